//! `POST /vms`: validation, disk placement and clone semantics.

use capov_ovirt::model::{self, BLANK_TEMPLATE_ID, DiskStatus, VmStatus};

use super::*;
use crate::ids::{new_id, new_mac, now_millis};
use crate::state::*;

/// Result of a successful add.
pub struct Added {
    pub vm_id: String,
    /// True when disk tasks run (202 + `image_locked`), false for a disk-less VM (201).
    pub accepted: bool,
    pub scheduled: Vec<Scheduled>,
}

/// `POST /vms?clone=…`.
pub fn add_vm(state: &mut State, timings: &Timings, request: &model::Vm, clone: bool) -> EngineResult<Added> {
    let name = request
        .name
        .clone()
        .filter(|n| !n.is_empty())
        .ok_or_else(|| incomplete("Vm [name] required for add"))?;
    let cluster_ref = request
        .cluster
        .as_ref()
        .ok_or_else(|| incomplete("Vm [cluster] required for add"))?;
    let template_ref = request
        .template
        .as_ref()
        .ok_or_else(|| incomplete("Vm [template] required for add"))?;
    let cluster = state
        .cluster_by_ref(cluster_ref.id.as_deref(), cluster_ref.name.as_deref())
        .ok_or_else(|| operation_failed(400, "Cannot add VM. The relevant Cluster doesn't exist."))?
        .clone();
    let initialization = request.initialization.clone().unwrap_or_default();
    // The REST layer maps the request before any command runs: its refusals come first.
    let init_network = super::init_network::from_request(&initialization)?;
    let template = requested_template(state, template_ref, &cluster.data_center_id)?;
    // The REST layer resolves the instance type and the dedicated hosts before the command: unknown ones are 404s.
    let instance_type = super::workload::requested_instance_type(state, request)?;
    let dedicated_hosts = super::workload::requested_hosts(state, request.placement_policy.as_ref())?;
    check_name_and_description(state, &name, request, &cluster.data_center_id)?;
    let mut sizing = Sizing::of(request, template.as_ref());
    let base = VmWorkload {
        high_availability: HighAvailability {
            enabled: false,
            priority: 1,
        },
        ..VmWorkload::default()
    };
    let mut workload = super::workload::requested_workload(request, &base, state.engine_version);
    workload.dedicated_hosts = dedicated_hosts;
    let mut affinity = request.placement_policy.as_ref().and_then(|p| p.affinity.clone());
    if let Some(instance_type) = &instance_type {
        sizing.memory = instance_type.memory;
        sizing.guaranteed = instance_type.guaranteed;
        sizing.sockets = instance_type.sockets;
        sizing.cores = instance_type.cores;
        sizing.threads = instance_type.threads;
        super::workload::apply_instance_type(instance_type, &mut workload, &mut affinity);
    }
    // `AddVmCommand.validate`, in its order.
    super::workload::check_priority(workload.high_availability.priority)?;
    super::workload::check_custom_properties("add", &workload.custom_properties)?;
    super::workload::check_dedicated_hosts(state, "add", &workload.dedicated_hosts, &cluster.id)?;
    if let Some(template) = &template
        && template.status == "locked"
    {
        return Err(operation_failed(
            409,
            "Cannot add VM: Template is locked. Please try again in a few minutes.",
        ));
    }
    super::workload::check_cpu_pinning(
        &workload.cpu_pinning,
        &workload.dedicated_hosts,
        sizing.sockets * sizing.cores * sizing.threads,
    )?;
    if sizing.guaranteed > sizing.memory {
        return Err(operation_failed(
            400,
            "Cannot add VM. Physical Memory Guaranteed cannot exceed Memory Size.",
        ));
    }
    super::workload::check_lease(state, "add", &workload, &cluster.data_center_id)?;

    super::init_network::validate(&init_network, "add")?;

    let vm_id = new_id();
    let new_disks = match &template {
        Some(template) => place_disks(state, request, template, &cluster.data_center_id, clone, &vm_id)?,
        None => Vec::new(),
    };
    check_space(state, &new_disks, clone)?;
    let template_id = template
        .as_ref()
        .map(|t| t.id.clone())
        .unwrap_or_else(|| BLANK_TEMPLATE_ID.to_string());
    let accepted = !new_disks.is_empty();
    let address_index = state.allocate_address();
    let disk_ids: Vec<String> = new_disks.iter().map(|d| d.id.clone()).collect();
    for disk in new_disks {
        state.take_space(&disk);
        state.disks.insert(disk.id.clone(), disk);
    }
    state.insert_vm(VmRecord {
        id: vm_id.clone(),
        name,
        description: request.description.clone().unwrap_or_default(),
        comment: request.comment.clone().unwrap_or_default(),
        cluster_id: cluster.id.clone(),
        // A clone is independent of its template: the engine shows Blank.
        template_id: if clone {
            BLANK_TEMPLATE_ID.to_string()
        } else {
            template_id.clone()
        },
        original_template_id: template_id,
        os_type: request
            .os
            .as_ref()
            .and_then(|os| os.kind.clone())
            .or_else(|| template.as_ref().map(|t| t.os_type.clone()))
            .unwrap_or_else(|| "other".into()),
        delivered: None,
        status: if accepted {
            VmStatus::ImageLocked
        } else {
            VmStatus::Down
        },
        kind: request
            .kind
            .as_ref()
            .map(|k| k.to_string())
            .unwrap_or_else(|| "server".into()),
        memory: sizing.memory,
        guaranteed: sizing.guaranteed,
        ballooning: sizing.ballooning,
        sockets: sizing.sockets,
        cores: sizing.cores,
        threads: sizing.threads,
        affinity,
        custom_script: initialization.custom_script,
        host_name: initialization.host_name,
        init_network,
        creation_time: now_millis(),
        start_time: None,
        stop_time: None,
        disk_ids,
        nics: template_nics(template.as_ref()),
        generation: 1,
        guest_agent: template.as_ref().is_none_or(|t| t.guest_agent),
        guest_addresses: Vec::new(),
        ips_reported: false,
        address_index,
        removing: false,
        last_start_init: None,
        copy_outcome: CopyOutcome::Succeeds,
        ignores_acpi: false,
        tag_ids: Default::default(),
        created_by: None,
        placement: Placement::default(),
        workload,
    });
    let scheduled = image_timers(timings, &vm_id, accepted, clone);
    Ok(Added {
        vm_id,
        accepted,
        scheduled,
    })
}

