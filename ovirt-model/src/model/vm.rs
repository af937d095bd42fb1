//! Virtual machines, their NICs and the devices their guest agent reports.

use serde::{Deserialize, Serialize};
use serde_with::skip_serializing_none;

use super::common::{Actions, HostRefs, Link, Mac, Ref};
use super::disk::DiskAttachments;
use super::macros::{collection, string_enum};

string_enum!(
    /// `vm_status` of the engine.
    VmStatus {
        Unassigned = "unassigned",
        Down = "down",
        Up = "up",
        PoweringUp = "powering_up",
        Paused = "paused",
        Migrating = "migrating",
        Unknown = "unknown",
        NotResponding = "not_responding",
        WaitForLaunch = "wait_for_launch",
        RebootInProgress = "reboot_in_progress",
        SavingState = "saving_state",
        RestoringState = "restoring_state",
        Suspended = "suspended",
        ImageLocked = "image_locked",
        PoweringDown = "powering_down",
    }
);

impl VmStatus {
    /// The status of a VM the engine shows without `<status>`: only `ImageIllegal` (disk images illegal, e.g. after
    /// a failed copy) has no REST value (`VmMapper.mapVmStatus`). Not a wire value: CAPOV's name for that case, so
    /// that a VM without status is never taken for an absent one.
    pub const IMAGE_ILLEGAL: &'static str = "image_illegal";

    /// The status of a VM document: its `<status>`, or [`VmStatus::IMAGE_ILLEGAL`] without one.
    pub fn of(status: Option<&VmStatus>) -> VmStatus {
        status
            .cloned()
            .unwrap_or_else(|| VmStatus::Other(Self::IMAGE_ILLEGAL.to_string()))
    }
}

string_enum!(
    /// `vm_type`: desktop | server | high_performance.
    VmType {
        Desktop = "desktop",
        Server = "server",
        HighPerformance = "high_performance",
    }
);

#[skip_serializing_none]
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct CpuTopology {
    pub cores: Option<u32>,
    pub sockets: Option<u32>,
    pub threads: Option<u32>,
}

/// `<cpu>` of VMs, templates and clusters (clusters add `type`).
#[skip_serializing_none]
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Cpu {
    pub architecture: Option<String>,
    /// `host_passthrough` | `host_model` | `custom` ([`CpuMode`]).
    pub mode: Option<String>,
    pub topology: Option<CpuTopology>,
    /// Manual CPU pinning: which host CPUs each virtual CPU may run on.
    pub cpu_tune: Option<CpuTune>,
    #[serde(rename = "type")]
    pub kind: Option<String>,
}

string_enum!(
    /// `cpu_mode`: how the guest sees the host's CPU.
    CpuMode {
        Custom = "custom",
        HostModel = "host_model",
        HostPassthrough = "host_passthrough",
    }
);

/// One virtual CPU pinned to a set of host CPUs (`cpu_set` in libvirt's syntax: `1`, `2-3`, `^4`).
#[skip_serializing_none]
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct VcpuPin {
    pub vcpu: Option<u32>,
    pub cpu_set: Option<String>,
}

/// `<vcpu_pins><vcpu_pin/>…</vcpu_pins>`.
#[skip_serializing_none]
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct VcpuPins {
    #[serde(rename = "vcpu_pin", default, deserialize_with = "crate::decode_budget::items")]
    pub items: Vec<VcpuPin>,
}

/// `<cpu_tune>` of a VM's `<cpu>`.
#[skip_serializing_none]
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CpuTune {
    pub vcpu_pins: Option<VcpuPins>,
}

impl CpuTune {
    /// The engine's pinning string (`0#1_1#2-3`), as it stores `cpu_tune` (`VmMapper.cpuTuneToString`).
    pub fn to_pinning_string(&self) -> String {
        self.vcpu_pins
            .iter()
            .flat_map(|pins| pins.items.iter())
            .map(|pin| {
                format!(
                    "{}#{}",
                    pin.vcpu.map(|v| v.to_string()).unwrap_or_default(),
                    pin.cpu_set.as_deref().unwrap_or_default()
                )
            })
            .collect::<Vec<_>>()
            .join("_")
    }
}

string_enum!(
    /// `auto_pinning_policy` (engines 4.4.3 as a `POST /vms` parameter, 4.4.8 as a VM element; deprecated in 4.5 for
    /// `cpu_pinning_policy`): `existing` pins to the host's current topology, `adjust` also resizes the VM to it.
    AutoPinningPolicy {
        Disabled = "disabled",
        Existing = "existing",
        Adjust = "adjust",
    }
);

string_enum!(
    /// `cpu_pinning_policy` (engines 4.5 and later).
    CpuPinningPolicy {
        None = "none",
        Manual = "manual",
        ResizeAndPinNuma = "resize_and_pin_numa",
        Dedicated = "dedicated",
        IsolateThreads = "isolate_threads",
    }
);

