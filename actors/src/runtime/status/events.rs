//! Kubernetes Events (events.k8s.io/v1) on CAPOV's objects, as kube's `Recorder` writes them: a new Event per
//! (object, type, reason), and the same Event's `series` counted up when it happens again within 6 minutes.
//!
//! Why not kube's `Recorder`: it keeps every Event it wrote (the whole object, about 1 KB, in a map whose table
//! never shrinks) for those 6 minutes. Bringing 1,000 machines up records about 8 Events each, and the profile
//! (docs/benchmarks.md, "Where the memory goes") showed that cache at 36 MiB, the largest single holder; at 10,000
//! machines it alone would pass the chart's memory limit. Here a recent Event costs its name and count, and the
//! table holds at most [`RECENT_EVENTS`] of them, as client-go's correlator keeps at most 4,096 (an LRU cache): its
//! cost does not grow with the number of machines. Events are published by a few workers from a bounded queue, so that a
//! burst opens a few API connections instead of one task and connection per Event; when the queue is full an
//! Event is dropped (Events are best-effort, as client-go's broadcaster drops them too), and so is one the apiserver
//! does not answer within [`WRITE_DEADLINE`].
//!
//! The Events of steps (a condition's change that is no failure) also keep to a budget per namespace
//! ([`STEPS_PER_SECOND`], [`STEPS_BURST`]); Warnings and records of things done do not. An Event costs the apiserver
//! and etcd about 2 ms of CPU (an OVirtMachine write 4–10 ms), and a large batch reaches many steps: at 10,000
//! machines the writers were never idle, about 145 Events a second taking a seventh of the two cores the benchmark's
//! host shares with the apiserver (docs/benchmarks.md). A scale-up by a few dozen machines stays within the burst, so
//! every step shows; in a batch of thousands most steps go unrecorded (the full queue already dropped a third of
//! them), while their conditions and the metrics show the progress. Per namespace, so that one tenant's batch never
//! uses up another's Events.

use std::collections::{HashMap, VecDeque};
use std::hash::{DefaultHasher, Hash, Hasher};
use std::num::NonZeroU32;
use std::sync::{Arc, Mutex};

use futures::StreamExt;
use governor::{DefaultKeyedRateLimiter, Quota, RateLimiter};
use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::api::events::v1::Event;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use kube::api::{Api, Patch, PatchParams, PostParams};
use prometheus::IntCounterVec;
use serde_json::json;
use tokio::sync::mpsc;

use crate::runtime::kube::clients::answer_within;

/// How long a repeat counts into the same Event's series (kube's and client-go's value).
const SERIES_WINDOW: SignedDuration = SignedDuration::from_mins(6);
/// Events waiting to be written; more are dropped.
const QUEUE: usize = 1024;
/// Events written at once.
const WORKERS: usize = 8;
/// How long one Event's write may take; past it the Event is given up (Events are best-effort). Without it, an
/// apiserver holding 1 % of requests until the client's 30 s read timeout held the workers most of the time: at
/// 10,000 machines in the benchmark's trouble fewer than one Event in eight was written, the others dropped at the
/// full queue.
const WRITE_DEADLINE: std::time::Duration = std::time::Duration::from_secs(5);
/// Events of steps a namespace may have written a second, once its burst is spent.
const STEPS_PER_SECOND: NonZeroU32 = NonZeroU32::new(20).expect("not zero");
/// Events of steps a namespace may have written at once: a scale-up by 25 machines records every step of each.
const STEPS_BURST: NonZeroU32 = NonZeroU32::new(200).expect("not zero");
/// Namespaces whose budgets are remembered before the ones at their full burst again are forgotten.
const BUDGETS_KEPT: usize = 1024;

/// Recent Events remembered for their series. Past it the oldest is forgotten: its next repeat starts a new Event
/// instead of counting into the old one's series, as after the window. About 150 bytes each: 0.3 MiB in all, where
/// 10,000 machines with their several Events each would hold 13 MiB (docs/benchmarks.md).
const RECENT_EVENTS: usize = 2048;

/// What an Event tells; it decides the Event's type and whether it keeps to its namespace's budget.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum NoteKind {
    /// A step reached or left (a condition's change): Normal, kept to its namespace's budget.
    Step,
    /// Something done that the object will not show later (a disk detached and kept, a marker rewritten): Normal,
    /// never held back.
    Record,
    /// A failure, or something left alone: Warning, never held back.
    Warning,
}