/// The template the add names; None for Blank (its id, or its name in any case).
fn requested_template(
    state: &State,
    template_ref: &model::Ref,
    data_center_id: &str,
) -> EngineResult<Option<TemplateRecord>> {
    let blank_requested = template_ref.id.as_deref() == Some(BLANK_TEMPLATE_ID)
        || template_ref
            .name
            .as_deref()
            .is_some_and(|n| n.eq_ignore_ascii_case("blank"));
    if blank_requested {
        return Ok(None);
    }
    state
        .template_by_ref(
            template_ref.id.as_deref(),
            template_ref.name.as_deref(),
            Some(data_center_id),
        )
        .cloned()
        .map(Some)
        .ok_or_else(|| operation_failed(400, "Cannot add VM. The relevant Template doesn't exist."))
}

/// `AddVmCommand.validate`: the name's length (`MaxVmNameLength`, 64, in UTF-16 units as Java counts), the
/// description's, then the name's uniqueness within the cluster's data center (`isVmWithSameNameExists(vm,
/// storagePoolId)`).
fn check_name_and_description(
    state: &State,
    name: &str,
    request: &model::Vm,
    data_center_id: &str,
) -> EngineResult<()> {
    if name.encode_utf16().count() > VM_NAME_LIMIT {
        return Err(operation_failed(400, "Cannot add VM. The given name is too long."));
    }
    if request
        .description
        .as_ref()
        .is_some_and(|d| d.chars().count() > DESCRIPTION_LIMIT)
    {
        return Err(operation_failed(
            400,
            "Cannot add VM. The given description is too long.",
        ));
    }
    if state.vm_name_taken_in(name, data_center_id) {
        return Err(operation_failed(
            409,
            "Cannot add VM. The VM name is already in use, please choose a unique name and try again.",
        ));
    }
    Ok(())
}

/// The new VM's memory and CPUs: the request's, else its template's, else the engine's defaults.
struct Sizing {
    memory: u64,
    guaranteed: u64,
    ballooning: bool,
    sockets: u32,
    cores: u32,
    threads: u32,
}

