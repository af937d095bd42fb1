//! The simulator's inventory: plain records indexed for O(1)/O(log n) access, with the engine's types they hold
//! (the release played, the work finishing later, the disk copies running). The engine's behaviour (`engine`)
//! works on them; nothing here depends on it.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::time::Instant;

use capov_ovirt::model::{DiskStatus, VmStatus};
use serde::Serialize;

pub mod copies;
mod init_network;
mod placement;
mod schedule;
mod version;
mod workload;

pub use copies::CopyPools;
pub use init_network::{InitNetwork, InitNic, Protocol};
pub use placement::*;
pub use schedule::{Scheduled, Transition, later};
pub use version::EngineVersion;
pub use workload::*;

#[derive(Debug, Clone)]
pub struct DataCenterRecord {
    pub id: String,
    pub name: String,
}

#[derive(Debug, Clone)]
pub struct ClusterRecord {
    pub id: String,
    pub name: String,
    pub data_center_id: String,
    pub cpu_type: String,
}

#[derive(Debug, Clone)]
pub struct StorageDomainRecord {
    pub id: String,
    pub name: String,
    /// data | iso | export | image
    pub kind: String,
    /// None = unattached.
    pub data_center_id: Option<String>,
    /// Status inside its data center (active, maintenance, …).
    pub status: String,
    pub external_status: String,
    pub available: u64,
    pub used: u64,
    /// GiB: the engine refuses new disks once less than this is available.
    pub critical_space_action_blocker: u64,
    pub master: bool,
    /// nfs, glusterfs, posixfs (file) or iscsi, fcp (block): decides which disk formats it takes.
    pub storage_type: String,
}

impl StorageDomainRecord {
    /// Block storage (`StorageType.isBlockDomain`): iSCSI and FC.
    pub fn is_block(&self) -> bool {
        matches!(self.storage_type.as_str(), "iscsi" | "fcp")
    }
}

/// A disk profile of a storage domain; the engine gives every data domain one named after it.
#[derive(Debug, Clone)]
pub struct DiskProfileRecord {
    pub id: String,
    pub name: String,
    pub storage_domain_id: String,
}

/// An engine tag (`/tags`): names are unique engine-wide.
#[derive(Debug, Clone)]
pub struct TagRecord {
    pub id: String,
    pub name: String,
    pub description: String,
    /// The parent tag's id; the root tag has none.
    pub parent_id: Option<String>,
}

/// Id of the engine's root tag (`tags` row 0), the parent of tags added without one.
pub const ROOT_TAG_ID: &str = "00000000-0000-0000-0000-000000000000";

#[derive(Debug, Clone)]
pub struct NetworkRecord {
    pub id: String,
    pub name: String,
    pub data_center_id: String,
}

#[derive(Debug, Clone)]
pub struct VnicProfileRecord {
    pub id: String,
    pub name: String,
    pub network_id: String,
}

#[derive(Debug, Clone)]
pub struct TemplateNic {
    pub name: String,
    pub vnic_profile_id: Option<String>,
}

#[derive(Debug, Clone)]
pub struct TemplateRecord {
    pub id: String,
    pub name: String,
    pub description: String,
    pub cluster_id: Option<String>,
    pub status: String,
    pub version_number: u32,
    pub version_name: Option<String>,
    pub base_template_id: Option<String>,
    pub memory: u64,
    pub sockets: u32,
    pub cores: u32,
    pub threads: u32,
    /// Template disks (records in `State::disks`), bootable first.
    pub disk_ids: Vec<String>,
    pub nics: Vec<TemplateNic>,
    pub creation_time: i64,
    /// The engine's OS type (`other`, `rhcos_x64`, …).
    pub os_type: String,
    /// Its image runs a guest agent ([`crate::inventory::TemplateSeed::guest_agent`]).
    pub guest_agent: bool,
}

#[derive(Debug, Clone)]
pub struct DiskRecord {
    pub id: String,
    pub alias: String,
    pub description: String,
    pub provisioned_size: u64,
    pub actual_size: u64,
    pub status: DiskStatus,
    pub format: String,
    pub sparse: bool,
    pub storage_domain_ids: Vec<String>,
    pub image_id: String,
    pub vm_id: Option<String>,
    pub bootable: bool,
    pub interface: String,
    pub active: bool,
    /// Bumped by every operation; timers carry the value they were scheduled for.
    pub generation: u64,
    /// Size being applied by a running extend job.
    pub pending_size: Option<u64>,
    pub disk_profile_id: Option<String>,
}

#[derive(Debug, Clone)]
pub struct NicRecord {
    pub id: String,
    pub name: String,
    pub interface: String,
    pub mac: String,
    pub vnic_profile_id: Option<String>,
    pub linked: bool,
    pub plugged: bool,
}

