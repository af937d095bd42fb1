//! Dormant machines: a machine with nothing to do before its next pass (Ready and watched at the steady cadence,
//! waiting for its VM to boot or its Node to join, waiting out a backoff, or waiting for its permit) stops its actor
//! and leaves its state with the supervisor. A machine also starts that way: the supervisor starts its actor in its
//! namespace's turn (`supervisor::wake_turn`). An actor costs about 7 KB beside its state whatever it holds
//! (ractor's channels, the task, its processing loop; docs/benchmarks.md): at 10,000 machines, 70 MiB for actors
//! that wait.
//!
//! Nothing a machine would hear is lost meanwhile. Its timer, its provider subscription and its ticket for a permit
//! stay; mail that finds its actor stopped goes to the supervisor (`machine_mail::tell`), which holds it, starts the
//! actor again from the dormant state and hands it over. An object change the machine would not act on (its own
//! status write coming back) only replaces the object in the dormant state. A machine being deleted never rests.

use std::sync::Arc;

use capov_crds::OVirtMachine;

use super::state::MachineState;
use crate::runtime::keys::ObjectKey;
use crate::runtime::mailbox;
use crate::runtime::messages::Dormant;

/// A machine's state while it has no actor: the supervisor holds it and starts the actor again with it.
pub struct DormantMachine {
    state: Box<MachineState>,
    _counted: mailbox::Alive,
}

impl DormantMachine {
    pub(super) fn new(mut state: Box<MachineState>) -> DormantMachine {
        state.resting = false;
        state.alive = None;
        let counted = mailbox::Alive::counted_in(&state.shared.metrics.machines_dormant);
        DormantMachine {
            state,
            _counted: counted,
        }
    }

    /// The state for the actor that starts again; None for a record that is not a machine's.
    pub(super) fn state_of(record: Box<dyn Dormant>) -> Option<Box<MachineState>> {
        record
            .into_any()
            .downcast::<DormantMachine>()
            .ok()
            .map(|dormant| dormant.state)
    }
}

impl Dormant for DormantMachine {
    fn key(&self) -> &ObjectKey {
        &self.state.key
    }

    fn uid(&self) -> Option<&str> {
        self.state.object.metadata.uid.as_deref()
    }

    fn wants_pass(&self) -> bool {
        self.state.pass_queued
    }

    fn takes_object(&mut self, object: Arc<OVirtMachine>) -> bool {
        let relevant = super::object_change::takes_object(&mut self.state, object);
        self.state.pass_queued |= relevant;
        relevant
    }

    fn release(mut self: Box<Self>) {
        self.state.release();
    }

    fn into_any(self: Box<Self>) -> Box<dyn std::any::Any + Send> {
        self
    }
}

/// Whether the actor may stop and leave its state: its next pass is not due at once (`schedule::is_restful`), or its
/// ticket waits for a permit or a task for its Node-step places (what comes wakes it); no pass is queued, it holds
/// nothing of a running pass, and its object is not being deleted (a deletion runs to its end in a live actor). What
/// a pass carries to the next one after a workload step (`carried_success`) is kept in the dormant state.
pub(super) fn may_rest(state: &MachineState) -> bool {
    (state.restful || state.awaiting_permit.is_some() || state.awaiting_place)
        && !state.resting
        && !state.pass_queued
        && state.workload_place.is_none()
        && state.workload_place_wanted.is_none()
        && state.bootstrap_data.is_none()
        && state.node_written.is_none()
        && !state.permit.may_work()
        && state.object.metadata.deletion_timestamp.is_none()
}
