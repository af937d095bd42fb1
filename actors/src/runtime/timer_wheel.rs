//! One timer for every machine's next pass. A task per timer (`mailbox::cast_after`) costs a tokio task and its timer
//! entry, about 2 KB, and every machine always has one (docs/benchmarks.md, "Where the memory is"): at 10,000
//! machines 20 MiB of sleeping tasks. Here one task keeps the deadlines in order and sends each machine its `Tick`
//! when its deadline comes; a machine's entry is a few dozen bytes.
//!
//! A timer outlives its actor while the machine is dormant: its `Tick` then goes to the supervisor, which wakes the
//! machine (`machine_mail::tell`). Setting a machine's timer replaces the one it had, and cancelling removes it. As
//! with an aborted task, a `Tick` already sent when the replacement arrives stays in the mailbox; the pass it starts
//! decides from what it observes.
//!
//! A timer set for a retry after the management cluster's apiserver did not answer is marked so: when the apiserver
//! answers again after an outage (`kube::pulse`), every marked timer due later is brought forward, spread over a few
//! seconds ([`return_spread`]), instead of each machine waiting out its own backoff.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use ractor::ActorRef;
use tokio::sync::{mpsc, watch};
use tokio::time::Instant;

use crate::metrics::Metrics;
use crate::runtime::keys::ObjectKey;
use crate::runtime::kube::pulse::Return;
use crate::runtime::machine_mail::tell;
use crate::runtime::messages::{MachineMsg, SupervisorMsg};

/// Which timer of the wheel: one per machine, for its life.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TimerId(u64);

/// When a timer fires.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fires {
    AtDeadline,
    /// At its deadline, or sooner when the management cluster's apiserver answers again after an outage: the
    /// machine's retry waits for it.
    AtDeadlineOrApiserverReturn,
}

/// Whom a timer tells, and whether it waits for the apiserver to answer again.
struct Recipient {
    key: ObjectKey,
    actor: Option<ActorRef<MachineMsg>>,
    fires: Fires,
}

enum Command {
    Set {
        id: TimerId,
        at: Instant,
        to: Recipient,
    },
    /// The machine rests: its timer keeps its deadline and goes to the supervisor.
    Rest(TimerId),
    Cancel(TimerId),
}

/// The handle to the wheel's task; the task ends when every handle is dropped.
pub struct TimerWheel {
    commands: mpsc::UnboundedSender<Command>,
    next_id: AtomicU64,
}

impl TimerWheel {
    /// Starts the wheel's task (on the current tokio runtime); `returns` tells it when the apiserver answers again.
    pub fn start(
        metrics: Metrics,
        supervisor: ActorRef<SupervisorMsg>,
        returns: watch::Receiver<Return>,
    ) -> TimerWheel {
        let (commands, received) = mpsc::unbounded_channel();
        tokio::spawn(run(received, metrics, supervisor, returns));
        TimerWheel {
            commands,
            next_id: AtomicU64::new(0),
        }
    }

    /// A new timer id, for one machine.
    pub fn new_id(&self) -> TimerId {
        TimerId(self.next_id.fetch_add(1, Ordering::Relaxed))
    }

    /// Sends the machine `key` a `Tick` at `at` (to `actor`, or through the supervisor once that has stopped), in
    /// place of what timer `id` was set to.
    pub fn set(&self, id: TimerId, at: Instant, fires: Fires, key: &ObjectKey, actor: ActorRef<MachineMsg>) {
        let to = Recipient {
            key: key.clone(),
            actor: Some(actor),
            fires,
        };
        let _ = self.commands.send(Command::Set { id, at, to });
    }

    /// The machine of timer `id` rests (`machine::dormant`): its `Tick` goes to the supervisor, and the wheel lets go
    /// of the stopped actor's reference.
    pub fn rest(&self, id: TimerId) {
        let _ = self.commands.send(Command::Rest(id));
    }

    pub fn cancel(&self, id: TimerId) {
        let _ = self.commands.send(Command::Cancel(id));
    }
}

/// The deadlines in order (the timer's id keeps equal instants apart) and each timer's current deadline, with whom
/// to tell.
struct Deadlines<T> {
    by_time: BTreeMap<(Instant, TimerId), T>,
    by_id: HashMap<TimerId, Instant>,
}

impl<T> Default for Deadlines<T> {
    fn default() -> Self {
        Deadlines {
            by_time: BTreeMap::new(),
            by_id: HashMap::new(),
        }
    }
}