/// One Event to record.
pub struct Note {
    pub reference: ObjectReference,
    pub kind: NoteKind,
    pub reason: String,
    pub note: String,
}

/// Records Events in the background; cheap to clone.
#[derive(Clone)]
pub struct EventRecorder {
    queue: mpsc::Sender<Note>,
    budget: Arc<StepBudget>,
    /// `capov_events_dropped_total{cause}`.
    dropped: IntCounterVec,
}

/// Why an Event was not written: the `cause` label of `capov_events_dropped_total`.
pub mod cause {
    /// Its namespace's budget of Events of steps was spent.
    pub const BUDGET: &str = "budget";
    /// The queue was full.
    pub const QUEUE: &str = "queue";
    /// The apiserver refused it, or did not answer within the deadline.
    pub const FAILED: &str = "failed";
}

/// The budget of Events of steps, per namespace.
struct StepBudget {
    limiter: DefaultKeyedRateLimiter<String>,
}

impl StepBudget {
    fn new(quota: Quota) -> StepBudget {
        StepBudget {
            limiter: RateLimiter::keyed(quota),
        }
    }

    /// Whether `note` may be written now: a step while its namespace has budget left, anything else always.
    fn admits(&self, note: &Note) -> bool {
        if note.kind != NoteKind::Step {
            return true;
        }
        if self.limiter.len() > BUDGETS_KEPT {
            self.limiter.retain_recent();
        }
        let namespace = note.reference.namespace.as_deref().unwrap_or_default();
        self.limiter.check_key(&namespace.to_string()).is_ok()
    }
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
    recent: Mutex<RecentEvents>,
}

/// The Events written in the last [`SERIES_WINDOW`], at most `capacity`, the first written first out.
struct RecentEvents {
    capacity: usize,
    by_key: HashMap<u64, Recent>,
    /// The keys in the order their Events were created.
    order: VecDeque<u64>,
}

impl RecentEvents {
    fn new(capacity: usize) -> RecentEvents {
        RecentEvents {
            capacity,
            by_key: HashMap::new(),
            order: VecDeque::new(),
        }
    }

    /// Forgets the Events whose window has passed at `now`, the oldest first, up to the first still in its window:
    /// one repeated for longer keeps those behind it a while, which [`RecentEvents::repeat`]'s own check and the
    /// capacity make harmless.
    fn expire(&mut self, now: Timestamp) {
        while let Some(key) = self.order.front() {
            match self.by_key.get(key) {
                Some(seen) if seen.last + SERIES_WINDOW > now => break,
                Some(_) => {
                    self.by_key.remove(key);
                }
                None => {}
            }
            self.order.pop_front();
        }
    }

    /// A repeat of `key` at `now`: where to count it and its new count; None when no Event of it is remembered.
    fn repeat(&mut self, key: u64, now: Timestamp) -> Option<(String, String, i32)> {
        let seen = self
            .by_key
            .get_mut(&key)
            .filter(|seen| seen.last + SERIES_WINDOW > now)?;
        seen.count += 1;
        seen.last = now;
        Some((seen.namespace.clone(), seen.name.clone(), seen.count))
    }

    /// Remembers a new Event, forgetting the oldest when full.
    fn insert(&mut self, key: u64, recent: Recent) {
        if self.by_key.insert(key, recent).is_some() {
            self.order.retain(|k| *k != key);
        }
        self.order.push_back(key);
        while self.order.len() > self.capacity {
            if let Some(oldest) = self.order.pop_front() {
                self.by_key.remove(&oldest);
            }
        }
    }
}

impl EventRecorder {
    /// Starts the workers; they stop when every clone of the recorder is dropped.
    pub fn start(
        client: kube::Client,
        controller: &str,
        instance: Option<String>,
        dropped: IntCounterVec,
    ) -> EventRecorder {
        let (queue, receiver) = mpsc::channel(QUEUE);
        let writer = Arc::new(Writer {
            client,
            controller: controller.to_string(),
            instance: instance.unwrap_or_else(|| controller.to_string()),
            recent: Mutex::new(RecentEvents::new(RECENT_EVENTS)),
        });
        let notes = futures::stream::unfold(receiver, |mut receiver| async move {
            receiver.recv().await.map(|note| (note, receiver))
        });
        let failed = dropped.with_label_values(&[cause::FAILED]);
        tokio::spawn(notes.for_each_concurrent(WORKERS, move |note| {
            let (writer, failed) = (writer.clone(), failed.clone());
            async move {
                if let Err(err) = answer_within(WRITE_DEADLINE, writer.publish(note)).await {
                    failed.inc();
                    tracing::debug!(error = %err, "event not recorded");
                }
            }
        }));
        EventRecorder {
            queue,
            budget: Arc::new(StepBudget::new(
                Quota::per_second(STEPS_PER_SECOND).allow_burst(STEPS_BURST),
            )),
            dropped,
        }
    }

