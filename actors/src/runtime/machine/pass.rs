//! One reconcile pass of a machine: observe, decide, act — again at once after an action that succeeded — then
//! report the status and schedule the next pass.

use std::time::{Duration, Instant};

use capov_crds::{Initialization, Severity};
use kube::Resource;
use ractor::ActorRef;

use super::execute::execute;
use super::observe::{self, Observation, ObserveError};
use super::outcome::Executed;
use super::read::read;
use super::schedule::{Next, schedule, to_next};
use super::share::machine_share;
use super::state::MachineState;
use super::ticket::{TICKET_PATIENCE, Ticket};
use crate::metrics::{kind, result};
use crate::runtime::machine_mail::tell;
use crate::runtime::mailbox;
use crate::runtime::messages::{Cadence, MachineMsg, VmWatch};
use crate::runtime::permits::Permit;
use crate::runtime::status::events::NoteKind;
use crate::runtime::status::writer::{Pace, StatusWriterMsg};
use crate::runtime::timer_wheel::Fires;
use capov_core::conditions::{ConditionUpdate, State, change_recorded_as_event, machine_ready, set_condition, types};
use capov_core::machine_steps::{Action, Decision, Observed, StatusChange, VmAction, decide, without_effect};

/// How many actions one pass may take before it hands its permit back.
const MAX_ACTIONS_PER_PASS: usize = 12;

/// Waits for a place at the Node step if the last pass found none, then takes a permit and runs the pass, or leaves
/// a ticket for the permit (`permits`).
pub async fn run_pass(me: &ActorRef<MachineMsg>, state: &mut MachineState) {
    // Before the CAPI Machines and Clusters are listed, a pass would find no owner and report that: at every start
    // of the operator one more pass (under a permit) and one more status write per machine. Their first list wakes
    // every machine (`SupervisorMsg::CapiListed`), as controllers start reconciling once their caches are synced.
    if !state.shared.capi_listed() {
        return;
    }
    // The places come by mail (or the end of their wait), and the pass runs then. A deletion waits for them too: its
    // Node step (`NodeRelease`) needs one, and a pass without it would only find none again.
    if state.awaiting_place {
        return;
    }
    if state.awaiting_permit.is_none()
        && let Some(wanted) = state.workload_place_wanted.take()
    {
        wait_for_place(state, wanted);
        return;
    }
    // A VM this actor created counts before it is recorded in spec.providerID (once its disks are copied).
    let share = machine_share(state, observe::owner_machine(state).as_deref(), false);
    // A machine whose ticket waits passes when its permit comes, on what it holds by then. It queues once more only
    // when its work became more urgent (its deletion began): it must not wait in its old class's turn, behind its
    // cluster's batch; or when its ticket waited past `TICKET_PATIENCE`: a permit lost on its way (a bug) must not
    // leave the machine waiting for good. The first permit to come runs the pass; the other finds no ticket and goes
    // on.
    if state
        .awaiting_permit
        .is_some_and(|ticket| !ticket.queue_again(share.class, tokio::time::Instant::now()))
    {
        return;
    }
    match state
        .shared
        .permits
        .acquire_or_ticket(&share, &state.key, state.last_pass_failed)
    {
        Some(permit) => run_permitted_pass(me, state, permit).await,
        // No permit is free: the ticket queues in the machine's turn and the machine may rest until it comes. Its
        // timer wakes it when the ticket waited too long.
        None => {
            let asked = tokio::time::Instant::now();
            state.awaiting_permit = Some(Ticket {
                class: share.class,
                asked,
            });
            state.shared.timers.set(
                state.timer,
                asked + TICKET_PATIENCE,
                Fires::AtDeadline,
                &state.key,
                me.clone(),
            );
        }
    }
}

/// Waits for the Node-step places `wanted` in a task, first come first served: the actor may rest meanwhile. After a
/// restart every Ready machine reads its Node, a few dozen at a time, and thousands wait for their places at once: as
/// live actors (about 6 KB each) they were the restarted process's peak; a waiting task costs a fraction of that. The
/// places (or None after `PLACE_WAIT`) come back as `MachineMsg::Placed`, through the supervisor, which wakes the
/// machine at once with them. A machine that is gone by then drops them, and they go on to the next waiter.
fn wait_for_place(state: &mut MachineState, wanted: crate::runtime::workload::clients::Wanted) {
    state.awaiting_place = true;
    let (shared, key) = (state.shared.clone(), state.key.clone());
    tokio::spawn(async move {
        let place = shared.workload_clients.wait_place(wanted).await;
        tell(
            &shared.metrics,
            &shared.supervisor,
            &key,
            None,
            MachineMsg::Placed(place),
        );
    });
}