impl<T> Deadlines<T> {
    fn set(&mut self, id: TimerId, at: Instant, to: T) {
        self.cancel(id);
        self.by_time.insert((at, id), to);
        self.by_id.insert(id, at);
    }

    fn get_mut(&mut self, id: TimerId) -> Option<&mut T> {
        let at = *self.by_id.get(&id)?;
        self.by_time.get_mut(&(at, id))
    }

    fn cancel(&mut self, id: TimerId) {
        if let Some(at) = self.by_id.remove(&id) {
            self.by_time.remove(&(at, id));
        }
    }

    fn next(&self) -> Option<Instant> {
        self.by_time.first_key_value().map(|((at, _), _)| *at)
    }

    /// Brings every timer `chosen` picks that is due later than `now + spread` forward to a point within
    /// `spread` of `now` (`unit` gives a number in [0, 1) for each); returns how many moved.
    fn bring_forward(
        &mut self,
        now: Instant,
        spread: Duration,
        chosen: impl Fn(&T) -> bool,
        mut unit: impl FnMut() -> f64,
    ) -> usize {
        let later: Vec<(Instant, TimerId)> = self
            .by_time
            .iter()
            .filter(|((at, _), to)| *at > now + spread && chosen(to))
            .map(|(key, _)| *key)
            .collect();
        for (at, id) in &later {
            if let Some(to) = self.by_time.remove(&(*at, *id)) {
                self.set(*id, now + spread.mul_f64(unit().clamp(0.0, 1.0)), to);
            }
        }
        later.len()
    }

    /// How many timers `chosen` picks.
    fn count(&self, chosen: impl Fn(&T) -> bool) -> usize {
        self.by_time.values().filter(|to| chosen(to)).count()
    }

    /// Removes and returns the timers due at `now`, earliest first.
    fn due(&mut self, now: Instant) -> Vec<T> {
        let mut due = Vec::new();
        while let Some(entry) = self.by_time.first_entry() {
            if entry.key().0 > now {
                break;
            }
            let ((_, id), to) = entry.remove_entry();
            self.by_id.remove(&id);
            due.push(to);
        }
        due
    }
}

/// Retries brought forward at the apiserver's return start at about this many a second: the supervisor wakes resting
/// machines in turns and the passes take reconcile permits, but a retry from every waiting machine at the same instant
/// would still meet an apiserver busy with its watches' lists.
const RETURNS_PER_SECOND: f64 = 500.0;

/// Over how long the retries of `waiting` machines are spread when the apiserver answers again: at least a second,
/// at most the apiserver retry ceiling (a machine waits no longer than that anyway during its first minute).
pub fn return_spread(waiting: usize) -> Duration {
    Duration::from_secs_f64(waiting as f64 / RETURNS_PER_SECOND).clamp(
        Duration::from_secs(1),
        capov_core::policy::backoff::APISERVER_RETRY_CEILING,
    )
}

async fn run(
    mut commands: mpsc::UnboundedReceiver<Command>,
    metrics: Metrics,
    supervisor: ActorRef<SupervisorMsg>,
    mut returns: watch::Receiver<Return>,
) {
    let mut deadlines: Deadlines<Recipient> = Deadlines::default();
    let mut listening = true;
    loop {
        let next = deadlines.next();
        tokio::select! {
            command = commands.recv() => match command {
                None => return,
                Some(Command::Set { id, at, to }) => deadlines.set(id, at, to),
                Some(Command::Rest(id)) => {
                    if let Some(to) = deadlines.get_mut(id) {
                        to.actor = None;
                    }
                }
                Some(Command::Cancel(id)) => deadlines.cancel(id),
            },
            () = sleep_until(next) => {
                for to in deadlines.due(Instant::now()) {
                    tell(&metrics, &supervisor, &to.key, to.actor.as_ref(), MachineMsg::Tick);
                }
            }
            changed = returns.changed(), if listening => match changed {
                Ok(()) => {
                    let back = *returns.borrow_and_update();
                    metrics.apiserver_outages_total.inc();
                    bring_forward_apiserver_retries(&mut deadlines, back);
                }
                // The pulse is gone (the runtime stops): nothing will announce a return.
                Err(_) => listening = false,
            },
        }
    }
}

