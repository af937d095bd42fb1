//! One connection: the service wrapper that counts its requests, and the driver that holds it to its
//! [`ConnectionLimits`] (see [`super::lifetime`]) and closes it when it is evicted or the server stops.

use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};

use http::{HeaderValue, Request, StatusCode, Version, header};
use hyper::body::Incoming;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto::Builder;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::sync::{Notify, watch};
use tokio::time::Instant;
use warp::reply::{Reply, Response};

use super::lifetime::{self, Activity, ConnectionLimits, Next, Why};

/// What the server asks of its connections.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Stop {
    Serving,
    /// Close gracefully: requests in progress finish.
    Draining,
    /// Drop every connection now.
    Now,
}

/// What a connection has done, shared by its service (which counts requests) and its driver (which reads them).
pub(super) struct Tracker {
    activity: Mutex<Activity>,
    changed: Notify,
    max_requests: u32,
}

impl Tracker {
    pub(super) fn new(accepted: Instant, max_requests: u32) -> Arc<Tracker> {
        Arc::new(Tracker {
            activity: Mutex::new(Activity::new(accepted)),
            changed: Notify::new(),
            max_requests,
        })
    }

    fn activity(&self) -> std::sync::MutexGuard<'_, Activity> {
        self.activity.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn snapshot(&self) -> Activity {
        *self.activity()
    }

    /// A request begins: whether it is the last one allowed, or `None` when it is one too many.
    fn begin(&self) -> Option<bool> {
        let turn = {
            let mut activity = self.activity();
            if activity.begun >= self.max_requests {
                None
            } else {
                activity.begun += 1;
                activity.in_flight += 1;
                Some(activity.begun >= self.max_requests)
            }
        };
        self.changed.notify_one();
        turn
    }

    fn end(&self) {
        {
            let mut activity = self.activity();
            activity.in_flight = activity.in_flight.saturating_sub(1);
            if activity.in_flight == 0 {
                activity.idle_since = Instant::now();
            }
        }
        self.changed.notify_one();
    }
}

/// A request in progress; ends when its answer is ready or it is given up.
struct InFlight(Arc<Tracker>);

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.end();
    }
}

/// `inner` with each request counted in `tracker`. The last request a connection may make is answered with
/// `Connection: close` over HTTP/1 (HTTP/2 learns it from the GOAWAY the driver sends); one more (HTTP/2 streams
/// opened before the GOAWAY arrived) is answered 503.
#[derive(Clone)]
pub(super) struct Counted<S> {
    pub(super) inner: S,
    pub(super) tracker: Arc<Tracker>,
}

impl<S> hyper::service::Service<Request<Incoming>> for Counted<S>
where
    S: hyper::service::Service<Request<Incoming>, Response = Response, Error = Infallible>,
    S::Future: Send + 'static,
{
    type Response = Response;
    type Error = Infallible;
    type Future = Pin<Box<dyn Future<Output = Result<Response, Infallible>> + Send>>;

    fn call(&self, request: Request<Incoming>) -> Self::Future {
        let http1 = request.version() < Version::HTTP_2;
        let Some(last) = self.tracker.begin() else {
            let mut answer = warp::reply::with_status(
                "this connection has made all the requests it may; open another\n",
                StatusCode::SERVICE_UNAVAILABLE,
            )
            .into_response();
            if http1 {
                answer
                    .headers_mut()
                    .insert(header::CONNECTION, HeaderValue::from_static("close"));
            }
            return Box::pin(std::future::ready(Ok(answer)));
        };
        let in_flight = InFlight(self.tracker.clone());
        let answer = self.inner.call(request);
        Box::pin(async move {
            let mut answer = answer.await?;
            drop(in_flight);
            if last && http1 {
                answer
                    .headers_mut()
                    .insert(header::CONNECTION, HeaderValue::from_static("close"));
            }
            Ok(answer)
        })
    }
}

/// How a connection ended.
#[derive(Debug)]
pub(super) enum Ended {
    /// hyper finished it: the client closed, or it closed after a graceful close (`why`), or it failed.
    Finished(Option<Why>, Result<(), String>),
    /// Dropped by its driver.
    Dropped(Why),
    /// Its place went to another client's connection.
    Evicted,
}

/// Resolves when the server asks for `at_least` (or the server is gone).
pub(super) async fn stopped(stop: &mut watch::Receiver<Stop>, at_least: Stop) {
    let _ = stop
        .wait_for(|stop| match at_least {
            Stop::Serving => true,
            Stop::Draining => *stop != Stop::Serving,
            Stop::Now => *stop == Stop::Now,
        })
        .await;
}

/// Serves HTTP/1 or HTTP/2 on `io` until the connection ends or its limits end it.
pub(super) async fn drive<I, S>(
    builder: &Builder<TokioExecutor>,
    io: I,
    service: Counted<S>,
    limits: &ConnectionLimits,
    accepted: Instant,
    kill: &Notify,
    stop: &mut watch::Receiver<Stop>,
) -> Ended
where
    I: AsyncRead + AsyncWrite + Unpin + Send + 'static,
    S: hyper::service::Service<Request<Incoming>, Response = Response, Error = Infallible> + Send + 'static,
    S::Future: Send + 'static,
{
    let tracker = service.tracker.clone();
    let connection = builder.serve_connection(TokioIo::new(io), service);
    tokio::pin!(connection);
    let mut closing: Option<(Instant, Why)> = None;
    loop {
        let now = Instant::now();
        let until = match lifetime::next(limits, accepted, &tracker.snapshot(), closing.map(|(at, _)| at), now) {
            Next::Wait(until) => until,
            Next::Close(why) => {
                connection.as_mut().graceful_shutdown();
                closing = Some((now, why));
                continue;
            }
            Next::Drop(why) => return Ended::Dropped(why),
        };
        // Created before waiting, so that a request beginning or ending meanwhile is not missed.
        let changed = tracker.changed.notified();
        let draining = closing.is_some();
        tokio::select! {
            result = connection.as_mut() => {
                return Ended::Finished(closing.map(|(_, why)| why), result.map_err(|err| err.to_string()));
            }
            () = tokio::time::sleep_until(until) => {}
            () = changed => {}
            () = kill.notified() => return Ended::Evicted,
            () = stopped(stop, if draining { Stop::Now } else { Stop::Draining }) => {
                if draining {
                    return Ended::Dropped(Why::Stopping);
                }
                connection.as_mut().graceful_shutdown();
                closing = Some((Instant::now(), Why::Stopping));
            }
        }
    }
}
