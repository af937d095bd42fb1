//! One actor per OVirtMachine. It holds the latest object and what it saw of its VM, runs at most one reconcile
//! pass at a time (bursts of messages collapse into one pass), takes a permit of `--max-concurrent-reconciles` for
//! each pass, hands the resulting status to the status writer, and schedules its next pass.

mod create;
mod execute;
mod observe;
mod workload;

use std::sync::Arc;
use std::time::{Duration, Instant};

use capov_crds::{Initialization, OVirtMachine, OVirtMachineStatus, Severity};
use kube::Resource;
use kube::ResourceExt;
use ractor::{Actor, ActorProcessingErr, ActorRef};

use crate::conditions::{ConditionUpdate, MACHINE_READY_INPUTS, State, ready_summary, set_condition, types};
use crate::identity::parse_provider_id;
use crate::machine_steps::{Action, NodeObservation, Observed, Requeue, StatusChange, decide, without_effect};

use super::keys::ObjectKey;
use super::mailbox::{self, ActorMetrics, Alive, Mail};
use super::messages::MachineMsg;
use super::permits::Priority;
use super::provider::{Cadence, ProviderMsg, VmWatch};
use super::status_writer::StatusWriterMsg;
use super::shared::Shared;
use crate::metrics::{kind, result};
use crate::vm_snapshot::{Fingerprints, VmSnapshot};

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

pub struct MachineState {
    key: ObjectKey,
    /// The object as last seen by the watch (shared with the supervisor) or as returned by this actor's own write;
    /// without managedFields (`slim`).
    object: Arc<OVirtMachine>,
    shared: Arc<Shared>,
    /// The status CAPOV owns, as last sent to the status writer.
    status: OVirtMachineStatus,
    /// Since when the machine has waited for a missing provider or credentials (SPEC §2.4: critical after 10 min).
    missing_since: Option<std::time::Instant>,
    /// 5 s doubling to 5 min, each wait jittered (crate::backoff).
    backoff: crate::backoff::Backoff,
    pass_queued: bool,
    timer: Option<tokio::task::JoinHandle<()>>,
    subscribed_to: Option<(String, ActorRef<ProviderMsg>)>,
    watched_vm: Option<VmWatch>,
    last_seen_vm_status: Option<String>,
    /// The VM as last seen (by this actor's read or delivered by the provider's poll) and its fingerprint. While the
    /// VM is watched the poll delivers every change, so a pass decides from this instead of reading the VM again;
    /// any engine write on the VM, or the end of the watch, drops it.
    vm_snapshot: Option<Arc<VmSnapshot>>,
    /// When `vm_snapshot` was read or delivered: while the VM is not watched, what it shows is trusted only while it
    /// is about as fresh as a watched one.
    vm_snapshot_at: Option<Instant>,
    /// When what this pass's observation took from `vm_snapshot` was seen; None when it read the VM itself.
    observed_snapshot_at: Option<Instant>,
    last_seen_fingerprint: Option<Fingerprints>,
    /// The watched VM and status (hashed) when the last transition guard timer was set, and how many guards in a
    /// row were set with nothing changed: the guard's delay grows with them ([`guard_delay`]).
    guard_key: Option<u64>,
    quiet_guards: u8,
    /// The last successful action of a pass that ended to wait for its permit outside the pass (see [`pass`]), and
    /// what it observed before acting: the next pass's hot-loop guard compares against it.
    carried_success: Option<Box<(Observed, Action)>>,
    /// The VM this actor created and has not recorded in spec.providerID yet (it is recorded once its disks are
    /// copied): recording it then is not an adoption.
    created_vm: Option<String>,
    mail: ActorMetrics,
    _alive: Alive,
}

/// What a pass asks for next.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Next {
    /// Nothing to do until something changes (a watch event, a provider message) or the sync period passes.
    Idle,
    /// Retry after a failure: backoff 5 s doubling to 5 min.
    Backoff,
    /// Check again after this long.
    After(Duration),
    /// Go on at once in a new pass (after waiting for a permit), from where this one stopped: what it saw of the VM
    /// and the VM's watch stay as they are.
    Resume,
    /// The provider's batched poll hands over the VM when it changes: each poll while the VM is in a transition,
    /// every minute once the machine is Ready (which then resyncs only once per sync period, from what it holds).
    WatchVm(VmWatch),
}

impl Actor for MachineActor {
    type Msg = MachineMsg;
    type State = MachineState;
    type Arguments = MachineArgs;

