//! The seed format (JSON, from a file or the control API) and the default inventory.

use capov_ovirt::model::{DiskStatus, VmStatus};
use serde::{Deserialize, Serialize};

use crate::ids::{new_id, new_mac, now_millis};
use crate::state::*;

pub const GIB: u64 = 1 << 30;

/// Objects to add to the engine. Names refer to each other; ids are generated when absent.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Inventory {
    pub data_centers: Vec<DataCenterSeed>,
    pub clusters: Vec<ClusterSeed>,
    pub storage_domains: Vec<StorageDomainSeed>,
    pub networks: Vec<NetworkSeed>,
    pub vnic_profiles: Vec<VnicProfileSeed>,
    pub templates: Vec<TemplateSeed>,
    pub vms: Vec<VmSeed>,
    pub hosts: Vec<HostSeed>,
    /// Affinity labels; hosts name the ones they carry ([`HostSeed::labels`]).
    pub affinity_labels: Vec<AffinityLabelSeed>,
    /// Affinity groups made by someone else than CAPOV (an administrator), seeded after the VMs they name.
    pub affinity_groups: Vec<AffinityGroupSeed>,
    /// Instance types (named sizes); the default inventory has the engine's five (Tiny to XLarge).
    pub instance_types: Vec<InstanceTypeSeed>,
}

/// A device of a host: a PCI card for passthrough, or a GPU that also offers mediated-device (vGPU) types.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct HostDeviceSeed {
    /// libvirt's name, e.g. `pci_0000_3b_00_0`.
    pub name: String,
    pub capability: String,
    pub vendor_id: String,
    pub vendor_name: String,
    pub product_id: String,
    pub product_name: String,
    /// Devices of one IOMMU group go to a VM together.
    pub iommu_group: Option<u32>,
    pub driver: Option<String>,
    pub parent: Option<String>,
    pub mdev_types: Vec<MdevTypeSeed>,
}

impl Default for HostDeviceSeed {
    fn default() -> Self {
        Self {
            name: String::new(),
            capability: "pci".into(),
            vendor_id: "0x10de".into(),
            vendor_name: "NVIDIA Corporation".into(),
            product_id: "0x1eb8".into(),
            product_name: "TU104GL [Tesla T4]".into(),
            iommu_group: None,
            driver: Some("nvidia".into()),
            parent: Some("computer".into()),
            mdev_types: Vec::new(),
        }
    }
}

impl HostDeviceSeed {
    /// A Tesla T4 at PCI address `bus` (e.g. `3b`) in IOMMU group `group`, offering `mdev_types`.
    pub fn gpu(bus: &str, group: u32, mdev_types: Vec<MdevTypeSeed>) -> Self {
        Self {
            name: format!("pci_0000_{bus}_00_0"),
            iommu_group: Some(group),
            mdev_types,
            ..Self::default()
        }
    }
}

/// A mediated-device type a device offers, and how many instances of it the device can make.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct MdevTypeSeed {
    pub name: String,
    pub human_readable_name: String,
    pub description: String,
    pub instances: u32,
}

impl MdevTypeSeed {
    pub fn new(name: &str, human_readable_name: &str, instances: u32) -> Self {
        Self {
            name: name.into(),
            human_readable_name: human_readable_name.into(),
            description: String::new(),
            instances,
        }
    }
}

/// A named size: what a VM made with it takes over the request's values.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct InstanceTypeSeed {
    pub id: Option<String>,
    pub name: String,
    pub description: String,
    pub memory_bytes: u64,
    /// None: all of its memory.
    pub guaranteed_bytes: Option<u64>,
    pub sockets: u32,
    pub cores: u32,
    pub threads: u32,
    pub high_availability: bool,
    pub priority: i32,
    pub affinity: String,
}

impl Default for InstanceTypeSeed {
    fn default() -> Self {
        Self {
            id: None,
            name: String::new(),
            description: String::new(),
            memory_bytes: GIB,
            guaranteed_bytes: None,
            sockets: 1,
            cores: 1,
            threads: 1,
            high_availability: false,
            priority: 0,
            affinity: "migratable".into(),
        }
    }
}