    /// Queues an Event, unless its namespace's budget is spent; never waits.
    pub fn record(&self, note: Note) {
        if !self.budget.admits(&note) {
            self.dropped.with_label_values(&[cause::BUDGET]).inc();
            return;
        }
        if let Err(err) = self.queue.try_send(note) {
            self.dropped.with_label_values(&[cause::QUEUE]).inc();
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
            recent.expire(now);
            recent.repeat(key, now)
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
            type_: Some(
                if note.kind == NoteKind::Warning {
                    "Warning"
                } else {
                    "Normal"
                }
                .into(),
            ),
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
        note.kind,
        &note.reason,
    )
        .hash(&mut hasher);
    hasher.finish()
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn recent(name: &str, at: Timestamp) -> Recent {
        Recent {
            namespace: "default".into(),
            name: name.into(),
            count: 1,
            last: at,
        }
    }

    fn note(namespace: &str, kind: NoteKind) -> Note {
        Note {
            reference: ObjectReference {
                namespace: Some(namespace.into()),
                name: Some("worker-0".into()),
                ..ObjectReference::default()
            },
            kind,
            reason: "VMCreated".into(),
            note: String::new(),
        }
    }

    #[test]
    fn a_namespace_that_spent_its_budget_of_steps_still_gets_its_other_events_and_others_their_budgets() {
        // Three at once, then one an hour: no refill within the test.
        let budget = StepBudget::new(Quota::per_hour(NonZeroU32::MIN).allow_burst(NonZeroU32::new(3).unwrap()));
        let admitted = (0..5)
            .filter(|_| budget.admits(&note("tenant-a", NoteKind::Step)))
            .count();
        assert_eq!(admitted, 3);
        assert!(
            budget.admits(&note("tenant-a", NoteKind::Warning)),
            "a Warning is never held to the budget"
        );
        assert!(budget.admits(&note("tenant-a", NoteKind::Record)), "nor is a record");
        assert!(
            budget.admits(&note("tenant-b", NoteKind::Step)),
            "another namespace has its own budget"
        );
    }

    #[test]
    fn a_repeat_within_the_window_counts_into_the_series_and_one_after_it_does_not() {
        let start = Timestamp::UNIX_EPOCH;
        let mut events = RecentEvents::new(8);
        events.insert(1, recent("a.1", start));
        let later = start + SignedDuration::from_mins(5);
        assert_eq!(events.repeat(1, later), Some(("default".into(), "a.1".into(), 2)));
        // The window counts from the last repeat.
        let still = later + SignedDuration::from_mins(5);
        assert_eq!(events.repeat(1, still).map(|(_, _, count)| count), Some(3));
        let past = still + SERIES_WINDOW;
        events.expire(past);
        assert_eq!(events.repeat(1, past), None);
        assert!(events.by_key.is_empty() && events.order.is_empty());
    }

    #[test]
    fn the_table_never_holds_more_than_its_capacity_and_forgets_the_oldest_first() {
        let start = Timestamp::UNIX_EPOCH;
        let mut events = RecentEvents::new(3);
        for key in 0..10u64 {
            events.insert(key, recent(&format!("e.{key}"), start));
            assert!(events.by_key.len() <= 3 && events.order.len() <= 3);
        }
        assert_eq!(events.repeat(6, start), None);
        assert_eq!(events.repeat(7, start).map(|(_, name, _)| name), Some("e.7".into()));
        assert_eq!(events.repeat(9, start).map(|(_, _, count)| count), Some(2));
    }

    #[test]
    fn an_event_created_again_for_the_same_key_is_held_once() {
        let start = Timestamp::UNIX_EPOCH;
        let mut events = RecentEvents::new(2);
        events.insert(1, recent("a.1", start));
        events.insert(1, recent("a.2", start));
        events.insert(2, recent("b.1", start));
        assert_eq!(events.order, VecDeque::from([1, 2]));
        assert_eq!(events.repeat(1, start).map(|(_, name, _)| name), Some("a.2".into()));
    }
}