    async fn pre_start(&self, me: ActorRef<MachineMsg>, args: MachineArgs) -> Result<MachineState, ActorProcessingErr> {
        let key = ObjectKey::machine(&args.object.namespace().unwrap_or_default(), &args.object.name_any());
        if let Some(seen) = &args.status
            && let Ok(status) = serde_json::to_value(seen)
        {
            let seen = StatusWriterMsg::Seen {
                key: key.clone(),
                status,
            };
            let _ = mailbox::cast(&args.shared.metrics, &args.shared.status_writer, seen);
        }
        mailbox::cast(&args.shared.metrics, &me, MachineMsg::Tick)?;
        let mail = ActorMetrics::of::<MachineMsg>(&args.shared.metrics);
        Ok(MachineState {
            key,
            object: args.object,
            shared: args.shared,
            status: args.status.unwrap_or_default(),
            missing_since: None,
            backoff: crate::backoff::Backoff::steps(),
            pass_queued: true,
            timer: None,
            subscribed_to: None,
            watched_vm: None,
            last_seen_vm_status: None,
            vm_snapshot: None,
            vm_snapshot_at: None,
            observed_snapshot_at: None,
            last_seen_fingerprint: None,
            guard_key: None,
            quiet_guards: 0,
            carried_success: None,
            created_vm: None,
            _alive: mail.alive(),
            mail,
        })
    }

