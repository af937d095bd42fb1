//! One actor per OVirtMachine while it works. It holds the latest object and what it saw of its VM, runs at most one
//! reconcile pass at a time (bursts of messages collapse into one pass), takes a permit of
//! `--max-concurrent-reconciles` for each pass (or leaves a ticket for one), hands the resulting status to the status
//! writer, and schedules its next pass. Between passes that are not due at once, and while its ticket waits, its
//! actor stops and the supervisor keeps its state (`dormant`).
//!
//! The actor's messages are handled here; a pass is `pass`, what it reads is `observe`, what it does is `execute`
//! (with `outcome`), and what follows it is `schedule`.

mod dormant;
mod execute;
mod held_permit;
mod node_release;
mod object_change;
mod observe;
mod outcome;
mod pass;
mod read;
mod schedule;
mod share;
mod state;
mod ticket;
mod workload;

use std::sync::Arc;
use std::time::Instant;

use capov_crds::{OVirtMachine, OVirtMachineStatus};
use kube::ResourceExt;
use ractor::{Actor, ActorProcessingErr, ActorRef, MessagingErr};

use self::dormant::DormantMachine;
use self::object_change::takes_object;
use self::pass::{run_pass, run_permitted_pass};
use self::state::MachineState;
use super::keys::ObjectKey;
use super::mailbox::{self, Mail};
use super::messages::{Dormant, MachineMsg, ProviderMsg, SupervisorMsg};
use super::shared::Shared;
use crate::metrics::kind;

impl Mail for MachineMsg {
    const KIND: &'static str = kind::MACHINE;
}

pub struct MachineActor;

/// The actor's state, boxed so that its stop can hand it to the supervisor whole (`dormant`).
pub struct Slot(Option<Box<MachineState>>);

impl Actor for MachineActor {
    type Msg = MachineMsg;
    type State = Slot;
    /// The machine's state: left by its actor when it rested, or made for a machine seen for the first time
    /// ([`unstarted`]).
    type Arguments = Box<dyn Dormant>;

    async fn pre_start(&self, me: ActorRef<MachineMsg>, record: Box<dyn Dormant>) -> Result<Slot, ActorProcessingErr> {
        let mut state = DormantMachine::state_of(record).ok_or("a dormant record that is not a machine's")?;
        state.alive = Some(state.mail.alive());
        if state.pass_queued {
            mailbox::cast(&state.shared.metrics, &me, MachineMsg::Tick)?;
        }
        Ok(Slot(Some(state)))
    }

    async fn post_stop(&self, _me: ActorRef<MachineMsg>, slot: &mut Slot) -> Result<(), ActorProcessingErr> {
        let Some(mut state) = slot.0.take() else {
            return Ok(());
        };
        if !state.resting {
            state.release();
            return Ok(());
        }
        // Nothing may keep the stopped actor's reference: it holds the actor's channels.
        state.shared.timers.rest(state.timer);
        if let Some((_, provider)) = &state.subscribed_to {
            let _ = mailbox::cast(&state.shared.metrics, provider, ProviderMsg::Rests(state.key.clone()));
        }
        let (metrics, supervisor) = (state.shared.metrics.clone(), state.shared.supervisor.clone());
        // A supervisor that is stopping takes no dormant machine: the runtime ends with it.
        let dormant = Box::new(DormantMachine::new(state));
        if let Err(MessagingErr::SendErr(SupervisorMsg::Dormant(dormant))) =
            mailbox::cast(&metrics, &supervisor, SupervisorMsg::Dormant(dormant))
        {
            dormant.release();
        }
        Ok(())
    }

    async fn handle(
        &self,
        me: ActorRef<MachineMsg>,
        message: MachineMsg,
        slot: &mut Slot,
    ) -> Result<(), ActorProcessingErr> {
        let Some(state) = slot.0.as_deref_mut() else {
            return Ok(());
        };
        let _handling = state.mail.handling();
        match message {
            MachineMsg::ObjectChanged(object) => {
                // Our own status writes come back through the watch; they need no pass.
                if takes_object(state, object) {
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
            MachineMsg::Placed(place) => {
                // Places this actor did not wait for (an earlier actor's wait, before a failure) are dropped, and go
                // on to the next waiter.
                if state.awaiting_place {
                    state.awaiting_place = false;
                    state.workload_place = place;
                    Box::pin(run_pass(&me, state)).await;
                }
            }
            MachineMsg::Permitted(permit) => {
                // A permit this actor left no ticket for (its ticket was an earlier actor's, before a failure) is
                // dropped, and goes on to the next waiter.
                if state.awaiting_permit.is_some() {
                    Box::pin(run_permitted_pass(&me, state, permit)).await;
                }
            }
        }
        if dormant::may_rest(state) {
            // Mail sent from now on finds the actor stopped and goes to the supervisor (`machine_mail`); what is
            // queued already is handled first, and a pass it queues makes the supervisor start the actor again.
            state.resting = true;
            let _ = me.drain();
        }
        Ok(())
    }
}

/// The state of a machine seen for the first time (or whose actor failed), to be started like a dormant one, with a
/// pass queued: a machine costs no actor until its turn to be woken comes (`supervisor`). `status` is the object's
/// whole status, which the actor's status stays based on; `object` carries only the part it reads later
/// (`slim::split_status`).
pub fn unstarted(
    object: Arc<OVirtMachine>,
    status: Option<OVirtMachineStatus>,
    shared: Arc<Shared>,
) -> Box<dyn Dormant> {
    let key = ObjectKey::machine(&object.namespace().unwrap_or_default(), &object.name_any());
    let mut sent_status = None;
    if let Some(seen) = &status
        && let Ok(status) = serde_json::to_value(seen)
    {
        let (fingerprint, seen) = crate::runtime::status::writer::seen(&shared.metrics, key.clone(), &status);
        sent_status = Some(fingerprint);
        let _ = mailbox::cast(&shared.metrics, &shared.status_writer, seen);
    }
    let mut state = Box::new(MachineState::new(key, object, status.unwrap_or_default(), shared));
    state.sent_status = sent_status;
    Box::new(DormantMachine::new(state))
}

fn queue_pass(me: &ActorRef<MachineMsg>, state: &mut MachineState) {
    if !state.pass_queued {
        state.pass_queued = true;
        let _ = mailbox::cast(&state.shared.metrics, me, MachineMsg::Tick);
    }
}
