//! Retry timing of the machine steps (SPEC §2): a step that cannot finish yet is retried after 5 s, doubling up to
//! 5 minutes; VMs in a transition are polled every 5 s; a VM blocked by a non-system disk is retried every minute;
//! missing provider or credentials become critical after 10 minutes; a Ready machine resyncs once per sync period.

use std::time::Duration;

/// First retry delay.
pub const INITIAL_BACKOFF: Duration = Duration::from_secs(5);
/// Longest retry delay.
pub const MAX_BACKOFF: Duration = Duration::from_secs(5 * 60);
/// Poll interval while the VM is in a transition (image_locked, powering_up, …).
pub const VM_POLL_INTERVAL: Duration = Duration::from_secs(5);
/// Retry interval while a non-system disk blocks deletion (the documents: "every minute").
pub const NON_SYSTEM_DISK_RETRY: Duration = Duration::from_secs(60);
/// How long ProviderNotFound / CredentialsNotFound may last before they become critical (SPEC §2.4).
pub const CRITICAL_GRACE: Duration = Duration::from_secs(10 * 60);

/// While a machine waits for its Node (a kubelet registers it once the VM has booted and joined: typically within a
/// few minutes of the VM going up), no retry waits longer than this during [`NODE_WAIT_WINDOW`]: a Node is seen at
/// most this long after it registers, where a doubling backoff would have grown to 80 or 160 s while the VM booted.
pub const NODE_WAIT_CEILING: Duration = Duration::from_secs(20);
/// How long (the sum of the nominal waits) retries for a Node stay at most [`NODE_WAIT_CEILING`] apart; then they
/// double again up to [`MAX_BACKOFF`], so a machine whose Node never comes (a failed bootstrap) costs its workload
/// apiserver a read every 5 minutes, not every 20 s.
pub const NODE_WAIT_WINDOW: Duration = Duration::from_secs(10 * 60);

/// A pass that failed because the management cluster's apiserver did not answer (cut, 5xx, or past its deadline) is
/// retried at most this long after for [`APISERVER_RETRY_WINDOW`]: an apiserver restart or a burst of timeouts lasts
/// seconds, and a doubling backoff grown to 20 or 40 s during it kept machines waiting that long after the apiserver
/// was back. The retries stay bounded by the reconcile permits, so the apiserver never sees more of them at once.
pub const APISERVER_RETRY_CEILING: Duration = Duration::from_secs(10);
/// How long (the sum of the nominal waits) retries after apiserver failures stay at most
/// [`APISERVER_RETRY_CEILING`] apart; then they double again up to [`MAX_BACKOFF`], as for any failure. A minute
/// covers a restart; an apiserver down for longer gets the retries of 10,000 machines spread out as before, not one
/// from each every 10 s.
pub const APISERVER_RETRY_WINDOW: Duration = Duration::from_secs(60);

/// A running, set-up VM is looked at by the provider's batched search once per this many poll intervals (1 min at
/// the default 5 s): a status change then wakes its machine within a minute, at one search per 50 VMs.
pub const STEADY_POLL_EVERY: u64 = 12;

/// `period` spread by up to ±10 % (`unit` in [0, 1) picks where), so that machines which became Ready together
/// (or after an operator restart) do not all resync in the same second.
pub fn jittered(period: Duration, unit: f64) -> Duration {
    let factor = 0.9 + 0.2 * unit.clamp(0.0, 1.0);
    period.mul_f64(factor)
}

/// The delay before retry number `attempt` (0 = the first retry): 5 s, 10 s, 20 s, … capped at 5 min. Nominal:
/// what is waited is [`jitter`]ed.
pub fn backoff_delay(attempt: u32) -> Duration {
    INITIAL_BACKOFF
        .checked_mul(2u32.saturating_pow(attempt))
        .map_or(MAX_BACKOFF, |d| d.min(MAX_BACKOFF))
}

/// How far every retry delay is spread around its nominal value: ±20 %.
///
/// Why not "full jitter" (a uniform draw in [0, delay]): it can retry at once, so a failing engine or apiserver
/// would still see bursts, and the documented schedule (5 s, 10 s, … 5 min) would no longer say when the next try
/// comes. ±20 % keeps a floor of 80 % of the nominal delay and is still enough to take apart retries that failed
/// together (an engine outage fails every machine in the same second).
pub const JITTER: f64 = 0.2;

/// `delay` spread by up to ±[`JITTER`] (`unit` in [0, 1) picks where; out-of-range input is clamped).
pub fn jitter(delay: Duration, unit: f64) -> Duration {
    let factor = 1.0 - JITTER + 2.0 * JITTER * unit.clamp(0.0, 1.0);
    delay.mul_f64(factor)
}

