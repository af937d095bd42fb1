//! Engine behaviour: validation, error texts and state transitions, independent of HTTP and of
//! timers. Operations return the delayed transitions they start; the server schedules them.

use std::time::Duration;

use capov_ovirt::model::{self, BLANK_TEMPLATE_ID, DiskStatus, VmStatus};
use serde::{Deserialize, Serialize};

use crate::ids::{new_id, new_mac, now_millis};
use crate::state::*;

/// How an operation failed, in the engine's terms.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EngineError {
    /// 404 with an empty body.
    NotFound,
    /// `<fault>` with this status.
    Fault {
        status: u16,
        reason: String,
        detail: String,
    },
    /// A failed action: `<action><fault/><status>failed</status></action>`.
    ActionFailed { status: u16, detail: String },
}

pub type EngineResult<T> = Result<T, EngineError>;

/// A backend validation failure (reason `Operation Failed`, detail `[message]`).
pub fn operation_failed(status: u16, message: &str) -> EngineError {
    EngineError::Fault {
        status,
        reason: "Operation Failed".into(),
        detail: format!("[{message}]"),
    }
}

fn action_failed(status: u16, message: &str) -> EngineError {
    EngineError::ActionFailed {
        status,
        detail: format!("[{message}]"),
    }
}

fn incomplete(what: &str) -> EngineError {
    EngineError::Fault {
        status: 400,
        reason: "Incomplete parameters".into(),
        detail: what.into(),
    }
}

/// Durations of the engine's asynchronous work.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct Timings {
    /// `image_locked` → `down` after add.
    pub image_locked_ms: u64,
    /// `wait_for_launch` → `powering_up` → `up`.
    pub boot_ms: u64,
    /// From `up` until the guest agent reports devices and IPs.
    pub ip_report_delay_ms: u64,
    /// Disk extend (`locked` → `ok`) and VM removal.
    pub disk_operation_ms: u64,
    /// `powering_down` → `down` on shutdown.
    pub shutdown_ms: u64,
}

impl Timings {
    /// Fast timings for tests.
    pub fn fast() -> Self {
        Self {
            image_locked_ms: 200,
            boot_ms: 300,
            ip_report_delay_ms: 300,
            disk_operation_ms: 200,
            shutdown_ms: 200,
        }
    }

    /// Timings closer to a small real engine, for demos.
    pub fn realistic() -> Self {
        Self {
            image_locked_ms: 2000,
            boot_ms: 3000,
            ip_report_delay_ms: 2000,
            disk_operation_ms: 1000,
            shutdown_ms: 1000,
        }
    }
}

impl Default for Timings {
    fn default() -> Self {
        Self::fast()
    }
}

/// A state change that happens later, if the object's generation has not moved on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Scheduled {
    pub after: Duration,
    pub target: String,
    pub generation: u64,
    pub transition: Transition,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transition {
    VmImagesReady,
    VmPoweringUp,
    VmUp,
    VmDevicesReported,
    VmPoweredDown,
    VmRemoved,
    DiskJobDone,
}

fn later(ms: u64, target: &str, generation: u64, transition: Transition) -> Scheduled {
    Scheduled {
        after: Duration::from_millis(ms),
        target: target.to_string(),
        generation,
        transition,
    }
}

/// Running states for the start/stop/remove rules.
fn is_running(status: &VmStatus) -> bool {
    matches!(
        status,
        VmStatus::Up
            | VmStatus::PoweringUp
            | VmStatus::WaitForLaunch
            | VmStatus::PoweringDown
            | VmStatus::RebootInProgress
            | VmStatus::Migrating
            | VmStatus::NotResponding
            | VmStatus::Paused
            | VmStatus::SavingState
            | VmStatus::RestoringState
            | VmStatus::Suspended
            | VmStatus::Unknown
    )
}

fn vm_mut<'a>(state: &'a mut State, id: &str) -> EngineResult<&'a mut VmRecord> {
    state.vms.get_mut(id).ok_or(EngineError::NotFound)
}

