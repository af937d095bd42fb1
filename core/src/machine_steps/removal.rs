//! What deletion does with a VM proven this object's (SPEC §2.1), by its status: stop it, wait, or delete it; and
//! the MachineDeleted conditions that say so. Shared by `deletion` and `volume_release`.

use super::action::{Action, Requeue, VmAction};
use std::time::Duration;

use capov_crds::Severity;

use super::observed::{Observed, ObservedVm};
use crate::conditions::{ConditionUpdate, reasons, types};

/// The message the product documents show for a VM that still has a CSI disk.
pub const NON_SYSTEM_DISK_MESSAGE: &str = "VM has non system disk, cannot delete";

/// A MachineDeleted condition that is False.
pub(super) fn deleted(reason: &'static str, severity: Severity, message: impl Into<String>) -> ConditionUpdate {
    ConditionUpdate::false_(types::MACHINE_DELETED, reason, severity, message)
}

/// The VM carries only disks that go with it: stop it (through the guest first with a graceful shutdown), wait, or
/// delete it, by its status.
pub(super) fn by_status(o: &Observed, vm: &ObservedVm) -> (Action, ConditionUpdate) {
    match vm.status.as_str() {
        // ImageIllegal is a stopped state for the engine (`VMStatus.isNotRunning`): removed as it is.
        "down" | "unassigned" | capov_ovirt_model::model::VmStatus::IMAGE_ILLEGAL => (
            Action::Vm(VmAction::Delete { vm_id: vm.id.clone() }),
            deleted(reasons::VM_DELETING, Severity::Info, "deleting the VM"),
        ),
        "image_locked" => (
            Action::Wait(Requeue::PollVm),
            deleted(
                reasons::VM_LOCKED,
                Severity::Info,
                "waiting for the VM to be unlocked in oVirt",
            ),
        ),
        // The engine refuses both stop and remove in these states (`StopVmCommandBase`/`RemoveVmCommand`
        // validate): a stop would come back 409 on every pass. Wait with backoff (the VM watch wakes the machine
        // as soon as the status changes) and say what the user can do.
        status @ ("unknown" | "saving_state" | "restoring_state") => (
            Action::Wait(Requeue::Backoff),
            deleted(
                reasons::VM_STATE_BLOCKS_DELETION,
                Severity::Warning,
                blocked_by_state_message(status),
            ),
        ),
        _ => power_off(o, vm),
    }
}

/// A running VM before its deletion: powered off at once, or with spec.gracefulshutdowntimeoutseconds first asked
/// to shut down through the guest (ACPI) and powered off once the timeout, counted from the deletion request, has
/// passed. Only an `up` (or migrating) VM is asked: for any other running state the engine's shutdown is a stop
/// anyway (`ShutdownVmCommand.canShutdownVm`). A guest that ignores the request leaves the VM `powering_down` and
/// then `up` again; it is asked again until the deadline.
fn power_off(o: &Observed, vm: &ObservedVm) -> (Action, ConditionUpdate) {
    let stop = Action::Vm(VmAction::StopForce { vm_id: vm.id.clone() });
    let timeout = o
        .settings
        .gracefulshutdowntimeoutseconds
        .and_then(|s| u64::try_from(s).ok())
        .filter(|s| *s > 0)
        .map(Duration::from_secs);
    let graceful_state = matches!(vm.status.as_str(), "up" | "migrating" | "powering_down");
    let Some(timeout) = timeout.filter(|_| graceful_state) else {
        let message = "powering the VM off before deleting it";
        return (
            stop,
            ConditionUpdate::false_(types::MACHINE_DELETED, reasons::VM_STOPPING, Severity::Info, message),
        );
    };
    let elapsed = o.deletion_requested_for.unwrap_or_default();
    let Some(remaining) = timeout.checked_sub(elapsed).filter(|r| !r.is_zero()) else {
        let message = format!(
            "the guest did not shut down within {}s of the deletion request \
             (spec.gracefulshutdowntimeoutseconds); powering the VM off",
            timeout.as_secs()
        );
        return (
            stop,
            ConditionUpdate::false_(types::MACHINE_DELETED, reasons::VM_STOPPING, Severity::Warning, message),
        );
    };
    let message = format!(
        "asked the guest to shut down (ACPI); the VM is powered off if it still runs {}s after the deletion request",
        timeout.as_secs()
    );
    let action = if vm.status == "powering_down" {
        Action::Wait(Requeue::PollVmWithin(remaining))
    } else {
        Action::Vm(VmAction::Shutdown {
            vm_id: vm.id.clone(),
            deadline_in: remaining,
        })
    };
    (
        action,
        ConditionUpdate::false_(
            types::MACHINE_DELETED,
            reasons::VM_SHUTTING_DOWN,
            Severity::Info,
            message,
        ),
    )
}

/// Why the engine will not stop or remove the VM now, and what clears it.
pub(super) fn blocked_by_state_message(status: &str) -> String {
    let (what, clears) = match status {
        "unknown" => (
            "its host lost contact with it",
            "the engine sees the VM again (check the host in oVirt; fencing or confirming the host rebooted sets \
             the VM down)",
        ),
        _ => (
            "it is being suspended or resumed",
            "the VM is up or down (resume or power it off in oVirt if it stays there)",
        ),
    };
    format!(
        "the VM is {status} in oVirt ({what}); the engine refuses to stop or delete it until {clears}; retrying \
         with backoff"
    )
}