string_enum!(
    /// `numa_tune_mode` of a VM and its virtual NUMA nodes.
    NumaTuneMode {
        Strict = "strict",
        Interleave = "interleave",
        Preferred = "preferred",
    }
);

/// `<high_availability>`: the engine restarts the VM when it goes down unexpectedly (its host lost or fenced), in
/// `priority` order (higher first).
#[skip_serializing_none]
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct HighAvailability {
    pub enabled: Option<bool>,
    pub priority: Option<i32>,
}

/// `<lease><storage_domain id/></lease>`: a VM lease on a data domain, so that the VM never runs twice.
#[skip_serializing_none]
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct StorageDomainLease {
    pub storage_domain: Option<Ref>,
}

/// One custom property (`hugepages`, `mdev_type`, …).
#[skip_serializing_none]
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CustomProperty {
    pub name: Option<String>,
    pub value: Option<String>,
}

impl CustomProperty {
    pub fn new(name: impl Into<String>, value: impl Into<String>) -> Self {
        Self {
            name: Some(name.into()),
            value: Some(value.into()),
        }
    }
}

/// `<custom_properties><custom_property/>…</custom_properties>`.
#[skip_serializing_none]
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CustomProperties {
    #[serde(
        rename = "custom_property",
        default,
        deserialize_with = "crate::decode_budget::items"
    )]
    pub items: Vec<CustomProperty>,
}

impl CustomProperties {
    /// The value of the property `name`, if set.
    pub fn get(&self, name: &str) -> Option<&str> {
        self.items
            .iter()
            .find(|p| p.name.as_deref() == Some(name))
            .and_then(|p| p.value.as_deref())
    }
}

#[skip_serializing_none]
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct MemoryPolicy {
    pub ballooning: Option<bool>,
    pub guaranteed: Option<u64>,
    pub max: Option<u64>,
}

#[skip_serializing_none]
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct PlacementPolicy {
    /// migratable | user_migratable | pinned
    pub affinity: Option<String>,
    /// The hosts the VM may run on (the engine's dedicated hosts); host devices need exactly one.
    pub hosts: Option<HostRefs>,
}

#[skip_serializing_none]
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct OperatingSystem {
    #[serde(rename = "type")]
    pub kind: Option<String>,
}

/// cloud-init / Ignition payload applied on the first start.
#[skip_serializing_none]
#[derive(Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Initialization {
    pub custom_script: Option<String>,
    pub host_name: Option<String>,
    /// Name servers, separated by spaces (the engine splits them on `' '`).
    pub dns_servers: Option<String>,
    /// Search domains, separated by spaces.
    pub dns_search: Option<String>,
    /// The guest's network interfaces as cloud-init configures them (`network_data.json` of the config drive).
    pub nic_configurations: Option<NicConfigurations>,
}

// Bootstrap data carries secrets (join tokens): never print it.
impl std::fmt::Debug for Initialization {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Initialization")
            .field(
                "custom_script",
                &self.custom_script.as_ref().map(|s| format!("<{} bytes>", s.len())),
            )
            .field("host_name", &self.host_name)
            .field("dns_servers", &self.dns_servers)
            .field("dns_search", &self.dns_search)
            .field("nic_configurations", &self.nic_configurations)
            .finish()
    }
}

string_enum!(
    /// `boot_protocol`: how an interface of the guest gets its address.
    BootProtocol {
        Autoconf = "autoconf",
        Dhcp = "dhcp",
        PolyDhcpAutoconf = "poly_dhcp_autoconf",
        Static = "static",
        None = "none",
    }
);

/// One network interface of the guest as its initialization configures it. `name` is the interface's name inside
/// the guest (e.g. `eth0`), not the VM NIC's.
#[skip_serializing_none]
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct NicConfiguration {
    pub name: Option<String>,
    /// IPv4: `address`, `netmask` (dotted) and `gateway`.
    pub ip: Option<Ip>,
    pub boot_protocol: Option<BootProtocol>,
    /// IPv6: `address`, `netmask` (the prefix length as a number) and `gateway`.
    pub ipv6: Option<Ip>,
    pub ipv6_boot_protocol: Option<BootProtocol>,
    /// Must be true: the engine refuses anything else for cloud-init's network data.
    pub on_boot: Option<bool>,
}

collection!(
    NicConfigurations,
    "nic_configurations",
    "nic_configuration",
    NicConfiguration
);