/// Result of a successful add.
pub struct Added {
    pub vm_id: String,
    /// True when disk tasks run (202 + `image_locked`), false for a disk-less VM (201).
    pub accepted: bool,
    pub scheduled: Vec<Scheduled>,
}

/// `POST /vms?clone=…`.
pub fn add_vm(
    state: &mut State,
    timings: &Timings,
    request: &model::Vm,
    clone: bool,
) -> EngineResult<Added> {
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
    let blank_requested = template_ref.id.as_deref() == Some(BLANK_TEMPLATE_ID)
        || template_ref
            .name
            .as_deref()
            .is_some_and(|n| n.eq_ignore_ascii_case("blank"));
    let template = if blank_requested {
        None
    } else {
        Some(
            state
                .template_by_ref(template_ref.id.as_deref(), template_ref.name.as_deref())
                .ok_or_else(|| {
                    operation_failed(400, "Cannot add VM. The relevant Template doesn't exist.")
                })?
                .clone(),
        )
    };
    if state.vm_name_taken(&name) {
        return Err(operation_failed(
            409,
            "Cannot add VM. The VM name is already in use, please choose a unique name and try again.",
        ));
    }
    let memory = request
        .memory
        .or(template.as_ref().map(|t| t.memory))
        .unwrap_or(1 << 30);
    let policy = request.memory_policy.clone().unwrap_or_default();
    let guaranteed = policy.guaranteed.unwrap_or(memory);
    if guaranteed > memory {
        return Err(operation_failed(
            400,
            "Cannot add VM. Physical Memory Guaranteed cannot exceed Memory Size.",
        ));
    }
    if let Some(template) = &template
        && template.status == "locked"
    {
        return Err(operation_failed(
            409,
            "Cannot add VM: Template is locked. Please try again in a few minutes.",
        ));
    }

    // Disk placement: one entry per template disk overridden by `disk_attachments`.
    let vm_id = new_id();
    let requested = request
        .disk_attachments
        .as_ref()
        .map(|d| d.items.as_slice())
        .unwrap_or_default();
    let default_sd = request.storage_domain.as_ref().and_then(|r| r.id.clone());
    let mut new_disks = Vec::new();
    if let Some(template) = &template {
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
                Some(sd_id) => {
                    let usable = state.storage_domains.get(&sd_id).is_some_and(|sd| {
                        sd.kind == "data"
                            && sd.status == "active"
                            && sd.data_center_id.as_ref() == Some(&cluster.data_center_id)
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
                    sd_id
                }
                None => source
                    .storage_domain_ids
                    .first()
                    .cloned()
                    .unwrap_or_default(),
            };
            let format = overrides.and_then(|d| d.format.clone());
            if !clone && format.as_deref() == Some("raw") {
                return Err(operation_failed(
                    400,
                    "Cannot add VM. Thin provisioned template disks can not be defined as Raw.",
                ));
            }
            let format = format.unwrap_or_else(|| {
                if clone {
                    source.format.clone()
                } else {
                    "cow".into()
                }
            });
            let sparse = overrides.and_then(|d| d.sparse).unwrap_or(source.sparse);
            new_disks.push(DiskRecord {
                id: new_id(),
                alias: overrides
                    .and_then(|d| d.alias.clone())
                    .unwrap_or(source.alias.clone()),
                description: String::new(),
                provisioned_size: source.provisioned_size,
                actual_size: if clone { source.actual_size } else { 1 << 20 },
                status: DiskStatus::Locked,
                format,
                sparse,
                storage_domain_ids: vec![storage_domain_id],
                image_id: new_id(),
                vm_id: Some(vm_id.clone()),
                bootable: source.bootable,
                interface: source.interface.clone(),
                active: true,
                generation: 1,
                pending_size: None,
            });
        }
    }

    let topology = request
        .cpu
        .as_ref()
        .and_then(|c| c.topology.clone())
        .unwrap_or_default();
    let template_id = template
        .as_ref()
        .map(|t| t.id.clone())
        .unwrap_or_else(|| BLANK_TEMPLATE_ID.to_string());
    let nics = template
        .as_ref()
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
        .unwrap_or_default();
    let accepted = !new_disks.is_empty();
    let address_index = state.allocate_address();
    let disk_ids: Vec<String> = new_disks.iter().map(|d| d.id.clone()).collect();
    for disk in new_disks {
        state.disks.insert(disk.id.clone(), disk);
    }
    let initialization = request.initialization.clone().unwrap_or_default();
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
        memory,
        guaranteed,
        ballooning: policy.ballooning.unwrap_or(true),
        sockets: topology
            .sockets
            .or(template.as_ref().map(|t| t.sockets))
            .unwrap_or(1),
        cores: topology
            .cores
            .or(template.as_ref().map(|t| t.cores))
            .unwrap_or(1),
        threads: topology
            .threads
            .or(template.as_ref().map(|t| t.threads))
            .unwrap_or(1),
        affinity: request
            .placement_policy
            .as_ref()
            .and_then(|p| p.affinity.clone()),
        custom_script: initialization.custom_script,
        host_name: initialization.host_name,
        creation_time: now_millis(),
        start_time: None,
        stop_time: None,
        disk_ids,
        nics,
        generation: 1,
        ips_reported: false,
        address_index,
        removing: false,
        last_start_init: None,
    });
    // Cloning copies whole images: it takes longer than a thin snapshot.
    let lock_ms = if clone {
        timings.image_locked_ms * 2
    } else {
        timings.image_locked_ms
    };
    let scheduled = if accepted {
        vec![later(lock_ms, &vm_id, 1, Transition::VmImagesReady)]
    } else {
        Vec::new()
    };
    Ok(Added {
        vm_id,
        accepted,
        scheduled,
    })
}

