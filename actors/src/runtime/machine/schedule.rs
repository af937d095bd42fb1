//! What follows a pass: which VM the provider's batched poll watches for the machine, and when the next pass runs.

use std::time::Duration;

use ractor::ActorRef;

use super::state::MachineState;
use crate::runtime::mailbox;
use crate::runtime::messages::{Cadence, MachineMsg, ProviderMsg, VmWatch};
use crate::runtime::timer_wheel::Fires;
use capov_core::machine_steps::Requeue;
use capov_core::policy::backoff::{
    APISERVER_RETRY_CEILING, APISERVER_RETRY_WINDOW, Backoff, NODE_WAIT_CEILING, NODE_WAIT_WINDOW,
};
use capov_core::trust::identity::parse_provider_id;

/// What a pass asks for next.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Next {
    /// Nothing to do until something changes (a watch event, a provider message) or the sync period passes.
    Idle,
    /// Retry after a failure: backoff 5 s doubling to 5 min.
    Backoff,
    /// Retry after a request to the management cluster's apiserver was cut, timed out or met an overloaded
    /// apiserver: the backoff, held at 10 s for its first minute ([`APISERVER_RETRY_CEILING`]).
    RetryApiserver,
    /// Look for the VM's Node again: the backoff, held at 20 s for its first 10 minutes
    /// ([`NODE_WAIT_CEILING`]).
    AwaitNode,
    /// Check again after this long.
    After(Duration),
    /// Go on at once in a new pass (after waiting for a permit), from where this one stopped: what it saw of the VM
    /// and the VM's watch stay as they are.
    Resume,
    /// The provider's batched poll hands over the VM when it changes: each poll while the VM is in a transition,
    /// every minute once the machine is Ready (which then resyncs only once per sync period, from what it holds).
    WatchVm(VmWatch),
    /// The provider's next batched search hands over the VM, which this machine has not seen yet (its first pass
    /// after a restart); the timer (the deadline set at the first ask, two steady rounds) only guards against no
    /// search answering: the search answers at its next poll, and a failed search is retried at the poll after.
    AwaitSearch(VmWatch),
}

impl Next {
    /// The retry after a failure: soon when it was the management cluster's apiserver that did not answer
    /// ([`Next::RetryApiserver`]), otherwise the doubling backoff.
    pub fn after_failure(apiserver: bool) -> Next {
        match apiserver {
            true => Next::RetryApiserver,
            false => Next::Backoff,
        }
    }

    /// Whether the pass ended in a failure.
    fn is_failure(&self) -> bool {
        matches!(self, Next::Backoff | Next::RetryApiserver)
    }

    /// Whether the next pass waits out the machine's backoff: after a failure, or while it looks for its Node.
    fn waits_out_backoff(&self) -> bool {
        self.is_failure() || *self == Next::AwaitNode
    }
}

/// What an action's `Requeue` means for this machine: a wait for the VM becomes a watch of it, when its id is known.
pub fn to_next(state: &mut MachineState, requeue: Requeue, vm_id: Option<String>) -> Next {
    state.deadline = match requeue {
        Requeue::PollVmWithin(deadline) => Some(deadline),
        _ => None,
    };
    let state = &*state;
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
        Requeue::AwaitNode => Next::AwaitNode,
        Requeue::After(delay) => Next::After(delay),
        Requeue::PollVm => watch(Cadence::EveryPoll, Next::After(state.shared.settings.poll_interval)),
        Requeue::Steady => watch(Cadence::Steady, Next::Idle),
        Requeue::PollVmWithin(deadline) => watch(
            Cadence::EveryPoll,
            Next::After(deadline.min(state.shared.settings.poll_interval)),
        ),
    }
}

/// Tells the provider which VM to watch for this machine and sets the timer of the next pass.
pub fn schedule(me: &ActorRef<MachineMsg>, state: &mut MachineState, next: Next) {
    let watched = vm_to_watch(state, &next);
    update_vm_watch(state, &next, watched);
    let delay = delay_until_next_pass(state, &next);
    state.restful = is_restful(&next, delay);
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
    if !next.waits_out_backoff() {
        state.backoff.reset();
    }
    state.last_pass_failed = next.is_failure();
    let at = tokio::time::Instant::now() + delay;
    let fires = match next {
        Next::RetryApiserver => Fires::AtDeadlineOrApiserverReturn,
        _ => Fires::AtDeadline,
    };
    state.shared.timers.set(state.timer, at, fires, &state.key, me.clone());
}

/// Whether the machine may rest (`dormant`) until its next pass: unless that pass is due at once. Its timer and
/// its mail wake it (through the supervisor); meanwhile an actor (about 7 KB) would wait for nothing. A machine
/// waiting for its VM to boot, for its Node, or out a backoff rests as a Ready one does.
fn is_restful(next: &Next, delay: Duration) -> bool {
    *next != Next::Resume && delay >= MIN_REST
}

/// A pass due sooner runs in the live actor: starting an actor again costs more than keeping it that long.
const MIN_REST: Duration = Duration::from_secs(1);