impl Sizing {
    /// What the request asks for (validated by the caller, after an instance type had its say).
    fn of(request: &model::Vm, template: Option<&TemplateRecord>) -> Sizing {
        let memory = request.memory.or(template.map(|t| t.memory)).unwrap_or(1 << 30);
        let policy = request.memory_policy.clone().unwrap_or_default();
        let guaranteed = policy.guaranteed.unwrap_or(memory);
        let topology = request
            .cpu
            .as_ref()
            .and_then(|c| c.topology.clone())
            .unwrap_or_default();
        Sizing {
            memory,
            guaranteed,
            ballooning: policy.ballooning.unwrap_or(true),
            sockets: topology.sockets.or(template.map(|t| t.sockets)).unwrap_or(1),
            cores: topology.cores.or(template.map(|t| t.cores)).unwrap_or(1),
            threads: topology.threads.or(template.map(|t| t.threads)).unwrap_or(1),
        }
    }
}

/// Disk placement: one new disk per template disk, as `disk_attachments` override it (naming only the template's
/// disks).
fn place_disks(
    state: &State,
    request: &model::Vm,
    template: &TemplateRecord,
    data_center_id: &str,
    clone: bool,
    vm_id: &str,
) -> EngineResult<Vec<DiskRecord>> {
    let requested = request
        .disk_attachments
        .as_ref()
        .map(|d| d.items.as_slice())
        .unwrap_or_default();
    let default_sd = request.storage_domain.as_ref().and_then(|r| r.id.clone());
    for attachment in requested {
        let disk_id = attachment
            .disk
            .as_ref()
            .and_then(|d| d.id.as_deref())
            .unwrap_or_default();
        if !template.disk_ids.iter().any(|id| id == disk_id) {
            return Err(EngineError::NotFound);
        }
    }
    let mut new_disks = Vec::new();
    for template_disk_id in &template.disk_ids {
        let Some(source) = state.disks.get(template_disk_id).cloned() else {
            continue;
        };
        let overrides = requested
            .iter()
            .filter_map(|a| a.disk.as_ref())
            .find(|d| d.id.as_deref() == Some(template_disk_id.as_str()));
        let target_sd = overrides
            .and_then(|d| d.storage_domains.as_ref())
            .and_then(|sds| sds.items.first())
            .and_then(|r| r.id.clone())
            .or_else(|| if clone { None } else { default_sd.clone() });
        let storage_domain_id = match target_sd {
            Some(sd_id) => check_target_domain(state, &source, sd_id, data_center_id, clone)?,
            None => source.storage_domain_ids.first().cloned().unwrap_or_default(),
        };
        new_disks.push(copied_disk(source, overrides, storage_domain_id, vm_id, clone)?);
    }
    Ok(new_disks)
}

/// `sd_id`, when a disk copied from `source` may go there: an active data domain of the VM's data center, holding
/// the template's image unless the VM is a clone.
fn check_target_domain(
    state: &State,
    source: &DiskRecord,
    sd_id: String,
    data_center_id: &str,
    clone: bool,
) -> EngineResult<String> {
    let usable = state.storage_domains.get(&sd_id).is_some_and(|sd| {
        sd.kind == "data" && sd.status == "active" && sd.data_center_id.as_deref() == Some(data_center_id)
    });
    if !usable {
        return Err(operation_failed(
            400,
            "Cannot add VM. One or more provided storage domains are either not in active status or of an illegal type for the requested operation.",
        ));
    }
    // A thin copy needs the template image on the same domain; a clone does not.
    if !clone && !source.storage_domain_ids.contains(&sd_id) {
        return Err(operation_failed(
            400,
            "Cannot add VM. The selected Storage Domain does not contain the VM Template.",
        ));
    }
    Ok(sd_id)
}

