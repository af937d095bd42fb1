//! A newer OVirtMachine from the watch, as a machine takes it: whether a pass must look at it. Shared by the actor
//! and its dormant state (`dormant`), so that a machine decides the same with or without its actor.

use std::sync::Arc;

use capov_crds::OVirtMachine;

use super::state::MachineState;

/// Takes a newer object from the watch; true when a pass must look at it. An event older than the held object is
/// dropped, and so is a change of the status alone (our own writes come back through the watch).
pub(super) fn takes_object(state: &mut MachineState, object: Arc<OVirtMachine>) -> bool {
    if is_stale(&object, &state.object) {
        return false;
    }
    let cleared = adopt_user_status_changes(state, &object);
    let relevant = cleared || changed_beyond_status(&state.object, &object);
    state.object = object;
    relevant
}

/// The user may clear failureReason (the documented reset) or the status may be edited by hand; our own writes
/// come back through the watch too. A failure we set is considered cleared once the object shows our
/// CanConnectToOVirt condition but no failureReason.
fn adopt_user_status_changes(state: &mut MachineState, object: &OVirtMachine) -> bool {
    let Some(observed) = &object.status else { return false };
    if state.status.failure_reason.is_some() && observed.failure_reason.is_none() {
        let ours = state
            .status
            .conditions
            .iter()
            .find(|c| c.type_ == capov_core::conditions::types::CAN_CONNECT_TO_OVIRT);
        let seen = observed
            .conditions
            .iter()
            .find(|c| c.type_ == capov_core::conditions::types::CAN_CONNECT_TO_OVIRT);
        if ours.is_some() && ours == seen {
            state.status.failure_reason = None;
            state.status.failure_message = None;
            state.missing_since = None;
            return true;
        }
    }
    false
}

/// A watch event can trail this actor's own writes: the object a patch returned is newer than the event of an earlier
/// status write still on its way. Taking such an event would undo the patch locally (a machine would look as if it
/// had no providerID or finalizer yet and redo that step). resourceVersions are etcd revisions on every real
/// apiserver; when both parse as numbers and the object is the same (uid), an older one is ignored; anything else is
/// taken as news.
fn is_stale(incoming: &OVirtMachine, held: &OVirtMachine) -> bool {
    let revision = |o: &OVirtMachine| {
        o.metadata
            .resource_version
            .as_deref()
            .and_then(|v| v.parse::<u64>().ok())
    };
    incoming.metadata.uid == held.metadata.uid
        && matches!((revision(incoming), revision(held)), (Some(new), Some(old)) if new < old)
}

/// Whether anything a pass reads changed: spec, deletion, finalizers, labels, annotations or owners.
fn changed_beyond_status(old: &OVirtMachine, new: &OVirtMachine) -> bool {
    let (a, b) = (&old.metadata, &new.metadata);
    old.spec != new.spec
        || a.generation != b.generation
        || a.deletion_timestamp != b.deletion_timestamp
        || a.finalizers != b.finalizers
        || a.labels != b.labels
        || a.annotations != b.annotations
        || a.owner_references != b.owner_references
}

#[cfg(test)]
mod tests {
    use super::*;

    fn machine(uid: &str, resource_version: &str) -> OVirtMachine {
        serde_json::from_value(serde_json::json!({
            "apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1", "kind": "OVirtMachine",
            "metadata": {"name": "worker-0", "namespace": "default", "uid": uid, "resourceVersion": resource_version},
            "spec": {"provider": "engine", "ovirtcluster": "Default", "template": "rhcos"}
        }))
        .expect("machine")
    }

    #[test]
    fn events_behind_the_held_object_are_stale() {
        let held = machine("a", "120");
        assert!(is_stale(&machine("a", "119"), &held));
        assert!(!is_stale(&machine("a", "120"), &held));
        assert!(!is_stale(&machine("a", "121"), &held));
        // Another object of the same name (deleted and created again) is always news.
        assert!(!is_stale(&machine("b", "7"), &held));
        // Opaque versions cannot be ordered: taken as news.
        assert!(!is_stale(&machine("a", "x9"), &held));
    }
}