/// Runs a pass under `permit`: one free when the pass was asked for, or the one its ticket waited for.
pub async fn run_permitted_pass(me: &ActorRef<MachineMsg>, state: &mut MachineState, permit: Permit) {
    state.awaiting_permit = None;
    state.permit.put(permit);
    // A pass's future holds the futures of every engine and API request it awaits, about 18 KB. Inline, it would be
    // part of `handle`'s future, which ractor allocates once per actor for the actor's whole life (its processing
    // loop): 18 KB for each idle machine. Boxed after the permit, it exists only for the passes that run.
    Box::pin(pass(me, state)).await;
}

/// Observe, decide, act — again at once after an action that succeeded — then report and schedule.
///
/// The reconcile permit is held for engine and management-cluster work only. Workload-cluster calls (reading the
/// Node, setting its providerID) run with the permit released: a tenant's workload apiserver that is slow or hung
/// must not take a permit from every other machine for as long as its requests last. The permit is taken again
/// before the next step that needs it. A step whose management-cluster request hung finishes on a loan
/// (`held_permit`), and the pass then ends as after a workload step.
async fn pass(me: &ActorRef<MachineMsg>, state: &mut MachineState) {
    let started = Instant::now();
    let mut next = Next::After(Duration::ZERO);
    // The observation and action of the last action that reported success, for the hot-loop guard.
    let mut last_success: Option<(Observed, Action)> = state.carried_success.take().map(|carried| *carried);
    for _ in 0..MAX_ACTIONS_PER_PASS {
        if !state.permit.holds_permit() {
            // A workload step released the permit (or a hung request lent it on) and the next step needs it again.
            // Waiting for it here would keep this boxed pass (about 18 KB, and the observation) alive for as long as
            // the queue takes: in a large batch thousands of machines between their Node step and the next pass wait
            // at once. The next pass waits for its permit in `run_pass`, before its future exists, and starts from
            // the same observation the loop would have made here.
            state.carried_success = last_success.take().map(Box::new);
            next = Next::Resume;
            break;
        }
        if let Some(end) = step(me, state, &mut last_success).await {
            next = end;
            break;
        }
    }
    state.permit.clear();
    state.workload_place = None;
    state.bootstrap_data = None;
    state.node_written = None;
    record_pass(state, &next, started);
    // A pass that ended only to wait for its permit is continued by the next one, which reports the status: an
    // intermediate status written meanwhile would be one more write per machine. One that waits for the provider's
    // search decided nothing.
    if !matches!(next, Next::Resume | Next::AwaitSearch(_)) {
        report_status(state);
    }
    schedule(me, state, next);
}

/// Hands the status to the status writer, unless it is the one this actor sent last: most passes change nothing,
/// and when thousands of machines pass at once (a relist, a reconnected engine) while the apiserver is slow, their
/// unchanged statuses would queue in the writer's mailbox, a JSON tree each.
///
/// A change a user acts on (`headline`) goes out at once; one that only shows progress is spaced by the writer.
///
/// A machine without a status yet gets none while its own says nothing (`reports_nothing`): its first passes may
/// only add the finalizer, wait for the Cluster's infrastructure or for the provider to connect, and in a large
/// batch its next pass waits minutes for a permit. Written, that status would cost one more write per machine and
/// tell a user nothing the CAPI Machine's phase does not (CAPI's own Machine conditions say what it waits for).
fn report_status(state: &mut MachineState) {
    let status = serde_json::to_value(&state.status).unwrap_or_default();
    if state.sent_status.is_none() && reports_nothing(&state.status) {
        // Counted in `capov_machines` all the same, as not yet reported.
        crate::runtime::status::census::record_seen(&state.shared.metrics, &state.key, &status);
        return;
    }
    let sent = crate::runtime::status::writer::fingerprint(&status);
    if state.sent_status == Some(sent) {
        return;
    }
    state.sent_status = Some(sent);
    let headline = headline(&state.status);
    let pace = match state.sent_headline {
        Some(sent) if sent == headline => Pace::Spaced,
        // A first status with nothing to act on is progress too: the writer holds it for the spacing, and the
        // steps of the machine's first seconds go out as one write.
        None if !calls_for_action(&state.status) => Pace::Spaced,
        _ => Pace::Now,
    };
    state.sent_headline = Some(headline);
    let update = StatusWriterMsg::Update {
        key: state.key.clone(),
        status,
        pace,
    };
    let _ = mailbox::cast(&state.shared.metrics, &state.shared.status_writer, update);
}