/// `POST /vms/{id}/start`.
pub fn start_vm(
    state: &mut State,
    timings: &Timings,
    id: &str,
    action: &model::Action,
) -> EngineResult<Vec<Scheduled>> {
    let disks: Vec<(bool, bool, DiskStatus)> = {
        let vm = state.vms.get(id).ok_or(EngineError::NotFound)?;
        vm.disk_ids
            .iter()
            .filter_map(|d| state.disks.get(d))
            .map(|d| (d.bootable, d.active, d.status.clone()))
            .collect()
    };
    let vm = vm_mut(state, id)?;
    if vm.removing || vm.status == VmStatus::ImageLocked {
        return Err(action_failed(
            409,
            "Cannot run VM: VM is locked. Please try again in a few minutes.",
        ));
    }
    if is_running(&vm.status) {
        return Err(action_failed(409, "Cannot run VM. VM is running."));
    }
    if vm.status != VmStatus::Down {
        return Err(action_failed(
            409,
            &format!("Cannot run VM because the VM is in {} status.", vm.status),
        ));
    }
    if disks
        .iter()
        .any(|(_, _, status)| *status == DiskStatus::Locked)
    {
        return Err(action_failed(
            409,
            "Cannot run VM: Disk is locked. Please try again in a few minutes.",
        ));
    }
    if !disks
        .iter()
        .any(|(bootable, active, _)| *bootable && *active)
    {
        return Err(action_failed(
            409,
            "Cannot run VM without at least one bootable disk.",
        ));
    }
    vm.generation += 1;
    vm.status = VmStatus::WaitForLaunch;
    vm.ips_reported = false;
    vm.start_time = Some(now_millis());
    vm.last_start_init = match (
        action.use_cloud_init,
        action.use_ignition,
        action.use_initialization,
    ) {
        (Some(true), _, _) => Some("cloud-init".into()),
        (_, Some(true), _) => Some("ignition".into()),
        (_, _, Some(true)) => Some("initialization".into()),
        _ => None,
    };
    let generation = vm.generation;
    Ok(vec![
        later(
            timings.boot_ms / 3,
            id,
            generation,
            Transition::VmPoweringUp,
        ),
        later(timings.boot_ms, id, generation, Transition::VmUp),
        later(
            timings.boot_ms + timings.ip_report_delay_ms,
            id,
            generation,
            Transition::VmDevicesReported,
        ),
    ])
}

