//! The hook the operator uses to record metrics for every HTTP request.

use std::time::Duration;

/// What became of one HTTP request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// The engine answered with this status code.
    Status(u16),
    /// No answer; the [`crate::Error::label`] of the failure.
    Failed(&'static str),
}

/// One HTTP request, reported after it finished.
#[derive(Debug, Clone)]
pub struct RequestEvent<'a> {
    /// `GET`, `POST`, `PUT`, `DELETE`.
    pub method: &'a str,
    /// Resource kind: `api`, `vms`, `disks`, `diskattachments`, `nics`, `sso`, …
    pub resource: &'a str,
    pub outcome: Outcome,
    /// Time on the wire, excluding the rate-limit wait.
    pub latency: Duration,
    /// Time spent waiting for the rate limiter before sending.
    pub rate_limit_wait: Duration,
    pub correlation_id: Option<&'a str>,
    /// The tenant whose turn at the rate limit the request waited for ([`crate::PROVIDER_TENANT`]: the provider's
    /// own work).
    pub tenant: &'a str,
}

/// Receives one [`RequestEvent`] per HTTP request. Called inline: keep it cheap.
pub trait RequestObserver: Send + Sync {
    fn on_request(&self, event: &RequestEvent<'_>);
}

impl<F> RequestObserver for F
where
    F: Fn(&RequestEvent<'_>) + Send + Sync,
{
    fn on_request(&self, event: &RequestEvent<'_>) {
        self(event)
    }
}
