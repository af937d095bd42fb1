//! The time the runtime writes into conditions and statuses.

/// Now, at the one-second precision Kubernetes stores, so a condition read back equals the one written.
pub fn now() -> jiff::Timestamp {
    jiff::Timestamp::from_second(jiff::Timestamp::now().as_second()).unwrap_or_else(|_| jiff::Timestamp::now())
}