fn bring_forward_apiserver_retries(deadlines: &mut Deadlines<Recipient>, back: Return) {
    let awaits = |to: &Recipient| to.fires == Fires::AtDeadlineOrApiserverReturn;
    let spread = return_spread(deadlines.count(awaits));
    let moved = deadlines.bring_forward(Instant::now(), spread, awaits, fastrand::f64);
    tracing::info!(
        silent_seconds = back.silent.as_secs(),
        machines = moved,
        within_seconds = spread.as_secs_f64(),
        "the management cluster's apiserver answers again; machines waiting to retry on it go on now"
    );
}

/// Sleeps until `at`, or forever without a deadline.
async fn sleep_until(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn a_timer_fires_once_at_its_latest_deadline_and_a_cancelled_one_never() {
        let start = Instant::now();
        let at = |secs: u64| start + Duration::from_secs(secs);
        let mut deadlines: Deadlines<&str> = Deadlines::default();
        let (a, b, c) = (TimerId(1), TimerId(2), TimerId(3));
        deadlines.set(a, at(10), "a");
        deadlines.set(b, at(5), "b");
        deadlines.set(c, at(7), "c");
        deadlines.set(a, at(3), "a again");
        deadlines.cancel(c);
        assert_eq!(deadlines.next(), Some(at(3)));
        assert_eq!(deadlines.due(at(4)), vec!["a again"]);
        assert_eq!(deadlines.due(at(4)), Vec::<&str>::new(), "fired once");
        assert_eq!(
            deadlines.due(at(100)),
            vec!["b"],
            "c was cancelled, a's first deadline replaced"
        );
        assert_eq!(deadlines.next(), None);
        assert!(deadlines.by_id.is_empty());
    }

    #[test]
    fn a_resting_timer_keeps_its_deadline_and_loses_its_recipient() {
        let start = Instant::now();
        let mut deadlines: Deadlines<Option<&str>> = Deadlines::default();
        deadlines.set(TimerId(1), start + Duration::from_secs(5), Some("actor"));
        if let Some(recipient) = deadlines.get_mut(TimerId(1)) {
            *recipient = None;
        }
        assert!(deadlines.get_mut(TimerId(2)).is_none(), "no such timer");
        assert_eq!(deadlines.next(), Some(start + Duration::from_secs(5)));
        assert_eq!(deadlines.due(start + Duration::from_secs(5)), vec![None]);
    }

    #[test]
    fn a_return_brings_forward_only_the_chosen_timers_due_later_than_its_spread() {
        let start = Instant::now();
        let at = |millis: u64| start + Duration::from_millis(millis);
        let mut deadlines: Deadlines<(&str, bool)> = Deadlines::default();
        deadlines.set(TimerId(1), at(9_000), ("waits for the apiserver", true));
        deadlines.set(TimerId(2), at(9_000), ("waits for the engine", false));
        deadlines.set(TimerId(3), at(500), ("waits for the apiserver, due soon anyway", true));
        deadlines.set(TimerId(4), at(200_000), ("waits for the apiserver, long backoff", true));
        assert_eq!(deadlines.count(|to| to.1), 3);
        let spread = Duration::from_secs(1);
        let mut units = [0.5, 0.25].into_iter();
        let moved = deadlines.bring_forward(start, spread, |to| to.1, || units.next().unwrap_or(0.0));
        assert_eq!(moved, 2);
        assert_eq!(
            deadlines.due(at(1_000)),
            vec![
                ("waits for the apiserver, long backoff", true),
                ("waits for the apiserver", true),
                ("waits for the apiserver, due soon anyway", true),
            ],
            "earliest first: moved to 250 and 500 ms, the one due at 500 ms kept (equal instants in id order)"
        );
        assert_eq!(deadlines.due(at(100_000)), vec![("waits for the engine", false)]);
        assert_eq!(deadlines.next(), None);
        assert!(deadlines.by_id.is_empty());
    }

    #[test]
    fn the_spread_grows_with_the_machines_waiting_between_a_second_and_the_retry_ceiling() {
        assert_eq!(return_spread(0), Duration::from_secs(1));
        assert_eq!(return_spread(300), Duration::from_secs(1));
        assert_eq!(return_spread(2_500), Duration::from_secs(5));
        assert_eq!(return_spread(50_000), Duration::from_secs(10));
    }

    #[test]
    fn timers_due_at_the_same_instant_all_fire() {
        let now = Instant::now();
        let mut deadlines: Deadlines<u64> = Deadlines::default();
        for id in 0..100 {
            deadlines.set(TimerId(id), now, id);
        }
        assert_eq!(deadlines.due(now).len(), 100);
    }
}