#[derive(Debug, Clone)]
pub struct VmRecord {
    pub id: String,
    pub name: String,
    pub description: String,
    pub comment: String,
    pub cluster_id: String,
    pub template_id: String,
    pub original_template_id: String,
    /// The engine's OS type, from the template unless the add named one.
    pub os_type: String,
    /// What the last start handed the guest: the initialization kind and the payload as the engine rewrote it.
    pub delivered: Option<Delivered>,
    pub status: VmStatus,
    pub kind: String,
    pub memory: u64,
    pub guaranteed: u64,
    pub ballooning: bool,
    pub sockets: u32,
    pub cores: u32,
    pub threads: u32,
    pub affinity: Option<String>,
    pub custom_script: Option<String>,
    pub host_name: Option<String>,
    /// The initialization's DNS settings and NIC configurations.
    pub init_network: InitNetwork,
    pub creation_time: i64,
    pub start_time: Option<i64>,
    pub stop_time: Option<i64>,
    /// Attached disks in attachment order.
    pub disk_ids: Vec<String>,
    pub nics: Vec<NicRecord>,
    pub generation: u64,
    /// The guest runs an agent (from its template): without one nothing is ever reported.
    pub guest_agent: bool,
    /// Addresses the guest holds on its first NIC besides its own, e.g. a keepalived VIP
    /// ([`crate::Control::add_guest_address`]).
    pub guest_addresses: Vec<String>,
    /// The guest agent has reported its devices since the last start.
    pub ips_reported: bool,
    /// Index of the VM's guest addresses (stable over reboots).
    pub address_index: u64,
    /// Removal started; the VM disappears when its disks are gone.
    pub removing: bool,
    /// How the last start asked for initialization (for assertions).
    pub last_start_init: Option<String>,
    /// How the disk copy of an accepted add ends (fault injection).
    pub copy_outcome: CopyOutcome,
    /// The guest ignores ACPI shutdown requests (a hung or misconfigured guest): a shutdown leaves the VM
    /// `powering_down` until the engine gives up and it is `up` again ([`crate::Control::set_guest_ignores_acpi`]).
    pub ignores_acpi: bool,
    /// Ids of the tags assigned to it.
    pub tag_ids: BTreeSet<String>,
    /// The user whose `POST /vms` made it: the engine grants the creator `UserVmManager` on the new VM, which is
    /// what lets a filtered caller see it. None for seeded VMs.
    pub created_by: Option<String>,
    /// Where the VM runs (the engine's `run_on_vds`): set by the scheduler when it starts, the source host while it
    /// migrates, None while it is not running.
    pub placement: Placement,
    /// High availability, lease, CPU and NUMA tuning, devices and the instance type.
    pub workload: VmWorkload,
}

/// What a start delivered to the guest.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Delivered {
    /// `cloud-init` or `ignition`.
    pub kind: String,
    /// The user-data the guest reads, as the engine rewrote it (`openstack/latest/user_data` of the config drive).
    pub user_data: String,
    /// The config drive's `openstack/latest/meta_data.json`: the host name (`hostname`, `name`) and the keys the
    /// engine always writes (`CloudInitHandler.storeHostname`/`storeExecutionParameters`; Ignition goes through the
    /// same handler). cloud-init's ConfigDrive datasource makes `local-hostname` of `hostname`.
    pub meta_data: serde_json::Value,
    /// The config drive's `openstack/latest/network_data.json`, when the initialization has network settings
    /// (`engine::init_network::network_data`).
    pub network_data: Option<serde_json::Value>,
}

/// How the disk copy of an accepted `POST /vms` ends.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum CopyOutcome {
    /// `image_locked` → `down`.
    #[default]
    Succeeds,
    /// The copy fails and the engine removes the VM it had accepted (`AddVmCommand` ends with failure and its
    /// compensation deletes the VM record): the VM is 404 from then on.
    Vanishes,
    /// The copy fails and leaves the VM `ImageIllegal`, which the REST API renders without `<status>`
    /// (`VmMapper.mapVmStatus` has no case for it).
    Illegal,
}

#[derive(Debug, Clone)]
pub struct TokenRecord {
    pub expires: Option<Instant>,
    /// The user the token was issued to (`name@domain`).
    pub user: String,
}

