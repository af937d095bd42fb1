//! The only writer of status: server-side apply on the status subresource with field manager `capov`. Several
//! updates of one object queued before a flush become one write; a write equal to the last one is skipped; a failed
//! write is retried unless a newer status of the object arrived meanwhile. It also records Kubernetes Events.

use std::collections::HashMap;
use std::hash::{DefaultHasher, Hasher};
use std::time::Duration;

use k8s_openapi::api::core::v1::ObjectReference;
use kube::api::{Api, DynamicObject, Patch, PatchParams};
use ractor::{Actor, ActorProcessingErr, ActorRef};
use serde_json::{Value, json};

use super::events::{EventRecorder, Note};
use super::keys::ObjectKey;
use super::mailbox::{self, ActorMetrics, Alive, Mail};
use super::status_census;
use super::status_queue::WriteQueue;
use crate::metrics::{Metrics, kind};

pub const FIELD_MANAGER: &str = "capov";
/// Writes per `Flush` message, sent side by side (each to another object). Between two batches the mailbox is read,
/// so that updates arriving while the apiserver is slow coalesce in the queue (one status per object) instead of
/// queueing in the mailbox, one whole status per pass. One write at a time measured 7 writes/s with 10,000 machines
/// on a busy apiserver: the statuses, not the engine, set the pace, and the queued updates took 270 MiB.
const WRITES_PER_FLUSH: usize = 8;
/// First retry of a failed write; consecutive failing rounds double it up to [`MAX_RETRY_AFTER`], jittered.
const RETRY_AFTER: Duration = Duration::from_secs(2);
const MAX_RETRY_AFTER: Duration = Duration::from_secs(60);

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
    },
    /// A Kubernetes Event on the object.
    Event {
        reference: ObjectReference,
        warning: bool,
        reason: String,
        note: String,
    },
    /// The object already carries this status (as the watch showed it when its actor started): an update to the same
    /// status needs no write. Ignored once this writer wrote or holds a status of the object, which is newer.
    Seen {
        key: ObjectKey,
        status: Value,
    },
    /// The object is gone: forget what was written.
    Forget(ObjectKey),
    Flush,
    /// Time to send the writes that failed again.
    Retry,
    Stats(ractor::RpcReplyPort<WriterStats>),
}

impl Mail for StatusWriterMsg {
    const KIND: &'static str = kind::STATUS_WRITER;
}

pub struct StatusWriterArgs {
    pub client: kube::Client,
    pub metrics: Metrics,
}

pub struct StatusWriter;

pub struct WriterState {
    client: kube::Client,
    recorder: EventRecorder,
    queue: WriteQueue<ObjectKey, Value>,
    /// A hash of each object's last written status (`fingerprint`): enough to skip an unchanged write, where the
    /// status itself (a JSON tree of a few KB per machine) would be one more copy of every status.
    written: HashMap<ObjectKey, u64>,
    flush_queued: bool,
    retry_queued: bool,
    retry: crate::backoff::Backoff,
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
        _me: ActorRef<Self::Msg>,
        args: StatusWriterArgs,
    ) -> Result<WriterState, ActorProcessingErr> {
        let StatusWriterArgs { client, metrics } = args;
        let instance = std::env::var("POD_NAME").ok();
        let recorder = EventRecorder::start(client.clone(), "capov", instance);
        Ok(WriterState {
            client,
            recorder,
            queue: WriteQueue::default(),
            written: HashMap::new(),
            flush_queued: false,
            retry_queued: false,
            retry: crate::backoff::Backoff::new(RETRY_AFTER, MAX_RETRY_AFTER),
            stats: WriterStats::default(),
            mail: ActorMetrics::of::<StatusWriterMsg>(&metrics),
            _alive: ActorMetrics::of::<StatusWriterMsg>(&metrics).alive(),
            metrics,
        })
    }

    async fn handle(
        &self,
        me: ActorRef<Self::Msg>,
        message: Self::Msg,
        state: &mut WriterState,
    ) -> Result<(), ActorProcessingErr> {
        let _handling = state.mail.handling();
        match message {
            StatusWriterMsg::Update { key, status } => {
                status_census::record(&state.metrics, &key, &status);
                let label = [key.kind.label()];
                if state.queue.update(key, status) {
                    state.stats.coalesced += 1;
                    state
                        .metrics
                        .status_updates_coalesced_total
                        .with_label_values(&label)
                        .inc();
                }
                queue_flush(&me, state);
            }
            StatusWriterMsg::Seen { key, status } => {
                status_census::record_seen(&state.metrics, &key, &status);
                // After a restart the writer knows nothing it wrote: without this, every machine's first pass would
                // write back the status its object already has.
                if !state.written.contains_key(&key) && !state.queue.holds(&key) {
                    state.written.insert(key, fingerprint(&status));
                }
            }
            StatusWriterMsg::Flush => {
                state.flush_queued = false;
                flush(&me, state).await;
            }
            StatusWriterMsg::Retry => {
                state.retry_queued = false;
                state.queue.retry_failed();
                queue_flush(&me, state);
            }
            StatusWriterMsg::Event {
                reference,
                warning,
                reason,
                note,
            } => {
                // Recording an Event is one more API call; it must never hold up the status writes queued behind it.
                state.recorder.record(Note {
                    reference,
                    warning,
                    reason,
                    note,
                });
            }
            StatusWriterMsg::Forget(key) => {
                status_census::forget(&state.metrics, &key);
                state.queue.forget(&key);
                state.written.remove(&key);
            }
            StatusWriterMsg::Stats(reply) => {
                let _ = reply.send(state.stats);
            }
        }
        Ok(())
    }
}

