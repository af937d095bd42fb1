//! One actor per OVirtMachine. It holds the latest object and what it saw of its VM, runs at most one reconcile
//! pass at a time (bursts of messages collapse into one pass), takes a permit of `--max-concurrent-reconciles` for
//! each pass, hands the resulting status to the status writer, and schedules its next pass.
//!
//! The actor's messages are handled here; a pass is `pass`, what it reads is `observe`, what it does is `execute`
//! (with `outcome`), and what follows it is `schedule`.

mod execute;
mod held_permit;
mod node_release;
mod observe;
mod outcome;
mod pass;
mod read;
mod schedule;
mod share;
mod state;
mod workload;

use std::sync::Arc;
use std::time::Instant;

use capov_crds::{OVirtMachine, OVirtMachineStatus};
use kube::ResourceExt;
use ractor::{Actor, ActorProcessingErr, ActorRef};

use self::pass::run_pass;
use self::state::MachineState;
use super::keys::ObjectKey;
use super::mailbox::{self, Mail};
use super::messages::{MachineMsg, ProviderMsg};
use super::shared::Shared;
use crate::metrics::kind;

impl Mail for MachineMsg {
    const KIND: &'static str = kind::MACHINE;
}

pub struct MachineArgs {
    /// The object with only the part of its status the actor reads later (`slim::split_status`).
    pub object: Arc<OVirtMachine>,
    /// The object's whole status when the actor starts.
    pub status: Option<OVirtMachineStatus>,
    pub shared: Arc<Shared>,
}

pub struct MachineActor;

impl Actor for MachineActor {
    type Msg = MachineMsg;
    type State = MachineState;
    type Arguments = MachineArgs;

    async fn pre_start(&self, me: ActorRef<MachineMsg>, args: MachineArgs) -> Result<MachineState, ActorProcessingErr> {
        let key = ObjectKey::machine(&args.object.namespace().unwrap_or_default(), &args.object.name_any());
        let mut sent_status = None;
        if let Some(seen) = &args.status
            && let Ok(status) = serde_json::to_value(seen)
        {
            let (fingerprint, seen) = crate::runtime::status::writer::seen(&args.shared.metrics, key.clone(), &status);
            sent_status = Some(fingerprint);
            let _ = mailbox::cast(&args.shared.metrics, &args.shared.status_writer, seen);
        }
        mailbox::cast(&args.shared.metrics, &me, MachineMsg::Tick)?;
        let status = args.status.unwrap_or_default();
        let mut state = MachineState::new(key, args.object, status, args.shared);
        state.sent_status = sent_status;
        Ok(state)
    }

    async fn post_stop(&self, _me: ActorRef<MachineMsg>, state: &mut MachineState) -> Result<(), ActorProcessingErr> {
        state.shared.timers.cancel(state.timer);
        state.shared.placements.forget_machine(&state.key);
        state.shared.device_claims.release(&state.key);
        if let Some((_, provider)) = state.subscribed_to.take() {
            let _ = mailbox::cast(
                &state.shared.metrics,
                &provider,
                ProviderMsg::Unsubscribe(state.key.clone()),
            );
        }
        Ok(())
    }

    async fn handle(
        &self,
        me: ActorRef<MachineMsg>,
        message: MachineMsg,
        state: &mut MachineState,
    ) -> Result<(), ActorProcessingErr> {
        let _handling = state.mail.handling();
        match message {
            MachineMsg::ObjectChanged(object) => {
                if is_stale(&object, &state.object) {
                    return Ok(());
                }
                let cleared = adopt_user_status_changes(state, &object);
                let relevant = cleared || changed_beyond_status(&state.object, &object);
                state.object = object;
                // Our own status writes come back through the watch; they need no pass.
                if relevant {
                    queue_pass(&me, state);
                }
            }
            MachineMsg::Poke => queue_pass(&me, state),
            MachineMsg::ConnectionChanged => {
                state.backoff.reset();
                queue_pass(&me, state);
            }
            MachineMsg::VmObserved { vm_id, snapshot } => {
                // The provider reports a watched VM whenever it differs from what this machine had seen, and goes on
                // watching it; the pass decides from the latest delivered snapshot.
                if state.watched_vm.as_ref().is_some_and(|w| w.vm_id == vm_id) {
                    state.last_seen_vm_status = snapshot.as_ref().map(|s| s.status.clone());
                    state.last_seen_fingerprint = snapshot.as_ref().map(|s| s.fingerprints());
                    state.vm_snapshot = snapshot;
                    state.vm_snapshot_at = Some(Instant::now());
                    queue_pass(&me, state);
                }
            }
            MachineMsg::Tick => {
                state.pass_queued = false;
                // Boxed: ractor keeps room for `handle`'s future inside each actor's processing loop for the
                // actor's whole life. Inline, waiting for a Node-step place and a permit makes it 504 bytes and the
                // loop 1,440; boxed, an idle machine holds only the loop's room for its other messages.
                Box::pin(run_pass(&me, state)).await;
            }
        }
        Ok(())
    }
}

fn queue_pass(me: &ActorRef<MachineMsg>, state: &mut MachineState) {
    if !state.pass_queued {
        state.pass_queued = true;
        let _ = mailbox::cast(&state.shared.metrics, me, MachineMsg::Tick);
    }
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
