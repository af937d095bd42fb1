//! SPEC §2.1: deletion is always processed (also with failureReason set, and without the owner Machine or
//! Cluster), except while paused. A VM is deleted only when its marker proves it is this object's and it carries no
//! disk other than its system disks (a CSI volume still attached would be destroyed with it). A VM is gone only
//! when neither its id nor its name (with this object's marker) finds it, through the engine and user the VM was
//! created with.

use super::action::{Action, BookkeepingAction, Requeue, VmAction};
use capov_crds::Severity;
use capov_crds::labels::{
    DELETE_FOR_MOVE_ANNOTATION, MANAGEMENT_CLUSTER_ANNOTATION, RELEASE_VM_ANNOTATION, SYSTEM_DISKS_ANNOTATION,
};

use super::decision::Decision;
use super::observed::{ConnectionFailure, FoundBy, Observed, ObservedVm, ProviderConnection, VmDisk};
use super::placement;
use super::recorded_engine::engine_changed;
use super::removal::{NON_SYSTEM_DISK_MESSAGE, by_status, deleted};
use super::volume_release;
use crate::conditions::{ConditionUpdate, reasons, types};
use crate::policy::backoff::NON_SYSTEM_DISK_RETRY;
use crate::trust::identity::{NotOwned, Ownership, parse_provider_id};

pub(super) fn decide(o: &Observed) -> Decision {
    if !o.has_finalizer {
        return Decision::new(Action::Done(Requeue::OnChange), vec![]);
    }
    if o.deleted_for_move {
        // clusterctl move deletes the source's copy and removes its finalizers itself; the VM belongs to the copy in
        // the target management cluster. Nothing is asked of the engine, and the finalizer is left to clusterctl, so
        // that the annotation never lets an object go while its VM stays behind.
        let moved = ConditionUpdate::false_(
            types::MACHINE_DELETED,
            reasons::DELETED_FOR_MOVE,
            Severity::Info,
            format!(
                "clusterctl move is deleting this copy; its VM belongs to the copy in the target management cluster \
                 and is left alone. Not a move? Remove the annotation {DELETE_FOR_MOVE_ANNOTATION} and the VM is \
                 deleted with this OVirtMachine"
            ),
        );
        return Decision::new(Action::Wait(Requeue::OnChange), vec![moved]);
    }
    if releasable_without_engine(o) {
        return Decision::new(
            Action::Bookkeeping(BookkeepingAction::RemoveFinalizer { left_alone: None }),
            vec![],
        );
    }
    // Never critical during deletion: failureReason is only for creation (SPEC §2.4).
    if let ProviderConnection::Failed { failure, message, .. } = &o.connection {
        return not_connected(o, *failure, message);
    }
    let connected = crate::conditions::connected(types::CAN_CONNECT_TO_OVIRT, o.connection.insecure_transport());
    let recorded_vm = o.provider_id.as_deref().or(o.created_vm.as_deref());
    if let Some(message) = recorded_vm.and_then(|id| engine_changed(o, id)) {
        let blocked = ConditionUpdate::false_(
            types::MACHINE_DELETED,
            reasons::ENGINE_CHANGED,
            Severity::Error,
            message,
        );
        return Decision::new(Action::Wait(Requeue::OnChange), vec![connected, blocked]);
    }
    match own_vm(o, &connected) {
        Ok(vm) => remove(o, vm, connected),
        Err(decision) => *decision,
    }
}