/// What of a machine's status someone acts on: whether it is Ready, a terminal failure, the warnings and errors
/// (each condition's type and reason), whether it is paused, the steps of its deletion, and a Ready machine's
/// addresses (CAPI copies them to the Machine; they can follow Ready when the guest agent reports late). Everything
/// else (the steps of provisioning, the VM's status) is progress.
fn headline(status: &capov_crds::OVirtMachineStatus) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut hasher = std::hash::DefaultHasher::new();
    status.ready.hash(&mut hasher);
    status.failure_reason.hash(&mut hasher);
    status.failure_message.is_some().hash(&mut hasher);
    if status.ready {
        for address in &status.addresses {
            (&address.type_, &address.address).hash(&mut hasher);
        }
    }
    for condition in &status.conditions {
        let acted_on = matches!(condition.severity, Some(Severity::Warning | Severity::Error))
            && condition.status == capov_crds::ConditionStatus::False;
        if condition.type_ == types::READY || condition.type_ == types::PAUSED {
            (&condition.type_, condition.status as u8).hash(&mut hasher);
        } else if condition.type_ == types::MACHINE_DELETED {
            // A deletion's every step: few per machine, and what someone waiting for a hung scale-down looks at.
            (&condition.type_, condition.status as u8, &condition.reason).hash(&mut hasher);
        } else if acted_on {
            (&condition.type_, &condition.reason).hash(&mut hasher);
        }
    }
    hasher.finish()
}

/// Whether a status holds no step's result yet: Ready is Unknown as not yet reported (no step's condition beyond the
/// connection's is set), and nothing calls for action.
fn reports_nothing(status: &capov_crds::OVirtMachineStatus) -> bool {
    let ready = status
        .conditions
        .iter()
        .find(|condition| condition.type_ == types::READY);
    let not_reported = ready.is_none_or(|ready| {
        ready.status == capov_crds::ConditionStatus::Unknown
            && ready.reason == capov_core::conditions::reasons::NOT_YET_REPORTED
    });
    not_reported && !calls_for_action(status)
}

/// Whether a status says something a user acts on: Ready, a failure, a warning or error, a pause, a deletion.
fn calls_for_action(status: &capov_crds::OVirtMachineStatus) -> bool {
    status.ready
        || status.failure_reason.is_some()
        || status.failure_message.is_some()
        || status.conditions.iter().any(|condition| {
            let warns = matches!(condition.severity, Some(Severity::Warning | Severity::Error))
                && condition.status == capov_crds::ConditionStatus::False;
            let paused = condition.type_ == types::PAUSED && condition.status == capov_crds::ConditionStatus::True;
            warns || paused || condition.type_ == types::MACHINE_DELETED
        })
}

/// One step of a pass: observes, decides and carries out the action, unless the action would repeat one that
/// changed nothing. Returns what follows the pass when it ends here; None: the pass goes on with the next step.
async fn step(
    me: &ActorRef<MachineMsg>,
    state: &mut MachineState,
    last_success: &mut Option<(Observed, Action)>,
) -> Option<Next> {
    let (observation, decision) = match observe_and_decide(me, state).await {
        Ok(decided) => decided,
        Err(next) => return Some(next),
    };
    // An engine write is decided on what was seen of the VM within two poll intervals: a Ready machine's
    // snapshot can be a minute old (deletion of a VM that went `unknown`, a disk attached since). A stop, a removal
    // or a detach is decided only on the VM as read now: a held snapshot can miss the last poll's change (a VM that
    // just went `unknown` must get no stop).
    let seen_long_ago = state
        .observed_snapshot_at
        .is_some_and(|at| at.elapsed() > state.shared.settings.poll_interval * 2);
    let class = decision.action.class();
    let held = state.observed_snapshot_at.is_some();
    if class.writes_engine && (seen_long_ago || (class.destroys && held)) {
        state.vm_snapshot = None;
        return None;
    }
    if let Some((before, acted)) = last_success.as_ref()
        && without_effect(before, acted, &observation.observed, &decision.action)
    {
        tracing::warn!(
            object = %state.key,
            action = ?acted,
            "the action reported success but nothing it should change did; backing off instead of repeating it"
        );
        return Some(Next::Backoff);
    }
    if !state.permit.may_work() && class.needs_permit {
        let share = machine_share(state, observe::owner_machine(state).as_deref(), true);
        let permit = state.shared.permits.acquire(&share).await;
        state.permit.put(permit);
    }
    act(state, observation, decision, last_success).await
}

