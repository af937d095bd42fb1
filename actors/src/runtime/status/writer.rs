//! The only writer of status: server-side apply on the status subresource with field manager `capov`. Several
//! updates of one object queued before a write become one write; a write equal to the last one is skipped; a failed
//! write is retried unless a newer status of the object arrived meanwhile. It also records Kubernetes Events.
//!
//! Progress of an object written moments ago waits (`Pace::Spaced`): every change a user acts on (Ready, a failure, a
//! warning or error, pause) is written at once, and the steps between are written at most once per
//! [`RuntimeSettings::status_spacing`](crate::runtime::RuntimeSettings) per object, the last one winning. An object's
//! first status is progress too unless it calls for action: it waits the spacing from its arrival. A batch of
//! machines passes its steps within seconds; written one by one, the statuses were more than four writes per machine
//! and a quarter of the apiserver's CPU on a two-core host (docs/benchmarks.md).
//!
//! Writes run as tasks, at most [`WRITES_IN_FLIGHT`] at once and never two for one object, and report back as
//! messages: the writer keeps reading its mailbox while the apiserver is slow, so updates coalesce in the queue (one
//! status per object) instead of piling up in the mailbox, and one write held until its deadline (30 s) takes one
//! slot, not the whole writer. Queued statuses are kept as their JSON text (about a third of the JSON tree), so a
//! queue of every machine's status while the apiserver struggles costs about 1.5 KB per machine.

use std::collections::{HashMap, HashSet};
use std::hash::{DefaultHasher, Hasher};
use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::ObjectReference;
use kube::api::{Api, DynamicObject, Patch, PatchParams};
use ractor::{Actor, ActorProcessingErr, ActorRef};
use serde_json::{Value, json};
use tokio::sync::watch;

use crate::metrics::{Metrics, kind};
use crate::runtime::keys::ObjectKey;
use crate::runtime::kube::clients::{answer_within, is_transient};
use crate::runtime::kube::pulse::Return;
use crate::runtime::mailbox::{self, ActorMetrics, Alive, Mail};
use crate::runtime::status::census;
use crate::runtime::status::events::{EventRecorder, Note, NoteKind};
use crate::runtime::status::queue::WriteQueue;
use crate::runtime::status::retry::RetryTimer;

pub const FIELD_MANAGER: &str = "capov";
/// Status writes sent side by side (each to another object). One write at a time measured 7 writes/s with 10,000
/// machines on a busy apiserver: the statuses, not the engine, set the pace.
const WRITES_IN_FLIGHT: usize = 8;
/// A write not answered after this long is taken for hung (the apiserver answers one in milliseconds) and stops
/// taking a slot, up to [`MAX_SLOW_WRITES`] at once: with 1 % of requests held until their 30 s timeout, a few hung
/// writes would otherwise hold all eight slots and every status would wait behind them.
const SLOW_WRITE: Duration = Duration::from_secs(1);
/// A write not answered after this long is given up and retried: a held write kept the object's newer status (its
/// Ready, say) queued behind it until the client's 30 s read timeout.
const WRITE_DEADLINE: Duration = Duration::from_secs(10);
const MAX_SLOW_WRITES: usize = 4 * WRITES_IN_FLIGHT;

/// A status as queued and written: its JSON text.
type StatusText = Arc<str>;

/// How soon an update of a status is to be written.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Pace {
    /// In its turn, as soon as a write slot is free.
    Now,
    /// Progress only: an object whose last write started less than the spacing ago is written again once the
    /// spacing is over, with the newest status by then, unless an update `Now` comes first.
    Spaced,
}

/// What the writer remembers of an object it wrote or saw written.
#[derive(Clone, Copy, Default)]
struct Written {
    /// [`fingerprint`] of the status last written (or seen on the object); 0 while none is known.
    fingerprint: u64,
    /// When this writer last started a write of it or, before its first write, when its first progress arrived
    /// (`Pace::Spaced`): milliseconds since the writer started, plus one; 0 for neither.
    started: u64,
}