/// The connection failed: deletion waits for it, unless the machine's namespace is not served and no VM of this
/// object was ever recorded.
fn not_connected(o: &Observed, failure: ConnectionFailure, message: &str) -> Decision {
    // A machine of a namespace the provider does not serve never got a VM from CAPOV (it is refused before
    // any engine request), unless it created one while its namespace was still allowed: recorded in
    // spec.providerID, or in the created-VM annotation while its disks were copied.
    let own_vm = o
        .provider_id
        .as_deref()
        .and_then(parse_provider_id)
        .or(o.created_vm.as_deref());
    let message = match own_vm {
        None if failure == ConnectionFailure::NamespaceNotAllowed => {
            return Decision::new(
                Action::Bookkeeping(BookkeepingAction::RemoveFinalizer { left_alone: None }),
                vec![],
            );
        }
        Some(vm_id) if failure == ConnectionFailure::NamespaceNotAllowed => format!(
            "{message}; CAPOV created the VM {vm_id} for this OVirtMachine, which keeps its finalizer until the \
             VM can be deleted"
        ),
        _ => message.to_string(),
    };
    let condition = ConditionUpdate::false_(
        types::CAN_CONNECT_TO_OVIRT,
        failure.reason(),
        failure.severity(),
        message,
    );
    Decision::new(Action::Wait(Requeue::Backoff), vec![condition])
}

/// The VM to remove, once proven this object's; Err = the decision without one (none, another's, or one this
/// object's marker names under another management cluster).
fn own_vm<'o>(o: &'o Observed, connected: &ConditionUpdate) -> Result<&'o ObservedVm, Box<Decision>> {
    match &o.vm {
        None => Err(Box::new(Decision::new(
            Action::Bookkeeping(BookkeepingAction::RemoveFinalizer { left_alone: None }),
            vec![connected.clone()],
        ))),
        Some(vm) if vm.ownership.proven(vm.found_by == FoundBy::ProviderId) => Ok(vm),
        Some(vm)
            if vm.ownership == Ownership::NotOwned(NotOwned::ThisObjectOtherManagementCluster)
                && !o.release_vm_requested =>
        {
            let held = deleted(
                reasons::VM_OF_ANOTHER_MANAGEMENT_CLUSTER,
                Severity::Warning,
                another_management_clusters_vm_message(o, vm),
            );
            Err(Box::new(Decision::new(
                Action::Wait(Requeue::OnChange),
                vec![connected.clone(), held],
            )))
        }
        Some(vm) => {
            let note = format!(
                "the VM {} ({}) is not this OVirtMachine's: {}; it is left untouched",
                o.vm_name(),
                vm.id,
                vm.ownership.unproven_by_name()
            );
            Err(Box::new(Decision::new(
                Action::Bookkeeping(BookkeepingAction::RemoveFinalizer { left_alone: Some(note) }),
                vec![connected.clone()],
            )))
        }
    }
}

/// Removes the proven VM: its disks CAPOV did not create first, then by its status, leaving its groups first.
fn remove(o: &Observed, vm: &ObservedVm, connected: ConditionUpdate) -> Decision {
    let foreign = non_system_disks(o, vm);
    let (action, condition) = if foreign.is_empty() {
        by_status(o, vm)
    } else if o.gates.disk_detach_when_node_gone {
        volume_release::decide(o, vm, foreign)
    } else {
        (
            Action::Wait(Requeue::After(NON_SYSTEM_DISK_RETRY)),
            deleted(
                reasons::VM_HAS_NON_SYSTEM_DISK,
                Severity::Warning,
                non_system_disk_message(o),
            ),
        )
    };
    let condition = volume_release::naming_detached(o, condition);
    // Its affinity groups first (issue #25): the last member takes its group along.
    let (action, condition) = match placement::leave(o, vm) {
        Some(leave) if matches!(action, Action::Vm(VmAction::StopForce { .. } | VmAction::Delete { .. })) => (
            leave,
            deleted(
                reasons::LEAVING_AFFINITY_GROUP,
                Severity::Info,
                "taking the VM out of its affinity groups before deleting it",
            ),
        ),
        Some(_) | None => (action, condition),
    };
    let mut decision = Decision::new(action, vec![connected, condition]);
    decision.status.vm_status = Some(vm.status.clone());
    decision
}