/// The instance types every engine ships (`packaging/dbscripts/data/01100_insert_vm_static.sql`): Tiny, Small,
/// Medium, Large and XLarge, with their ids.
pub fn predefined_instance_types() -> Vec<InstanceTypeSeed> {
    [
        (
            "00000003-0003-0003-0003-0000000000be",
            "Tiny",
            512u64,
            1u32,
            "Tiny instance type",
        ),
        (
            "00000005-0005-0005-0005-0000000002e6",
            "Small",
            2048,
            1,
            "Small instance type",
        ),
        (
            "00000007-0007-0007-0007-00000000010a",
            "Medium",
            4096,
            2,
            "Medium instance type",
        ),
        (
            "00000009-0009-0009-0009-0000000000f1",
            "Large",
            8192,
            2,
            "Large instance type",
        ),
        (
            "0000000b-000b-000b-000b-00000000021f",
            "XLarge",
            16384,
            4,
            "Extra Large instance type",
        ),
    ]
    .into_iter()
    .map(|(id, name, memory_mib, sockets, description)| InstanceTypeSeed {
        id: Some(id.into()),
        name: name.into(),
        description: description.into(),
        memory_bytes: memory_mib << 20,
        sockets,
        ..InstanceTypeSeed::default()
    })
    .collect()
}

/// A hypervisor of a cluster.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct HostSeed {
    pub id: Option<String>,
    pub name: String,
    pub cluster: String,
    /// up, maintenance, non_responsive, …
    pub status: String,
    pub memory_bytes: u64,
    pub sockets: u32,
    pub cores: u32,
    pub threads: u32,
    /// Names of the affinity labels the host carries.
    pub labels: Vec<String>,
    /// Its devices (PCI cards, GPUs and their mdev types).
    pub devices: Vec<HostDeviceSeed>,
}

