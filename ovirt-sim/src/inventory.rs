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
            available_bytes: 1024 * GIB,
            used_bytes: 100 * GIB,
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
    pub version_number: u32,
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
    }
}

fn id_or_new(id: &Option<String>) -> String {
    id.clone().unwrap_or_else(new_id)
}

/// Adds an inventory to the state. Unknown references are errors (nothing is half-added for the
/// failing object, earlier objects stay).
pub fn seed(state: &mut State, inventory: &Inventory) -> Result<(), String> {
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
                master,
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
    for vm in &inventory.vms {
        seed_vm(state, vm)?;
    }
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
            version_name: None,
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
                    ..template_disk
                },
            );
            disk_ids.push(disk_id);
        }
    }
    let address_index = state.allocate_address();
    let status = VmStatus::parse(&seed.status);
    let guest_agent = state.templates.get(&template_id).is_none_or(|t| t.guest_agent);
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
        created_by: seed.created_by.clone(),
    });
    Ok(())
}