/// Observes and decides, then reads what the decision asks for (`Action::Read`) and decides again, until it asks
/// for nothing more: each fact is read at most once a step. An observation or a read that failed ends the pass with
/// a backoff.
async fn observe_and_decide(
    me: &ActorRef<MachineMsg>,
    state: &mut MachineState,
) -> Result<(Observation, Decision), Next> {
    let mut observation = match observe::observe(me, state).await {
        Ok(observation) => observation,
        Err(failed) => return Err(not_observed(state, failed)),
    };
    let mut decision = decide(&observation.observed);
    while let Some(request) = decision.action.class().reads {
        if !observation.observed.unread(&request) {
            // A read fact asked for again would loop: a mistake in the decision, not in the engine.
            tracing::error!(object = %state.key, ?request, "the decision asked again for a fact it was given");
            return Err(Next::Backoff);
        }
        read(state, &mut observation, request).await?;
        decision = decide(&observation.observed);
    }
    Ok((observation, decision))
}

/// What follows an observation that failed: waiting for the provider's search of the VM, or a backoff.
fn not_observed(state: &MachineState, failed: ObserveError) -> Next {
    match failed {
        ObserveError {
            awaiting_search: Some(vm_id),
            ..
        } => {
            // Searched with disks when the steps before the first start or a deletion may need them.
            let cadence = match state.status.ready {
                true => Cadence::Steady,
                false => Cadence::EveryPoll,
            };
            Next::AwaitSearch(VmWatch { vm_id, cadence })
        }
        ObserveError {
            message,
            expected,
            apiserver,
            ..
        } => {
            if expected {
                tracing::debug!(object = %state.key, %message, "cannot observe yet; retrying");
            } else {
                tracing::warn!(object = %state.key, %message, "cannot observe; retrying");
            }
            Next::after_failure(apiserver)
        }
    }
}

