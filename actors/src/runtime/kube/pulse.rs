//! Whether the management cluster's apiserver answers at all. A machine whose pass failed because it did not answer
//! retries after its backoff (at most 10 s for a minute, then doubling to 5 minutes); after an outage (the apiserver
//! restarted or rolled out, the network cut) the machines would come back one by one over that whole time, and a
//! batch waits for the last of them. The pulse notices when the apiserver answers again, and the timer wheel brings
//! the retries of the machines that wait for it forward, spread out (`timer_wheel`).
//!
//! Only silence counts: requests that got no HTTP answer (a refused or cut connection, a timeout) or a gateway's
//! 502, 503 or 504 (a load balancer with no apiserver behind it), for [`OUTAGE_MIN`] with no other answer in between.
//! An apiserver that answers 500 or 429 is overloaded, not gone, and so is one that answers some requests while it
//! fails others: its callers keep their backoff. While the apiserver is silent, [`probe_while_silent`] asks it for its
//! version now and then, so that its return is noticed even when nothing else is asking.

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::sync::watch;
use tokio::time::Instant;
use tower::{BoxError, Layer, Service};

/// Silence this long, with no answer in between, is an outage.
pub const OUTAGE_MIN: Duration = Duration::from_secs(3);
/// How often, during an outage, the prober asks the apiserver for its version (± 20 %).
pub const PROBE_EVERY: Duration = Duration::from_secs(1);
/// How long a probe waits for its answer.
const PROBE_TIMEOUT: Duration = Duration::from_secs(5);
/// The least time between two announced returns. A return within twice the spacing of the last one doubles it, up
/// to [`RETURN_SPACING_MAX`]: an apiserver that comes and goes must not have every waiting machine retry at each
/// return, more often than their backoff would.
pub const RETURN_SPACING_MIN: Duration = Duration::from_secs(10);
pub const RETURN_SPACING_MAX: Duration = Duration::from_secs(5 * 60);

/// The apiserver answered again after an outage.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Return {
    /// Returns announced so far (the receiver's change marker).
    pub count: u64,
    /// How long it had been silent.
    pub silent: Duration,
}

/// What the requests' outcomes say of the apiserver (pure: the caller gives the time).
#[derive(Debug)]
pub struct OutageWatch {
    /// The first request that got no answer since the last answer.
    silent_since: Option<Instant>,
    last_return: Option<Instant>,
    spacing: Duration,
}

impl Default for OutageWatch {
    fn default() -> Self {
        OutageWatch {
            silent_since: None,
            last_return: None,
            spacing: RETURN_SPACING_MIN,
        }
    }
}

impl OutageWatch {
    /// A request got no answer.
    pub fn failed(&mut self, now: Instant) {
        self.silent_since.get_or_insert(now);
    }

    /// Whether the apiserver has been silent for an outage's length.
    pub fn is_silent(&self, now: Instant) -> bool {
        self.silent_since
            .is_some_and(|since| now.saturating_duration_since(since) >= OUTAGE_MIN)
    }

    /// A request got an answer (any HTTP status): how long the apiserver had been silent, when that was an outage
    /// whose end is to be announced.
    pub fn answered(&mut self, now: Instant) -> Option<Duration> {
        let since = self.silent_since.take()?;
        let silent = now.saturating_duration_since(since);
        if silent < OUTAGE_MIN {
            return None;
        }
        if let Some(last) = self.last_return {
            let since_last = now.saturating_duration_since(last);
            if since_last < self.spacing {
                return None;
            }
            // A return within twice the spacing follows the last one; after a longer calm the spacing starts over.
            self.spacing = match since_last < self.spacing * 2 {
                true => (self.spacing * 2).min(RETURN_SPACING_MAX),
                false => RETURN_SPACING_MIN,
            };
        }
        self.last_return = Some(now);
        Some(silent)
    }
}

/// The management clients' shared view of the apiserver: their [`PulseLayer`] feeds it, the timer wheel listens
/// for its returns.
#[derive(Clone)]
pub struct ApiserverPulse(Arc<PulseInner>);

struct PulseInner {
    watch: Mutex<OutageWatch>,
    returns: watch::Sender<Return>,
}

