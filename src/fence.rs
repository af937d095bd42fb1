//! The leader's fence: engine writes are allowed only for [`RENEW_DEADLINE`] after the last renewal of the
//! leader-election Lease that the API server accepted. The Lease stays valid for
//! [`crate::lease_timing::LEASE_DURATION`] after that renewal, so a leader cut off from the API server stops writing
//! to the engine at least [`FENCE_MARGIN`] before another replica may take the Lease: two leaders never write to one
//! engine at once, however long stopping the old one's actors takes.
//!
//! The renewal time is taken when the renewal request is sent, which is not earlier than the `renewTime` the
//! replica writes into the Lease (kube-lease-manager reads its clock before sending). The margin covers what the
//! fence cannot see: clock skew between replicas, and a write sent just before the fence closed still travelling to
//! the engine.

use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::time::Instant;
use tower::{BoxError, Layer, Service};

pub use crate::lease_timing::{FENCE_MARGIN, RENEW_DEADLINE};

/// Open while the Lease was renewed within [`RENEW_DEADLINE`]; closed before the first renewal.
#[derive(Debug)]
pub struct LeaseFence {
    open_until: Mutex<Option<Instant>>,
    deadline: Duration,
}

impl Default for LeaseFence {
    fn default() -> Self {
        Self::new(RENEW_DEADLINE)
    }
}

impl LeaseFence {
    pub fn new(deadline: Duration) -> Self {
        LeaseFence {
            open_until: Mutex::new(None),
            deadline,
        }
    }

    /// The API server accepted a Lease write sent at `sent_at`.
    pub fn renewed(&self, sent_at: Instant) {
        let until = sent_at + self.deadline;
        let mut open_until = self.open_until.lock().unwrap_or_else(|e| e.into_inner());
        if open_until.is_none_or(|current| current < until) {
            *open_until = Some(until);
        }
    }

    /// Leadership ended: no writes until the next renewal.
    pub fn close(&self) {
        *self.open_until.lock().unwrap_or_else(|e| e.into_inner()) = None;
    }

    fn open_until(&self) -> Option<Instant> {
        *self.open_until.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub fn is_open(&self) -> bool {
        self.open_until().is_some_and(|until| Instant::now() < until)
    }

    /// Returns once the fence is closed (at once if it is).
    pub async fn closed(&self) {
        while let Some(until) = self.open_until().filter(|until| Instant::now() < *until) {
            tokio::time::sleep_until(until).await;
        }
    }
}

impl capov_ovirt::WriteGate for LeaseFence {
    fn check(&self) -> Result<(), String> {
        if self.is_open() {
            return Ok(());
        }
        Err(format!(
            "this replica's leader-election Lease was not renewed within {}s; engine writes stop until it is",
            self.deadline.as_secs()
        ))
    }
}

/// Opens the fence on every Lease write the API server accepts (a Lease client's layer).
#[derive(Clone)]
pub struct RenewalLayer(pub Arc<LeaseFence>);

impl<S> Layer<S> for RenewalLayer {
    type Service = Renewals<S>;

    fn layer(&self, inner: S) -> Renewals<S> {
        Renewals {
            inner,
            fence: self.0.clone(),
        }
    }
}

#[derive(Clone)]
pub struct Renewals<S> {
    inner: S,
    fence: Arc<LeaseFence>,
}

/// A write to a Lease: what kube-lease-manager sends to take or renew one.
fn is_lease_write<B>(request: &http::Request<B>) -> bool {
    let write = matches!(
        *request.method(),
        http::Method::PUT | http::Method::PATCH | http::Method::POST
    );
    write && request.uri().path().contains("/apis/coordination.k8s.io/v1/")
}

impl<S, Req, Res> Service<http::Request<Req>> for Renewals<S>
where
    S: Service<http::Request<Req>, Response = http::Response<Res>>,
    S::Error: Into<BoxError>,
    S::Future: Send + 'static,
{
    type Response = http::Response<Res>;
    type Error = BoxError;
    type Future = Pin<Box<dyn Future<Output = Result<http::Response<Res>, BoxError>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        self.inner.poll_ready(cx).map_err(Into::into)
    }

    fn call(&mut self, request: http::Request<Req>) -> Self::Future {
        let renewal = is_lease_write(&request).then(|| (self.fence.clone(), Instant::now()));
        let answer = self.inner.call(request);
        Box::pin(async move {
            let response = answer.await.map_err(Into::into)?;
            if let Some((fence, sent_at)) = renewal
                && response.status().is_success()
            {
                fence.renewed(sent_at);
            }
            Ok(response)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use capov_ovirt::WriteGate;

    #[tokio::test(start_paused = true)]
    async fn closed_until_renewed_open_for_the_deadline_after_the_sending() {
        let fence = LeaseFence::new(Duration::from_secs(10));
        assert!(fence.check().is_err(), "closed before any renewal");
        let sent_at = Instant::now();
        tokio::time::advance(Duration::from_secs(2)).await;
        fence.renewed(sent_at);
        assert!(fence.check().is_ok());
        tokio::time::advance(Duration::from_millis(7_900)).await;
        assert!(fence.is_open(), "9.9 s after the sending");
        tokio::time::advance(Duration::from_millis(100)).await;
        let refused = fence.check().expect_err("10 s after the sending");
        assert!(refused.contains("not renewed within 10s"), "{refused}");
    }

    #[tokio::test(start_paused = true)]
    async fn an_older_renewal_answered_late_does_not_shorten_or_extend_wrongly() {
        let fence = LeaseFence::new(Duration::from_secs(10));
        let early = Instant::now();
        tokio::time::advance(Duration::from_secs(5)).await;
        fence.renewed(Instant::now());
        fence.renewed(early);
        tokio::time::advance(Duration::from_secs(9)).await;
        assert!(fence.is_open(), "the later renewal counts");
        fence.close();
        assert!(!fence.is_open());
    }

    #[tokio::test(start_paused = true)]
    async fn closed_returns_when_renewals_stop() {
        let fence = LeaseFence::new(Duration::from_secs(10));
        fence.renewed(Instant::now());
        let started = Instant::now();
        tokio::time::advance(Duration::from_secs(4)).await;
        fence.renewed(Instant::now());
        fence.closed().await;
        assert_eq!(started.elapsed(), Duration::from_secs(14));
    }

    #[test]
    fn only_writes_to_leases_count_as_renewals() {
        let request = |method: http::Method, path: &str| {
            http::Request::builder()
                .method(method)
                .uri(path)
                .body(())
                .expect("request")
        };
        let lease = "/apis/coordination.k8s.io/v1/namespaces/capov-system/leases/capov-leader";
        assert!(is_lease_write(&request(http::Method::PATCH, lease)));
        assert!(is_lease_write(&request(http::Method::PUT, lease)));
        assert!(!is_lease_write(&request(http::Method::GET, lease)));
        assert!(!is_lease_write(&request(
            http::Method::PATCH,
            "/apis/infrastructure.cluster.x-k8s.io/v1beta1/ovirtmachines/x"
        )));
    }
}
