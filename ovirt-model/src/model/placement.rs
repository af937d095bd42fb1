//! Where VMs run: hosts, the affinity groups that keep VMs apart or on chosen hosts, and the affinity labels that
//! name sets of hosts.

use serde::{Deserialize, Serialize};
use serde_with::skip_serializing_none;

use super::common::{Actions, HostRefs, Link, Ref};
use super::macros::{collection, string_enum};
use super::vm::Cpu;

string_enum!(
    /// `host_status` of the engine.
    HostStatus {
        Down = "down",
        Error = "error",
        Initializing = "initializing",
        Installing = "installing",
        InstallFailed = "install_failed",
        Maintenance = "maintenance",
        NonOperational = "non_operational",
        NonResponsive = "non_responsive",
        PreparingForMaintenance = "preparing_for_maintenance",
        Connecting = "connecting",
        Reboot = "reboot",
        Unassigned = "unassigned",
        Up = "up",
        InstallingOs = "installing_os",
        Kdumping = "kdumping",
    }
);

/// `<summary>` of a host: how many VMs run on it.
#[skip_serializing_none]
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct VmSummary {
    pub active: Option<u64>,
    pub migrating: Option<u64>,
    pub total: Option<u64>,
}

/// A hypervisor.
#[skip_serializing_none]
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename = "host")]
pub struct Host {
    #[serde(rename = "@href")]
    pub href: Option<String>,
    #[serde(rename = "@id")]
    pub id: Option<String>,
    pub actions: Option<Actions>,
    pub name: Option<String>,
    pub description: Option<String>,
    pub comment: Option<String>,
    #[serde(
        rename = "link",
        default,
        deserialize_with = "crate::decode_budget::items",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub links: Vec<Link>,
    pub address: Option<String>,
    pub cpu: Option<Cpu>,
    /// Physical memory in bytes.
    pub memory: Option<u64>,
    /// What the scheduler can still give a VM on this host, in bytes (the Memory filter's figure).
    pub max_scheduling_memory: Option<u64>,
    pub status: Option<HostStatus>,
    pub summary: Option<VmSummary>,
    #[serde(rename = "type")]
    pub kind: Option<String>,
    pub cluster: Option<Ref>,
}

collection!(Hosts, "hosts", "host", Host);

impl Host {
    /// Logical CPUs: sockets × cores × threads of its topology; None when the engine does not know them yet.
    pub fn logical_cpus(&self) -> Option<u64> {
        let topology = self.cpu.as_ref()?.topology.as_ref()?;
        let count = |n: Option<u32>| n.map(u64::from);
        Some(count(topology.sockets)? * count(topology.cores)? * count(topology.threads).unwrap_or(1))
    }
}

/// `<vms_rule>` / `<hosts_rule>` of an affinity group.
#[skip_serializing_none]
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct AffinityRule {
    pub enabled: Option<bool>,
    /// Hard (true): hosts breaking the rule are filtered out; soft (false): only scored lower.
    pub enforcing: Option<bool>,
    /// Together (true) or apart (false).
    pub positive: Option<bool>,
}

/// `<vms><vm id/></vms>` inside an affinity group or label.
#[skip_serializing_none]
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct VmRefs {
    #[serde(rename = "vm", default, deserialize_with = "crate::decode_budget::items")]
    pub items: Vec<Ref>,
}

/// `<host_labels><affinity_label id/></host_labels>` inside an affinity group.
#[skip_serializing_none]
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct AffinityLabelRefs {
    #[serde(rename = "affinity_label", default, deserialize_with = "crate::decode_budget::items")]
    pub items: Vec<Ref>,
}

/// A set of VMs kept together or apart (`vms_rule`), or on or off a set of hosts (`hosts_rule`), in one cluster.
/// Names are unique in the whole engine.
#[skip_serializing_none]
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename = "affinity_group")]
pub struct AffinityGroup {
    #[serde(rename = "@href")]
    pub href: Option<String>,
    #[serde(rename = "@id")]
    pub id: Option<String>,
    pub name: Option<String>,
    pub description: Option<String>,
    #[serde(
        rename = "link",
        default,
        deserialize_with = "crate::decode_budget::items",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub links: Vec<Link>,
    pub broken: Option<bool>,
    /// Deprecated mirror of `vms_rule.enforcing` the engine still sends.
    pub enforcing: Option<bool>,
    /// Deprecated mirror of `vms_rule.positive` the engine still sends.
    pub positive: Option<bool>,
    pub priority: Option<f64>,
    pub hosts_rule: Option<AffinityRule>,
    pub vms_rule: Option<AffinityRule>,
    pub cluster: Option<Ref>,
    pub host_labels: Option<AffinityLabelRefs>,
    pub hosts: Option<HostRefs>,
    pub vm_labels: Option<AffinityLabelRefs>,
    pub vms: Option<VmRefs>,
}

collection!(AffinityGroups, "affinity_groups", "affinity_group", AffinityGroup);

impl AffinityGroup {
    /// The ids of the VMs in the group.
    pub fn vm_ids(&self) -> Vec<String> {
        self.vms
            .as_ref()
            .map(|vms| vms.items.iter().filter_map(|vm| vm.id.clone()).collect())
            .unwrap_or_default()
    }
}

/// A name for a set of hosts and VMs; affinity groups refer to it (`host_labels`, `vm_labels`).
#[skip_serializing_none]
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename = "affinity_label")]
pub struct AffinityLabel {
    #[serde(rename = "@href")]
    pub href: Option<String>,
    #[serde(rename = "@id")]
    pub id: Option<String>,
    pub name: Option<String>,
    #[serde(
        rename = "link",
        default,
        deserialize_with = "crate::decode_budget::items",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub links: Vec<Link>,
    pub has_implicit_affinity_group: Option<bool>,
    pub read_only: Option<bool>,
}

collection!(AffinityLabels, "affinity_labels", "affinity_label", AffinityLabel);