/// Why the deletion of a machine whose VM carries its marker from another management cluster waits, and the two
/// ways on: adopt the VM (an admin lists that cluster on the OVirtProvider; the VM is then deleted with the
/// machine), or let the machine go and leave the VM running (the release-vm annotation).
fn another_management_clusters_vm_message(o: &Observed, vm: &ObservedVm) -> String {
    let theirs = vm.foreign_management_cluster.as_deref().unwrap_or("(unnamed)");
    let mut accepted = vec![o.owner.management_cluster.clone()];
    for id in &o.owner.accepted_management_clusters {
        if !accepted.contains(id) {
            accepted.push(id.clone());
        }
    }
    accepted.push(theirs.to_string());
    format!(
        "the VM {} carries this OVirtMachine's ownership marker written by management cluster {theirs:?}, not by \
         this one: it came here with clusterctl move onto a cluster whose OVirtProvider {:?} already existed. \
         Deleting it now would leave the VM running in oVirt, so the deletion waits. To delete the VM with this \
         machine, a platform admin adopts that cluster's VMs: kubectl annotate ovirtprovider {} \
         {MANAGEMENT_CLUSTER_ANNOTATION}={} --overwrite. To let this OVirtMachine go and keep the VM in oVirt: \
         kubectl annotate ovirtmachine -n {} {} {RELEASE_VM_ANNOTATION}=true",
        vm.id,
        o.settings.provider,
        o.settings.provider,
        accepted.join(","),
        o.namespace,
        o.name,
    )
}

/// Whether a machine being deleted is released at once, before any engine request (the actor then asks neither the
/// provider nor the engine): its spec.providerID names no engine VM id, so CAPOV never wrote it and no VM of
/// CAPOV's is recorded there. Looking it up would read nothing useful, or worse (`ovirt://..` was once a listing of
/// every VM).
///
/// So is a machine whose spec.provider was never set and that records no VM: the provider is set before a VM is
/// created (issue 39), so there is no engine to ask.
pub fn releasable_without_engine(o: &Observed) -> bool {
    let invalid_id = o
        .provider_id
        .as_deref()
        .is_some_and(|id| parse_provider_id(id).is_none());
    let never_placed = o.settings.provider.is_empty() && !o.vm_recorded();
    o.deletion_requested && (invalid_id || never_placed)
}

/// MachineCreated's message for a spec.providerID that is not `ovirt://<uuid>`.
pub(super) fn invalid_provider_id_message(provider_id: &str) -> String {
    format!(
        "spec.providerID {:?} is not ovirt://<VM id> with the VM's id in oVirt (a UUID); CAPOV never writes such a \
         value and looks nothing up for it. Delete this OVirtMachine: it is released without any request to oVirt",
        crate::trust::bounded_text::cut(provider_id, 100)
    )
}

/// The documents' message; when the system disks were never recorded, also how to release the VM.
fn non_system_disk_message(o: &Observed) -> String {
    match o.system_disks {
        Some(_) => NON_SYSTEM_DISK_MESSAGE.to_string(),
        None => format!(
            "{NON_SYSTEM_DISK_MESSAGE}: the VM's system disks were never recorded, so only its bootable disk counts \
             as one; detach the other disks in oVirt, or list the ids of those that may be deleted with the VM in \
             the annotation {SYSTEM_DISKS_ANNOTATION} (comma-separated)"
        ),
    }
}

/// The disks that are not system disks: never deleted with the VM. A disk counts as a system disk when the
/// system-disks annotation lists it. Without the annotation, every disk of a never-started VM does (nothing can have
/// been attached yet); of a started VM only the bootable one, since the engine does not tell template disks from
/// volumes attached later (a CSI disk deleted with the VM is data lost), and listing the disks in the annotation
/// releases the VM.
pub(super) fn non_system_disks<'a>(o: &Observed, vm: &'a ObservedVm) -> Vec<&'a VmDisk> {
    vm.disks
        .iter()
        .filter(|disk| match &o.system_disks {
            Some(system) => !system.contains(&disk.disk_id),
            None => vm.ever_started && !disk.bootable,
        })
        .collect()
}