/// [`jitter`] with a fresh random draw: what every retry of the runtime waits.
pub fn jittered_retry(delay: Duration) -> Duration {
    jitter(delay, fastrand::f64())
}

/// After an actor's `restarts`-th failure: 1 s doubling to 5 min, jittered so that actors that failed together do not
/// restart together.
pub fn actor_restart_delay(restarts: u32) -> Duration {
    jittered_retry(Duration::from_secs(1u64 << restarts.min(8)).min(Duration::from_secs(300)))
}

/// A doubling retry delay: [`Backoff::next_delay`] hands out the current delay (jittered) and doubles it up to the
/// ceiling; [`Backoff::reset`] starts again from the first delay after a success.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Backoff {
    initial: Duration,
    max: Duration,
    next: Duration,
    /// The nominal delays handed out since the last reset.
    waited: Duration,
}

impl Backoff {
    pub fn new(initial: Duration, max: Duration) -> Backoff {
        Backoff {
            initial,
            max,
            next: initial,
            waited: Duration::ZERO,
        }
    }

    /// The machine steps' schedule: [`INITIAL_BACKOFF`] doubling to [`MAX_BACKOFF`].
    pub fn steps() -> Backoff {
        Backoff::new(INITIAL_BACKOFF, MAX_BACKOFF)
    }

    /// The nominal delay the next retry waits (before jitter).
    pub fn nominal(&self) -> Duration {
        self.next
    }

    /// The delay to wait now, jittered with `unit` (see [`jitter`]); the nominal delay then doubles.
    pub fn next_delay_with(&mut self, unit: f64) -> Duration {
        let nominal = self.next;
        self.waited = self.waited.saturating_add(nominal);
        self.next = nominal.saturating_mul(2).min(self.max);
        jitter(nominal, unit)
    }

    /// As [`Backoff::next_delay_with`], but no nominal delay above `ceiling` until the delays handed out since the
    /// last reset add up to `window`; after that the delay doubles from the ceiling as usual.
    pub fn next_delay_within_with(&mut self, ceiling: Duration, window: Duration, unit: f64) -> Duration {
        if self.waited < window {
            self.next = self.next.min(ceiling);
        }
        self.next_delay_with(unit)
    }

    /// [`Backoff::next_delay_within_with`] with a fresh random draw.
    pub fn next_delay_within(&mut self, ceiling: Duration, window: Duration) -> Duration {
        self.next_delay_within_with(ceiling, window, fastrand::f64())
    }

    /// [`Backoff::next_delay_with`] with a fresh random draw.
    pub fn next_delay(&mut self) -> Duration {
        self.next_delay_with(fastrand::f64())
    }

    pub fn reset(&mut self) {
        self.next = self.initial;
        self.waited = Duration::ZERO;
    }

    /// The nominal delays handed out since the last reset: how long the retries have been going on.
    pub fn waited(&self) -> Duration {
        self.waited
    }