fn queue_flush(me: &ActorRef<StatusWriterMsg>, state: &mut WriterState) {
    if !state.flush_queued && state.queue.has_pending() {
        state.flush_queued = true;
        let _ = mailbox::cast(&state.metrics, me, StatusWriterMsg::Flush);
    }
}

/// Writes up to [`WRITES_PER_FLUSH`] pending statuses, oldest first, and queues the next flush behind the messages
/// that arrived meanwhile.
async fn flush(me: &ActorRef<StatusWriterMsg>, state: &mut WriterState) {
    let mut writes = Vec::with_capacity(WRITES_PER_FLUSH);
    for (key, status) in state.queue.take_batch(WRITES_PER_FLUSH) {
        let fingerprint = fingerprint(&status);
        if state.written.get(&key) == Some(&fingerprint) {
            state.stats.unchanged += 1;
            continue;
        }
        writes.push((key, status, fingerprint));
    }
    let client = &state.client;
    let results =
        futures::future::join_all(writes.iter().map(|(key, status, _)| write_status(client, key, status))).await;
    for ((key, status, fingerprint), result) in writes.into_iter().zip(results) {
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
                state.written.insert(key, fingerprint);
            }
            Err(err) if is_gone(&err) => {
                state.written.remove(&key);
            }
            Err(err) => {
                state.stats.failed += 1;
                tracing::warn!(object = %key, error = %err, "status write failed; retrying");
                state.queue.write_failed(key, status);
            }
        }
    }
    queue_flush(me, state);
    if !state.queue.has_failed() {
        state.retry.reset();
    } else if !state.retry_queued {
        state.retry_queued = true;
        let delay = state.retry.next_delay();
        mailbox::cast_after(&state.metrics, delay, me.clone(), || StatusWriterMsg::Retry);
    }
}

async fn write_status(client: &kube::Client, key: &ObjectKey, status: &Value) -> Result<(), kube::Error> {
    let resource = key.kind.api_resource();
    let api: Api<DynamicObject> = match &key.namespace {
        Some(namespace) => Api::namespaced_with(client.clone(), namespace, &resource),
        None => Api::all_with(client.clone(), &resource),
    };
    let body = json!({
        "apiVersion": resource.api_version,
        "kind": resource.kind,
        "metadata": {"name": key.name},
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

/// A 64-bit hash of the status as JSON text (object keys in a fixed order), standing for the status last written. A
/// collision between an object's consecutive statuses (about 1 in 2^64) would skip one write until the next change.
fn fingerprint(status: &Value) -> u64 {
    let mut hasher = DefaultHasher::new();
    hasher.write(status.to_string().as_bytes());
    hasher.finish()
}

fn is_gone(err: &kube::Error) -> bool {
    matches!(err, kube::Error::Api(status) if status.code == 404)
}