/// `POST /vms/{id}/stop`: power off at once.
pub fn stop_vm(state: &mut State, id: &str) -> EngineResult<()> {
    let vm = vm_mut(state, id)?;
    if vm.removing {
        return Err(action_failed(
            409,
            "Cannot stop VM: VM is locked. Please try again in a few minutes.",
        ));
    }
    if !is_running(&vm.status) {
        return Err(action_failed(409, "Cannot stop VM. VM is not running."));
    }
    power_off(vm);
    Ok(())
}

fn power_off(vm: &mut VmRecord) {
    vm.generation += 1;
    vm.status = VmStatus::Down;
    vm.ips_reported = false;
    vm.stop_time = Some(now_millis());
}

/// `POST /vms/{id}/shutdown`: through the guest when `up`, else the engine stops it.
pub fn shutdown_vm(state: &mut State, timings: &Timings, id: &str) -> EngineResult<Vec<Scheduled>> {
    let vm = vm_mut(state, id)?;
    if vm.removing {
        return Err(action_failed(
            409,
            "Cannot shutdown VM: VM is locked. Please try again in a few minutes.",
        ));
    }
    if !is_running(&vm.status) {
        return Err(action_failed(409, "Cannot shutdown VM. VM is not running."));
    }
    if vm.status != VmStatus::Up {
        power_off(vm);
        return Ok(Vec::new());
    }
    vm.generation += 1;
    vm.status = VmStatus::PoweringDown;
    Ok(vec![later(
        timings.shutdown_ms,
        id,
        vm.generation,
        Transition::VmPoweredDown,
    )])
}

/// `DELETE /vms/{id}`.
pub fn remove_vm(state: &mut State, timings: &Timings, id: &str) -> EngineResult<Vec<Scheduled>> {
    let locked_disk = {
        let vm = state.vms.get(id).ok_or(EngineError::NotFound)?;
        vm.disk_ids
            .iter()
            .filter_map(|d| state.disks.get(d))
            .any(|d| d.status == DiskStatus::Locked)
    };
    let vm = vm_mut(state, id)?;
    if is_running(&vm.status) {
        return Err(operation_failed(409, "Cannot remove VM. VM is running."));
    }
    if vm.removing || vm.status == VmStatus::ImageLocked || locked_disk {
        return Err(operation_failed(
            409,
            "Cannot remove VM: VM is locked. Please try again in a few minutes.",
        ));
    }
    vm.generation += 1;
    vm.removing = true;
    vm.status = VmStatus::ImageLocked;
    let generation = vm.generation;
    let disk_ids = vm.disk_ids.clone();
    for disk_id in disk_ids {
        if let Some(disk) = state.disks.get_mut(&disk_id) {
            disk.status = DiskStatus::Locked;
        }
    }
    Ok(vec![later(
        timings.disk_operation_ms,
        id,
        generation,
        Transition::VmRemoved,
    )])
}

