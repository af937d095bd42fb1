//! Deletion of a VM that still carries disks CAPOV did not create (CSI volumes), with the gate
//! `disk-detach-when-node-gone` on (issue 27; docs/decisions.md, "Volumes of a machine whose Node is gone"). Without
//! the gate the documents' rule holds: deletion waits until someone else detaches them (SPEC §2.1).
//!
//! With it, the workload cluster decides: while the machine's Node exists, or a VolumeAttachment still names it, or
//! the cluster cannot be asked, deletion waits and says which. Once the Node is gone and nothing names it, the VM is
//! powered off (a guest that still runs must not lose a disk it writes to), the disks are detached — never deleted;
//! the engine keeps each on its storage domain — and then the VM is deleted with the disks CAPOV did create. Every
//! decision here comes after `deletion::decide` proved the VM this object's own (its marker).

use capov_crds::Severity;

use super::action::{Action, Requeue, VmAction};
use super::fact::Fact;
use super::observed::{NodeRelease, Observed, ObservedVm, ReadRequest, VmDisk};
use super::removal::{NON_SYSTEM_DISK_MESSAGE, blocked_by_state_message, by_status, deleted};
use crate::conditions::{ConditionUpdate, reasons};
use crate::policy::backoff::NON_SYSTEM_DISK_RETRY;

/// The next step for a VM proven this object's whose `foreign` disks (not empty) CAPOV did not create.
pub(super) fn decide(o: &Observed, vm: &ObservedVm, foreign: Vec<&VmDisk>) -> (Action, ConditionUpdate) {
    let ids = disk_ids(&foreign);
    let waiting = |why: String| {
        (
            Action::Wait(Requeue::After(NON_SYSTEM_DISK_RETRY)),
            deleted(
                reasons::VM_HAS_NON_SYSTEM_DISK,
                Severity::Warning,
                format!(
                    "{NON_SYSTEM_DISK_MESSAGE}: disks {ids} were not created by CAPOV and stay attached while {why}; \
                     once the Node is deleted and no VolumeAttachment names it, CAPOV detaches them (they are not \
                     deleted) and deletes the VM; retrying every minute"
                ),
            ),
        )
    };
    let unknown = |reason, severity, message: &str| {
        (
            Action::Wait(Requeue::Backoff),
            deleted(
                reason,
                severity,
                format!(
                    "{NON_SYSTEM_DISK_MESSAGE}: disks {ids} were not created by CAPOV and stay attached until the \
                     workload cluster shows the machine's Node gone, and it cannot be asked: {message}"
                ),
            ),
        )
    };
    let Fact::Read(answer) = &o.node_release else {
        // The pass reads the workload cluster and decides again; this condition is never reported.
        return (
            Action::Read(ReadRequest::NodeRelease),
            deleted(
                reasons::VM_HAS_NON_SYSTEM_DISK,
                Severity::Warning,
                NON_SYSTEM_DISK_MESSAGE,
            ),
        );
    };
    match answer {
        NodeRelease::Unreachable { message } => {
            unknown(reasons::WORKLOAD_CLUSTER_UNREACHABLE, Severity::Warning, message)
        }
        NodeRelease::Rejected { message } => unknown(reasons::WORKLOAD_KUBECONFIG_REJECTED, Severity::Error, message),
        NodeRelease::NodeExists { name } => waiting(format!("the Node {name:?} exists in the workload cluster")),
        NodeRelease::VolumeAttachments { node, names, total } => waiting(format!(
            "{} in the workload cluster still name{} the Node {node:?}, which is gone (the CSI driver has not \
             released {})",
            volume_attachments(names, *total),
            if *total == 1 { "s" } else { "" },
            if *total == 1 { "it" } else { "them" },
        )),
        NodeRelease::Released { node } => release(o, vm, foreign, &ids, node),
    }
}

/// The Node is gone and nothing names it: power the VM off, then detach the disks.
fn release(o: &Observed, vm: &ObservedVm, foreign: Vec<&VmDisk>, ids: &str, node: &str) -> (Action, ConditionUpdate) {
    let why = format!("the Node {node:?} is gone from the workload cluster and no VolumeAttachment names it");
    match vm.status.as_str() {
        "down" => (
            Action::Vm(VmAction::DetachDisks {
                vm_id: vm.id.clone(),
                disks: foreign.into_iter().cloned().collect(),
            }),
            deleted(
                reasons::DETACHING_VOLUMES,
                Severity::Info,
                format!(
                    "{why}: detaching disks {ids}, which CAPOV did not create, from the VM; they are not deleted and \
                     stay on their storage domains; then the VM is deleted"
                ),
            ),
        ),
        // `DetachDiskFromVmCommand` takes only a VM that is up or down, and these are neither running nor stoppable.
        status @ ("unassigned" | capov_ovirt_model::model::VmStatus::IMAGE_ILLEGAL) => (
            Action::Wait(Requeue::Backoff),
            deleted(
                reasons::VM_STATE_BLOCKS_DELETION,
                Severity::Warning,
                format!(
                    "{why}, but the VM is {status} in oVirt and the engine detaches disks only from a VM that is up \
                     or down: detach disks {ids} in oVirt (they must not be deleted with the VM); retrying with \
                     backoff"
                ),
            ),
        ),
        status @ ("unknown" | "saving_state" | "restoring_state") => (
            Action::Wait(Requeue::Backoff),
            deleted(
                reasons::VM_STATE_BLOCKS_DELETION,
                Severity::Warning,
                blocked_by_state_message(status),
            ),
        ),
        "image_locked" => by_status(o, vm),
        _ => (
            Action::Vm(VmAction::StopForce { vm_id: vm.id.clone() }),
            deleted(
                reasons::VM_STOPPING,
                Severity::Info,
                format!("{why}: powering the VM off to detach disks {ids}, which CAPOV did not create"),
            ),
        ),
    }
}

/// A deletion condition once disks were detached: it names them, so that the record stays until the VM is gone.
pub(super) fn naming_detached(o: &Observed, condition: ConditionUpdate) -> ConditionUpdate {
    if o.detached_disks.is_empty() {
        return condition;
    }
    let message = format!(
        "{}; detached from the VM and kept on their storage domains: disks {}",
        condition.message,
        o.detached_disks.join(", ")
    );
    condition.with_message(message)
}

fn disk_ids(disks: &[&VmDisk]) -> String {
    disks
        .iter()
        .map(|disk| disk.disk_id.as_str())
        .collect::<Vec<_>>()
        .join(", ")
}

/// `VolumeAttachments "a", "b" and 3 more` / `the VolumeAttachment "a"`.
fn volume_attachments(names: &[String], total: usize) -> String {
    let listed = names
        .iter()
        .map(|name| format!("{name:?}"))
        .collect::<Vec<_>>()
        .join(", ");
    match total.saturating_sub(names.len()) {
        _ if total == 1 => format!("the VolumeAttachment {listed}"),
        0 => format!("the VolumeAttachments {listed}"),
        more => format!("the VolumeAttachments {listed} and {more} more"),
    }
}