/// Reports the decision's conditions and carries out its action. An action that succeeded is kept in `last_success`
/// with what it was decided on, for the next step's hot-loop guard.
async fn act(
    state: &mut MachineState,
    observation: Observation,
    decision: Decision,
    last_success: &mut Option<(Observed, Action)>,
) -> Option<Next> {
    // What a start will show (MachineOn powering up) is only true once the engine accepted the start: a start
    // that fails must leave no sign of a started VM, or the next pass would take the VM, still down, for one
    // that was shut down after it ran, and never start it.
    let (now, after_success): (Vec<_>, Vec<_>) = decision.conditions.into_iter().partition(|update| {
        !(matches!(decision.action, Action::Vm(VmAction::Start { .. })) && update.type_ == types::MACHINE_ON)
    });
    apply(state, &now, decision.status);
    let vm_id = observation.observed.vm.as_ref().map(|vm| vm.id.clone());
    let acted = decision.action.clone();
    let executed = execute(
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
    if !after_success.is_empty() && !matches!(executed, Executed::Failed { .. }) {
        apply(state, &after_success, StatusChange::default());
    }
    match executed {
        Executed::Continue => {
            *last_success = Some((observation.observed, acted));
            None
        }
        Executed::Requeue(requeue) => Some(to_next(state, requeue, vm_id)),
        Executed::RetryApiserver => Some(Next::RetryApiserver),
        Executed::Failed { type_, failure } => {
            if !failure.is_retry_only() {
                let update = ConditionUpdate::false_(type_, failure.reason, failure.severity, failure.message);
                apply(state, &[update], StatusChange::default());
            }
            Some(Next::Backoff)
        }
    }
}

/// `capov_reconciles_total` / `capov_reconcile_duration_seconds` for one pass.
fn record_pass(state: &MachineState, next: &Next, started: Instant) {
    let outcome = match next {
        _ if state.status.failure_reason.is_some() => result::TERMINAL,
        Next::Backoff | Next::RetryApiserver => result::ERROR,
        // Waiting for a kubelet is no error.
        Next::AwaitNode => result::REQUEUE,
        Next::Idle => result::SUCCESS,
        Next::WatchVm(watch) if watch.cadence == Cadence::Steady => result::SUCCESS,
        Next::After(_) | Next::Resume | Next::WatchVm(_) | Next::AwaitSearch(_) => result::REQUEUE,
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
/// whose change is a step reached or a failure (`change_recorded_as_event`).
fn apply(state: &mut MachineState, conditions: &[ConditionUpdate], change: StatusChange) {
    let now = crate::runtime::clock::now();
    let generation = state.object.metadata.generation;
    for update in conditions {
        let before = state
            .status
            .conditions
            .iter()
            .find(|c| c.type_ == update.type_)
            .cloned();
        set_condition(&mut state.status.conditions, update, now, generation);
        let after = state.status.conditions.iter().find(|c| c.type_ == update.type_);
        if update.type_ != types::PAUSED && after.is_some_and(|after| change_recorded_as_event(before.as_ref(), after))
        {
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
    if let Some(data_disks) = change.data_disks {
        state.status.data_disks = data_disks;
    }
    if let Some(vm_status) = change.vm_status {
        state.last_seen_vm_status = Some(vm_status.clone());
        state.status.vm_status = Some(vm_status);
    }
    if let Some(host) = change.host {
        state.status.host = host;
    }
    if let Some(domain) = change.failure_domain {
        state.status.failure_domain = Some(domain);
    }
    let ready = machine_ready(&state.status.conditions);
    set_condition(&mut state.status.conditions, &ready, now, generation);
    if ready.state == State::True {
        record_first_ready(state, now);
    }
}

/// `capov_machine_time_to_ready_seconds`: the first Ready of a machine this actor saw being provisioned.
fn record_first_ready(state: &mut MachineState, now: jiff::Timestamp) {
    if !std::mem::take(&mut state.awaiting_first_ready) {
        return;
    }
    if let Some(created) = &state.object.metadata.creation_timestamp {
        let seconds = now.duration_since(created.0).as_secs_f64().max(0.0);
        state.shared.metrics.machine_time_to_ready_seconds.observe(seconds);
    }
}

fn record_event(state: &MachineState, update: &ConditionUpdate) {
    let warning = matches!(update.state, State::False(Severity::Warning | Severity::Error));
    let note = if update.message.is_empty() {
        format!("{}: {}", update.type_, update.reason)
    } else {
        update.message.clone()
    };
    let kind = if warning { NoteKind::Warning } else { NoteKind::Step };
    let event = StatusWriterMsg::Event {
        reference: state.object.object_ref(&()),
        kind,
        reason: update.reason.to_string(),
        note,
    };
    let _ = mailbox::cast(&state.shared.metrics, &state.shared.status_writer, event);
}

#[cfg(test)]
mod tests {
    use super::*;
    use capov_crds::OVirtMachineStatus;

    fn with(conditions: &[ConditionUpdate]) -> OVirtMachineStatus {
        let mut status = OVirtMachineStatus::default();
        let now = jiff::Timestamp::UNIX_EPOCH;
        for update in conditions {
            set_condition(&mut status.conditions, update, now, None);
        }
        let ready = machine_ready(&status.conditions);
        set_condition(&mut status.conditions, &ready, now, None);
        status
    }

    fn progress(reason: &'static str) -> ConditionUpdate {
        ConditionUpdate::false_(types::MACHINE_CREATED, reason, Severity::Info, "")
    }

    #[test]
    fn a_first_status_calls_for_action_only_when_it_says_something_to_act_on() {
        let connected = || ConditionUpdate::true_(types::CAN_CONNECT_TO_OVIRT, "Connected");
        assert!(!calls_for_action(&with(&[connected(), progress("VMImageLocked")])));
        let mut ready = with(&[connected()]);
        ready.ready = true;
        let warning = with(&[ConditionUpdate::false_(
            types::CAN_CONNECT_TO_OVIRT,
            "EngineUnreachable",
            Severity::Warning,
            "",
        )]);
        let paused = with(&[ConditionUpdate::true_(types::PAUSED, "Paused")]);
        let deleting = with(&[ConditionUpdate::false_(
            types::MACHINE_DELETED,
            "VMDeleting",
            Severity::Info,
            "",
        )]);
        let mut failed = with(&[connected()]);
        failed.failure_reason = Some("CreateError".into());
        for acted_on in [&ready, &warning, &paused, &deleting, &failed] {
            assert!(calls_for_action(acted_on), "{acted_on:?}");
        }
    }

    #[test]
    fn a_step_of_provisioning_leaves_the_headline_as_it_was() {
        let down = ConditionUpdate::false_(types::MACHINE_ON, "VMDown", Severity::Info, "");
        let locked = with(&[progress("VMImageLocked"), down.clone()]);
        let mut created = with(&[ConditionUpdate::true_(types::MACHINE_CREATED, "VMCreated"), down]);
        created.vm_status = Some("down".into());
        assert_eq!(headline(&locked), headline(&created));
    }

    #[test]
    fn ready_a_warning_an_error_and_a_failure_each_change_the_headline() {
        let provisioning = headline(&with(&[progress("VMImageLocked")]));
        let mut ready = with(&[ConditionUpdate::true_(types::MACHINE_CREATED, "VMCreated")]);
        ready.ready = true;
        let warning = with(&[ConditionUpdate::false_(
            types::MACHINE_CREATED,
            "EngineUnreachable",
            Severity::Warning,
            "",
        )]);
        let error = with(&[ConditionUpdate::false_(
            types::MACHINE_CREATED,
            "TemplateNotFound",
            Severity::Error,
            "",
        )]);
        let mut failed = with(&[progress("VMImageLocked")]);
        failed.failure_reason = Some("CreateError".into());
        for acted_on in [&ready, &warning, &error, &failed] {
            assert_ne!(headline(acted_on), provisioning);
        }
        assert_ne!(headline(&warning), headline(&error));
        let mut addressed = ready.clone();
        addressed.addresses.push(capov_crds::MachineAddress {
            type_: "InternalIP".into(),
            address: "10.0.0.5".into(),
        });
        assert_ne!(headline(&addressed), headline(&ready), "a Ready machine's addresses");
        let stopping = with(&[ConditionUpdate::false_(
            types::MACHINE_DELETED,
            "VMStopping",
            Severity::Info,
            "",
        )]);
        let deleting = with(&[ConditionUpdate::false_(
            types::MACHINE_DELETED,
            "VMDeleting",
            Severity::Info,
            "",
        )]);
        assert_ne!(headline(&stopping), headline(&deleting), "each step of a deletion");
    }

    #[test]
    fn a_status_says_nothing_until_a_step_reports_or_something_calls_for_action() {
        use capov_core::conditions::reasons;
        let not_paused = ConditionUpdate::false_(types::PAUSED, reasons::NOT_PAUSED, Severity::Info, "");
        let connected = ConditionUpdate::true_(types::CAN_CONNECT_TO_OVIRT, reasons::CONNECTED);
        assert!(reports_nothing(&OVirtMachineStatus::default()));
        assert!(
            reports_nothing(&with(std::slice::from_ref(&not_paused))),
            "only the finalizer's step ran"
        );
        assert!(
            reports_nothing(&with(&[not_paused.clone(), connected.clone()])),
            "connected, no step yet"
        );
        let creating = with(&[not_paused.clone(), connected.clone(), progress("VMImageLocked")]);
        assert!(!reports_nothing(&creating), "a step's progress is reported");
        let unreachable = ConditionUpdate::false_(
            types::CAN_CONNECT_TO_OVIRT,
            reasons::PROVIDER_NOT_FOUND,
            Severity::Error,
            "OVirtProvider \"x\" not found",
        );
        assert!(
            !reports_nothing(&with(&[not_paused.clone(), unreachable])),
            "an error is reported"
        );
        let paused = with(&[ConditionUpdate::true_(types::PAUSED, reasons::PAUSED)]);
        assert!(!reports_nothing(&paused), "a pause is reported");
    }
}
