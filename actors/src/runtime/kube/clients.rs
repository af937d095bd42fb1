//! Kubernetes clients with deadlines on every request. kube's defaults have no read timeout: an apiserver (the
//! management cluster's, or a tenant's workload apiserver) that accepts a connection and never answers would hold
//! the caller, and with it a reconcile permit, the status writer or the supervisor, for ever.
//!
//! Two management clients, because one setting cannot serve both kinds of call: a watch legitimately stays silent
//! for minutes (kube-runtime's watcher has its own idle timeout, the server-side watch timeout plus a margin), while
//! a get, list or patch that is silent for [`READ_TIMEOUT`] is dead. Clients of tenants' workload apiservers also cap
//! the size of every answer ([`workload_client`]).

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};
use tokio::time::{Instant, Sleep};
use tower::{BoxError, Layer, Service};

use crate::runtime::kube::pulse::{ApiserverPulse, PulseLayer};
use crate::runtime::kube::requests::NameFailuresLayer;

/// Establishing a connection, TLS handshake included.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// Silence while an answer is awaited or read (kube's socket read timeout, restarted by every write so that the time
/// a pooled connection sat idle does not count).
pub const READ_TIMEOUT: Duration = Duration::from_secs(30);
/// Sending a request.
pub const WRITE_TIMEOUT: Duration = Duration::from_secs(30);
/// A whole request, from sending it to the last byte of its answer (kube's retries of 429/503/504 included). The
/// apiserver ends its own requests after 60 s (`--request-timeout`); a request still running a little later is lost.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(70);
/// A page of a watch's list (the watch client's requests that are not watches), from sending it to its last byte.
/// A page holds at most a hundred objects and answers within a second or two even from a busy apiserver; one that
/// does not answer is lost. Without a deadline a held page stalled the whole list until the server gave up (75 s in
/// the benchmark's trouble), and with it the start of every machine not listed yet.
pub const LIST_PAGE_TIMEOUT: Duration = Duration::from_secs(15);
/// Tries of one page of a watch's list that got no answer ([`ListPageRetryLayer`]).
pub const LIST_PAGE_TRIES: u32 = 3;
/// How long the first try of a page waits for its answer before the page is asked for again; the second waits twice
/// as long, the last [`LIST_PAGE_TIMEOUT`]. A held page cost the whole 15 s before: at 10,000 machines in the
/// benchmark's trouble the operator's first lists took 37 s, and no machine starts before them. A page that is only
/// slow still gets its 15 s on the last try.
pub const LIST_PAGE_FIRST_WAIT: Duration = Duration::from_secs(5);

/// The management cluster's clients: `requests` for everything but watches, `watches` for the watches; the
/// apiserver's URL they talk to; and what their requests' outcomes say of it (`pulse`).
#[derive(Clone)]
pub struct KubeClients {
    pub requests: kube::Client,
    pub watches: kube::Client,
    pub apiserver: http::Uri,
    pub pulse: ApiserverPulse,
}

impl KubeClients {
    /// Both clients from one configuration (a kubeconfig or the in-cluster service account).
    pub fn new(config: kube::Config) -> Result<KubeClients, kube::Error> {
        let mut watch_config = config.clone();
        watch_config.connect_timeout = Some(CONNECT_TIMEOUT);
        watch_config.write_timeout = Some(WRITE_TIMEOUT);
        let pulse = ApiserverPulse::default();
        Ok(KubeClients {
            apiserver: config.cluster_url.clone(),
            requests: request_client(config, &pulse)?,
            watches: kube::client::ClientBuilder::try_from(watch_config)?
                .with_layer(&DeadlineLayer::except_watches(LIST_PAGE_TIMEOUT))
                .with_layer(&ListPageRetryLayer::new(LIST_PAGE_FIRST_WAIT))
                .with_layer(&NameFailuresLayer)
                .with_layer(&PulseLayer(pulse.clone()))
                .build(),
            pulse,
        })
    }
}