/// The VM the provider's poll should watch for the machine until its next pass; None: none.
fn vm_to_watch(state: &MachineState, next: &Next) -> Option<VmWatch> {
    match next {
        Next::WatchVm(watch) | Next::AwaitSearch(watch) => Some(watch.clone()),
        Next::Resume => state.watched_vm.clone(),
        // A pass that failed (an engine hiccup) keeps its VM watched: the provider's batched poll wakes the machine
        // as soon as the VM changes, instead of the machine waiting out a backoff that grew during the hiccup. A
        // pass that waits with backoff for something outside the engine (the Node, an address) has its VM watched
        // too, so that its retries decide from what they hold instead of reading the VM each time: at each poll
        // while the retries come faster than the steady search, then with the steady search.
        Next::Backoff | Next::RetryApiserver | Next::AwaitNode => {
            let steady_every =
                state.shared.settings.poll_interval * capov_core::policy::backoff::STEADY_POLL_EVERY as u32;
            let vm_id = (state.watched_vm.as_ref().map(|w| w.vm_id.clone()))
                .or_else(|| state.vm_snapshot.as_ref().map(|vm| vm.id.clone()));
            // Waiting for a Node retries every 20 s for 10 minutes: its VM goes to the steady search after the
            // first minute of waiting, as a doubling backoff's would, instead of staying in every poll.
            let fast = match next {
                Next::AwaitNode => state.backoff.waited() < steady_every,
                _ => state.backoff.upcoming() < steady_every,
            };
            vm_id.map(|vm_id| VmWatch {
                vm_id,
                cadence: if fast { Cadence::EveryPoll } else { Cadence::Steady },
            })
        }
        _ => None,
    }
}

/// Registers `watched` with the provider when it changed (or the pass backs off), and forgets what was seen of a VM
/// that is no longer watched.
fn update_vm_watch(state: &mut MachineState, next: &Next, watched: Option<VmWatch>) {
    // A backoff re-registers the watch with the VM status this pass saw: a change the machine already knows of must
    // not cut the backoff short (the hot-loop guard's backoff included), only a change after it.
    let refresh = next.waits_out_backoff() && watched.is_some();
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
    if watched.is_none() && *next != Next::Resume {
        state.vm_snapshot = None;
    }
    state.watched_vm = watched;
}

fn delay_until_next_pass(state: &mut MachineState, next: &Next) -> Duration {
    match next {
        // For a Ready machine the poll answers a status change; this resync refreshes the addresses.
        Next::Idle
        | Next::WatchVm(VmWatch {
            cadence: Cadence::Steady,
            ..
        }) => capov_core::policy::backoff::jittered(state.shared.settings.sync_period, fastrand::f64()),
        Next::Backoff | Next::RetryApiserver | Next::AwaitNode => retry_delay(&mut state.backoff, next),
        Next::After(delay) => *delay,
        Next::Resume => Duration::ZERO,
        // The deadline set at the machine's first ask; a pass at or after it reads the VM.
        Next::AwaitSearch(_) => state.vm_search_until.map_or(Duration::ZERO, |until| {
            until.saturating_duration_since(std::time::Instant::now())
        }),
        Next::WatchVm(VmWatch {
            cadence: Cadence::EveryPoll,
            vm_id,
        }) => {
            let guard = transition_guard(state, vm_id);
            state.deadline.take().map_or(guard, |deadline| guard.min(deadline))
        }
    }
}

/// The wait before a retry: the doubling backoff, held at a ceiling for a while when the retry waits for the
/// management cluster's apiserver or for a Node, both of which usually come back within seconds.
fn retry_delay(backoff: &mut Backoff, next: &Next) -> Duration {
    match next {
        Next::RetryApiserver => backoff.next_delay_within(APISERVER_RETRY_CEILING, APISERVER_RETRY_WINDOW),
        Next::AwaitNode => backoff.next_delay_within(NODE_WAIT_CEILING, NODE_WAIT_WINDOW),
        _ => backoff.next_delay(),
    }
}

/// The poll answers; this timer only guards against a lost answer. A VM `image_locked` for long (a clone's disk copy
/// takes minutes) must not cost a full pass every 30 s: while neither the VM nor its status changes, each guard waits
/// twice as long as the one before, up to 5 minutes. The end of the copy changes the status, which the poll reports
/// at once. Other waits keep 30 s: a disk job, for one, ends without the VM's status changing, so only this timer
/// notices it.
fn transition_guard(state: &mut MachineState, vm_id: &str) -> Duration {
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
    guard_delay(state.shared.settings.poll_interval, state.quiet_guards)
}

/// The guard timer of a machine whose VM is in a transition: 6 poll intervals, doubled for each guard in a row set
/// with nothing changed, at most [`capov_core::policy::backoff::MAX_BACKOFF`].
fn guard_delay(poll_interval: Duration, quiet_guards: u8) -> Duration {
    let first = poll_interval * 6;
    first
        .checked_mul(1u32 << quiet_guards.min(16))
        .unwrap_or(capov_core::policy::backoff::MAX_BACKOFF)
        .min(capov_core::policy::backoff::MAX_BACKOFF.max(first))
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

    #[test]
    fn a_retry_for_the_apiserver_waits_at_most_its_ceiling_however_far_the_backoff_grew() {
        // Three failed passes in a row (an apiserver restart): 5, 10 and 20 s.
        let mut backoff = Backoff::steps();
        for _ in 0..3 {
            retry_delay(&mut backoff, &Next::Backoff);
        }
        let mut otherwise = backoff.clone();
        let retry = retry_delay(&mut backoff, &Next::RetryApiserver);
        assert!(retry <= APISERVER_RETRY_CEILING.mul_f64(1.2), "{retry:?}");
        // Any other failure waits 40 s (± 20 %) next.
        let other = retry_delay(&mut otherwise, &Next::Backoff);
        assert!(other >= Duration::from_secs(32), "{other:?}");
    }
}