impl Written {
    /// Whether its last write started less than `spacing` before `now` (both in milliseconds since the writer
    /// started): a spaced update of it waits.
    fn within_spacing(&self, now: u64, spacing: u64) -> bool {
        self.started != 0 && now < self.started - 1 + spacing
    }
}

/// Counts of what the writer did, for metrics and tests.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct WriterStats {
    pub writes: u64,
    pub coalesced: u64,
    pub unchanged: u64,
    pub failed: u64,
}

pub enum StatusWriterMsg {
    /// The complete status CAPOV owns for this object.
    Update {
        key: ObjectKey,
        status: Value,
        pace: Pace,
    },
    /// A Kubernetes Event on the object.
    Event {
        reference: ObjectReference,
        kind: NoteKind,
        reason: String,
        note: String,
    },
    /// The object already carries this status (as the watch showed it when its actor started): an update to the same
    /// status needs no write. Ignored once this writer wrote or holds a status of the object, which is newer.
    Seen {
        key: ObjectKey,
        fingerprint: u64,
    },
    /// The object is gone: forget what was written.
    Forget(ObjectKey),
    Flush,
    /// A write under way is slow: it gives up its slot.
    Slow(ObjectKey),
    /// A write task's outcome.
    Written {
        key: ObjectKey,
        status: StatusText,
        result: Result<(), kube::Error>,
    },
    /// Time to send the writes that failed again.
    Retry,
    /// Time to release the held statuses whose spacing is over.
    Release,
    Stats(ractor::RpcReplyPort<WriterStats>),
}

impl Mail for StatusWriterMsg {
    const KIND: &'static str = kind::STATUS_WRITER;
}

pub struct StatusWriterArgs {
    pub client: kube::Client,
    pub metrics: Metrics,
    /// The least time between two writes of one object's progress (`Pace::Spaced`); zero writes each at once.
    pub spacing: Duration,
    /// Changes when the apiserver answers again after an outage (`kube::pulse`): the failed writes are sent again
    /// then, instead of at a retry timer that doubled while it was silent.
    pub apiserver_returns: watch::Receiver<Return>,
}

pub struct StatusWriter;

pub struct WriterState {
    client: kube::Client,
    recorder: EventRecorder,
    queue: WriteQueue<ObjectKey, StatusText>,
    /// A hash of each object's last written status (`fingerprint`): enough to skip an unchanged write, where the
    /// status itself (a JSON tree of a few KB per machine) would be one more copy of every status. And when its last
    /// write started, for the spacing.
    written: HashMap<ObjectKey, Written>,
    spacing: Duration,
    /// What `Written::started` counts from.
    started_at: Instant,
    release_queued: bool,
    /// The objects whose write is under way.
    in_flight: HashSet<ObjectKey>,
    /// Those of them whose write is slow: they take no slot.
    slow: HashSet<ObjectKey>,
    flush_queued: bool,
    /// When the failed writes are sent again (`retry`), and the timer that will say so.
    retry: RetryTimer,
    retry_armed: Option<tokio::task::JoinHandle<()>>,
    /// Sends `Retry` at each return of the apiserver.
    retry_at_returns: tokio::task::JoinHandle<()>,
    stats: WriterStats,
    metrics: Metrics,
    mail: ActorMetrics,
    _alive: Alive,
}

impl Actor for StatusWriter {
    type Msg = StatusWriterMsg;
    type State = WriterState;
    type Arguments = StatusWriterArgs;

    async fn pre_start(
        &self,
        me: ActorRef<Self::Msg>,
        args: StatusWriterArgs,
    ) -> Result<WriterState, ActorProcessingErr> {
        let StatusWriterArgs {
            client,
            metrics,
            spacing,
            apiserver_returns,
        } = args;
        let instance = std::env::var("POD_NAME").ok();
        let recorder = EventRecorder::start(client.clone(), "capov", instance, metrics.events_dropped_total.clone());
        Ok(WriterState {
            client,
            recorder,
            queue: WriteQueue::default(),
            written: HashMap::new(),
            spacing,
            started_at: Instant::now(),
            release_queued: false,
            in_flight: HashSet::new(),
            slow: HashSet::new(),
            flush_queued: false,
            retry: RetryTimer::default(),
            retry_armed: None,
            retry_at_returns: tokio::spawn(retry_at_returns(apiserver_returns, me, metrics.clone())),
            stats: WriterStats::default(),
            mail: ActorMetrics::of::<StatusWriterMsg>(&metrics),
            _alive: ActorMetrics::of::<StatusWriterMsg>(&metrics).alive(),
            metrics,
        })
    }

