//! SPEC §2.1: deletion is always processed (also with failureReason set, and without the owner Machine or
//! Cluster), except while paused. A VM is deleted only when it is certainly ours and carries no disk other than
//! its system disks (a CSI volume still attached would be destroyed with it).

use capov_crds::Severity;

use super::decision::{Action, Decision, Requeue};
use super::observed::{Observed, ObservedVm, ProviderConnection};
use crate::backoff::NON_SYSTEM_DISK_RETRY;
use crate::conditions::{ConditionUpdate, reasons, types};
use crate::identity::parse_provider_id;

/// The message the product documents show for a VM that still has a CSI disk.
pub const NON_SYSTEM_DISK_MESSAGE: &str = "VM has non system disk, cannot delete";

pub(super) fn decide(o: &Observed) -> Decision {
    if !o.has_finalizer {
        return Decision::new(Action::Done(Requeue::OnChange), vec![]);
    }
    // Never critical during deletion: failureReason is only for creation (SPEC §2.4).
    if let ProviderConnection::Failed { failure, message, .. } = &o.connection {
        let condition = ConditionUpdate::false_(
            types::CAN_CONNECT_TO_OVIRT,
            failure.reason(),
            failure.severity(),
            message,
        );
        return Decision::new(Action::Wait(Requeue::Backoff), vec![condition]);
    }
    let connected = crate::conditions::connected(types::CAN_CONNECT_TO_OVIRT, o.connection.insecure_transport());
    let found_by_id = o.provider_id.as_deref().and_then(parse_provider_id).is_some();
    let vm = match &o.vm {
        None => {
            return Decision::new(
                Action::RemoveFinalizer {
                    foreign_vm_left_alone: false,
                },
                vec![connected],
            );
        }
        Some(vm) if !found_by_id && !vm.marker_matches => {
            return Decision::new(
                Action::RemoveFinalizer {
                    foreign_vm_left_alone: true,
                },
                vec![connected],
            );
        }
        Some(vm) => vm,
    };
    let deleted =
        |reason, severity, message: &str| ConditionUpdate::false_(types::MACHINE_DELETED, reason, severity, message);
    let (action, condition) = if has_non_system_disk(o, vm) {
        (
            Action::Wait(Requeue::After(NON_SYSTEM_DISK_RETRY)),
            deleted(
                reasons::VM_HAS_NON_SYSTEM_DISK,
                Severity::Warning,
                NON_SYSTEM_DISK_MESSAGE,
            ),
        )
    } else {
        match vm.status.as_str() {
            "down" | "unassigned" => (
                Action::DeleteVm { vm_id: vm.id.clone() },
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
            _ => (
                Action::StopVmForce { vm_id: vm.id.clone() },
                deleted(
                    reasons::VM_STOPPING,
                    Severity::Info,
                    "powering the VM off before deleting it",
                ),
            ),
        }
    };
    let mut decision = Decision::new(action, vec![connected, condition]);
    decision.status.vm_status = Some(vm.status.clone());
    decision
}

/// A disk counts as a system disk when the system-disks annotation lists it; without the annotation, every disk
/// of a never-started VM does, and of a started VM those that came from its template.
fn has_non_system_disk(o: &Observed, vm: &ObservedVm) -> bool {
    vm.disks.iter().any(|disk| match &o.system_disks {
        Some(system) => !system.contains(&disk.disk_id),
        None => vm.ever_started && !disk.from_template,
    })
}