impl Default for HostSeed {
    fn default() -> Self {
        Self {
            id: None,
            name: String::new(),
            cluster: "Default".into(),
            status: "up".into(),
            memory_bytes: 256 * GIB,
            sockets: 2,
            cores: 16,
            threads: 2,
            labels: Vec::new(),
            devices: Vec::new(),
        }
    }
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct AffinityLabelSeed {
    pub id: Option<String>,
    pub name: String,
}

/// A VM-to-VM negative affinity group of a cluster, with the VMs it names.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct AffinityGroupSeed {
    pub id: Option<String>,
    pub name: String,
    pub cluster: String,
    pub description: String,
    /// Names of seeded VMs.
    pub vms: Vec<String>,
    /// Hard (enforcing) rather than soft.
    pub enforcing: bool,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct DataCenterSeed {
    pub id: Option<String>,
    pub name: String,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ClusterSeed {
    pub id: Option<String>,
    pub name: String,
    pub data_center: String,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct StorageDomainSeed {
    pub id: Option<String>,
    pub name: String,
    /// None = unattached.
    pub data_center: Option<String>,
    #[serde(rename = "type")]
    pub kind: String,
    pub status: String,
    pub external_status: String,
    pub available_bytes: u64,
    pub used_bytes: u64,
    /// nfs (default), glusterfs, posixfs, iscsi or fcp.
    pub storage_type: String,
    /// GiB: below this much available space the engine refuses new disks (`critical_space_action_blocker`; the
    /// engine's default `CriticalSpaceActionBlocker` is 5).
    pub critical_space_action_blocker: u64,
}

impl Default for StorageDomainSeed {
    fn default() -> Self {
        Self {
            id: None,
            name: String::new(),
            data_center: None,
            kind: "data".into(),
            status: "active".into(),
            external_status: "ok".into(),
            // A large SAN: a thousand clones of the default template (2.5 GiB allocated each) fit.
            available_bytes: 16 * 1024 * GIB,
            used_bytes: 100 * GIB,
            storage_type: "nfs".into(),
            critical_space_action_blocker: 5,
        }
    }
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct NetworkSeed {
    pub id: Option<String>,
    pub name: String,
    pub data_center: String,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct VnicProfileSeed {
    pub id: Option<String>,
    pub name: String,
    pub network: String,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct TemplateSeed {
    pub id: Option<String>,
    pub name: String,
    pub cluster: Option<String>,
    pub status: String,
    /// Versions of one name share it; version 1 is the base the others name (`base_template`).
    pub version_number: u32,
    pub version_name: Option<String>,
    pub memory_bytes: u64,
    pub disks: Vec<TemplateDiskSeed>,
    pub nics: Vec<TemplateNicSeed>,
    /// The engine's OS type (`other`, `rhcos_x64`, `rhel_8x64`, `windows_2019x64`, …): decides which
    /// initialization a start delivers (osinfo `vmInitType`).
    pub os_type: String,
    /// Whether the template's image runs a guest agent (qemu-guest-agent): without one the engine never learns the
    /// guest's interfaces, and VMs of the template report no devices, addresses or FQDN.
    pub guest_agent: bool,
}

impl Default for TemplateSeed {
    fn default() -> Self {
        Self {
            id: None,
            name: String::new(),
            cluster: None,
            status: "ok".into(),
            version_number: 1,
            version_name: None,
            memory_bytes: 4 * GIB,
            disks: Vec::new(),
            nics: Vec::new(),
            os_type: "other".into(),
            guest_agent: true,
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct TemplateDiskSeed {
    pub id: Option<String>,
    pub alias: String,
    pub size_bytes: u64,
    /// Names of the storage domains holding a copy.
    pub storage_domains: Vec<String>,
    pub bootable: bool,
    pub format: String,
}

impl Default for TemplateDiskSeed {
    fn default() -> Self {
        Self {
            id: None,
            alias: String::new(),
            size_bytes: 20 * GIB,
            storage_domains: Vec::new(),
            bootable: true,
            format: "cow".into(),
        }
    }
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct TemplateNicSeed {
    pub name: String,
    pub vnic_profile: Option<String>,
}

/// A VM that already exists (e.g. thousands of them for capacity tests).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct VmSeed {
    pub id: Option<String>,
    pub name: String,
    pub cluster: Option<String>,
    pub template: Option<String>,
    pub status: String,
    pub description: String,
    /// The user the engine gave `UserVmManager` on the VM, as on the VMs it creates; a user without an
    /// administrative role sees only such VMs. None: no user but administrators sees it.
    pub created_by: Option<String>,
}

impl Default for VmSeed {
    fn default() -> Self {
        Self {
            id: None,
            name: String::new(),
            cluster: None,
            template: None,
            status: "down".into(),
            description: String::new(),
            created_by: None,
        }
    }
}

/// The inventory the binary starts with unless `--inventory` is given.
pub fn default_inventory() -> Inventory {
    Inventory {
        data_centers: vec![DataCenterSeed {
            id: None,
            name: "Default".into(),
        }],
        clusters: vec![ClusterSeed {
            id: None,
            name: "Default".into(),
            data_center: "Default".into(),
        }],
        storage_domains: vec![
            StorageDomainSeed {
                name: "data1".into(),
                data_center: Some("Default".into()),
                ..Default::default()
            },
            StorageDomainSeed {
                name: "data2".into(),
                data_center: Some("Default".into()),
                ..Default::default()
            },
        ],
        networks: vec![NetworkSeed {
            id: None,
            name: "ovirtmgmt".into(),
            data_center: "Default".into(),
        }],
        vnic_profiles: vec![VnicProfileSeed {
            id: None,
            name: "ovirtmgmt".into(),
            network: "ovirtmgmt".into(),
        }],
        templates: vec![
            TemplateSeed {
                name: "rhcos-4.14".into(),
                cluster: Some("Default".into()),
                // Red Hat CoreOS boots with Ignition: a cloud-init request to a VM of this template delivers nothing.
                os_type: "rhcos_x64".into(),
                disks: vec![TemplateDiskSeed {
                    alias: "rhcos-4.14_Disk1".into(),
                    size_bytes: 20 * GIB,
                    storage_domains: vec!["data1".into()],
                    ..Default::default()
                }],
                nics: vec![TemplateNicSeed {
                    name: "nic1".into(),
                    vnic_profile: Some("ovirtmgmt".into()),
                }],
                ..Default::default()
            },
            TemplateSeed {
                name: "ubuntu-22.04".into(),
                cluster: Some("Default".into()),
                // A kubeadm image (e.g. built by image-builder) that boots with cloud-init: oVirt's "Other Linux".
                os_type: "other_linux".into(),
                disks: vec![TemplateDiskSeed {
                    alias: "ubuntu-22.04_Disk1".into(),
                    size_bytes: 20 * GIB,
                    storage_domains: vec!["data1".into()],
                    ..Default::default()
                }],
                nics: vec![TemplateNicSeed {
                    name: "nic1".into(),
                    vnic_profile: Some("ovirtmgmt".into()),
                }],
                ..Default::default()
            },
        ],
        vms: Vec::new(),
        // Three hosts as large as the largest a cluster level 4.x host may be, so that thousands of VMs of the
        // default templates fit (benchmarks); tests that need scarcity seed their own.
        hosts: (1..=3)
            .map(|n| HostSeed {
                name: format!("host-{n}"),
                memory_bytes: 16 * 1024 * GIB,
                sockets: 4,
                cores: 64,
                ..HostSeed::default()
            })
            .collect(),
        affinity_labels: Vec::new(),
        affinity_groups: Vec::new(),
        instance_types: predefined_instance_types(),
    }
}

fn id_or_new(id: &Option<String>) -> String {
    id.clone().unwrap_or_else(new_id)
}

/// Adds an inventory to the state. Unknown references are errors (nothing is half-added for the
/// failing object, earlier objects stay).
pub fn seed(state: &mut State, inventory: &Inventory) -> Result<(), String> {
    state.tags.entry(ROOT_TAG_ID.to_string()).or_insert_with(|| TagRecord {
        id: ROOT_TAG_ID.to_string(),
        name: "root".into(),
        description: "root".into(),
        parent_id: None,
    });
    for dc in &inventory.data_centers {
        let id = id_or_new(&dc.id);
        state.data_centers.insert(
            id.clone(),
            DataCenterRecord {
                id,
                name: dc.name.clone(),
            },
        );
    }
    let dc_id = |state: &State, name: &str| -> Result<String, String> {
        state
            .data_centers
            .values()
            .find(|dc| dc.name == name)
            .map(|dc| dc.id.clone())
            .ok_or_else(|| format!("unknown data center {name:?}"))
    };
    for cluster in &inventory.clusters {
        let data_center_id = dc_id(state, &cluster.data_center)?;
        let id = id_or_new(&cluster.id);
        state.clusters.insert(
            id.clone(),
            ClusterRecord {
                id,
                name: cluster.name.clone(),
                data_center_id,
                cpu_type: "Intel Nehalem Family".into(),
            },
        );
    }
    for sd in &inventory.storage_domains {
        let data_center_id = match &sd.data_center {
            Some(name) => Some(dc_id(state, name)?),
            None => None,
        };
        let master = data_center_id.as_ref().is_some_and(|dc| {
            !state
                .storage_domains
                .values()
                .any(|s| s.data_center_id.as_ref() == Some(dc) && s.master)
        });
        let id = id_or_new(&sd.id);
        let id_for_profile = id.clone();
        state.storage_domains.insert(
            id.clone(),
            StorageDomainRecord {
                id,
                name: sd.name.clone(),
                kind: sd.kind.clone(),
                data_center_id,
                status: sd.status.clone(),
                external_status: sd.external_status.clone(),
                available: sd.available_bytes,
                used: sd.used_bytes,
                critical_space_action_blocker: sd.critical_space_action_blocker,
                master,
                storage_type: sd.storage_type.clone(),
            },
        );
        // `AddStorageDomainCommand` gives every data domain a disk profile of its own name.
        let profile_id = new_id();
        state.disk_profiles.insert(
            profile_id.clone(),
            DiskProfileRecord {
                id: profile_id,
                name: sd.name.clone(),
                storage_domain_id: id_for_profile,
            },
        );
    }
    for network in &inventory.networks {
        let data_center_id = dc_id(state, &network.data_center)?;
        let id = id_or_new(&network.id);
        state.networks.insert(
            id.clone(),
            NetworkRecord {
                id,
                name: network.name.clone(),
                data_center_id,
            },
        );
    }
    for profile in &inventory.vnic_profiles {
        let network_id = state
            .networks
            .values()
            .find(|n| n.name == profile.network)
            .map(|n| n.id.clone())
            .ok_or_else(|| format!("unknown network {:?}", profile.network))?;
        let id = id_or_new(&profile.id);
        state.vnic_profiles.insert(
            id.clone(),
            VnicProfileRecord {
                id,
                name: profile.name.clone(),
                network_id,
            },
        );
    }
    for template in &inventory.templates {
        seed_template(state, template)?;
    }
    for label in &inventory.affinity_labels {
        let id = id_or_new(&label.id);
        state.affinity_labels.insert(
            id.clone(),
            AffinityLabelRecord {
                id,
                name: label.name.clone(),
                host_ids: Vec::new(),
                vm_ids: Vec::new(),
            },
        );
    }
    for host in &inventory.hosts {
        seed_host(state, host)?;
    }
    for instance_type in &inventory.instance_types {
        let id = id_or_new(&instance_type.id);
        state.instance_types.insert(
            id.clone(),
            InstanceTypeRecord {
                id,
                name: instance_type.name.clone(),
                description: instance_type.description.clone(),
                memory: instance_type.memory_bytes,
                guaranteed: instance_type.guaranteed_bytes.unwrap_or(instance_type.memory_bytes),
                sockets: instance_type.sockets,
                cores: instance_type.cores,
                threads: instance_type.threads,
                high_availability: HighAvailability {
                    enabled: instance_type.high_availability,
                    priority: instance_type.priority,
                },
                affinity: instance_type.affinity.clone(),
            },
        );
    }
    for vm in &inventory.vms {
        seed_vm(state, vm)?;
    }
    for group in &inventory.affinity_groups {
        seed_affinity_group(state, group)?;
    }
    Ok(())
}

fn seed_affinity_group(state: &mut State, seed: &AffinityGroupSeed) -> Result<(), String> {
    let cluster_id = state
        .clusters
        .values()
        .find(|c| c.name == seed.cluster)
        .map(|c| c.id.clone())
        .ok_or_else(|| format!("unknown cluster {:?}", seed.cluster))?;
    let vm_ids = seed
        .vms
        .iter()
        .map(|name| {
            let vm = state.vms.values().find(|vm| &vm.name == name);
            vm.map(|vm| vm.id.clone()).ok_or_else(|| format!("unknown VM {name:?}"))
        })
        .collect::<Result<Vec<_>, _>>()?;
    let id = id_or_new(&seed.id);
    let off = Rule::default();
    state.affinity_groups.insert(
        id.clone(),
        AffinityGroupRecord {
            id,
            name: seed.name.clone(),
            description: seed.description.clone(),
            cluster_id,
            vms_rule: Rule {
                enabled: true,
                positive: false,
                enforcing: seed.enforcing,
            },
            hosts_rule: off,
            priority: 1.0,
            vm_ids,
            host_ids: Vec::new(),
            vm_label_ids: Vec::new(),
            host_label_ids: Vec::new(),
        },
    );
    Ok(())
}

fn seed_host(state: &mut State, seed: &HostSeed) -> Result<(), String> {
    let cluster_id = state
        .clusters
        .values()
        .find(|c| c.name == seed.cluster)
        .map(|c| c.id.clone())
        .ok_or_else(|| format!("unknown cluster {:?}", seed.cluster))?;
    let id = id_or_new(&seed.id);
    for name in &seed.labels {
        let label = state
            .affinity_labels
            .values_mut()
            .find(|l| &l.name == name)
            .ok_or_else(|| format!("unknown affinity label {name:?}"))?;
        label.host_ids.push(id.clone());
    }
    state.hosts.insert(
        id.clone(),
        HostRecord {
            id,
            name: seed.name.clone(),
            cluster_id,
            status: capov_ovirt::model::HostStatus::parse(&seed.status),
            memory: seed.memory_bytes,
            sockets: seed.sockets,
            cores: seed.cores,
            threads: seed.threads,
            devices: seed
                .devices
                .iter()
                .map(|d| HostDeviceRecord {
                    name: d.name.clone(),
                    capability: d.capability.clone(),
                    vendor_id: d.vendor_id.clone(),
                    vendor_name: d.vendor_name.clone(),
                    product_id: d.product_id.clone(),
                    product_name: d.product_name.clone(),
                    iommu_group: d.iommu_group,
                    driver: d.driver.clone(),
                    parent: d.parent.clone(),
                    mdev_types: d
                        .mdev_types
                        .iter()
                        .map(|t| MdevTypeRecord {
                            name: t.name.clone(),
                            human_readable_name: t.human_readable_name.clone(),
                            description: t.description.clone(),
                            max_instances: t.instances,
                        })
                        .collect(),
                    taken_elsewhere: false,
                })
                .collect(),
        },
    );
    Ok(())
}

fn seed_template(state: &mut State, template: &TemplateSeed) -> Result<(), String> {
    let cluster_id = match &template.cluster {
        Some(name) => Some(
            state
                .clusters
                .values()
                .find(|c| &c.name == name)
                .map(|c| c.id.clone())
                .ok_or(format!("unknown cluster {name:?}"))?,
        ),
        None => None,
    };
    let id = id_or_new(&template.id);
    let mut disk_ids = Vec::new();
    for disk in &template.disks {
        let mut storage_domain_ids = Vec::new();
        for name in &disk.storage_domains {
            let sd = state
                .storage_domains
                .values()
                .find(|s| &s.name == name)
                .ok_or(format!("unknown storage domain {name:?}"))?;
            storage_domain_ids.push(sd.id.clone());
        }
        let disk_id = id_or_new(&disk.id);
        state.disks.insert(
            disk_id.clone(),
            DiskRecord {
                id: disk_id.clone(),
                alias: disk.alias.clone(),
                description: String::new(),
                provisioned_size: disk.size_bytes,
                actual_size: disk.size_bytes / 8,
                status: DiskStatus::Ok,
                format: disk.format.clone(),
                sparse: true,
                storage_domain_ids,
                image_id: new_id(),
                vm_id: None,
                bootable: disk.bootable,
                interface: "virtio_scsi".into(),
                active: true,
                generation: 0,
                pending_size: None,
                disk_profile_id: None,
            },
        );
        disk_ids.push(disk_id);
    }
    let mut nics = Vec::new();
    for nic in &template.nics {
        let vnic_profile_id = match &nic.vnic_profile {
            Some(name) => Some(
                state
                    .vnic_profiles
                    .values()
                    .find(|p| &p.name == name)
                    .map(|p| p.id.clone())
                    .ok_or(format!("unknown vNIC profile {name:?}"))?,
            ),
            None => None,
        };
        nics.push(TemplateNic {
            name: nic.name.clone(),
            vnic_profile_id,
        });
    }
    let base_template_id = state
        .templates
        .values()
        .find(|t| t.name == template.name && t.version_number == 1)
        .map(|t| t.id.clone());
    state.templates.insert(
        id.clone(),
        TemplateRecord {
            id: id.clone(),
            name: template.name.clone(),
            description: String::new(),
            cluster_id,
            status: template.status.clone(),
            version_number: template.version_number,
            version_name: template.version_name.clone(),
            base_template_id: base_template_id.or(Some(id)),
            memory: template.memory_bytes,
            sockets: 1,
            cores: 2,
            threads: 1,
            disk_ids,
            nics,
            creation_time: now_millis(),
            os_type: template.os_type.clone(),
            guest_agent: template.guest_agent,
        },
    );
    Ok(())
}

fn seed_vm(state: &mut State, seed: &VmSeed) -> Result<(), String> {
    let cluster = match &seed.cluster {
        Some(name) => state.clusters.values().find(|c| &c.name == name),
        None => state.clusters.values().next(),
    }
    .ok_or_else(|| "no cluster for seeded VM".to_string())?
    .id
    .clone();
    let template_id = match &seed.template {
        Some(name) => state
            .templates
            .values()
            .find(|t| &t.name == name)
            .ok_or(format!("unknown template {name:?}"))?
            .id
            .clone(),
        None => capov_ovirt::model::BLANK_TEMPLATE_ID.to_string(),
    };
    let id = id_or_new(&seed.id);
    let mut disk_ids = Vec::new();
    if let Some(template) = state.templates.get(&template_id).cloned() {
        for template_disk_id in &template.disk_ids {
            let Some(template_disk) = state.disks.get(template_disk_id).cloned() else {
                continue;
            };
            let disk_id = new_id();
            state.disks.insert(
                disk_id.clone(),
                DiskRecord {
                    id: disk_id.clone(),
                    image_id: new_id(),
                    vm_id: Some(id.clone()),
                    generation: 0,
                    pending_size: None,
                    disk_profile_id: None,
                    ..template_disk
                },
            );
            disk_ids.push(disk_id);
        }
    }
    let address_index = state.allocate_address();
    let status = VmStatus::parse(&seed.status);
    let guest_agent = state.templates.get(&template_id).is_none_or(|t| t.guest_agent);
    // A running VM runs somewhere: the first host of its cluster that is up.
    let host = runs_on_a_host(&status)
        .then(|| {
            state
                .hosts
                .values()
                .find(|h| h.cluster_id == cluster && h.status == capov_ovirt::model::HostStatus::Up)
                .map(|h| h.id.clone())
        })
        .flatten();
    state.insert_vm(VmRecord {
        id: id.clone(),
        name: seed.name.clone(),
        description: seed.description.clone(),
        comment: String::new(),
        cluster_id: cluster,
        template_id: template_id.clone(),
        os_type: state
            .templates
            .get(&template_id)
            .map_or_else(|| "other".to_string(), |t| t.os_type.clone()),
        delivered: None,
        original_template_id: template_id,
        guest_agent,
        guest_addresses: Vec::new(),
        ips_reported: status == VmStatus::Up && guest_agent,
        status,
        kind: "server".into(),
        memory: 4 * GIB,
        guaranteed: 4 * GIB,
        ballooning: true,
        sockets: 1,
        cores: 2,
        threads: 1,
        affinity: None,
        custom_script: None,
        host_name: None,
        init_network: Default::default(),
        creation_time: now_millis(),
        start_time: None,
        stop_time: None,
        disk_ids,
        nics: vec![NicRecord {
            id: new_id(),
            name: "nic1".into(),
            interface: "virtio".into(),
            mac: new_mac(),
            vnic_profile_id: state.vnic_profiles.keys().next().cloned(),
            linked: true,
            plugged: true,
        }],
        generation: 0,
        address_index,
        removing: false,
        last_start_init: None,
        copy_outcome: CopyOutcome::Succeeds,
        ignores_acpi: false,
        tag_ids: Default::default(),
        created_by: seed.created_by.clone(),
        placement: Placement {
            host,
            migrating_to: None,
        },
        workload: VmWorkload {
            high_availability: HighAvailability {
                enabled: false,
                priority: 1,
            },
            ..VmWorkload::default()
        },
    });
    Ok(())
}