    /// The nominal delay the next [`Backoff::next_delay`] will jitter.
    pub fn upcoming(&self) -> Duration {
        self.next
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_starts_at_five_seconds_and_doubles() {
        let secs: Vec<u64> = (0..6).map(|a| backoff_delay(a).as_secs()).collect();
        assert_eq!(secs, vec![5, 10, 20, 40, 80, 160]);
    }

    #[test]
    fn jitter_stays_within_ten_percent() {
        let period = Duration::from_secs(600);
        assert_eq!(jittered(period, 0.0), Duration::from_secs(540));
        assert_eq!(jittered(period, 0.5), Duration::from_secs(600));
        assert!(jittered(period, 0.999_999) < Duration::from_secs(660));
        // Out-of-range input is clamped rather than trusted.
        assert_eq!(jittered(period, -3.0), Duration::from_secs(540));
        assert_eq!(jittered(period, 7.0), Duration::from_secs(660));
    }

    #[test]
    fn retry_jitter_stays_within_twenty_percent() {
        let delay = Duration::from_secs(10);
        assert_eq!(jitter(delay, 0.0), Duration::from_secs(8));
        assert_eq!(jitter(delay, 0.5), Duration::from_secs(10));
        assert_eq!(jitter(delay, 1.0), Duration::from_secs(12));
        assert_eq!(jitter(delay, -1.0), Duration::from_secs(8));
        assert_eq!(jitter(delay, 2.0), Duration::from_secs(12));
        // The random draws the runtime uses: always inside the bounds.
        for _ in 0..10_000 {
            let waited = jittered_retry(delay);
            assert!(
                (Duration::from_secs(8)..=Duration::from_secs(12)).contains(&waited),
                "{waited:?}"
            );
        }
    }

    #[test]
    fn retry_jitter_is_not_constant() {
        // 200 draws from a 4 s wide range: a constant (or nearly constant) jitter would give at most a handful of
        // distinct values and a narrow spread.
        let draws: Vec<Duration> = (0..200).map(|_| jittered_retry(Duration::from_secs(10))).collect();
        let distinct: std::collections::BTreeSet<_> = draws.iter().collect();
        assert!(distinct.len() > 100, "only {} distinct delays", distinct.len());
        let (min, max) = (draws.iter().min().expect("min"), draws.iter().max().expect("max"));
        assert!(*max - *min > Duration::from_secs(2), "spread {min:?}..{max:?}");
    }

    #[test]
    fn backoff_doubles_the_nominal_delay_and_jitters_each_wait() {
        let mut backoff = Backoff::steps();
        let mut waits = Vec::new();
        for _ in 0..8 {
            let nominal = backoff.nominal();
            let waited = backoff.next_delay();
            assert!(
                waited >= nominal.mul_f64(0.8) && waited <= nominal.mul_f64(1.2),
                "{waited:?} for {nominal:?}"
            );
            waits.push(nominal.as_secs());
        }
        assert_eq!(waits, vec![5, 10, 20, 40, 80, 160, 300, 300]);
        // The ends of the range: the lowest draw waits 80 %, the highest 120 % of the nominal delay.
        let mut backoff = Backoff::steps();
        assert_eq!(backoff.next_delay_with(0.0), Duration::from_secs(4));
        assert_eq!(backoff.next_delay_with(1.0), Duration::from_secs(12));
        backoff.reset();
        assert_eq!(backoff.nominal(), INITIAL_BACKOFF);
    }

    /// The next `n` delays of `backoff` held to `ceiling` for `window`, in whole seconds: the middle draw waits the
    /// nominal delay.
    fn nominal_delays_within(backoff: &mut Backoff, ceiling: Duration, window: Duration, n: usize) -> Vec<u64> {
        (0..n)
            .map(|_| backoff.next_delay_within_with(ceiling, window, 0.5).as_secs())
            .collect()
    }

    #[test]
    fn waiting_for_a_node_stays_at_the_ceiling_for_the_window_then_doubles_again() {
        let mut backoff = Backoff::steps();
        let nominal = nominal_delays_within(&mut backoff, NODE_WAIT_CEILING, NODE_WAIT_WINDOW, 36);
        // 5 + 10 + 20 × 29 = 595 s < 10 min, the next 20 s wait ends the window; then 40, 80, 160, 300.
        assert_eq!(&nominal[..3], &[5, 10, 20]);
        assert!(nominal[3..31].iter().all(|&s| s == 20), "{nominal:?}");
        assert_eq!(&nominal[31..], &[20, 40, 80, 160, 300]);
        // A reset (the Node came, or the machine moved on) opens a new window.
        backoff.reset();
        assert_eq!(
            backoff.next_delay_within_with(NODE_WAIT_CEILING, NODE_WAIT_WINDOW, 0.5),
            INITIAL_BACKOFF
        );
    }

    #[test]
    fn a_backoff_that_grew_elsewhere_is_held_to_the_ceiling_while_waiting_for_a_node() {
        // A machine that backed off on engine errors and then reaches the Node step without a success between.
        let mut backoff = Backoff::steps();
        for _ in 0..4 {
            backoff.next_delay_with(0.5);
        }
        assert_eq!(backoff.nominal(), Duration::from_secs(80));
        assert_eq!(
            backoff.next_delay_within_with(NODE_WAIT_CEILING, NODE_WAIT_WINDOW, 0.5),
            NODE_WAIT_CEILING
        );
    }

    #[test]
    fn retries_after_apiserver_failures_stay_within_ten_seconds_for_a_minute_then_double_again() {
        let nominal = nominal_delays_within(
            &mut Backoff::steps(),
            APISERVER_RETRY_CEILING,
            APISERVER_RETRY_WINDOW,
            10,
        );
        // 5 + 10 × 5 = 55 s < 1 min, the next 10 s wait ends the window; then 20 s doubling to 5 min.
        assert_eq!(nominal, vec![5, 10, 10, 10, 10, 10, 10, 20, 40, 80]);
        // One that grew to 40 s first (say, during an apiserver restart that also cut the machine's engine
        // requests) is held to the ceiling at its next apiserver failure.
        let mut backoff = Backoff::steps();
        for _ in 0..3 {
            backoff.next_delay_with(0.5);
        }
        assert_eq!(
            backoff.next_delay_within_with(APISERVER_RETRY_CEILING, APISERVER_RETRY_WINDOW, 0.5),
            APISERVER_RETRY_CEILING
        );
    }

    #[test]
    fn backoff_is_capped_at_five_minutes() {
        assert_eq!(backoff_delay(6), MAX_BACKOFF);
        assert_eq!(backoff_delay(40), MAX_BACKOFF);
        assert_eq!(backoff_delay(u32::MAX), MAX_BACKOFF);
    }
}
