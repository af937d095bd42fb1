//! Start, stop, shutdown and removal with the engine's status rules and 409 texts, and the status the control
//! interface forces.

use capov_ovirt::model::{self, DiskStatus, VmStatus};

use super::*;
use crate::ids::now_millis;
use crate::state::*;

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
    if disks.iter().any(|(_, _, status)| *status == DiskStatus::Locked) {
        return Err(action_failed(
            409,
            "Cannot run VM: Disk is locked. Please try again in a few minutes.",
        ));
    }
    if !disks.iter().any(|(bootable, active, _)| *bootable && *active) {
        return Err(action_failed(409, "Cannot run VM without at least one bootable disk."));
    }
    // `RunVmValidator` asks the scheduler before anything runs: no host, no start.
    let vm = state.vms.get(id).ok_or(EngineError::NotFound)?;
    let host = match super::scheduling::choose_host(state, vm, "run", None, false) {
        super::scheduling::Choice::Host(host) => host,
        super::scheduling::Choice::Refused(lines) => return Err(action_failed(409, &lines.join(", "))),
    };
    launch_on(state, id, &host);
    let vm = vm_mut(state, id)?;
    // What reaches the guest depends on the OS type (`engine::init`); the start succeeds either way.
    let delivered = super::init::deliver(
        &vm.os_type,
        (action.use_cloud_init == Some(true), action.use_ignition == Some(true)),
        vm.custom_script.as_deref(),
        vm.host_name.as_deref(),
        &vm.init_network,
    )
    // The engine builds the payload only when it launches the VM on a host, after the start was answered: a script
    // it cannot build fails that launch (not modelled: the VM starts without a payload).
    .unwrap_or_else(|error| {
        tracing::info!(vm = %id, %error, "the engine could not build the initialization payload");
        None
    });
    vm.delivered = delivered;
    vm.last_start_init = match (action.use_cloud_init, action.use_ignition, action.use_initialization) {
        (Some(true), _, _) => Some("cloud-init".into()),
        (_, Some(true), _) => Some("ignition".into()),
        (_, _, Some(true)) => Some("initialization".into()),
        _ => None,
    };
    Ok(boot(vm, timings))
}

/// The VM starts on `host`: placed there, `wait_for_launch`, each of its vGPUs on a device of the host with a free
/// instance of its type (the scheduler's MDevice filter made sure there is one).
pub(super) fn launch_on(state: &mut State, id: &str, host: &str) {
    let mdev_types = state.vms.get(id).map(|vm| vm.workload.mdev_types()).unwrap_or_default();
    if let Some(vm) = state.vms.get_mut(id) {
        vm.placement = Placement {
            host: Some(host.to_string()),
            migrating_to: None,
        };
        vm.workload.mdev_assignments.clear();
    }
    for mdev_type in mdev_types {
        let Some(device) = state.mdev_device_with_room(host, &mdev_type) else {
            continue;
        };
        if let Some(vm) = state.vms.get_mut(id) {
            vm.workload.mdev_assignments.push((device, mdev_type));
        }
    }
    if let Some(vm) = state.vms.get_mut(id) {
        vm.generation += 1;
        vm.status = VmStatus::WaitForLaunch;
        vm.ips_reported = false;
        vm.start_time = Some(now_millis());
    }
}

/// The boot of a VM that was launched: `powering_up`, `up`, then what its guest agent reports.
pub(super) fn boot(vm: &VmRecord, timings: &Timings) -> Vec<Scheduled> {
    let (id, generation) = (vm.id.as_str(), vm.generation);
    vec![
        later(timings.boot_ms / 3, id, generation, Transition::VmPoweringUp),
        later(timings.boot_ms, id, generation, Transition::VmUp),
        later(
            timings.boot_ms.saturating_add(timings.ip_report_delay_ms),
            id,
            generation,
            Transition::VmDevicesReported,
        ),
    ]
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
    if let Some(refused) = refuse_power_off("stop", &vm.status) {
        return Err(refused);
    }
    power_off(vm);
    Ok(())
}

/// The status rule of `StopVmCommandBase.validate` (stop and shutdown): the engine powers off a VM that is running
/// (`VMStatus.isRunning`: up, powering up/down, wait for launch, reboot, migrating), paused, not responding or
/// suspended. `saving_state`/`restoring_state` are refused with their own message (`ACTION_TYPE_FAILED_VM_IS_SAVING_
/// RESTORING`); every other status — also `unknown`, when the host lost contact with the VM — is "not running".
/// The messages are `AppErrors.properties`' with `${action}` and `${type}` filled in; the `\n` is the file's.
fn refuse_power_off(action: &str, status: &VmStatus) -> Option<EngineError> {
    let engine_running = matches!(
        status,
        VmStatus::Up
            | VmStatus::PoweringDown
            | VmStatus::PoweringUp
            | VmStatus::Migrating
            | VmStatus::WaitForLaunch
            | VmStatus::RebootInProgress
    );
    if engine_running || matches!(status, VmStatus::Paused | VmStatus::NotResponding | VmStatus::Suspended) {
        return None;
    }
    let message = if matches!(status, VmStatus::SavingState | VmStatus::RestoringState) {
        format!(
            "Cannot {action} VM. VM is in saving/restoring state.\n-Please try again when the VM is either up or down."
        )
    } else {
        format!("Cannot {action} VM. VM is not running.")
    };
    Some(action_failed(409, &message))
}

pub(super) fn power_off(vm: &mut VmRecord) {
    vm.generation += 1;
    vm.status = VmStatus::Down;
    vm.placement = Placement::default();
    vm.workload.mdev_assignments.clear();
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
    if let Some(refused) = refuse_power_off("shutdown", &vm.status) {
        return Err(refused);
    }
    if vm.status != VmStatus::Up {
        power_off(vm);
        return Ok(Vec::new());
    }
    vm.generation += 1;
    vm.status = VmStatus::PoweringDown;
    // vdsm asks the guest (agent, then ACPI) and waits; a guest that ignores it stays up, and the engine reports
    // the VM `up` again ("Failed to power off VM").
    let outcome = if vm.ignores_acpi {
        Transition::VmShutdownFailed
    } else {
        Transition::VmPoweredDown
    };
    Ok(vec![later(timings.shutdown_ms, id, vm.generation, outcome)])
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
    // `RemoveVmCommand.validate`: only unassigned, down, image_illegal and image_locked pass the status switch;
    // suspended has its own message, every other status (also unknown, saving_state, restoring_state) is "running".
    if vm.status == VmStatus::Suspended {
        return Err(operation_failed(
            409,
            "Cannot remove VM that its state is not down.\n-Please stop the VM first.",
        ));
    }
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

/// Used by the control interface to force a state (e.g. `not_responding`) for tests.
pub fn force_vm_status(state: &mut State, id: &str, status: &str) -> Result<(), EngineError> {
    let first_up_host = {
        let vm = state.vms.get(id).ok_or(EngineError::NotFound)?;
        state
            .hosts
            .values()
            .find(|h| h.cluster_id == vm.cluster_id && h.status == capov_ovirt::model::HostStatus::Up)
            .map(|h| h.id.clone())
    };
    let vm = state.vms.get_mut(id).ok_or(EngineError::NotFound)?;
    vm.generation += 1;
    vm.status = VmStatus::parse(status);
    vm.ips_reported = vm.status == VmStatus::Up && vm.guest_agent;
    // A VM forced into a running state runs somewhere; one forced down nowhere.
    if !runs_on_a_host(&vm.status) {
        vm.placement = Placement::default();
    } else if vm.placement.host.is_none() {
        vm.placement.host = first_up_host;
    }
    Ok(())
}