/// `config` with this module's connect, read and write timeouts.
pub fn with_timeouts(mut config: kube::Config) -> kube::Config {
    config.connect_timeout = Some(CONNECT_TIMEOUT);
    config.read_timeout = Some(READ_TIMEOUT);
    config.write_timeout = Some(WRITE_TIMEOUT);
    config.reset_reader_on_write = true;
    config
}

/// A client for requests that are not watches: [`with_timeouts`], and no request outlives [`REQUEST_TIMEOUT`]; each
/// request's outcome goes to `pulse`.
pub fn request_client(config: kube::Config, pulse: &ApiserverPulse) -> Result<kube::Client, kube::Error> {
    Ok(kube::client::ClientBuilder::try_from(with_timeouts(config))?
        .with_layer(&DeadlineLayer::every_request(REQUEST_TIMEOUT))
        .with_layer(&NameFailuresLayer)
        .with_layer(&PulseLayer(pulse.clone()))
        .build())
}

/// The largest answer read from a tenant's workload apiserver: a page of Nodes, a Node, or an error. kube holds an
/// answer about three times over while it decodes it; how many requests run at once is bounded too
/// (`workload_clients`).
pub const WORKLOAD_BODY_LIMIT: u64 = 1 << 20;

/// A client for a tenant's workload apiserver: [`request_client`]'s deadlines, and no answer read past
/// [`WORKLOAD_BODY_LIMIT`] bytes.
pub fn workload_client(config: kube::Config) -> Result<kube::Client, kube::Error> {
    Ok(kube::client::ClientBuilder::try_from(with_timeouts(config))?
        .with_layer(&DeadlineLayer::every_request(REQUEST_TIMEOUT))
        .with_layer(&crate::runtime::kube::body_limit::BodyLimitLayer(WORKLOAD_BODY_LIMIT))
        .build())
}

/// Asks again, up to [`LIST_PAGE_TRIES`] times, for a page of a watch's list (a GET that is not a watch) that got no
/// answer: it timed out or its connection failed. kube-runtime's watcher starts a list over from its first page after
/// any failed page; at 10,000 machines a list is 100 pages, so one lost page in a hundred would restart most lists,
/// and each restart can lose another. An answer, even an error status, is passed on as it is: a 410 for an expired
/// continue token must reach the watcher, which lists again. Each try waits longer for its answer: `first_wait`,
/// twice that, then only the page's own deadline ([`DeadlineLayer`]).
#[derive(Clone, Copy, Debug)]
pub struct ListPageRetryLayer {
    first_wait: Duration,
}

impl ListPageRetryLayer {
    pub fn new(first_wait: Duration) -> ListPageRetryLayer {
        ListPageRetryLayer { first_wait }
    }
}

/// Requests of the watch client waiting for the shared stack (a dozen watches and their lists).
const LIST_PAGE_QUEUE: usize = 64;

type Shared<S> =
    tower::buffer::Buffer<http::Request<kube::client::Body>, <S as Service<http::Request<kube::client::Body>>>::Future>;

impl<S, B> Layer<S> for ListPageRetryLayer
where
    S: Service<http::Request<kube::client::Body>, Response = http::Response<B>> + Send + 'static,
    S::Error: Into<BoxError> + Send + Sync,
    S::Future: Send + 'static,
    B: Send + 'static,
{
    type Service = ListPageRetry<Shared<S>>;

    /// Needs a tokio runtime, as kube's own client does: the shared stack runs as a task.
    fn layer(&self, inner: S) -> ListPageRetry<Shared<S>> {
        ListPageRetry {
            inner: tower::buffer::Buffer::new(inner, LIST_PAGE_QUEUE),
            first_wait: self.first_wait,
        }
    }
}

#[derive(Clone, Debug)]
pub struct ListPageRetry<S> {
    inner: S,
    first_wait: Duration,
}