    async fn post_stop(&self, _me: ActorRef<Self::Msg>, state: &mut WriterState) -> Result<(), ActorProcessingErr> {
        state.retry_at_returns.abort();
        Ok(())
    }

    async fn handle(
        &self,
        me: ActorRef<Self::Msg>,
        message: Self::Msg,
        state: &mut WriterState,
    ) -> Result<(), ActorProcessingErr> {
        let _handling = state.mail.handling();
        match message {
            StatusWriterMsg::Update { key, status, pace } => {
                census::record(&state.metrics, &key, &status);
                let label = [key.kind.label()];
                let hold = pace == Pace::Spaced && progress_waits(state, &key);
                if state.queue.update(key, Arc::from(status.to_string()), hold) {
                    state.stats.coalesced += 1;
                    state
                        .metrics
                        .status_updates_coalesced_total
                        .with_label_values(&label)
                        .inc();
                }
                show_pending(state);
                queue_release(&me, state);
                queue_flush(&me, state);
            }
            StatusWriterMsg::Seen { key, fingerprint } => {
                // After a restart the writer knows nothing it wrote: without this, every machine's first pass would
                // write back the status its object already has.
                if !state.written.contains_key(&key) && !state.queue.holds(&key) && !state.in_flight.contains(&key) {
                    let seen = Written {
                        fingerprint,
                        started: 0,
                    };
                    state.written.insert(key, seen);
                }
            }
            StatusWriterMsg::Slow(key) => {
                if state.in_flight.contains(&key) && state.slow.len() < MAX_SLOW_WRITES {
                    state.slow.insert(key);
                    state.metrics.status_writes_slow.set(gauge_value(state.slow.len()));
                    flush(&me, state);
                }
            }
            StatusWriterMsg::Flush => {
                state.flush_queued = false;
                flush(&me, state);
            }
            StatusWriterMsg::Written { key, status, result } => written(&me, state, key, status, result),
            StatusWriterMsg::Retry => {
                state.retry.fired();
                // Sent at the apiserver's return, the retry stands for the timer too.
                if let Some(armed) = state.retry_armed.take() {
                    armed.abort();
                }
                state.queue.retry_failed();
                queue_flush(&me, state);
            }
            StatusWriterMsg::Release => {
                state.release_queued = false;
                let now = millis_since_start(state);
                let (written, spacing) = (&state.written, millis(state.spacing));
                state
                    .queue
                    .release(|key| !written.get(key).is_some_and(|w| w.within_spacing(now, spacing)));
                queue_release(&me, state);
                queue_flush(&me, state);
            }
            StatusWriterMsg::Event {
                reference,
                kind,
                reason,
                note,
            } => {
                // Recording an Event is one more API call; it must never hold up the status writes queued behind it.
                state.recorder.record(Note {
                    reference,
                    kind,
                    reason,
                    note,
                });
            }
            StatusWriterMsg::Forget(key) => {
                census::forget(&state.metrics, &key);
                state.queue.forget(&key);
                state.written.remove(&key);
                show_pending(state);
            }
            StatusWriterMsg::Stats(reply) => {
                let _ = reply.send(state.stats);
            }
        }
        Ok(())
    }
}

