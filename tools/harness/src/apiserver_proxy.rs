//! Apiserver trouble: a proxy in front of a kube-apiserver that only the operator under test talks to (the test's or
//! benchmark's own requests go to the apiserver directly). It passes requests and answers through, watches included,
//! until told otherwise ([`ApiserverProxy::set`]): then it adds latency to every request, answers
//! `504 Gateway Timeout` to a share of them as an overloaded apiserver's timeout filter does, holds another share
//! past the operator's client deadlines before answering 504, cuts every connection as an apiserver that is down,
//! or answers watches that resume from a resourceVersion with `410 Gone`, as a restarted apiserver whose watch cache
//! is new does (the watcher then lists everything again).
//!
//! Which requests get trouble is decided by a counter, not by chance: with a share of 0.05 every twentieth request
//! does, so two runs of the same size see the same trouble.

use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock};
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http_body::{Body, Frame};
use hyper::body::Incoming;
use hyper_util::rt::{TokioExecutor, TokioIo};
use tokio::sync::mpsc;

use crate::HarnessError;

/// What the proxy does to the requests it gets from now on.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Trouble {
    /// Added to every request before it is passed on.
    pub latency: Duration,
    /// Answered 504 at once, never passed on (0.05: every twentieth request).
    pub share_504: f64,
    /// Held for `held_for`, then answered 504; never passed on.
    pub share_held: f64,
    pub held_for: Duration,
    /// Every request fails: its connection is cut, as when the apiserver is down.
    pub down: bool,
    /// A watch resuming from a resourceVersion is answered `410 Gone` (a restarted apiserver's new watch cache).
    pub watches_gone: bool,
    /// Requests whose path contains this are answered `503 Service Unavailable` at once, as an apiserver answers
    /// for a resource it cannot serve for now (e.g. `ipaddressclaims`: that resource's lists fail, others pass).
    pub unavailable: Option<&'static str>,
}

impl Trouble {
    /// None at all: everything passes.
    pub const NONE: Trouble = Trouble {
        latency: Duration::ZERO,
        share_504: 0.0,
        share_held: 0.0,
        held_for: Duration::ZERO,
        down: false,
        watches_gone: false,
        unavailable: None,
    };
}

/// How many requests the proxy saw, and what it did to them.
#[derive(Default)]
pub struct Counts {
    pub requests: AtomicU64,
    pub answered_504: AtomicU64,
    /// Answered 503 because their resource was made unavailable ([`Trouble::unavailable`]).
    pub answered_503: AtomicU64,
    pub held: AtomicU64,
    /// Cut because the proxy played an apiserver that is down, or because the apiserver could not be reached.
    pub cut: AtomicU64,
    pub watches_gone: AtomicU64,
}

impl Counts {
    /// One line: what the proxy did.
    pub fn summary(&self) -> String {
        let get = |count: &AtomicU64| count.load(Ordering::Relaxed);
        format!(
            "{} requests through the proxy: {} answered 504, {} held past the deadline, {} cut (apiserver down), {} \
             watches answered 410 Gone",
            get(&self.requests),
            get(&self.answered_504),
            get(&self.held),
            get(&self.cut),
            get(&self.watches_gone),
        )
    }
}

/// The running proxy; it stops when dropped.
pub struct ApiserverProxy {
    /// A kubeconfig for the operator: the proxy's URL and CA, the apiserver's credentials.
    pub kubeconfig: PathBuf,
    pub counts: Arc<Counts>,
    trouble: Arc<RwLock<Trouble>>,
    /// Bumped to cut every open connection (streams of watches included), as a dying apiserver does.
    cuts: Arc<tokio::sync::watch::Sender<u64>>,
    server: tokio::task::JoinHandle<()>,
}

impl Drop for ApiserverProxy {
    fn drop(&mut self) {
        self.server.abort();
    }
}