impl<S, B> Service<http::Request<kube::client::Body>> for ListPageRetry<S>
where
    S: Service<http::Request<kube::client::Body>, Response = http::Response<B>> + Clone + Send + 'static,
    S::Error: Into<BoxError>,
    S::Future: Send + 'static,
    B: Send + 'static,
{
    type Response = http::Response<B>;
    type Error = BoxError;
    type Future = Pin<Box<dyn Future<Output = Result<http::Response<B>, BoxError>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        self.inner.poll_ready(cx).map_err(Into::into)
    }

    fn call(&mut self, request: http::Request<kube::client::Body>) -> Self::Future {
        let page = request.method() == http::Method::GET && !is_watch(request.uri());
        if !page {
            let answer = self.inner.call(request);
            return Box::pin(async move { answer.await.map_err(Into::into) });
        }
        let copies: Vec<_> = (1..LIST_PAGE_TRIES).map_while(|_| copy(&request)).collect();
        // The service made ready by `poll_ready` takes the first try; a clone, made ready in turn, each later one.
        let mut later = self.inner.clone();
        let first = self.inner.call(request);
        let first_wait = self.first_wait;
        Box::pin(async move {
            let mut failure = match try_within(first, Some(first_wait)).await {
                Ok(answer) => return Ok(answer),
                Err(err) => err,
            };
            for (try_, copy) in (1..).zip(copies) {
                tracing::debug!(error = %failure, "a page of a watch's list got no answer; asking again");
                tokio::time::sleep(Duration::from_millis(200 + fastrand::u64(0..800))).await;
                use tower::ServiceExt as _;
                let ready = later.ready().await.map_err(Into::into)?;
                // The last try waits for the page's own deadline.
                let wait = (try_ + 1 < LIST_PAGE_TRIES).then(|| first_wait * (1 << try_));
                failure = match try_within(ready.call(copy), wait).await {
                    Ok(answer) => return Ok(answer),
                    Err(err) => err,
                };
            }
            Err(failure)
        })
    }
}

/// One try of a page: its answer, or a failure when none came within `wait`.
async fn try_within<R, E: Into<BoxError>>(
    answer: impl Future<Output = Result<R, E>>,
    wait: Option<Duration>,
) -> Result<R, BoxError> {
    let answer = async { answer.await.map_err(Into::into) };
    match wait {
        Some(wait) => answer_within(wait, answer).await,
        None => answer.await,
    }
}

/// The same request again, when its body can be copied (a GET's is empty).
fn copy(request: &http::Request<kube::client::Body>) -> Option<http::Request<kube::client::Body>> {
    let mut copy = http::Request::new(request.body().try_clone()?);
    *copy.method_mut() = request.method().clone();
    *copy.uri_mut() = request.uri().clone();
    *copy.version_mut() = request.version();
    *copy.headers_mut() = request.headers().clone();
    *copy.extensions_mut() = request.extensions().clone();
    Some(copy)
}

/// A request ran past its deadline.
#[derive(Debug, thiserror::Error)]
#[error("the Kubernetes API request did not complete within {0:?}")]
pub struct RequestTimedOut(pub Duration);

impl From<RequestTimedOut> for kube::Error {
    fn from(timed_out: RequestTimedOut) -> kube::Error {
        kube::Error::Service(Box::new(timed_out))
    }
}

impl From<RequestTimedOut> for String {
    fn from(timed_out: RequestTimedOut) -> String {
        timed_out.to_string()
    }
}

/// Whether a failed management-cluster request may well succeed when asked again soon: it was cut or timed out, or
/// the apiserver was overloaded (5xx, 429) or saw a conflicting write (409). Refusals (403, 404, 422, …) come back
/// the same until something changes.
pub fn is_transient(err: &kube::Error) -> bool {
    match err {
        kube::Error::Api(status) => status.code >= 500 || status.code == 429 || status.code == 409,
        _ => true,
    }
}

