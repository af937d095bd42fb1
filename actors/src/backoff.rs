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

/// A running, set-up VM is looked at by the provider's batched search once per this many poll intervals (1 min at
/// the default 5 s): a status change then wakes its machine within a minute, at one search per 50 VMs.
pub const STEADY_POLL_EVERY: u64 = 12;

/// `period` spread by up to ±10 % (`unit` in [0, 1) picks where), so that machines which became Ready together
/// (or after an operator restart) do not all resync in the same second.
pub fn jittered(period: Duration, unit: f64) -> Duration {
    let factor = 0.9 + 0.2 * unit.clamp(0.0, 1.0);
    period.mul_f64(factor)
}

/// The delay before retry number `attempt` (0 = the first retry): 5 s, 10 s, 20 s, … capped at 5 min.
pub fn backoff_delay(attempt: u32) -> Duration {
    INITIAL_BACKOFF
        .checked_mul(2u32.saturating_pow(attempt))
        .map_or(MAX_BACKOFF, |d| d.min(MAX_BACKOFF))
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
    fn backoff_is_capped_at_five_minutes() {
        assert_eq!(backoff_delay(6), MAX_BACKOFF);
        assert_eq!(backoff_delay(40), MAX_BACKOFF);
        assert_eq!(backoff_delay(u32::MAX), MAX_BACKOFF);
    }
}