impl ApiserverProxy {
    /// Starts the proxy in front of the apiserver at `upstream` (whose CA is `upstream_ca_pem`), passing everything
    /// through, and writes the operator's kubeconfig (`plane_kubeconfig` with the server and CA replaced) into `dir`.
    pub async fn start(
        upstream: &str,
        upstream_ca_pem: &str,
        plane_kubeconfig: &str,
        dir: &Path,
    ) -> Result<ApiserverProxy, HarnessError> {
        let tls = capov_ovirt_sim::tls::generate(&[]).map_err(HarnessError::Proxy)?;
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .map_err(|err| HarnessError::io("the proxy's port", err))?;
        let address = listener
            .local_addr()
            .map_err(|err| HarnessError::io("the proxy's port", err))?;
        let certificate = reqwest::Certificate::from_pem(upstream_ca_pem.as_bytes())
            .map_err(|err| HarnessError::Proxy(err.to_string()))?;
        let client = reqwest::Client::builder()
            .tls_certs_only([certificate])
            .build()
            .map_err(|err| HarnessError::Proxy(err.to_string()))?;
        let shared = Arc::new(Shared {
            upstream: upstream.trim_end_matches('/').to_string(),
            client,
            trouble: Arc::new(RwLock::new(Trouble::NONE)),
            counts: Arc::new(Counts::default()),
            cuts: Arc::new(tokio::sync::watch::Sender::new(0)),
        });
        let kubeconfig = dir.join(format!("capov-apiserver-proxy-{}.kubeconfig", address.port()));
        let text = operator_kubeconfig(plane_kubeconfig, &format!("https://{address}"), &tls.ca_pem)?;
        std::fs::write(&kubeconfig, text).map_err(|err| HarnessError::io(&kubeconfig, err))?;
        let (trouble, counts, cuts) = (shared.trouble.clone(), shared.counts.clone(), shared.cuts.clone());
        let acceptor = tokio_rustls::TlsAcceptor::from(tls.server_config);
        let server = tokio::spawn(serve(listener, acceptor, shared));
        Ok(ApiserverProxy {
            kubeconfig,
            counts,
            trouble,
            cuts,
            server,
        })
    }

    /// From now on, `trouble` (a held request keeps the trouble it got). `down` also cuts every open connection,
    /// watches included, so that they resume (or list again) once the apiserver is back.
    pub fn set(&self, trouble: Trouble) {
        *self.trouble.write().unwrap_or_else(|poisoned| poisoned.into_inner()) = trouble;
        if trouble.down {
            self.cuts.send_modify(|cuts| *cuts = cuts.wrapping_add(1));
        }
    }

    /// A kube client for the operator, as `config_with` shapes its configuration from the proxy's kubeconfig.
    pub async fn kube_config(&self) -> Result<kube::Config, HarnessError> {
        let kubeconfig =
            kube::config::Kubeconfig::read_from(&self.kubeconfig).map_err(|err| HarnessError::Kube(err.to_string()))?;
        kube::Config::from_custom_kubeconfig(kubeconfig, &kube::config::KubeConfigOptions::default())
            .await
            .map_err(|err| HarnessError::Kube(err.to_string()))
    }
}

/// The operator's kubeconfig: the apiserver's with `server` and `certificate-authority-data` replaced.
fn operator_kubeconfig(plane: &str, server: &str, ca_pem: &str) -> Result<String, HarnessError> {
    use base64::Engine as _;
    let ca = base64::engine::general_purpose::STANDARD.encode(ca_pem);
    let mut replaced = (false, false);
    let lines: Vec<String> = plane
        .lines()
        .map(|line| {
            let indent = &line[..line.len() - line.trim_start().len()];
            if line.trim_start().starts_with("server:") {
                replaced.0 = true;
                format!("{indent}server: {server}")
            } else if line.trim_start().starts_with("certificate-authority-data:") {
                replaced.1 = true;
                format!("{indent}certificate-authority-data: {ca}")
            } else {
                line.to_string()
            }
        })
        .collect();
    if replaced != (true, true) {
        return Err(HarnessError::Proxy(
            "the apiserver's kubeconfig has no server or certificate-authority-data line".into(),
        ));
    }
    Ok(lines.join("\n") + "\n")
}

#[derive(Debug, PartialEq, Eq)]
enum Fate {
    Pass,
    Answer504,
    Hold,
}

/// The fate of the `n`th request (from 0): a share `s` picks request n when `floor((n+1)·s)` passes an integer,
/// which spreads the picks evenly. The 504s and the held requests are picked from different phases.
fn fate(trouble: &Trouble, n: u64) -> Fate {
    let picks = |share: f64, n: u64| {
        let share = share.clamp(0.0, 1.0);
        ((n + 1) as f64 * share).floor() > (n as f64 * share).floor()
    };
    if picks(trouble.share_504, n) {
        Fate::Answer504
    } else if picks(trouble.share_held, n.wrapping_add(7)) {
        Fate::Hold
    } else {
        Fate::Pass
    }
}

struct Shared {
    upstream: String,
    client: reqwest::Client,
    trouble: Arc<RwLock<Trouble>>,
    counts: Arc<Counts>,
    cuts: Arc<tokio::sync::watch::Sender<u64>>,
}