/// `request`'s answer, or [`RequestTimedOut`] when none came within `deadline` (the request is then dropped).
pub async fn answer_within<T, E: From<RequestTimedOut>>(
    deadline: Duration,
    request: impl Future<Output = Result<T, E>>,
) -> Result<T, E> {
    tokio::time::timeout(deadline, request)
        .await
        .unwrap_or_else(|_| Err(RequestTimedOut(deadline).into()))
}

/// A deadline over a whole request: the answer's headers and every byte of its body.
#[derive(Clone, Copy, Debug)]
pub struct DeadlineLayer {
    limit: Duration,
    watches_too: bool,
}

impl DeadlineLayer {
    /// Every request the client sends.
    pub fn every_request(limit: Duration) -> DeadlineLayer {
        DeadlineLayer {
            limit,
            watches_too: true,
        }
    }

    /// Every request but watches (`?watch=true`), which stay open for minutes by design.
    pub fn except_watches(limit: Duration) -> DeadlineLayer {
        DeadlineLayer {
            limit,
            watches_too: false,
        }
    }
}

impl<S> Layer<S> for DeadlineLayer {
    type Service = Deadline<S>;

    fn layer(&self, inner: S) -> Deadline<S> {
        Deadline {
            inner,
            limit: self.limit,
            watches_too: self.watches_too,
        }
    }
}

#[derive(Clone, Debug)]
pub struct Deadline<S> {
    inner: S,
    limit: Duration,
    watches_too: bool,
}

/// Whether the request is a watch: `watch=true` (or `1`) in its query.
fn is_watch(uri: &http::Uri) -> bool {
    uri.query()
        .is_some_and(|query| query.split('&').any(|pair| pair == "watch=true" || pair == "watch=1"))
}

type Answer<B> = http::Response<DeadlineBody<B>>;

impl<S, Req, B> Service<http::Request<Req>> for Deadline<S>
where
    S: Service<http::Request<Req>, Response = http::Response<B>>,
    S::Error: Into<BoxError>,
    S::Future: Send + 'static,
    B: Body<Data = Bytes> + Unpin,
    B::Error: Into<BoxError>,
{
    type Response = Answer<B>;
    type Error = BoxError;
    type Future = Pin<Box<dyn Future<Output = Result<Answer<B>, BoxError>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        self.inner.poll_ready(cx).map_err(Into::into)
    }

    fn call(&mut self, request: http::Request<Req>) -> Self::Future {
        let limit = self.limit;
        let unbounded = !self.watches_too && is_watch(request.uri());
        let answer = self.inner.call(request);
        if unbounded {
            return Box::pin(async move {
                let response = answer.await.map_err(Into::into)?;
                Ok(response.map(|body| DeadlineBody {
                    body,
                    deadline: None,
                    limit,
                }))
            });
        }
        let deadline = Instant::now() + limit;
        Box::pin(async move {
            match tokio::time::timeout_at(deadline, answer).await {
                Err(_) => Err(RequestTimedOut(limit).into()),
                Ok(Err(err)) => Err(err.into()),
                Ok(Ok(response)) => Ok(response.map(|body| DeadlineBody {
                    body,
                    deadline: Some(Box::pin(tokio::time::sleep_until(deadline))),
                    limit,
                })),
            }
        })
    }
}

/// An answer's body that fails once the request's deadline has passed (None: a watch's, without one).
pub struct DeadlineBody<B> {
    body: B,
    deadline: Option<Pin<Box<Sleep>>>,
    limit: Duration,
}