/// `AddVmCommand.validateSpaceRequirements`, per target domain in the order the disks name them: the domain's
/// threshold first (`isDomainWithinThresholds`: less available than `critical_space_action_blocker` GiB), then the
/// room for the new disks (`hasSpaceForClonedDisks` for a clone, `hasSpaceForNewDisks` for thin layers). Both fail
/// with `ACTION_TYPE_FAILED_DISK_SPACE_LOW_ON_STORAGE_DOMAIN`, a 409. The simulator's domains are file domains (NFS).
fn check_space(state: &State, new_disks: &[DiskRecord], clone: bool) -> EngineResult<()> {
    let mut domains: Vec<&str> = Vec::new();
    for disk in new_disks {
        if let Some(domain) = disk.storage_domain_ids.first()
            && !domains.contains(&domain.as_str())
        {
            domains.push(domain);
        }
    }
    for domain_id in domains {
        let Some(domain) = state.storage_domains.get(domain_id) else {
            continue;
        };
        let needed: u64 = new_disks
            .iter()
            .filter(|d| d.storage_domain_ids.first().map(String::as_str) == Some(domain_id))
            .map(|d| space_for_new_disk(d, clone))
            .sum();
        let below_threshold = domain.available < domain.critical_space_action_blocker.saturating_mul(GIB);
        if below_threshold || domain.available < needed {
            return Err(operation_failed(
                409,
                &format!("Cannot add VM. Low disk space on Storage Domain {}.", domain.name),
            ));
        }
    }
    Ok(())
}

const GIB: u64 = 1 << 30;

/// The space the engine asks a file domain to have for one new disk: a clone's collapsed copy takes what the
/// template disk allocates (all of it when preallocated), plus 10% for qcow2 (`QCOW_OVERHEAD_FACTOR`); a thin layer
/// takes an empty qcow2 header (1 MiB).
fn space_for_new_disk(disk: &DiskRecord, clone: bool) -> u64 {
    if !clone {
        return 1 << 20;
    }
    let size = if disk.sparse {
        disk.provisioned_size.min(disk.actual_size)
    } else {
        disk.provisioned_size
    };
    if disk.format == "cow" {
        size.saturating_mul(11).div_ceil(10)
    } else {
        size
    }
}

/// The VM's disk made from the template disk `source` on `storage_domain_id`: a whole copy for a clone, else a thin
/// `cow` layer (which cannot be raw).
fn copied_disk(
    source: DiskRecord,
    overrides: Option<&model::Disk>,
    storage_domain_id: String,
    vm_id: &str,
    clone: bool,
) -> EngineResult<DiskRecord> {
    let format = overrides.and_then(|d| d.format.clone());
    if !clone && format.as_deref() == Some("raw") {
        return Err(operation_failed(
            400,
            "Cannot add VM. Thin provisioned template disks can not be defined as Raw.",
        ));
    }
    let format = format.unwrap_or_else(|| if clone { source.format.clone() } else { "cow".into() });
    let sparse = overrides.and_then(|d| d.sparse).unwrap_or(source.sparse);
    Ok(DiskRecord {
        id: new_id(),
        alias: overrides.and_then(|d| d.alias.clone()).unwrap_or(source.alias.clone()),
        description: String::new(),
        provisioned_size: source.provisioned_size,
        actual_size: if clone { source.actual_size } else { 1 << 20 },
        status: DiskStatus::Locked,
        format,
        sparse,
        storage_domain_ids: vec![storage_domain_id],
        image_id: new_id(),
        vm_id: Some(vm_id.to_string()),
        bootable: source.bootable,
        interface: source.interface.clone(),
        active: true,
        generation: 1,
        pending_size: None,
        disk_profile_id: None,
    })
}

/// The template's NICs, each with a new id and MAC address.
fn template_nics(template: Option<&TemplateRecord>) -> Vec<NicRecord> {
    template
        .map(|t| {
            t.nics
                .iter()
                .map(|n| NicRecord {
                    id: new_id(),
                    name: n.name.clone(),
                    interface: "virtio".into(),
                    mac: new_mac(),
                    vnic_profile_id: n.vnic_profile_id.clone(),
                    linked: true,
                    plugged: true,
                })
                .collect()
        })
        .unwrap_or_default()
}

/// When the disks of an accepted add are ready. Cloning copies whole images (`state::copies`, sharing the storage
/// domain's bandwidth when one is set); a thin VM only gets a layer over the template's image.
fn image_timers(timings: &Timings, vm_id: &str, accepted: bool, clone: bool) -> Vec<Scheduled> {
    match (accepted, clone, timings.storage_bytes_per_second()) {
        (false, _, _) => Vec::new(),
        (true, true, Some(_)) => vec![later(timings.image_locked_ms, vm_id, 1, Transition::VmCopyStarts)],
        (true, true, None) => vec![later(
            timings.image_locked_ms.saturating_mul(2),
            vm_id,
            1,
            Transition::VmImagesReady,
        )],
        (true, false, _) => vec![later(timings.image_locked_ms, vm_id, 1, Transition::VmImagesReady)],
    }
}