/// `PUT /disks/{id}` or `PUT /vms/{vm}/diskattachments/{id}`: alias and size.
pub fn update_disk(
    state: &mut State,
    timings: &Timings,
    disk_id: &str,
    update: &model::Disk,
) -> EngineResult<Vec<Scheduled>> {
    let vm_locked = {
        let disk = state.disks.get(disk_id).ok_or(EngineError::NotFound)?;
        disk.vm_id
            .as_ref()
            .and_then(|vm| state.vms.get(vm))
            .is_some_and(|vm| vm.status == VmStatus::ImageLocked)
    };
    let disk = state.disks.get_mut(disk_id).ok_or(EngineError::NotFound)?;
    if vm_locked || disk.status == DiskStatus::Locked {
        return Err(operation_failed(
            409,
            "Cannot edit Virtual Disk: Disk is locked. Please try again in a few minutes.",
        ));
    }
    if let Some(size) = update.provisioned_size
        && size < disk.provisioned_size
    {
        return Err(operation_failed(
            400,
            "Cannot edit Virtual Disk. New disk size must be larger than the current disk size.",
        ));
    }
    if let Some(alias) = &update.alias {
        disk.alias = alias.clone();
    }
    if let Some(description) = &update.description {
        disk.description = description.clone();
    }
    match update.provisioned_size {
        Some(size) if size > disk.provisioned_size => {
            // The extend job locks the disk; the new size shows when it finishes.
            disk.generation += 1;
            disk.status = DiskStatus::Locked;
            disk.pending_size = Some(size);
            Ok(vec![later(
                timings.disk_operation_ms,
                disk_id,
                disk.generation,
                Transition::DiskJobDone,
            )])
        }
        _ => Ok(Vec::new()),
    }
}

fn nic_profile(state: &State, nic: &model::Nic) -> EngineResult<Option<String>> {
    match nic.vnic_profile.as_ref().and_then(|r| r.id.clone()) {
        Some(id) if !state.vnic_profiles.contains_key(&id) => Err(operation_failed(
            400,
            "Cannot add Interface. The specified vNIC profile doesn't exist.",
        )),
        other => Ok(other),
    }
}

/// `POST /vms/{id}/nics`.
pub fn add_nic(state: &mut State, vm_id: &str, nic: &model::Nic) -> EngineResult<String> {
    let name = nic
        .name
        .clone()
        .filter(|n| !n.is_empty())
        .ok_or_else(|| incomplete("Nic [name] required for add"))?;
    let profile = nic_profile(state, nic)?;
    let vm = vm_mut(state, vm_id)?;
    if vm.status == VmStatus::ImageLocked {
        return Err(operation_failed(
            409,
            "Cannot add Interface: VM is locked. Please try again in a few minutes.",
        ));
    }
    if vm.nics.iter().any(|n| n.name == name) {
        return Err(operation_failed(
            409,
            "Cannot add Interface. The VM Network Interface name is already in use.",
        ));
    }
    let id = new_id();
    vm.nics.push(NicRecord {
        id: id.clone(),
        name,
        interface: nic.interface.clone().unwrap_or_else(|| "virtio".into()),
        mac: nic
            .mac
            .as_ref()
            .and_then(|m| m.address.clone())
            .unwrap_or_else(new_mac),
        vnic_profile_id: profile,
        linked: nic.linked.unwrap_or(true),
        plugged: nic.plugged.unwrap_or(true),
    });
    Ok(id)
}

/// `PUT /vms/{id}/nics/{nic}`.
pub fn update_nic(
    state: &mut State,
    vm_id: &str,
    nic_id: &str,
    update: &model::Nic,
) -> EngineResult<()> {
    let profile = nic_profile(state, update)?;
    let vm = vm_mut(state, vm_id)?;
    if vm.status == VmStatus::ImageLocked {
        return Err(operation_failed(
            409,
            "Cannot edit Interface: VM is locked. Please try again in a few minutes.",
        ));
    }
    if let Some(name) = &update.name
        && vm.nics.iter().any(|n| &n.name == name && n.id != nic_id)
    {
        return Err(operation_failed(
            409,
            "Cannot edit Interface. The VM Network Interface name is already in use.",
        ));
    }
    let nic = vm
        .nics
        .iter_mut()
        .find(|n| n.id == nic_id)
        .ok_or(EngineError::NotFound)?;
    if let Some(name) = &update.name {
        nic.name = name.clone();
    }
    if let Some(interface) = &update.interface {
        nic.interface = interface.clone();
    }
    if update.vnic_profile.is_some() {
        nic.vnic_profile_id = profile;
    }
    if let Some(address) = update.mac.as_ref().and_then(|m| m.address.clone()) {
        nic.mac = address;
    }
    if let Some(linked) = update.linked {
        nic.linked = linked;
    }
    if let Some(plugged) = update.plugged {
        nic.plugged = plugged;
    }
    Ok(())
}