#[skip_serializing_none]
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename = "vm")]
pub struct Vm {
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
    pub cpu: Option<Cpu>,
    pub creation_time: Option<String>,
    /// The CPU model of a `custom` CPU mode (e.g. `Skylake-Server`).
    pub custom_cpu_model: Option<String>,
    pub custom_properties: Option<CustomProperties>,
    pub fqdn: Option<String>,
    pub high_availability: Option<HighAvailability>,
    pub initialization: Option<Initialization>,
    pub lease: Option<StorageDomainLease>,
    pub memory: Option<u64>,
    pub memory_policy: Option<MemoryPolicy>,
    pub os: Option<OperatingSystem>,
    pub placement_policy: Option<PlacementPolicy>,
    /// Engines 4.4.8 to 4.4.x; 4.5 maps it onto `cpu_pinning_policy`.
    pub auto_pinning_policy: Option<AutoPinningPolicy>,
    /// Engines 4.5 and later.
    pub cpu_pinning_policy: Option<CpuPinningPolicy>,
    pub numa_tune_mode: Option<NumaTuneMode>,
    #[serde(rename = "type")]
    pub kind: Option<VmType>,
    pub cluster: Option<Ref>,
    /// The instance type the VM was made with; its values win over the request's for the fields it sets.
    pub instance_type: Option<Ref>,
    /// Follow the newest version of its template (a stateless pool setting; CAPOV pins versions).
    pub use_latest_template_version: Option<bool>,
    /// The host the VM runs on; absent while it is not running.
    pub host: Option<Ref>,
    pub status: Option<VmStatus>,
    pub start_time: Option<String>,
    pub stop_reason: Option<String>,
    pub stop_time: Option<String>,
    pub disk_attachments: Option<DiskAttachments>,
    pub nics: Option<Nics>,
    /// Inlined with `?follow=reported_devices`: what the guest agent reports.
    pub reported_devices: Option<ReportedDevices>,
    pub original_template: Option<Ref>,
    pub storage_domain: Option<Ref>,
    pub template: Option<Ref>,
}

collection!(Vms, "vms", "vm", Vm);

/// A VM as a status poll reads it: id and status only. The engine sends every VM of a list whole, its
/// `<initialization><custom_script>` (the bootstrap data) included, and offers no way to leave it out
/// (docs/simulator-fidelity.md); decoding into this type skips everything else, so the poll never allocates or
/// keeps the bootstrap data.
#[skip_serializing_none]
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename = "vm")]
pub struct VmStatusEntry {
    #[serde(rename = "@id")]
    pub id: Option<String>,
    pub status: Option<VmStatus>,
}

collection!(VmStatusEntries, "vms", "vm", VmStatusEntry);

/// A VM as CAPOV observes it: what its decisions read, and the devices a `follow` inlined. Like [`VmStatusEntry`]
/// it skips everything else, the bootstrap data (`<initialization>`) included, whether the VM is read alone or in a
/// batched search.
#[skip_serializing_none]
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename = "vm")]
pub struct VmFacts {
    #[serde(rename = "@id")]
    pub id: Option<String>,
    pub name: Option<String>,
    pub description: Option<String>,
    pub os: Option<OperatingSystem>,
    pub status: Option<VmStatus>,
    /// The cluster the VM is in.
    pub cluster: Option<Ref>,
    /// The host the VM runs on (absent while it is not running).
    pub host: Option<Ref>,
    pub start_time: Option<String>,
    pub disk_attachments: Option<DiskAttachments>,
    pub nics: Option<Nics>,
    pub reported_devices: Option<ReportedDevices>,
}

collection!(VmFactsList, "vms", "vm", VmFacts);

#[skip_serializing_none]
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename = "nic")]
pub struct Nic {
    #[serde(rename = "@href")]
    pub href: Option<String>,
    #[serde(rename = "@id")]
    pub id: Option<String>,
    pub actions: Option<Actions>,
    pub name: Option<String>,
    #[serde(
        rename = "link",
        default,
        deserialize_with = "crate::decode_budget::items",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub links: Vec<Link>,
    pub vm: Option<Ref>,
    /// e1000 | e1000e | virtio | rtl8139 | rtl8139_virtio | spapr_vlan | pci_passthrough
    pub interface: Option<String>,
    pub linked: Option<bool>,
    pub mac: Option<Mac>,
    pub plugged: Option<bool>,
    pub synced: Option<bool>,
    pub vnic_profile: Option<Ref>,
}

collection!(Nics, "nics", "nic", Nic);

#[skip_serializing_none]
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Ip {
    pub address: Option<String>,
    /// Of a NIC configuration: IPv4 dotted (255.255.255.0), IPv6 the prefix length (64).
    pub netmask: Option<String>,
    pub gateway: Option<String>,
    /// v4 | v6
    pub version: Option<String>,
}

#[skip_serializing_none]
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Ips {
    #[serde(rename = "ip", default, deserialize_with = "crate::decode_budget::items")]
    pub items: Vec<Ip>,
}

#[skip_serializing_none]
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename = "reported_device")]
pub struct ReportedDevice {
    #[serde(rename = "@href")]
    pub href: Option<String>,
    #[serde(rename = "@id")]
    pub id: Option<String>,
    pub name: Option<String>,
    pub description: Option<String>,
    #[serde(rename = "type")]
    pub kind: Option<String>,
    pub ips: Option<Ips>,
    pub mac: Option<Mac>,
    pub vm: Option<Ref>,
}

collection!(ReportedDevices, "reported_devices", "reported_device", ReportedDevice);
