//! Kubernetes Events (events.k8s.io/v1) on CAPOV's objects, as kube's `Recorder` writes them: a new Event per
//! (object, type, reason), and the same Event's `series` counted up when it happens again within 6 minutes.
//!
//! Why not kube's `Recorder`: it keeps every Event it wrote (the whole object, about 1 KB, in a map whose table
//! never shrinks) for those 6 minutes. Bringing 1,000 machines up records about 8 Events each, and the profile
//! (docs/benchmarks.md, "Where the memory goes") showed that cache at 36 MiB, the largest single holder; at 10,000
//! machines it alone would pass the chart's memory limit. Here a recent Event costs its name and count, and the
//! table shrinks once the burst is over. Events are published by a few workers from a bounded queue, so that a
//! burst opens a few API connections instead of one task and connection per Event; when the queue is full an
//! Event is dropped (Events are best-effort, as client-go's broadcaster drops them too).

use std::collections::HashMap;
use std::hash::{DefaultHasher, Hash, Hasher};
use std::sync::{Arc, Mutex};

use futures::StreamExt;
use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::api::events::v1::Event;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::json;
use tokio::sync::mpsc;

/// How long a repeat counts into the same Event's series (kube's and client-go's value).
const SERIES_WINDOW: SignedDuration = SignedDuration::from_mins(6);
/// Events waiting to be written; more are dropped.
const QUEUE: usize = 1024;
/// Events written at once.
const WORKERS: usize = 4;

/// One Event to record.
pub struct Note {
    pub reference: ObjectReference,
    pub warning: bool,
    pub reason: String,
    pub note: String,
}

/// Records Events in the background; cheap to clone.
#[derive(Clone)]
pub struct EventRecorder {
    queue: mpsc::Sender<Note>,
}

/// An Event written in the last [`SERIES_WINDOW`]: enough to count a repeat into its series.
struct Recent {
    namespace: String,
    name: String,
    count: i32,
    last: Timestamp,
}

struct Writer {
    client: kube::Client,
    controller: String,
    instance: String,
    recent: Mutex<HashMap<u64, Recent>>,
}

impl EventRecorder {
    /// Starts the workers; they stop when every clone of the recorder is dropped.
    pub fn start(client: kube::Client, controller: &str, instance: Option<String>) -> EventRecorder {
        let (queue, receiver) = mpsc::channel(QUEUE);
        let writer = Arc::new(Writer {
            client,
            controller: controller.to_string(),
            instance: instance.unwrap_or_else(|| controller.to_string()),
            recent: Mutex::new(HashMap::new()),
        });
        let notes = futures::stream::unfold(receiver, |mut receiver| async move {
            receiver.recv().await.map(|note| (note, receiver))
        });
        tokio::spawn(notes.for_each_concurrent(WORKERS, move |note| {
            let writer = writer.clone();
            async move {
                if let Err(err) = writer.publish(note).await {
                    tracing::debug!(error = %err, "event not recorded");
                }
            }
        }));
        EventRecorder { queue }
    }

    /// Queues an Event; never waits.
    pub fn record(&self, note: Note) {
        if let Err(err) = self.queue.try_send(note) {
            tracing::debug!(error = %err, "event queue full; event dropped");
        }
    }
}

impl Writer {
    async fn publish(&self, note: Note) -> Result<(), kube::Error> {
        let now = Timestamp::now();
        let key = series_key(&note);
        let repeat = {
            let mut recent = lock(&self.recent);
            recent.retain(|_, seen| seen.last + SERIES_WINDOW > now);
            // After a burst the table would keep its peak size: give the memory back once it is mostly empty.
            if recent.capacity() > 64 && recent.len() < recent.capacity() / 4 {
                recent.shrink_to_fit();
            }
            recent.get_mut(&key).map(|seen| {
                seen.count += 1;
                seen.last = now;
                (seen.namespace.clone(), seen.name.clone(), seen.count)
            })
        };
        if let Some((namespace, name, count)) = repeat {
            let api: Api<Event> = Api::namespaced(self.client.clone(), &namespace);
            let series = json!({"series": {"count": count, "lastObservedTime": MicroTime(now)}});
            match api.patch(&name, &PatchParams::default(), &Patch::Merge(&series)).await {
                Ok(_) => return Ok(()),
                // Deleted meanwhile (Events expire): start a new one.
                Err(kube::Error::Api(status)) if status.code == 404 => {}
                Err(err) => return Err(err),
            }
        }
        let event = self.event(&note, now);
        let namespace = event.metadata.namespace.clone().unwrap_or_default();
        let name = event.metadata.name.clone().unwrap_or_default();
        let api: Api<Event> = Api::namespaced(self.client.clone(), &namespace);
        api.create(&PostParams::default(), &event).await?;
        lock(&self.recent).insert(
            key,
            Recent {
                namespace,
                name,
                count: 1,
                last: now,
            },
        );
        Ok(())
    }

    /// The Event as kube's `Recorder` builds it (name `<object>.<nanoseconds in hex>`).
    fn event(&self, note: &Note, now: Timestamp) -> Event {
        let object = note.reference.name.clone().unwrap_or_else(|| self.controller.clone());
        Event {
            action: Some(note.reason.clone()),
            reason: Some(note.reason.clone()),
            event_time: Some(MicroTime(now)),
            regarding: Some(note.reference.clone()),
            // The Event API refuses notes over 1 KiB; notes carry text from outside.
            note: Some(capov_core::trust::bounded_text::message(&note.note)),
            metadata: ObjectMeta {
                namespace: Some(note.reference.namespace.clone().unwrap_or_else(|| "default".into())),
                name: Some(format!("{object}.{:x}", now.as_nanosecond())),
                ..ObjectMeta::default()
            },
            reporting_controller: Some(self.controller.clone()),
            reporting_instance: Some(self.instance.clone()),
            type_: Some(if note.warning { "Warning" } else { "Normal" }.into()),
            ..Event::default()
        }
    }
}

/// What makes a repeat: the same object, type and reason (the note may differ, as with kube's `Recorder`). A 64-bit
/// hash stands for the key: a collision would count one Event into another's series, never lose a write.
fn series_key(note: &Note) -> u64 {
    let mut hasher = DefaultHasher::new();
    let reference = &note.reference;
    (
        &reference.uid,
        &reference.kind,
        &reference.namespace,
        &reference.name,
        note.warning,
        &note.reason,
    )
        .hash(&mut hasher);
    hasher.finish()
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}
