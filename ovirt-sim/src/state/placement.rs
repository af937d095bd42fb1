//! Hosts, where VMs run on them, affinity groups and labels, and the space disks take on storage domains: the
//! records the scheduler (`engine::scheduling`) and the host lifecycle (`engine::hosts`) work on.

use capov_ovirt::model::{HostStatus, VmStatus};
use serde::Serialize;

use super::{DiskRecord, State};

/// A hypervisor of a cluster.
#[derive(Debug, Clone)]
pub struct HostRecord {
    pub id: String,
    pub name: String,
    pub cluster_id: String,
    pub status: HostStatus,
    /// Physical memory in bytes; what VMs may take (the engine's `max_scheduling_memory`) is this minus the memory
    /// of the VMs on it ([`State::free_memory`]).
    pub memory: u64,
    pub sockets: u32,
    pub cores: u32,
    pub threads: u32,
    /// Its devices (PCI cards, GPUs with their mdev types), as vdsm reports them.
    pub devices: Vec<super::HostDeviceRecord>,
}

impl HostRecord {
    /// Logical CPUs (sockets × cores × threads).
    pub fn cpus(&self) -> u32 {
        self.sockets * self.cores * self.threads
    }
}

/// Where a VM runs.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Placement {
    /// The host it runs on (during a migration: the source).
    pub host: Option<String>,
    /// The host a running migration moves it to.
    pub migrating_to: Option<String>,
}

/// One rule of an affinity group (`vms_rule`, `hosts_rule`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Rule {
    pub enabled: bool,
    pub positive: bool,
    /// Hard: a host that breaks the rule is filtered out. Soft: only weighed down.
    pub enforcing: bool,
}

#[derive(Debug, Clone)]
pub struct AffinityGroupRecord {
    pub id: String,
    pub name: String,
    pub description: String,
    pub cluster_id: String,
    pub vms_rule: Rule,
    pub hosts_rule: Rule,
    pub priority: f64,
    pub vm_ids: Vec<String>,
    pub host_ids: Vec<String>,
    pub vm_label_ids: Vec<String>,
    pub host_label_ids: Vec<String>,
}

#[derive(Debug, Clone)]
pub struct AffinityLabelRecord {
    pub id: String,
    pub name: String,
    pub host_ids: Vec<String>,
    pub vm_ids: Vec<String>,
}

/// A host as tests see it through the control interface.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct HostSnapshot {
    pub id: String,
    pub name: String,
    pub cluster_id: String,
    pub status: String,
    pub memory: u64,
    pub free_memory: u64,
    /// The VMs running on it (migrating ones counted on their source).
    pub vm_ids: Vec<String>,
}

/// An affinity group as tests see it through the control interface.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct AffinityGroupSnapshot {
    pub id: String,
    pub name: String,
    pub description: String,
    pub cluster_id: String,
    pub vms_rule: Rule,
    pub hosts_rule: Rule,
    pub vm_ids: Vec<String>,
    pub host_label_ids: Vec<String>,
}

impl State {
    /// The VMs whose host is `host_id` (a migrating VM counts on its source).
    pub fn vms_on_host<'a>(&'a self, host_id: &'a str) -> impl Iterator<Item = &'a super::VmRecord> + 'a {
        self.vms
            .values()
            .filter(move |vm| vm.placement.host.as_deref() == Some(host_id))
    }

    /// What a host can still give VMs (the engine's `max_scheduling_memory`): its memory minus that of the VMs
    /// on it or migrating to it. 0 for a host that is not up: the scheduler takes nothing from it.
    pub fn free_memory(&self, host_id: &str) -> u64 {
        let Some(host) = self.hosts.get(host_id) else {
            return 0;
        };
        if host.status != HostStatus::Up {
            return 0;
        }
        let taken: u64 = self
            .vms
            .values()
            .filter(|vm| {
                vm.placement.host.as_deref() == Some(host_id) || vm.placement.migrating_to.as_deref() == Some(host_id)
            })
            .map(|vm| vm.memory)
            .sum();
        host.memory.saturating_sub(taken)
    }

    /// The hosts of a group: named ones and those carrying its host labels (the engine's "flat labels").
    pub fn group_hosts(&self, group: &AffinityGroupRecord) -> Vec<String> {
        let mut hosts = group.host_ids.clone();
        for label in group
            .host_label_ids
            .iter()
            .filter_map(|id| self.affinity_labels.get(id))
        {
            hosts.extend(label.host_ids.iter().cloned());
        }
        hosts.sort();
        hosts.dedup();
        hosts
    }

    /// Takes the bytes a new disk allocates from its storage domain.
    pub fn take_space(&mut self, disk: &DiskRecord) {
        if let Some(domain) = disk
            .storage_domain_ids
            .first()
            .and_then(|id| self.storage_domains.get_mut(id))
        {
            domain.available = domain.available.saturating_sub(disk.actual_size);
            domain.used = domain.used.saturating_add(disk.actual_size);
        }
    }

    /// Gives back the bytes of a removed disk.
    pub fn release_space(&mut self, disk: &DiskRecord) {
        if let Some(domain) = disk
            .storage_domain_ids
            .first()
            .and_then(|id| self.storage_domains.get_mut(id))
        {
            domain.available = domain.available.saturating_add(disk.actual_size);
            domain.used = domain.used.saturating_sub(disk.actual_size);
        }
    }

    pub fn snapshot_host(&self, host: &HostRecord) -> HostSnapshot {
        HostSnapshot {
            id: host.id.clone(),
            name: host.name.clone(),
            cluster_id: host.cluster_id.clone(),
            status: host.status.to_string(),
            memory: host.memory,
            free_memory: self.free_memory(&host.id),
            vm_ids: self.vms_on_host(&host.id).map(|vm| vm.id.clone()).collect(),
        }
    }

    pub fn snapshot_group(&self, group: &AffinityGroupRecord) -> AffinityGroupSnapshot {
        AffinityGroupSnapshot {
            id: group.id.clone(),
            name: group.name.clone(),
            description: group.description.clone(),
            cluster_id: group.cluster_id.clone(),
            vms_rule: group.vms_rule,
            hosts_rule: group.hosts_rule,
            vm_ids: group.vm_ids.clone(),
            host_label_ids: group.host_label_ids.clone(),
        }
    }
}

/// Whether a VM in this status runs somewhere (has a host).
pub fn runs_on_a_host(status: &VmStatus) -> bool {
    !matches!(
        status,
        VmStatus::Down | VmStatus::ImageLocked | VmStatus::Unassigned | VmStatus::Suspended
    ) && status.as_str() != "image_illegal"
}