/// Whether a progress update of `key` waits for the spacing: its last write started less than the spacing ago or,
/// for an object this writer has not written, its first progress arrived less than the spacing ago (the first one
/// starts that clock). A new machine's first steps then go as one write, not one each.
fn progress_waits(state: &mut WriterState, key: &ObjectKey) -> bool {
    let now = millis_since_start(state);
    let spacing = millis(state.spacing);
    if spacing == 0 {
        return false;
    }
    let first = !state.in_flight.contains(key) && !state.queue.holds(key);
    let written = state.written.entry(key.clone()).or_default();
    if written.started == 0 && first {
        written.started = now.saturating_add(1);
    }
    written.within_spacing(now, spacing)
}

/// Checks the held statuses again after a while, as long as some are held.
fn queue_release(me: &ActorRef<StatusWriterMsg>, state: &mut WriterState) {
    if !state.release_queued && state.queue.has_held() {
        state.release_queued = true;
        let tick = (state.spacing / 4).clamp(Duration::from_millis(50), Duration::from_secs(1));
        mailbox::cast_after(&state.metrics, tick, me.clone(), || StatusWriterMsg::Release);
    }
}

fn millis_since_start(state: &WriterState) -> u64 {
    millis(state.started_at.elapsed())
}

/// `capov_status_writes_pending` after a change of the queue.
fn show_pending(state: &WriterState) {
    state
        .metrics
        .status_writes_pending
        .set(gauge_value(state.queue.pending_len()));
}

fn gauge_value(count: usize) -> i64 {
    i64::try_from(count).unwrap_or(i64::MAX)
}

fn millis(duration: Duration) -> u64 {
    u64::try_from(duration.as_millis()).unwrap_or(u64::MAX)
}

/// Write slots free: writes under way take one each, except the slow ones.
fn free_slots(state: &WriterState) -> usize {
    let busy = state.in_flight.len().saturating_sub(state.slow.len());
    WRITES_IN_FLIGHT.saturating_sub(busy)
}

fn queue_flush(me: &ActorRef<StatusWriterMsg>, state: &mut WriterState) {
    if !state.flush_queued && free_slots(state) > 0 && state.queue.has_pending_except(&state.in_flight) {
        state.flush_queued = true;
        let _ = mailbox::cast(&state.metrics, me, StatusWriterMsg::Flush);
    }
}

/// Starts writes of the oldest pending statuses while fewer than [`WRITES_IN_FLIGHT`] run; an object whose write is
/// under way keeps its newer status queued until that write is done.
fn flush(me: &ActorRef<StatusWriterMsg>, state: &mut WriterState) {
    let free = free_slots(state);
    let in_flight = &state.in_flight;
    for (key, status) in state.queue.take_batch_except(free, |key| in_flight.contains(key)) {
        if state.written.get(&key).map(|w| w.fingerprint) == Some(text_fingerprint(&status)) {
            state.stats.unchanged += 1;
            continue;
        }
        let started = millis_since_start(state).saturating_add(1);
        state.written.entry(key.clone()).or_default().started = started;
        state.in_flight.insert(key.clone());
        let (client, me, metrics) = (state.client.clone(), me.clone(), state.metrics.clone());
        tokio::spawn(async move {
            let sent = Instant::now();
            let result = {
                let mut write = std::pin::pin!(answer_within(WRITE_DEADLINE, write_status(&client, &key, &status)));
                match tokio::time::timeout(SLOW_WRITE, &mut write).await {
                    Ok(result) => result,
                    Err(_) => {
                        let _ = mailbox::cast(&metrics, &me, StatusWriterMsg::Slow(key.clone()));
                        write.await
                    }
                }
            };
            metrics
                .status_write_duration_seconds
                .with_label_values(&[key.kind.label()])
                .observe(sent.elapsed().as_secs_f64());
            let _ = mailbox::cast(&metrics, &me, StatusWriterMsg::Written { key, status, result });
        });
    }
    show_pending(state);
    // Statuses skipped as unchanged left slots free.
    queue_flush(me, state);
}

