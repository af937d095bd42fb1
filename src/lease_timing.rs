//! The leader-election Lease's timings in one place: the election ([`crate::leader`]) and the fence that stops
//! engine writes before the Lease may pass to another replica ([`crate::fence`]) hold only together.

use std::time::Duration;

/// How long a Lease stays valid after its last renewal; a standby takes over a SIGKILLed leader after this long
/// (controller-runtime's default as well).
pub const LEASE_DURATION: Duration = Duration::from_secs(15);
/// How often the leader renews. The 10 s left after a failed renewal are the time it has to stop its work before
/// anyone else may take the Lease.
pub const RENEW_INTERVAL: Duration = Duration::from_secs(5);
/// How often a standby looks whether the Lease was released (controller-runtime's retry period).
pub const RETRY_PERIOD: Duration = Duration::from_secs(2);
/// How long after an accepted renewal engine writes stay allowed.
pub const RENEW_DEADLINE: Duration = Duration::from_secs(10);
/// What is left of the Lease when the fence closes.
pub const FENCE_MARGIN: Duration = LEASE_DURATION.saturating_sub(RENEW_DEADLINE);

// By construction: the fence closes well inside the Lease.
const _: () = assert!(RENEW_DEADLINE.as_secs() + 5 <= LEASE_DURATION.as_secs());

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_fence_closes_at_least_five_seconds_before_the_lease_expires() {
        assert!(FENCE_MARGIN >= Duration::from_secs(5), "{FENCE_MARGIN:?}");
    }
}