/// `DELETE /vms/{id}/nics/{nic}`.
pub fn remove_nic(state: &mut State, vm_id: &str, nic_id: &str) -> EngineResult<()> {
    let vm = vm_mut(state, vm_id)?;
    if vm.status == VmStatus::ImageLocked {
        return Err(operation_failed(
            409,
            "Cannot remove Interface: VM is locked. Please try again in a few minutes.",
        ));
    }
    let before = vm.nics.len();
    vm.nics.retain(|n| n.id != nic_id);
    if vm.nics.len() == before {
        Err(EngineError::NotFound)
    } else {
        Ok(())
    }
}

/// Control: attach a new data disk (not from the template) to a VM.
pub fn attach_extra_disk(
    state: &mut State,
    vm_id: &str,
    alias: &str,
    size_bytes: u64,
) -> EngineResult<String> {
    let storage_domain_id = {
        let vm = state.vms.get(vm_id).ok_or(EngineError::NotFound)?;
        vm.disk_ids
            .first()
            .and_then(|d| state.disks.get(d))
            .and_then(|d| d.storage_domain_ids.first().cloned())
            .or_else(|| state.storage_domains.keys().next().cloned())
            .unwrap_or_default()
    };
    let disk_id = new_id();
    state.disks.insert(
        disk_id.clone(),
        DiskRecord {
            id: disk_id.clone(),
            alias: alias.to_string(),
            description: String::new(),
            provisioned_size: size_bytes,
            actual_size: 0,
            status: DiskStatus::Ok,
            format: "cow".into(),
            sparse: true,
            storage_domain_ids: vec![storage_domain_id],
            image_id: new_id(),
            vm_id: Some(vm_id.to_string()),
            bootable: false,
            interface: "virtio_scsi".into(),
            active: true,
            generation: 0,
            pending_size: None,
        },
    );
    vm_mut(state, vm_id)?.disk_ids.push(disk_id.clone());
    Ok(disk_id)
}

/// Applies a delayed transition; stale ones (the object moved on) are ignored.
pub fn apply(state: &mut State, scheduled: &Scheduled) {
    if scheduled.transition == Transition::DiskJobDone {
        if let Some(disk) = state.disks.get_mut(&scheduled.target)
            && disk.generation == scheduled.generation
        {
            if let Some(size) = disk.pending_size.take() {
                disk.provisioned_size = size;
            }
            disk.status = DiskStatus::Ok;
        }
        return;
    }
    let Some(vm) = state.vms.get_mut(&scheduled.target) else {
        return;
    };
    if vm.generation != scheduled.generation {
        return;
    }
    match scheduled.transition {
        Transition::VmImagesReady => {
            vm.status = VmStatus::Down;
            let disk_ids = vm.disk_ids.clone();
            for disk_id in disk_ids {
                if let Some(disk) = state.disks.get_mut(&disk_id)
                    && disk.pending_size.is_none()
                {
                    disk.status = DiskStatus::Ok;
                }
            }
        }
        Transition::VmPoweringUp => vm.status = VmStatus::PoweringUp,
        Transition::VmUp => vm.status = VmStatus::Up,
        Transition::VmDevicesReported => {
            if vm.status == VmStatus::Up {
                vm.ips_reported = true;
            }
        }
        Transition::VmPoweredDown => power_off(vm),
        Transition::VmRemoved => {
            state.remove_vm(&scheduled.target);
        }
        Transition::DiskJobDone => {}
    }
}