/// The whole engine state. Guarded by one mutex; every operation holds it briefly.
#[derive(Debug, Default)]
pub struct State {
    pub data_centers: BTreeMap<String, DataCenterRecord>,
    pub clusters: BTreeMap<String, ClusterRecord>,
    pub storage_domains: BTreeMap<String, StorageDomainRecord>,
    pub networks: BTreeMap<String, NetworkRecord>,
    pub vnic_profiles: BTreeMap<String, VnicProfileRecord>,
    pub disk_profiles: BTreeMap<String, DiskProfileRecord>,
    pub tags: BTreeMap<String, TagRecord>,
    pub templates: BTreeMap<String, TemplateRecord>,
    pub instance_types: BTreeMap<String, InstanceTypeRecord>,
    pub vms: BTreeMap<String, VmRecord>,
    pub hosts: BTreeMap<String, HostRecord>,
    pub affinity_groups: BTreeMap<String, AffinityGroupRecord>,
    pub affinity_labels: BTreeMap<String, AffinityLabelRecord>,
    /// Lower-cased name → ids, for case-insensitive exact lookups without scans.
    pub vm_names: HashMap<String, BTreeSet<String>>,
    pub disks: HashMap<String, DiskRecord>,
    pub tokens: HashMap<String, TokenRecord>,
    /// Every token handed out recently, oldest first, revoked or not: tests search for them where they must not
    /// appear (logs, statuses), which `tokens` cannot serve once a token is revoked or expired.
    pub issued_tokens: std::collections::VecDeque<String>,
    pub users: HashMap<String, String>,
    /// Users without an administrative role: every request of theirs is filtered (`filter=true` implied).
    pub non_admin_users: BTreeSet<String>,
    /// Users without a role that allows creating VMs (e.g. no `UserVmManager`/`VmCreator` on the cluster).
    pub cannot_create_vms: BTreeSet<String>,
    pub next_address: u64,
    /// The release played: `product_info` and which request elements exist.
    pub engine_version: EngineVersion,
    /// Transitions that tests hold back, so that they can wait for the state before them instead of racing a
    /// timer (e.g. `powering_up` while `VmUp` is held). Held ones wait in `held` until released.
    pub holds: Vec<Transition>,
    /// Disk copies of cloned VMs running now, per storage domain ([`copies`]).
    pub copies: CopyPools,
    pub held: Vec<Scheduled>,
}

impl State {
    pub fn insert_vm(&mut self, vm: VmRecord) {
        self.vm_names
            .entry(vm.name.to_lowercase())
            .or_default()
            .insert(vm.id.clone());
        self.vms.insert(vm.id.clone(), vm);
    }

    pub fn remove_vm(&mut self, id: &str) -> Option<VmRecord> {
        let vm = self.vms.remove(id)?;
        let key = vm.name.to_lowercase();
        if let Some(ids) = self.vm_names.get_mut(&key) {
            ids.remove(id);
            if ids.is_empty() {
                self.vm_names.remove(&key);
            }
        }
        for disk_id in &vm.disk_ids {
            if let Some(disk) = self.disks.remove(disk_id) {
                self.release_space(&disk);
            }
        }
        // The engine drops a removed VM from every affinity group and label (the rows cascade).
        for group in self.affinity_groups.values_mut() {
            group.vm_ids.retain(|member| member != id);
        }
        for label in self.affinity_labels.values_mut() {
            label.vm_ids.retain(|member| member != id);
        }
        Some(vm)
    }

    /// A VM of exactly this name exists in a cluster of data center `data_center_id` (the engine's names are unique
    /// per data center, `VmHandler.isVmWithSameNameExistStatic(vm, storagePoolId)`).
    pub fn vm_name_taken_in(&self, name: &str, data_center_id: &str) -> bool {
        self.vm_names.get(&name.to_lowercase()).is_some_and(|ids| {
            ids.iter().any(|id| {
                self.vms.get(id).is_some_and(|vm| {
                    vm.name == name
                        && self
                            .clusters
                            .get(&vm.cluster_id)
                            .is_some_and(|c| c.data_center_id == data_center_id)
                })
            })
        })
    }

    pub fn cluster_by_ref(&self, id: Option<&str>, name: Option<&str>) -> Option<&ClusterRecord> {
        match (id, name) {
            (Some(id), _) => self.clusters.get(id),
            (None, Some(name)) => self.clusters.values().find(|c| c.name == name),
            _ => None,
        }
    }

    /// The template an add names: by id, or by name the newest version among those of the data center
    /// `data_center_id` (or of none), as `GetVmTemplateByVmtName` finds it (`storage_pool_id = ? OR storage_pool_id
    /// IS NULL`, `ORDER BY template_version_number DESC`, the first row).
    pub fn template_by_ref(
        &self,
        id: Option<&str>,
        name: Option<&str>,
        data_center_id: Option<&str>,
    ) -> Option<&TemplateRecord> {
        match (id, name) {
            (Some(id), _) => self.templates.get(id),
            (None, Some(name)) => self
                .templates
                .values()
                .filter(|t| t.name == name)
                .filter(|t| {
                    let template_dc = t
                        .cluster_id
                        .as_ref()
                        .and_then(|c| self.clusters.get(c))
                        .map(|c| c.data_center_id.as_str());
                    data_center_id.is_none() || template_dc.is_none() || template_dc == data_center_id
                })
                .max_by_key(|t| t.version_number),
            _ => None,
        }
    }