impl<B> Body for DeadlineBody<B>
where
    B: Body<Data = Bytes> + Unpin,
    B::Error: Into<BoxError>,
{
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        let this = &mut *self;
        if let Poll::Ready(frame) = Pin::new(&mut this.body).poll_frame(cx) {
            return Poll::Ready(frame.map(|frame| frame.map_err(Into::into)));
        }
        if this
            .deadline
            .as_mut()
            .is_some_and(|deadline| deadline.as_mut().poll(cx).is_ready())
        {
            return Poll::Ready(Some(Err(RequestTimedOut(this.limit).into())));
        }
        Poll::Pending
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::TcpListener;

    #[test]
    fn transient_failures_and_refusals_are_told_apart() {
        let api = |code: u16| kube::Error::Api(kube::core::Status::failure("", "").with_code(code).boxed());
        for code in [500, 503, 504, 429, 409] {
            assert!(is_transient(&api(code)), "{code}");
        }
        for code in [400, 403, 422] {
            assert!(!is_transient(&api(code)), "{code}");
        }
        let cut = kube::Error::Service(Box::new(std::io::Error::other("connection reset")));
        assert!(is_transient(&cut));
    }

    /// A plain-http "apiserver" on loopback that reads each request and then does what `serve` says.
    async fn server<F, Fut>(serve: F) -> (String, tokio::task::JoinHandle<()>)
    where
        F: Fn(tokio::net::TcpStream) -> Fut + Send + 'static,
        Fut: Future<Output = ()> + Send + 'static,
    {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let url = format!("http://{}", listener.local_addr().expect("addr"));
        let task = tokio::spawn(async move {
            while let Ok((mut socket, _)) = listener.accept().await {
                let mut request = [0u8; 4096];
                let _ = socket.read(&mut request).await;
                tokio::spawn(serve(socket));
            }
        });
        (url, task)
    }

    fn client_with_deadline(url: &str, limit: Duration) -> kube::Client {
        let config = with_timeouts(kube::Config::new(url.parse().expect("url")));
        kube::client::ClientBuilder::try_from(config)
            .expect("builder")
            .with_layer(&DeadlineLayer::every_request(limit))
            .build()
    }

    async fn get_version(client: &kube::Client) -> Result<String, kube::Error> {
        let request = http::Request::get("/version").body(Vec::new()).expect("request");
        client.request_text(request).await
    }

    #[test]
    fn request_clients_get_every_timeout() {
        let config = with_timeouts(kube::Config::new("https://127.0.0.1:6443".parse().expect("uri")));
        assert_eq!(config.connect_timeout, Some(CONNECT_TIMEOUT));
        assert_eq!(config.read_timeout, Some(READ_TIMEOUT));
        assert_eq!(config.write_timeout, Some(WRITE_TIMEOUT));
        assert!(
            config.reset_reader_on_write,
            "idle time in the pool must not count against a request"
        );
        assert!(REQUEST_TIMEOUT > READ_TIMEOUT);
    }

    #[tokio::test]
    async fn an_apiserver_that_never_answers_fails_the_request_at_its_deadline() {
        let (url, _server) = server(|socket| async move {
            // Accepts, reads the request, and keeps the connection open without a word.
            tokio::time::sleep(Duration::from_secs(3600)).await;
            drop(socket);
        })
        .await;
        let client = client_with_deadline(&url, Duration::from_millis(300));
        let started = std::time::Instant::now();
        let err = get_version(&client).await.expect_err("no answer");
        let waited = started.elapsed();
        assert!(err.to_string().contains("did not complete within"), "{err}");
        assert!(
            waited >= Duration::from_millis(300) && waited < Duration::from_secs(5),
            "{waited:?}"
        );
    }

    #[tokio::test]
    async fn an_answer_that_trickles_in_fails_at_the_deadline_too() {
        let (url, _server) = server(|mut socket| async move {
            let head = "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ntransfer-encoding: chunked\r\n\r\n";
            if socket.write_all(head.as_bytes()).await.is_err() {
                return;
            }
            // One byte every 50 ms: never silent long enough for a read timeout, never done.
            loop {
                if socket.write_all(b"1\r\n \r\n").await.is_err() {
                    return;
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        })
        .await;
        let client = client_with_deadline(&url, Duration::from_millis(500));
        let started = std::time::Instant::now();
        let err = get_version(&client).await.expect_err("never finished");
        let waited = started.elapsed();
        assert!(format!("{err:?}").contains("RequestTimedOut"), "{err:?}");
        assert!(
            waited >= Duration::from_millis(500) && waited < Duration::from_secs(5),
            "{waited:?}"
        );
    }

    #[tokio::test]
    async fn an_answer_within_the_deadline_passes_unchanged() {
        let (url, _server) = server(|mut socket| async move {
            let body = r#"{"major":"1","minor":"36"}"#;
            let answer = format!(
                "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{body}",
                body.len()
            );
            let _ = socket.write_all(answer.as_bytes()).await;
        })
        .await;
        let client = client_with_deadline(&url, Duration::from_secs(5));
        assert_eq!(
            get_version(&client).await.expect("answer"),
            r#"{"major":"1","minor":"36"}"#
        );
    }

    #[tokio::test]
    async fn the_watch_client_bounds_a_list_page_but_not_a_watch() {
        // Answers after 600 ms: past the list page's 300 ms deadline, and what a watch may take.
        let (url, _server) = server(|mut socket| async move {
            tokio::time::sleep(Duration::from_millis(600)).await;
            let body = r#"{"kind":"Status"}"#;
            let answer = format!(
                "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{body}",
                body.len()
            );
            let _ = socket.write_all(answer.as_bytes()).await;
        })
        .await;
        let config = kube::Config::new(url.parse().expect("url"));
        let client = kube::client::ClientBuilder::try_from(config)
            .expect("builder")
            .with_layer(&DeadlineLayer::except_watches(Duration::from_millis(300)))
            .build();
        let ask = |path: &str| {
            let client = client.clone();
            let request = http::Request::get(path).body(Vec::new()).expect("request");
            async move { client.request_text(request).await }
        };
        let err = ask("/api/v1/nodes?limit=100")
            .await
            .expect_err("a page past its deadline");
        assert!(err.to_string().contains("did not complete within"), "{err}");
        let watch = ask("/api/v1/nodes?resourceVersion=7&watch=true").await;
        assert_eq!(watch.expect("a watch has no deadline"), r#"{"kind":"Status"}"#);
        assert!(is_watch(&"/api/v1/nodes?watch=1".parse().expect("uri")));
        assert!(!is_watch(&"/api/v1/nodes?watchful=true&limit=1".parse().expect("uri")));
    }

    /// The watch client's stack as `KubeClients::new` builds it, with a page deadline of `limit` (which every try
    /// waits for).
    fn watch_client(url: &str, limit: Duration) -> kube::Client {
        watch_client_waiting(url, limit, limit)
    }

    /// The same, its first try asking again after `first_wait`.
    fn watch_client_waiting(url: &str, limit: Duration, first_wait: Duration) -> kube::Client {
        let config = kube::Config::new(url.parse().expect("url"));
        kube::client::ClientBuilder::try_from(config)
            .expect("builder")
            .with_layer(&DeadlineLayer::except_watches(limit))
            .with_layer(&ListPageRetryLayer::new(first_wait))
            .build()
    }

    fn answer(status: &str, body: &str) -> String {
        format!(
            "HTTP/1.1 {status}\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{body}",
            body.len()
        )
    }

    /// A server that holds the first request without a word and answers the next ones with an empty list; and how
    /// many requests it saw.
    async fn first_request_held() -> (
        String,
        tokio::task::JoinHandle<()>,
        std::sync::Arc<std::sync::atomic::AtomicUsize>,
    ) {
        use std::sync::atomic::{AtomicUsize, Ordering};
        let seen = std::sync::Arc::new(AtomicUsize::new(0));
        let counted = seen.clone();
        let (url, server) = server(move |mut socket| {
            let n = counted.fetch_add(1, Ordering::SeqCst);
            async move {
                if n == 0 {
                    tokio::time::sleep(Duration::from_secs(3600)).await;
                }
                let _ = socket.write_all(answer("200 OK", r#"{"items":[]}"#).as_bytes()).await;
            }
        })
        .await;
        (url, server, seen)
    }

    #[tokio::test(start_paused = true)]
    async fn an_answer_not_come_within_its_deadline_is_a_timeout_error() {
        let started = tokio::time::Instant::now();
        let held = std::future::pending::<Result<(), kube::Error>>();
        let err = answer_within(Duration::from_secs(10), held)
            .await
            .expect_err("no answer");
        assert_eq!(started.elapsed(), Duration::from_secs(10), "given up at the deadline");
        assert!(err.to_string().contains("did not complete within 10s"), "{err}");
        let quick = answer_within(Duration::from_secs(10), async { Ok::<_, kube::Error>(3) }).await;
        assert_eq!(quick.ok(), Some(3));
    }

    #[tokio::test]
    async fn a_held_list_page_is_asked_for_again_after_its_first_wait_not_its_deadline() {
        let (url, _server, seen) = first_request_held().await;
        let client = watch_client_waiting(&url, Duration::from_secs(60), Duration::from_millis(200));
        let request = http::Request::get("/api/v1/nodes?limit=100")
            .body(Vec::new())
            .expect("request");
        let started = std::time::Instant::now();
        assert_eq!(
            client.request_text(request).await.expect("the second try"),
            r#"{"items":[]}"#
        );
        let waited = started.elapsed();
        assert_eq!(seen.load(std::sync::atomic::Ordering::SeqCst), 2);
        // The first wait (200 ms) and the pause before the next try (at most a second), far from the 60 s deadline.
        assert!(
            waited >= Duration::from_millis(200) && waited < Duration::from_secs(10),
            "{waited:?}"
        );
    }

    #[tokio::test]
    async fn a_list_page_without_an_answer_is_asked_for_again_and_an_error_answer_is_not() {
        use std::sync::Arc;
        use std::sync::atomic::{AtomicUsize, Ordering};
        let (url, _server, seen) = first_request_held().await;
        let client = watch_client(&url, Duration::from_millis(300));
        let request = http::Request::get("/api/v1/nodes?limit=100")
            .body(Vec::new())
            .expect("request");
        assert_eq!(
            client.request_text(request).await.expect("the second try"),
            r#"{"items":[]}"#
        );
        assert_eq!(seen.load(Ordering::SeqCst), 2);

        // An answer is passed on as it is, an error status included: once.
        let seen = Arc::new(AtomicUsize::new(0));
        let counted = seen.clone();
        let (url, _server) = server(move |mut socket| {
            counted.fetch_add(1, Ordering::SeqCst);
            async move {
                let gone = r#"{"kind":"Status","code":410,"reason":"Expired"}"#;
                let _ = socket.write_all(answer("410 Gone", gone).as_bytes()).await;
            }
        })
        .await;
        let client = watch_client(&url, Duration::from_millis(300));
        let request = http::Request::get("/api/v1/nodes?limit=100&continue=x")
            .body(Vec::new())
            .expect("request");
        let err = client.request_text(request).await.expect_err("410");
        assert!(err.to_string().contains("Expired"), "{err}");
        assert_eq!(seen.load(Ordering::SeqCst), 1);
    }

    #[tokio::test]
    async fn a_page_that_never_answers_fails_after_its_tries() {
        use std::sync::Arc;
        use std::sync::atomic::{AtomicUsize, Ordering};
        let seen = Arc::new(AtomicUsize::new(0));
        let counted = seen.clone();
        let (url, _server) = server(move |socket| {
            counted.fetch_add(1, Ordering::SeqCst);
            async move {
                tokio::time::sleep(Duration::from_secs(3600)).await;
                drop(socket);
            }
        })
        .await;
        let client = watch_client(&url, Duration::from_millis(200));
        let request = http::Request::get("/api/v1/nodes?limit=100")
            .body(Vec::new())
            .expect("request");
        let err = client.request_text(request).await.expect_err("never answered");
        assert!(err.to_string().contains("did not complete within"), "{err}");
        assert_eq!(seen.load(Ordering::SeqCst), LIST_PAGE_TRIES as usize);
    }
}