type ProxyError = Box<dyn std::error::Error + Send + Sync>;

async fn serve(listener: tokio::net::TcpListener, acceptor: tokio_rustls::TlsAcceptor, shared: Arc<Shared>) {
    while let Ok((tcp, _)) = listener.accept().await {
        let (acceptor, shared) = (acceptor.clone(), shared.clone());
        tokio::spawn(async move {
            let Ok(tls) = acceptor.accept(tcp).await else {
                return;
            };
            let mut cuts = shared.cuts.subscribe();
            let service = hyper::service::service_fn(move |request| forward(shared.clone(), request));
            let builder = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new());
            // Dropping the connection's future closes it, with whatever it streams.
            tokio::select! {
                _ = builder.serve_connection(TokioIo::new(tls), service) => {}
                _ = cuts.changed() => {}
            }
        });
    }
}

/// A request's trouble, then the apiserver's answer streamed back. An error cuts the operator's connection, as a
/// dead apiserver would.
async fn forward(
    shared: Arc<Shared>,
    request: hyper::Request<Incoming>,
) -> Result<hyper::Response<Streamed>, ProxyError> {
    let n = shared.counts.requests.fetch_add(1, Ordering::Relaxed);
    let trouble = *shared.trouble.read().unwrap_or_else(|poisoned| poisoned.into_inner());
    if trouble.down {
        shared.counts.cut.fetch_add(1, Ordering::Relaxed);
        return Err("the apiserver is down".into());
    }
    if trouble
        .unavailable
        .is_some_and(|resource| request.uri().path().contains(resource))
    {
        shared.counts.answered_503.fetch_add(1, Ordering::Relaxed);
        return Ok(unavailable());
    }
    if trouble.watches_gone && resumes_a_watch(request.uri()) {
        shared.counts.watches_gone.fetch_add(1, Ordering::Relaxed);
        return Ok(gone());
    }
    if !trouble.latency.is_zero() {
        tokio::time::sleep(trouble.latency).await;
    }
    match fate(&trouble, n) {
        Fate::Pass => {}
        Fate::Answer504 => {
            shared.counts.answered_504.fetch_add(1, Ordering::Relaxed);
            return Ok(gateway_timeout());
        }
        Fate::Hold => {
            shared.counts.held.fetch_add(1, Ordering::Relaxed);
            tokio::time::sleep(trouble.held_for).await;
            return Ok(gateway_timeout());
        }
    }
    pass_on(&shared, request).await.inspect_err(|_| {
        shared.counts.cut.fetch_add(1, Ordering::Relaxed);
    })
}

/// A watch that resumes from a resourceVersion (not a list, not a watch from "now").
fn resumes_a_watch(uri: &http::Uri) -> bool {
    let query = uri.query().unwrap_or_default();
    let pairs: Vec<&str> = query.split('&').collect();
    let watch = pairs.iter().any(|pair| *pair == "watch=true" || *pair == "watch=1");
    let from = pairs
        .iter()
        .find_map(|pair| pair.strip_prefix("resourceVersion="))
        .filter(|version| !version.is_empty() && *version != "0");
    watch && from.is_some()
}

/// Headers that belong to one connection, not to the request or answer.
const HOP_BY_HOP: [&str; 7] = [
    "connection",
    "keep-alive",
    "proxy-connection",
    "transfer-encoding",
    "te",
    "upgrade",
    "host",
];

async fn pass_on(shared: &Shared, request: hyper::Request<Incoming>) -> Result<hyper::Response<Streamed>, ProxyError> {
    let (parts, mut body) = request.into_parts();
    let path = parts.uri.path_and_query().map(|p| p.as_str()).unwrap_or("/");
    let mut upstream = shared
        .client
        .request(parts.method.clone(), format!("{}{path}", shared.upstream));
    for (name, value) in &parts.headers {
        if !HOP_BY_HOP.contains(&name.as_str()) {
            upstream = upstream.header(name, value);
        }
    }
    let mut sent = Vec::new();
    while let Some(frame) = std::future::poll_fn(|cx| Pin::new(&mut body).poll_frame(cx)).await {
        if let Ok(data) = frame?.into_data() {
            sent.extend_from_slice(&data);
        }
    }
    let mut answer = upstream.body(sent).send().await?;
    let mut response = hyper::Response::builder().status(answer.status());
    for (name, value) in answer.headers() {
        if !HOP_BY_HOP.contains(&name.as_str()) {
            response = response.header(name, value);
        }
    }
    let (sender, receiver) = mpsc::channel(4);
    tokio::spawn(async move {
        loop {
            let chunk = match answer.chunk().await {
                Ok(Some(chunk)) => Ok(chunk),
                Ok(None) => return,
                Err(err) => Err(std::io::Error::other(err)),
            };
            let failed = chunk.is_err();
            if sender.send(chunk).await.is_err() || failed {
                return;
            }
        }
    });
    Ok(response.body(Streamed::Chunks(receiver))?)
}

