//! When the status writer sends its failed writes again: [`RETRY_AFTER`] after the first failure, doubling up to
//! [`MAX_RETRY_AFTER`] while the apiserver keeps failing them, and [`RETRY_AFTER`] again as soon as a write goes
//! through. A minute's delay grown during an apiserver restart had kept every write that failed later (one held
//! past its deadline, say) waiting a minute, and its machine's Ready with it, as long as any failed write was
//! waiting. Writes the apiserver refused (403, 422, …) fail the same way on every try: while one waits, a write that
//! goes through changes nothing, and the delay keeps doubling.

use std::time::{Duration, Instant};

use capov_core::policy::backoff::Backoff;

/// First retry of a failed write.
pub const RETRY_AFTER: Duration = Duration::from_secs(2);
/// Longest wait between retries.
pub const MAX_RETRY_AFTER: Duration = Duration::from_secs(60);

/// The retry schedule of the failed writes: one timer for all of them.
pub struct RetryTimer {
    backoff: Backoff,
    /// When the armed retry fires; None: none is armed.
    due: Option<Instant>,
    /// A failed write waiting was refused, not cut, timed out, overloaded or in conflict.
    refused: bool,
}

impl Default for RetryTimer {
    fn default() -> Self {
        RetryTimer {
            backoff: Backoff::new(RETRY_AFTER, MAX_RETRY_AFTER),
            due: None,
            refused: false,
        }
    }
}

impl RetryTimer {
    /// A write failed; `transient` as [`crate::runtime::kube::clients::is_transient`] tells.
    pub fn failed(&mut self, transient: bool) {
        self.refused |= !transient;
    }

    /// After a write's outcome (`went_through`), with failed writes waiting or not (`failed_waiting`): the delay to
    /// arm a retry after, replacing the one armed if any; None: the armed one stands, or none is needed. `unit`
    /// places the jitter.
    pub fn after_write(
        &mut self,
        went_through: bool,
        failed_waiting: bool,
        now: Instant,
        unit: f64,
    ) -> Option<Duration> {
        if !failed_waiting {
            self.backoff.reset();
            self.refused = false;
            return None;
        }
        // The apiserver answers again: what failed while it did not is sent again soon.
        let recovered = went_through && !self.refused;
        if recovered {
            self.backoff.reset();
        }
        let arm = match self.due {
            None => true,
            Some(due) => recovered && due > now + self.backoff.nominal() * 2,
        };
        if !arm {
            return None;
        }
        let delay = self.backoff.next_delay_with(unit);
        self.due = Some(now + delay);
        Some(delay)
    }

    /// The armed retry fired: the failed writes are queued again.
    pub fn fired(&mut self) {
        self.due = None;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIDDLE: f64 = 0.5;

    /// `timer` after `n` rounds in which every write failed: each round's retry fired and failed again.
    fn failing_rounds(timer: &mut RetryTimer, now: Instant, n: usize) -> Vec<Duration> {
        (0..n)
            .map(|_| {
                timer.failed(true);
                let delay = timer.after_write(false, true, now, MIDDLE).expect("a retry is armed");
                timer.fired();
                delay
            })
            .collect()
    }

    #[test]
    fn retries_double_while_every_write_fails() {
        let mut timer = RetryTimer::default();
        let delays = failing_rounds(&mut timer, Instant::now(), 7);
        let secs: Vec<u64> = delays.iter().map(Duration::as_secs).collect();
        assert_eq!(secs, vec![2, 4, 8, 16, 32, 60, 60]);
    }

    #[test]
    fn a_write_that_goes_through_brings_the_retry_of_transient_failures_forward() {
        let mut timer = RetryTimer::default();
        let now = Instant::now();
        failing_rounds(&mut timer, now, 5);
        // The apiserver is back; one write fails (a 504) and waits, armed after the grown delay.
        timer.failed(true);
        let grown = timer.after_write(false, true, now, MIDDLE);
        assert_eq!(grown, Some(Duration::from_secs(60)));
        // Another write goes through: the retry is armed again, after the first delay.
        assert_eq!(timer.after_write(true, true, now, MIDDLE), Some(RETRY_AFTER));
        // More writes go through: the retry armed two seconds out stands.
        assert_eq!(timer.after_write(true, true, now, MIDDLE), None);
        // Nothing failed waits any more: the next failure starts from the first delay.
        assert_eq!(timer.after_write(true, false, now, MIDDLE), None);
        timer.fired();
        timer.failed(true);
        assert_eq!(timer.after_write(false, true, now, MIDDLE), Some(RETRY_AFTER));
    }

    #[test]
    fn a_refused_write_keeps_its_doubling_retries_while_others_go_through() {
        let mut timer = RetryTimer::default();
        let now = Instant::now();
        let mut delays = Vec::new();
        for _ in 0..4 {
            timer.failed(false);
            delays.push(timer.after_write(false, true, now, MIDDLE).expect("armed"));
            // Other objects' writes go through meanwhile: the armed retry stands.
            assert_eq!(timer.after_write(true, true, now, MIDDLE), None);
            timer.fired();
        }
        let secs: Vec<u64> = delays.iter().map(Duration::as_secs).collect();
        assert_eq!(secs, vec![2, 4, 8, 16]);
    }
}
