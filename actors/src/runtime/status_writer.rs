//! The only writer of status: server-side apply on the status subresource with field manager `capov`. Several
//! updates of one object queued before a flush become one write; a write equal to the last one is skipped; failed
//! writes are retried. It also records Kubernetes Events.

use std::collections::HashMap;
use std::time::Duration;

use k8s_openapi::api::core::v1::ObjectReference;
use kube::api::{Api, DynamicObject, Patch, PatchParams};
use kube::runtime::events::{Event, EventType, Recorder, Reporter};
use ractor::{Actor, ActorProcessingErr, ActorRef};
use serde_json::{Value, json};

use super::keys::ObjectKey;

pub const FIELD_MANAGER: &str = "capov";
const RETRY_AFTER: Duration = Duration::from_secs(2);

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
    /// The object is gone: forget what was written.
    Forget(ObjectKey),
    Flush,
    Stats(ractor::RpcReplyPort<WriterStats>),
}

pub struct StatusWriter;

pub struct WriterState {
    client: kube::Client,
    recorder: Recorder,
    pending: HashMap<ObjectKey, Value>,
    written: HashMap<ObjectKey, Value>,
    flush_queued: bool,
    stats: WriterStats,
}

impl Actor for StatusWriter {
    type Msg = StatusWriterMsg;
    type State = WriterState;
    type Arguments = kube::Client;

    async fn pre_start(
        &self,
        _me: ActorRef<Self::Msg>,
        client: kube::Client,
    ) -> Result<WriterState, ActorProcessingErr> {
        let instance = std::env::var("POD_NAME").ok();
        let recorder = Recorder::new(
            client.clone(),
            Reporter {
                controller: "capov".into(),
                instance,
            },
        );
        Ok(WriterState {
            client,
            recorder,
            pending: HashMap::new(),
            written: HashMap::new(),
            flush_queued: false,
            stats: WriterStats::default(),
        })
    }

    async fn handle(
        &self,
        me: ActorRef<Self::Msg>,
        message: Self::Msg,
        state: &mut WriterState,
    ) -> Result<(), ActorProcessingErr> {
        match message {
            StatusWriterMsg::Update { key, status } => {
                if state.pending.insert(key, status).is_some() {
                    state.stats.coalesced += 1;
                }
                if !state.flush_queued {
                    state.flush_queued = true;
                    me.cast(StatusWriterMsg::Flush)?;
                }
            }
            StatusWriterMsg::Flush => {
                state.flush_queued = false;
                let pending: Vec<(ObjectKey, Value)> = state.pending.drain().collect();
                for (key, status) in pending {
                    if state.written.get(&key) == Some(&status) {
                        state.stats.unchanged += 1;
                        continue;
                    }
                    match write_status(&state.client, &key, &status).await {
                        Ok(()) => {
                            state.stats.writes += 1;
                            state.written.insert(key, status);
                        }
                        Err(err) if is_gone(&err) => {
                            state.written.remove(&key);
                        }
                        Err(err) => {
                            state.stats.failed += 1;
                            tracing::warn!(object = %key, error = %err, "status write failed; retrying");
                            me.send_after(RETRY_AFTER, move || StatusWriterMsg::Update { key, status });
                        }
                    }
                }
            }
            StatusWriterMsg::Event {
                reference,
                warning,
                reason,
                note,
            } => {
                let event = Event {
                    type_: if warning { EventType::Warning } else { EventType::Normal },
                    reason: reason.clone(),
                    note: Some(note),
                    action: reason,
                    secondary: None,
                };
                // Recording an Event is one more API call; it must never hold up the status writes queued behind it.
                let recorder = state.recorder.clone();
                tokio::spawn(async move {
                    if let Err(err) = recorder.publish(&event, &reference).await {
                        tracing::debug!(error = %err, "event not recorded");
                    }
                });
            }
            StatusWriterMsg::Forget(key) => {
                state.pending.remove(&key);
                state.written.remove(&key);
            }
            StatusWriterMsg::Stats(reply) => {
                let _ = reply.send(state.stats);
            }
        }
        Ok(())
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

fn is_gone(err: &kube::Error) -> bool {
    matches!(err, kube::Error::Api(status) if status.code == 404)
}