#[cfg(test)]
mod tests {
    use capov_ovirt::model::{self, Ref};

    use super::*;
    use crate::inventory::{default_inventory, seed};

    fn engine() -> (State, model::Vm) {
        let mut state = State::default();
        seed(&mut state, &default_inventory()).unwrap();
        let cluster = state.clusters.keys().next().unwrap().clone();
        let template = state
            .templates
            .values()
            .find(|t| t.name == "ubuntu-22.04")
            .unwrap()
            .id
            .clone();
        let request = model::Vm {
            name: Some("worker".into()),
            cluster: Some(Ref::id(cluster)),
            template: Some(Ref::id(template)),
            ..model::Vm::default()
        };
        (state, request)
    }

    fn data1(state: &mut State) -> &mut StorageDomainRecord {
        state
            .storage_domains
            .values_mut()
            .find(|sd| sd.name == "data1")
            .unwrap()
    }

    const LOW: &str = "Cannot add VM. Low disk space on Storage Domain data1.";

    #[test]
    fn a_clone_needs_the_templates_allocation_plus_qcow_overhead() {
        let (mut state, request) = engine();
        // The template disk allocates 2.5 GiB (20 GiB provisioned, sparse cow): a clone needs 2.75 GiB.
        let needed = (20 * GIB / 8) * 11 / 10;
        data1(&mut state).available = needed - 1 + 5 * GIB;
        data1(&mut state).critical_space_action_blocker = 0;
        let refused = add_vm(&mut state, &Timings::fast(), &request, true).err();
        assert_eq!(refused, None, "5 GiB more than the copy needs");
        data1(&mut state).available = needed - 1;
        let request = model::Vm {
            name: Some("worker-2".into()),
            ..request
        };
        assert_eq!(
            add_vm(&mut state, &Timings::fast(), &request, true).err(),
            Some(operation_failed(409, LOW))
        );
        // A thin VM takes a 1 MiB layer: it still fits.
        assert!(add_vm(&mut state, &Timings::fast(), &request, false).is_ok());
    }

    #[test]
    fn below_the_domains_threshold_nothing_is_added_and_created_disks_take_their_space() {
        let (mut state, request) = engine();
        let before = data1(&mut state).available;
        add_vm(&mut state, &Timings::fast(), &request, true).unwrap();
        assert_eq!(data1(&mut state).available, before - 20 * GIB / 8);
        data1(&mut state).available = 5 * GIB - 1;
        let request = model::Vm {
            name: Some("worker-2".into()),
            ..request
        };
        assert_eq!(
            add_vm(&mut state, &Timings::fast(), &request, false).err(),
            Some(operation_failed(409, LOW))
        );
        // Removing a VM gives its disks' space back.
        let vm = state.vms.values().find(|vm| vm.name == "worker").unwrap().id.clone();
        state.remove_vm(&vm);
        assert_eq!(data1(&mut state).available, 5 * GIB - 1 + 20 * GIB / 8);
    }

    #[test]
    fn by_name_the_newest_version_of_the_vms_data_center() {
        let (mut state, request) = engine();
        let inventory = crate::inventory::Inventory {
            data_centers: vec![crate::inventory::DataCenterSeed {
                id: None,
                name: "Remote".into(),
            }],
            clusters: vec![crate::inventory::ClusterSeed {
                id: None,
                name: "Remote".into(),
                data_center: "Remote".into(),
            }],
            templates: vec![
                crate::inventory::TemplateSeed {
                    name: "ubuntu-22.04".into(),
                    cluster: Some("Default".into()),
                    version_number: 2,
                    ..Default::default()
                },
                crate::inventory::TemplateSeed {
                    name: "ubuntu-22.04".into(),
                    cluster: Some("Remote".into()),
                    version_number: 7,
                    ..Default::default()
                },
            ],
            ..Default::default()
        };
        seed(&mut state, &inventory).unwrap();
        let request = model::Vm {
            template: Some(Ref::name("ubuntu-22.04")),
            ..request
        };
        let added = add_vm(&mut state, &Timings::fast(), &request, false).unwrap();
        let template = &state.templates[&state.vms[&added.vm_id].template_id];
        assert_eq!(
            template.version_number, 2,
            "the newest of Default's versions, not Remote's"
        );
    }
}
