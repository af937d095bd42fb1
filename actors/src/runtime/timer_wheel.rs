//! One timer for every machine's next pass. A task per timer (`mailbox::cast_after`) costs a tokio task and its timer
//! entry, about 2 KB, and every machine always has one (docs/benchmarks.md, "Where the memory is"): at 10,000
//! machines 20 MiB of sleeping tasks. Here one task keeps the deadlines in order and sends each machine its `Tick`
//! when its deadline comes; a machine's entry is a few dozen bytes.
//!
//! A timer outlives its actor while the machine is dormant: its `Tick` then goes to the supervisor, which wakes the
//! machine (`machine_mail::tell`). Setting a machine's timer replaces the one it had, and cancelling removes it. As
//! with an aborted task, a `Tick` already sent when the replacement arrives stays in the mailbox; the pass it starts
//! decides from what it observes.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};

use ractor::ActorRef;
use tokio::sync::mpsc;
use tokio::time::Instant;

use crate::metrics::Metrics;
use crate::runtime::keys::ObjectKey;
use crate::runtime::machine_mail::tell;
use crate::runtime::messages::{MachineMsg, SupervisorMsg};

/// Which timer of the wheel: one per machine, for its life.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TimerId(u64);

enum Command {
    Set {
        id: TimerId,
        at: Instant,
        to: (ObjectKey, Option<ActorRef<MachineMsg>>),
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
    /// Starts the wheel's task (on the current tokio runtime).
    pub fn start(metrics: Metrics, supervisor: ActorRef<SupervisorMsg>) -> TimerWheel {
        let (commands, received) = mpsc::unbounded_channel();
        tokio::spawn(run(received, metrics, supervisor));
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
    pub fn set(&self, id: TimerId, at: Instant, key: &ObjectKey, actor: ActorRef<MachineMsg>) {
        let to = (key.clone(), Some(actor));
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

async fn run(mut commands: mpsc::UnboundedReceiver<Command>, metrics: Metrics, supervisor: ActorRef<SupervisorMsg>) {
    let mut deadlines: Deadlines<(ObjectKey, Option<ActorRef<MachineMsg>>)> = Deadlines::default();
    loop {
        let next = deadlines.next();
        tokio::select! {
            command = commands.recv() => match command {
                None => return,
                Some(Command::Set { id, at, to }) => deadlines.set(id, at, to),
                Some(Command::Rest(id)) => {
                    if let Some((_, actor)) = deadlines.get_mut(id) {
                        *actor = None;
                    }
                }
                Some(Command::Cancel(id)) => deadlines.cancel(id),
            },
            () = sleep_until(next) => {
                for (key, actor) in deadlines.due(Instant::now()) {
                    tell(&metrics, &supervisor, &key, actor.as_ref(), MachineMsg::Tick);
                }
            }
        }
    }
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
    fn timers_due_at_the_same_instant_all_fire() {
        let now = Instant::now();
        let mut deadlines: Deadlines<u64> = Deadlines::default();
        for id in 0..100 {
            deadlines.set(TimerId(id), now, id);
        }
        assert_eq!(deadlines.due(now).len(), 100);
    }
}
