//! What creating the VM and its data disks needs to know from the engine besides the VM itself: the oVirt cluster,
//! the template, the template's disks and the chosen storage domain, the free space a clone needs, and a data disk's
//! storage domain and disk profile. Each is a [`Fact`] a step asks for with its parameters ([`EngineLookup`]); the
//! actor reads it and the step decides again, so that every verdict on what was found (not found, locked, no room)
//! is made here, in pure code, and not while the request is sent.

use capov_crds::Severity;

use super::fact::Fact;
use crate::placement::capacity::{DiskSize, DomainFact};
use crate::placement::host_devices::DeviceHostFact;
use crate::placement::{StorageDomainFact, TemplateDisk};

/// An engine lookup a step asks for, with what the actor needs to send it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum EngineLookup {
    /// The oVirt cluster of this name: [`CreationFacts::cluster`].
    OvirtCluster { name: String },
    /// The instance type of this name: [`CreationFacts::instance_type`].
    InstanceType { name: String },
    /// The versions of the template of this name among the templates of the data center's clusters:
    /// [`CreationFacts::template`].
    Template { name: String, data_center_id: String },
    /// The template's disks with their sizes and, when they are named, the storage domain chosen for the disks and
    /// the one for the VM's lease, as the data center shows them: [`CreationFacts::placement`].
    Placement {
        template_id: String,
        data_center_id: String,
        storage_domain_name: Option<String>,
        lease_storage_domain_name: Option<String>,
    },
    /// The storage domains a clone's disks go to, with their free space: [`CreationFacts::clone_domains`].
    CloneDomains { domain_ids: Vec<String> },
    /// The hosts of the oVirt cluster that have any of the named devices, each with those devices and who holds them:
    /// [`CreationFacts::device_hosts`].
    DeviceHosts { cluster_id: String, names: Vec<String> },
    /// The host devices added to the VM: [`super::Observed::vm_host_devices`].
    VmHostDevices { vm_id: String },
    /// The indexes of the VM's virtual NUMA nodes: [`super::Observed::vm_numa_nodes`].
    VmNumaNodes { vm_id: String },
    /// A data disk's storage domain and, when one is named, the domain's disk profiles:
    /// [`super::Observed::data_disk_target`].
    DataDiskTarget {
        storage_domain_name: String,
        disk_profile_name: Option<String>,
    },
}

/// A lookup the engine did not answer, as the condition it reports (the actor's reading of the engine's error).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LookupFailure {
    pub reason: &'static str,
    pub severity: Severity,
    pub message: String,
}

/// What a lookup found, or why the engine did not answer it.
pub type Lookup<T> = Result<T, LookupFailure>;

/// The oVirt cluster a VM is created in.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OvirtClusterFact {
    pub id: String,
    pub data_center_id: String,
}

/// One version of the template a VM is created from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TemplateFact {
    pub id: String,
    /// 1 for the base template.
    pub version_number: u32,
    pub version_name: Option<String>,
    /// The engine is still making the template (status `locked`).
    pub locked: bool,
    /// The template's OS type, which decides the bootstrap formats the engine delivers.
    pub os_type: Option<String>,
}

/// Where the template's disks are and the storage domain the specs chose.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PlacementFacts {
    /// The chosen storage domain; None when none is chosen or none has the name.
    pub storage_domain: Option<StorageDomainFact>,
    /// The storage domain of the VM's lease (spec.highavailability.leasestoragedomain); None when none is named or
    /// none has the name.
    pub lease_domain: Option<StorageDomainFact>,
    pub template_disks: Vec<(TemplateDisk, DiskSize)>,
}

/// The lookups of the creation step, read one after the other as it asks for them (each needs the one before).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CreationFacts {
    /// None: the engine has no oVirt cluster of the name.
    pub cluster: Fact<Lookup<Option<OvirtClusterFact>>>,
    /// The id of the instance type spec.instancetype names; None: the engine has none of the name.
    pub instance_type: Fact<Lookup<Option<String>>>,
    /// The versions of the template in the cluster's data center (none: no such template there).
    pub template: Fact<Lookup<Vec<TemplateFact>>>,
    pub placement: Fact<Lookup<PlacementFacts>>,
    /// The domains of those asked for that the engine shows (the provider's inventory, else read on their own).
    pub clone_domains: Fact<Lookup<Vec<DomainFact>>>,
    /// The hosts of the oVirt cluster, with those of spec.hostdevices they have (read only when devices or NUMA nodes
    /// are asked for; the devices only when some are).
    pub device_hosts: Fact<Lookup<Vec<DeviceHostFact>>>,
}

/// A data disk's storage domain and disk profiles, as read for the names it was asked for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DataDiskTarget {
    pub storage_domain_name: String,
    pub disk_profile_name: Option<String>,
    /// None: no storage domain of the name.
    pub storage_domain_id: Option<String>,
    /// The domain's disk profiles (name, id); read only when a profile is named and the domain was found.
    pub disk_profiles: Vec<(String, String)>,
}

impl DataDiskTarget {
    /// Whether this was read for these names.
    pub fn answers(&self, storage_domain_name: &str, disk_profile_name: Option<&str>) -> bool {
        self.storage_domain_name == storage_domain_name && self.disk_profile_name.as_deref() == disk_profile_name
    }
}

impl CreationFacts {
    /// Whether the creation fact `lookup` fills is not read yet (false for a lookup that fills none).
    pub(super) fn unread(&self, lookup: &EngineLookup) -> bool {
        match lookup {
            EngineLookup::OvirtCluster { .. } => self.cluster == Fact::NotRead,
            EngineLookup::InstanceType { .. } => self.instance_type == Fact::NotRead,
            EngineLookup::Template { .. } => self.template == Fact::NotRead,
            EngineLookup::Placement { .. } => self.placement == Fact::NotRead,
            EngineLookup::CloneDomains { .. } => self.clone_domains == Fact::NotRead,
            EngineLookup::DeviceHosts { .. } => self.device_hosts == Fact::NotRead,
            EngineLookup::DataDiskTarget { .. }
            | EngineLookup::VmHostDevices { .. }
            | EngineLookup::VmNumaNodes { .. } => false,
        }
    }
}

/// Whether the data disk target `lookup` asks for is not read yet: never read, or read for another disk's names.
pub(super) fn data_disk_target_unread(fact: &Fact<Lookup<DataDiskTarget>>, lookup: &EngineLookup) -> bool {
    let EngineLookup::DataDiskTarget {
        storage_domain_name,
        disk_profile_name,
    } = lookup
    else {
        return false;
    };
    match fact {
        Fact::NotRead => true,
        Fact::Read(Ok(target)) => !target.answers(storage_domain_name, disk_profile_name.as_deref()),
        // A failed read answers the disk it was asked for; the step reports it.
        Fact::Read(Err(_)) => false,
    }
}