/// A write's outcome: remembered, forgotten (the object is gone) or kept for the retry; then the next writes.
fn written(
    me: &ActorRef<StatusWriterMsg>,
    state: &mut WriterState,
    key: ObjectKey,
    status: StatusText,
    result: Result<(), kube::Error>,
) {
    state.in_flight.remove(&key);
    if state.slow.remove(&key) {
        state.metrics.status_writes_slow.set(gauge_value(state.slow.len()));
    }
    let went_through = result.is_ok();
    let outcome = match &result {
        Ok(()) => "success",
        Err(kube::Error::Api(status)) if status.code == 409 => "conflict",
        Err(_) => "error",
    };
    state
        .metrics
        .status_writes_total
        .with_label_values(&[key.kind.label(), outcome])
        .inc();
    match result {
        Ok(()) => {
            state.stats.writes += 1;
            state.written.entry(key).or_default().fingerprint = text_fingerprint(&status);
        }
        Err(err) if is_gone(&err) => {
            state.written.remove(&key);
        }
        Err(err) => {
            state.stats.failed += 1;
            tracing::warn!(object = %key, error = %err, "status write failed; retrying");
            state.retry.failed(is_transient(&err));
            state.queue.write_failed(key, status);
        }
    }
    show_pending(state);
    queue_flush(me, state);
    let rearm = state
        .retry
        .after_write(went_through, state.queue.has_failed(), Instant::now(), fastrand::f64());
    if let Some(delay) = rearm {
        // A retry fired meanwhile but not yet handled only queues the failed writes a little early.
        if let Some(replaced) = state.retry_armed.take() {
            replaced.abort();
        }
        let timer = mailbox::cast_after(&state.metrics, delay, me.clone(), || StatusWriterMsg::Retry);
        state.retry_armed = Some(timer);
    }
}

/// Sends the writer `Retry` each time the apiserver answers again after an outage, until either is gone.
async fn retry_at_returns(mut returns: watch::Receiver<Return>, writer: ActorRef<StatusWriterMsg>, metrics: Metrics) {
    while returns.changed().await.is_ok() {
        if mailbox::cast(&metrics, &writer, StatusWriterMsg::Retry).is_err() {
            return;
        }
    }
}

async fn write_status(client: &kube::Client, key: &ObjectKey, status: &str) -> Result<(), kube::Error> {
    let resource = key.kind.api_resource();
    let api: Api<DynamicObject> = match &key.namespace {
        Some(namespace) => Api::namespaced_with(client.clone(), namespace, &resource),
        None => Api::all_with(client.clone(), &resource),
    };
    let status: Value = serde_json::from_str(status).map_err(kube::Error::SerdeError)?;
    let body = json!({
        "apiVersion": resource.api_version,
        "kind": resource.kind,
        "metadata": {"name": &*key.name},
        "status": status,
    });
    api.patch_status(
        &key.name,
        &PatchParams::apply(FIELD_MANAGER).force(),
        &Patch::Apply(&body),
    )
    .await?;
    Ok(())
}

/// The [`StatusWriterMsg::Seen`] of a status an object already carries, counted in the status census now. Only its
/// fingerprint travels: after a restart every object's actor sends one at once, and 10,000 statuses as JSON trees
/// queued in the writer's mailbox were a peak of their own.
/// Returns the fingerprint too, for the sender's own record of what it sent.
pub(crate) fn seen(metrics: &Metrics, key: ObjectKey, status: &Value) -> (u64, StatusWriterMsg) {
    census::record_seen(metrics, &key, status);
    let fingerprint = fingerprint(status);
    (fingerprint, StatusWriterMsg::Seen { key, fingerprint })
}

/// A 64-bit hash of the status as JSON text (object keys in a fixed order), standing for the status last written. A
/// collision between an object's consecutive statuses (about 1 in 2^64) would skip one write until the next change.
pub(crate) fn fingerprint(status: &Value) -> u64 {
    text_fingerprint(&status.to_string())
}

fn text_fingerprint(status: &str) -> u64 {
    let mut hasher = DefaultHasher::new();
    hasher.write(status.as_bytes());
    hasher.finish()
}

fn is_gone(err: &kube::Error) -> bool {
    matches!(err, kube::Error::Api(status) if status.code == 404)
}