impl Default for ApiserverPulse {
    fn default() -> Self {
        ApiserverPulse(Arc::new(PulseInner {
            watch: Mutex::new(OutageWatch::default()),
            returns: watch::Sender::new(Return::default()),
        }))
    }
}

impl ApiserverPulse {
    fn outages(&self) -> std::sync::MutexGuard<'_, OutageWatch> {
        // A panic while holding the lock leaves a consistent value (each method makes one change).
        self.0.watch.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    pub fn failed(&self) {
        self.outages().failed(Instant::now());
    }

    pub fn answered(&self) {
        let Some(silent) = self.outages().answered(Instant::now()) else {
            return;
        };
        self.0.returns.send_modify(|last| {
            last.count += 1;
            last.silent = silent;
        });
    }

    pub fn is_silent(&self) -> bool {
        self.outages().is_silent(Instant::now())
    }

    /// Changes at each announced return.
    pub fn returns(&self) -> watch::Receiver<Return> {
        self.0.returns.subscribe()
    }
}

/// While the apiserver is silent, asks it for its version about every [`PROBE_EVERY`] (through `client`, whose
/// [`PulseLayer`] records the answer): its return is noticed within a second or two even when every other caller is
/// waiting out a backoff. Runs until aborted.
pub async fn probe_while_silent(client: kube::Client, pulse: ApiserverPulse) {
    loop {
        let pause = capov_core::policy::backoff::jitter(PROBE_EVERY, fastrand::f64());
        tokio::time::sleep(pause).await;
        if pulse.is_silent() {
            let _ = tokio::time::timeout(PROBE_TIMEOUT, client.apiserver_version()).await;
        }
    }
}

/// Tells the pulse, for each request, whether an answer came.
#[derive(Clone)]
pub struct PulseLayer(pub ApiserverPulse);

impl<S> Layer<S> for PulseLayer {
    type Service = Pulse<S>;

    fn layer(&self, inner: S) -> Pulse<S> {
        Pulse {
            inner,
            pulse: self.0.clone(),
        }
    }
}

#[derive(Clone)]
pub struct Pulse<S> {
    inner: S,
    pulse: ApiserverPulse,
}

impl<S, Req, B> Service<http::Request<Req>> for Pulse<S>
where
    S: Service<http::Request<Req>, Response = http::Response<B>>,
    S::Error: Into<BoxError>,
    S::Future: Send + 'static,
{
    type Response = http::Response<B>;
    type Error = BoxError;
    type Future = Pin<Box<dyn Future<Output = Result<http::Response<B>, BoxError>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        self.inner.poll_ready(cx).map_err(Into::into)
    }

    fn call(&mut self, request: http::Request<Req>) -> Self::Future {
        let answer = self.inner.call(request);
        let pulse = self.pulse.clone();
        Box::pin(async move {
            let result = answer.await.map_err(Into::into);
            match &result {
                Ok(answer) if is_gateway_failure(answer.status()) => pulse.failed(),
                Ok(_) => pulse.answered(),
                Err(_) => pulse.failed(),
            }
            result
        })
    }
}

/// What a load balancer or proxy in front of an apiserver that is down answers.
fn is_gateway_failure(status: http::StatusCode) -> bool {
    matches!(status.as_u16(), 502..=504)
}

#[cfg(test)]
mod tests {
    use super::*;
    use tower::ServiceExt as _;

    fn at(start: Instant, millis: u64) -> Instant {
        start + Duration::from_millis(millis)
    }

    #[test]
    fn silence_ends_in_a_return_only_after_an_outage_s_length() {
        let start = Instant::now();
        let mut watch = OutageWatch::default();
        watch.failed(at(start, 0));
        assert!(!watch.is_silent(at(start, 2_900)));
        assert_eq!(watch.answered(at(start, 2_900)), None, "a short silence is no outage");
        watch.failed(at(start, 5_000));
        watch.failed(at(start, 7_000));
        assert!(watch.is_silent(at(start, 8_000)), "silent since the first failure");
        assert_eq!(watch.answered(at(start, 16_000)), Some(Duration::from_secs(11)));
        assert_eq!(watch.answered(at(start, 16_100)), None, "announced once");
        assert!(!watch.is_silent(at(start, 60_000)));
    }