/// What an overloaded kube-apiserver's timeout filter answers.
fn gateway_timeout() -> hyper::Response<Streamed> {
    status_answer(
        http::StatusCode::GATEWAY_TIMEOUT,
        r#"{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"Timeout: request did not complete within requested timeout - context deadline exceeded","reason":"Timeout","details":{},"code":504}"#,
    )
}

/// What an apiserver answers for a resource it cannot serve for now.
fn unavailable() -> hyper::Response<Streamed> {
    status_answer(
        http::StatusCode::SERVICE_UNAVAILABLE,
        r#"{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"the server is currently unable to handle the request","reason":"ServiceUnavailable","code":503}"#,
    )
}

/// What a new apiserver answers a watch from a resourceVersion its watch cache does not hold.
fn gone() -> hyper::Response<Streamed> {
    status_answer(
        http::StatusCode::GONE,
        r#"{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"too old resource version","reason":"Expired","code":410}"#,
    )
}

fn status_answer(code: http::StatusCode, status: &'static str) -> hyper::Response<Streamed> {
    let mut response = hyper::Response::new(Streamed::Whole(Some(Bytes::from_static(status.as_bytes()))));
    *response.status_mut() = code;
    response.headers_mut().insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static("application/json"),
    );
    response
}

/// An answer's body: whole, or the apiserver's chunks as they come.
pub enum Streamed {
    Whole(Option<Bytes>),
    Chunks(mpsc::Receiver<Result<Bytes, std::io::Error>>),
}

impl Body for Streamed {
    type Data = Bytes;
    type Error = std::io::Error;

    fn poll_frame(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        match &mut *self {
            Streamed::Whole(bytes) => Poll::Ready(bytes.take().map(|bytes| Ok(Frame::data(bytes)))),
            Streamed::Chunks(receiver) => receiver
                .poll_recv(cx)
                .map(|chunk| chunk.map(|chunk| chunk.map(Frame::data))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shares_pick_requests_evenly_and_apart() {
        let trouble = Trouble {
            share_504: 0.05,
            share_held: 0.01,
            ..Trouble::NONE
        };
        let fates: Vec<Fate> = (0..1000).map(|n| fate(&trouble, n)).collect();
        assert_eq!(fates.iter().filter(|f| **f == Fate::Answer504).count(), 50);
        assert_eq!(fates.iter().filter(|f| **f == Fate::Hold).count(), 10);
        assert_eq!(fates[19], Fate::Answer504);
        assert_eq!(fates[18], Fate::Pass);
        assert!((0..1000).all(|n| fate(&Trouble::NONE, n) == Fate::Pass));
    }

    #[test]
    fn the_operator_kubeconfig_points_at_the_proxy() {
        let plane = "clusters:\n- cluster:\n    server: https://127.0.0.1:1\n    certificate-authority-data: AAA\n\
                     users:\n- user:\n    token: secret\n";
        let config = operator_kubeconfig(plane, "https://127.0.0.1:2", "PEM").expect("kubeconfig");
        assert!(config.contains("    server: https://127.0.0.1:2\n"), "{config}");
        assert!(config.contains("certificate-authority-data: UEVN\n"), "{config}");
        assert!(config.contains("token: secret"), "{config}");
        assert!(operator_kubeconfig("nothing", "x", "y").is_err());
    }

    #[test]
    fn only_watches_that_resume_from_a_version_are_gone() {
        let uri = |text: &str| text.parse::<http::Uri>().expect("uri");
        assert!(resumes_a_watch(&uri("/api/v1/secrets?watch=true&resourceVersion=42")));
        assert!(!resumes_a_watch(&uri("/api/v1/secrets?watch=true&resourceVersion=0")));
        assert!(!resumes_a_watch(&uri("/api/v1/secrets?limit=500")));
        assert!(!resumes_a_watch(&uri("/api/v1/secrets?resourceVersion=42")));
    }
}