    pub fn allocate_address(&mut self) -> u64 {
        self.next_address += 1;
        self.next_address
    }
}

/// A VM as tests see it through the control interface.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct VmSnapshot {
    pub id: String,
    pub name: String,
    pub status: String,
    pub description: String,
    pub template_id: String,
    pub cluster_id: String,
    pub custom_script: Option<String>,
    /// The initialization's DNS settings and NIC configurations.
    pub init_network: InitNetwork,
    pub last_start_init: Option<String>,
    pub disks: Vec<DiskSnapshot>,
    pub nics: Vec<NicSnapshot>,
    /// Names of the tags assigned to it.
    pub tags: Vec<String>,
    /// The host it runs on (its source while it migrates).
    pub host_id: Option<String>,
    pub high_availability: HighAvailability,
    /// The storage domain of its VM lease.
    pub lease_domain_id: Option<String>,
    /// How often the engine restarted it elsewhere after its host was lost or fenced.
    pub ha_restarts: u32,
    /// Names of its host devices (placeholders of their IOMMU groups included).
    pub host_devices: Vec<String>,
    /// The mdev types of its mediated devices.
    pub mediated_devices: Vec<String>,
    /// While it runs: (host device, mdev type) of each vGPU instance it holds.
    pub mdev_assignments: Vec<(String, String)>,
    /// The hosts it may run on.
    pub dedicated_hosts: Vec<String>,
    pub instance_type_id: Option<String>,
}

#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct DiskSnapshot {
    pub id: String,
    pub alias: String,
    pub provisioned_size: u64,
    pub status: String,
    pub bootable: bool,
    pub format: String,
    pub sparse: bool,
    pub interface: String,
    pub disk_profile_id: Option<String>,
    pub storage_domain_ids: Vec<String>,
}

impl DiskSnapshot {
    pub fn of(d: &DiskRecord) -> DiskSnapshot {
        DiskSnapshot {
            id: d.id.clone(),
            alias: d.alias.clone(),
            provisioned_size: d.provisioned_size,
            status: d.status.to_string(),
            bootable: d.bootable,
            format: d.format.clone(),
            sparse: d.sparse,
            interface: d.interface.clone(),
            disk_profile_id: d.disk_profile_id.clone(),
            storage_domain_ids: d.storage_domain_ids.clone(),
        }
    }
}

#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct NicSnapshot {
    pub id: String,
    pub name: String,
    pub mac: String,
    pub vnic_profile_id: Option<String>,
}

impl State {
    pub fn snapshot_vm(&self, vm: &VmRecord) -> VmSnapshot {
        VmSnapshot {
            id: vm.id.clone(),
            name: vm.name.clone(),
            status: vm.status.to_string(),
            description: vm.description.clone(),
            template_id: vm.template_id.clone(),
            cluster_id: vm.cluster_id.clone(),
            custom_script: vm.custom_script.clone(),
            init_network: vm.init_network.clone(),
            last_start_init: vm.last_start_init.clone(),
            disks: vm
                .disk_ids
                .iter()
                .filter_map(|id| self.disks.get(id))
                .map(DiskSnapshot::of)
                .collect(),
            nics: vm
                .nics
                .iter()
                .map(|n| NicSnapshot {
                    id: n.id.clone(),
                    name: n.name.clone(),
                    mac: n.mac.clone(),
                    vnic_profile_id: n.vnic_profile_id.clone(),
                })
                .collect(),
            tags: vm
                .tag_ids
                .iter()
                .filter_map(|id| self.tags.get(id))
                .map(|t| t.name.clone())
                .collect(),
            host_id: vm.placement.host.clone(),
            high_availability: vm.workload.high_availability.clone(),
            lease_domain_id: vm.workload.lease_domain_id.clone(),
            ha_restarts: vm.workload.ha_restarts,
            host_devices: vm.workload.host_devices.iter().map(|d| d.name.clone()).collect(),
            mediated_devices: vm
                .workload
                .mediated_devices
                .iter()
                .map(|m| m.mdev_type.clone())
                .collect(),
            mdev_assignments: vm.workload.mdev_assignments.clone(),
            dedicated_hosts: vm.workload.dedicated_hosts.clone(),
            instance_type_id: vm.workload.instance_type_id.clone(),
        }
    }
}