    #[test]
    fn an_answer_between_failures_starts_the_silence_over() {
        let start = Instant::now();
        let mut watch = OutageWatch::default();
        // A 504 in one request of twenty, answers in between: the apiserver is busy, not gone.
        for second in 0..30 {
            watch.failed(at(start, second * 1000));
            assert_eq!(watch.answered(at(start, second * 1000 + 50)), None);
        }
        assert!(!watch.is_silent(at(start, 31_000)));
    }

    #[test]
    fn returns_that_follow_each_other_are_announced_ever_further_apart() {
        let start = Instant::now();
        let mut watch = OutageWatch::default();
        let mut announced = Vec::new();
        // An apiserver silent for 4 s in every 6 s, for 20 minutes.
        for cycle in 0..200u64 {
            let t = cycle * 6_000;
            watch.failed(at(start, t));
            if watch.answered(at(start, t + 4_000)).is_some() {
                announced.push((t + 4_000) / 1000);
            }
        }
        let gaps: Vec<u64> = announced.windows(2).map(|pair| pair[1] - pair[0]).collect();
        assert_eq!(
            gaps,
            [12, 24, 42, 84, 162, 300, 300],
            "each gap at least the doubled spacing, at most 5 min"
        );
        // After a calm longer than twice the spacing, a return is announced at once and the spacing starts over.
        let later = 200 * 6_000 + 400_000;
        watch.failed(at(start, later));
        assert!(watch.answered(at(start, later + 5_000)).is_some());
        watch.failed(at(start, later + 16_000));
        assert!(
            watch.answered(at(start, later + 20_000)).is_some(),
            "15 s later: the spacing is 10 s again"
        );
    }

    /// A stand-in for the client's stack: each request gets `answer` (an HTTP status) or, with None, no answer.
    fn apiserver(
        pulse: &ApiserverPulse,
        answer: Option<u16>,
    ) -> impl Service<http::Request<()>, Response = http::Response<()>, Error = BoxError> {
        PulseLayer(pulse.clone()).layer(tower::service_fn(move |_request: http::Request<()>| async move {
            match answer {
                Some(code) => {
                    let mut response = http::Response::new(());
                    *response.status_mut() = http::StatusCode::from_u16(code).expect("status");
                    Ok(response)
                }
                None => Err::<http::Response<()>, BoxError>("connection refused".into()),
            }
        }))
    }

    async fn ask(service: impl Service<http::Request<()>, Response = http::Response<()>, Error = BoxError>) {
        let request = http::Request::get("/version").body(()).expect("request");
        let _ = service.oneshot(request).await;
    }

    #[tokio::test(start_paused = true)]
    async fn the_layer_announces_the_first_answer_after_silence_and_gateway_failures() {
        let pulse = ApiserverPulse::default();
        let mut returns = pulse.returns();
        ask(apiserver(&pulse, None)).await;
        tokio::time::advance(Duration::from_secs(2)).await;
        ask(apiserver(&pulse, Some(503))).await;
        assert!(!pulse.is_silent(), "2 s of silence is no outage yet");
        tokio::time::advance(Duration::from_secs(2)).await;
        assert!(
            pulse.is_silent(),
            "a refused connection, then a load balancer's 503: silent for 4 s"
        );
        assert!(!returns.has_changed().expect("pulse alive"));
        ask(apiserver(&pulse, Some(404))).await;
        assert!(
            returns.has_changed().expect("pulse alive"),
            "an answer, even a refusal, ends the outage"
        );
        assert_eq!(
            *returns.borrow_and_update(),
            Return {
                count: 1,
                silent: Duration::from_secs(4)
            }
        );
        assert!(!pulse.is_silent());
    }

    #[tokio::test(start_paused = true)]
    async fn an_overloaded_apiserver_is_no_outage() {
        let pulse = ApiserverPulse::default();
        let returns = pulse.returns();
        for _ in 0..10 {
            ask(apiserver(&pulse, Some(429))).await;
            ask(apiserver(&pulse, Some(500))).await;
            tokio::time::advance(Duration::from_secs(1)).await;
        }
        assert!(!pulse.is_silent());
        ask(apiserver(&pulse, Some(200))).await;
        assert!(!returns.has_changed().expect("pulse alive"));
    }
}