    async fn post_stop(&self, _me: ActorRef<MachineMsg>, state: &mut MachineState) -> Result<(), ActorProcessingErr> {
        if let Some(timer) = state.timer.take() {
            timer.abort();
        }
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
                run_pass(&me, state).await;
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
            .find(|c| c.type_ == crate::conditions::types::CAN_CONNECT_TO_OVIRT);
        let seen = observed
            .conditions
            .iter()
            .find(|c| c.type_ == crate::conditions::types::CAN_CONNECT_TO_OVIRT);
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

/// How many actions one pass may take before it hands its permit back.
const MAX_ACTIONS_PER_PASS: usize = 12;

/// Waits for a permit, then runs the pass.
async fn run_pass(me: &ActorRef<MachineMsg>, state: &mut MachineState) {
    // A VM this actor created counts before it is recorded in spec.providerID (once its disks are copied).
    let priority = match (&state.object.spec.provider_id, &state.created_vm) {
        (None, None) => Priority::New,
        _ => Priority::HasVm,
    };
    let permit = state.shared.permits.acquire(priority).await;
    // A pass's future holds the futures of every engine and API request it awaits, about 18 KB. Inline, it would be
    // part of `handle`'s future, which ractor allocates once per actor for the actor's whole life (its processing
    // loop): 18 KB for each idle machine. Boxed after the permit, it exists only for the passes that run.
    Box::pin(pass(me, state, permit)).await;
}

/// Observe, decide, act — again at once after an action that succeeded — then report and schedule.
///
/// The reconcile permit is held for engine and management-cluster work only. Workload-cluster calls (reading the
/// Node, setting its providerID) run with the permit released: a tenant's workload apiserver that is slow or hung
/// must not take a permit from every other machine for as long as its requests last. The permit is taken again
/// before the next step that needs it.
async fn pass(me: &ActorRef<MachineMsg>, state: &mut MachineState, permit: super::permits::Permit) {
    let mut permit = Some(permit);
    let started = Instant::now();
    let mut next = Next::After(Duration::ZERO);
    let mut resumes = false;
    // The observation and action of the last action that reported success, for the hot-loop guard.
    let mut last_success: Option<(Observed, Action)> = state.carried_success.take().map(|carried| *carried);
    for _ in 0..MAX_ACTIONS_PER_PASS {
        if permit.is_none() {
            // A workload step released the permit and the next step needs it again. Waiting for it here would keep
            // this boxed pass (about 18 KB, and the observation) alive for as long as the queue takes: in a large
            // batch thousands of machines between their Node step and the next pass wait at once. The next pass
            // waits for its permit in `run_pass`, before its future exists, and starts from the same observation
            // the loop would have made here.
            state.carried_success = last_success.take().map(Box::new);
            next = Next::Resume;
            resumes = true;
            break;
        }
        let mut observation = match observe::observe(me, state).await {
            Ok(observation) => observation,
            Err(observe::ObserveError { message, expected }) => {
                if expected {
                    tracing::debug!(object = %state.key, %message, "cannot observe yet; retrying");
                } else {
                    tracing::warn!(object = %state.key, %message, "cannot observe; retrying");
                }
                next = Next::Backoff;
                break;
            }
        };
        let mut decision = decide(&observation.observed);
        if matches!(decision.action, Action::StartVm { .. }) {
            match observe::nics_before_start(state, observation.engine.as_ref(), &observation.observed).await {
                None => {}
                Some(Ok(nics)) => {
                    observation.observed.nics = nics;
                    decision = decide(&observation.observed);
                }
                Some(Err(observe::ObserveError { message, .. })) => {
                    tracing::warn!(object = %state.key, %message, "cannot observe; retrying");
                    next = Next::Backoff;
                    break;
                }
            }
        }
        if decision.action == Action::ReadNode {
            // Workload I/O: without the permit (see above).
            permit = None;
            observation.observed.node = match (&observation.cluster, &observation.observed.vm) {
                (Some(cluster), Some(vm)) => workload::observe_node(state, cluster, &vm.id).await,
                _ => NodeObservation::NotFound,
            };
            decision = decide(&observation.observed);
        }
        // An engine write is decided on what was seen of the VM within two poll intervals: a Ready machine's
        // snapshot can be a minute old (deletion of a VM that went `unknown`, a disk attached since).
        let seen_long_ago = state
            .observed_snapshot_at
            .is_some_and(|at| at.elapsed() > state.shared.settings.poll_interval * 2);
        if decision.action.writes_engine() && seen_long_ago {
            state.vm_snapshot = None;
            continue;
        }
        if let Some((before, acted)) = &last_success
            && without_effect(before, acted, &observation.observed, &decision.action)
        {
            tracing::warn!(
                object = %state.key,
                action = ?acted,
                "the action reported success but nothing it should change did; backing off instead of repeating it"
            );
            next = Next::Backoff;
            break;
        }
        if permit.is_none() && decision.action.needs_permit() {
            permit = Some(state.shared.permits.acquire(Priority::HasVm).await);
        }
        // What a start will show (MachineOn powering up) is only true once the engine accepted the start: a start
        // that fails must leave no sign of a started VM, or the next pass would take the VM, still down, for one
        // that was shut down after it ran, and never start it.
        let (now, after_success): (Vec<_>, Vec<_>) = decision.conditions.iter().cloned().partition(|update| {
            !(matches!(decision.action, Action::StartVm { .. }) && update.type_ == types::MACHINE_ON)
        });
        apply(state, &now, decision.status.clone());
        let vm_id = observation.observed.vm.as_ref().map(|vm| vm.id.clone());
        let acted = decision.action.clone();
        let executed = execute::execute(
            state,
            &observation.observed,
            observation.engine.as_ref(),
            observation.cluster.as_deref(),
            decision.action,
        )
        .await;
        if acted.writes_engine() {
            state.vm_snapshot = None;
        }
        if !after_success.is_empty() && !matches!(executed, execute::Executed::Failed { .. }) {
            apply(state, &after_success, StatusChange::default());
        }
        match executed {
            execute::Executed::Continue => {
                last_success = Some((observation.observed, acted));
                continue;
            }
            execute::Executed::Requeue(requeue) => {
                next = to_next(state, requeue, vm_id);
                break;
            }
            execute::Executed::Failed { type_, failure } => {
                if !failure.is_retry_only() {
                    let update = ConditionUpdate::false_(type_, failure.reason, failure.severity, failure.message);
                    apply(state, &[update], StatusChange::default());
                }
                next = Next::Backoff;
                break;
            }
        }
    }
    drop(permit);
    record_pass(state, &next, started);
    // A pass that ended only to wait for its permit is continued by the next one, which reports the status: an
    // intermediate status written meanwhile would be one more write per machine.
    if !resumes {
        let status = serde_json::to_value(&state.status).unwrap_or_default();
        let update = StatusWriterMsg::Update {
            key: state.key.clone(),
            status,
        };
        let _ = mailbox::cast(&state.shared.metrics, &state.shared.status_writer, update);
    }
    schedule(me, state, next);
}

/// `capov_reconciles_total` / `capov_reconcile_duration_seconds` for one pass.
fn record_pass(state: &MachineState, next: &Next, started: Instant) {
    let outcome = match next {
        _ if state.status.failure_reason.is_some() => result::TERMINAL,
        Next::Backoff => result::ERROR,
        Next::Idle => result::SUCCESS,
        Next::WatchVm(watch) if watch.cadence == Cadence::Steady => result::SUCCESS,
        Next::After(_) | Next::Resume | Next::WatchVm(_) => result::REQUEUE,
    };
    let metrics = &state.shared.metrics;
    metrics
        .reconciles_total
        .with_label_values(&[kind::MACHINE, outcome])
        .inc();
    metrics
        .reconcile_duration_seconds
        .with_label_values(&[kind::MACHINE])
        .observe(started.elapsed().as_secs_f64());
}

/// Writes a decision's conditions and status fields, recomputes Ready, and records an Event for each condition
/// whose status or reason changed.
fn apply(state: &mut MachineState, conditions: &[ConditionUpdate], change: StatusChange) {
    let now = crate::runtime::now();
    let generation = state.object.metadata.generation;
    for update in conditions {
        let before = state
            .status
            .conditions
            .iter()
            .find(|c| c.type_ == update.type_)
            .map(|c| (c.status, c.reason.clone()));
        set_condition(&mut state.status.conditions, update, now, generation);
        let after = state
            .status
            .conditions
            .iter()
            .find(|c| c.type_ == update.type_)
            .map(|c| (c.status, c.reason.clone()));
        if before != after && update.type_ != types::PAUSED {
            record_event(state, update);
        }
    }
    if change.mark_provisioned {
        state.status.ready = true;
        state.status.initialization = Some(Initialization {
            provisioned: Some(true),
        });
    }
    if let Some(addresses) = change.addresses {
        state.status.addresses = addresses;
    }
    if let Some(vm_status) = change.vm_status {
        state.last_seen_vm_status = Some(vm_status.clone());
        state.status.vm_status = Some(vm_status);
    }
    let ready = ready_summary(&state.status.conditions, MACHINE_READY_INPUTS);
    set_condition(&mut state.status.conditions, &ready, now, generation);
}

fn record_event(state: &MachineState, update: &ConditionUpdate) {
    let warning = matches!(update.state, State::False(Severity::Warning | Severity::Error));
    let note = if update.message.is_empty() {
        format!("{}: {}", update.type_, update.reason)
    } else {
        update.message.clone()
    };
    let event = StatusWriterMsg::Event {
        reference: state.object.object_ref(&()),
        warning,
        reason: update.reason.to_string(),
        note,
    };
    let _ = mailbox::cast(&state.shared.metrics, &state.shared.status_writer, event);
}

fn to_next(state: &MachineState, requeue: Requeue, vm_id: Option<String>) -> Next {
    let watch = |cadence, otherwise| {
        let provider_id = state
            .object
            .spec
            .provider_id
            .as_deref()
            .and_then(parse_provider_id)
            .map(String::from);
        match vm_id.clone().or(provider_id).or_else(|| state.created_vm.clone()) {
            Some(vm_id) => Next::WatchVm(VmWatch { vm_id, cadence }),
            None => otherwise,
        }
    };
    match requeue {
        Requeue::OnChange => Next::Idle,
        Requeue::Backoff => Next::Backoff,
        Requeue::After(delay) => Next::After(delay),
        Requeue::PollVm => watch(Cadence::EveryPoll, Next::After(state.shared.settings.poll_interval)),
        Requeue::Steady => watch(Cadence::Steady, Next::Idle),
    }
}

fn schedule(me: &ActorRef<MachineMsg>, state: &mut MachineState, next: Next) {
    let poll_interval = state.shared.settings.poll_interval;
    if let Some(timer) = state.timer.take() {
        timer.abort();
    }
    let watched = match &next {
        Next::WatchVm(watch) => Some(watch.clone()),
        Next::Resume => state.watched_vm.clone(),
        // A pass that failed (an engine hiccup) keeps its VM watched: the provider's batched poll wakes the machine
        // as soon as the VM changes, instead of the machine waiting out a backoff that grew during the hiccup. A
        // pass that waits with backoff for something outside the engine (the Node, an address) has its VM watched
        // too, so that its retries decide from what they hold instead of reading the VM each time: at each poll
        // while the retries come faster than the steady search, then with the steady search.
        Next::Backoff => {
            let steady_every = poll_interval * crate::backoff::STEADY_POLL_EVERY as u32;
            let vm_id = (state.watched_vm.as_ref().map(|w| w.vm_id.clone()))
                .or_else(|| state.vm_snapshot.as_ref().map(|vm| vm.id.clone()));
            vm_id.map(|vm_id| VmWatch {
                vm_id,
                cadence: if state.backoff.upcoming() < steady_every {
                    Cadence::EveryPoll
                } else {
                    Cadence::Steady
                },
            })
        }
        _ => None,
    };
    // A backoff re-registers the watch with the VM status this pass saw: a change the machine already knows of must
    // not cut the backoff short (the hot-loop guard's backoff included), only a change after it.
    let refresh = matches!(next, Next::Backoff) && watched.is_some();
    if (watched != state.watched_vm || refresh)
        && let Some((_, provider)) = &state.subscribed_to
    {
        let message = match &watched {
            Some(watch) => ProviderMsg::WatchVm {
                machine: state.key.clone(),
                watch: watch.clone(),
                seen: state.last_seen_fingerprint,
            },
            None => ProviderMsg::UnwatchVm(state.key.clone()),
        };
        let _ = mailbox::cast(&state.shared.metrics, provider, message);
    }
    // Unwatched, the VM can change unseen: the next pass reads it (a pass that resumes at once goes on from what
    // this one saw).
    if watched.is_none() && next != Next::Resume {
        state.vm_snapshot = None;
    }
    state.watched_vm = watched;
    let settings = &state.shared.settings;
    let delay = match &next {
        // For a Ready machine the poll answers a status change; this resync refreshes the addresses.
        Next::Idle
        | Next::WatchVm(VmWatch {
            cadence: Cadence::Steady,
            ..
        }) => crate::backoff::jittered(settings.sync_period, fastrand::f64()),
        Next::Backoff => state.backoff.next_delay(),
        Next::After(delay) => *delay,
        Next::Resume => Duration::ZERO,
        // The poll answers; this timer only guards against a lost answer. A VM `image_locked` for long (a clone's
        // disk copy takes minutes) must not cost a full pass every 30 s: while neither the VM nor its status
        // changes, each guard waits twice as long as the one before, up to 5 minutes. The end of the copy changes
        // the status, which the poll reports at once. Other waits keep 30 s: a disk job, for one, ends without the
        // VM's status changing, so only this timer notices it.
        Next::WatchVm(VmWatch {
            cadence: Cadence::EveryPoll,
            vm_id,
        }) => {
            use std::hash::{Hash, Hasher};
            let mut hasher = std::collections::hash_map::DefaultHasher::new();
            (vm_id, &state.last_seen_vm_status).hash(&mut hasher);
            let key = hasher.finish();
            let copying = state.last_seen_vm_status.as_deref() == Some("image_locked");
            state.quiet_guards = if copying && state.guard_key == Some(key) {
                state.quiet_guards.saturating_add(1)
            } else {
                0
            };
            state.guard_key = Some(key);
            guard_delay(settings.poll_interval, state.quiet_guards)
        }
    };
    if !matches!(
        next,
        Next::WatchVm(VmWatch {
            cadence: Cadence::EveryPoll,
            ..
        })
    ) {
        state.guard_key = None;
        state.quiet_guards = 0;
    }
    if !matches!(next, Next::Backoff) {
        state.backoff.reset();
    }
    state.timer = Some(mailbox::cast_after(&state.shared.metrics, delay, me.clone(), || {
        MachineMsg::Tick
    }));
}

/// The guard timer of a machine whose VM is in a transition: 6 poll intervals, doubled for each guard in a row set
/// with nothing changed, at most [`crate::backoff::MAX_BACKOFF`].
fn guard_delay(poll_interval: Duration, quiet_guards: u8) -> Duration {
    let first = poll_interval * 6;
    first
        .checked_mul(1u32 << quiet_guards.min(16))
        .unwrap_or(crate::backoff::MAX_BACKOFF)
        .min(crate::backoff::MAX_BACKOFF.max(first))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_transition_guard_grows_while_nothing_changes() {
        let poll = Duration::from_secs(5);
        let delays: Vec<u64> = (0..6).map(|n| guard_delay(poll, n).as_secs()).collect();
        assert_eq!(delays, vec![30, 60, 120, 240, 300, 300]);
        assert_eq!(guard_delay(poll, u8::MAX).as_secs(), 300);
        // A test's short poll interval keeps its short first guard.
        assert_eq!(guard_delay(Duration::from_millis(200), 0), Duration::from_millis(1200));
    }

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
