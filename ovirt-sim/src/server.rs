//! The HTTP(S) front: request pipeline (faults, counters, auth, correlation ids), the listener and
//! the [`Simulator`] builder and handle.

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, RwLock};
use std::time::Duration;

use bytes::Bytes;
use http::{HeaderMap, Method};
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::service::TowerToHyperService;
use tokio::net::TcpListener;
use tokio::sync::oneshot;
use warp::Filter;

use crate::control::{BodyFault, Control, FaultInjection};
use crate::engine::{self, Timings};
use crate::inventory::{self, Inventory};
use crate::state::{EngineVersion, Scheduled, State};
use crate::wire::{Format, Reply};
use crate::{api, control, sso};

const API_PREFIX: &str = "/ovirt-engine/api";

/// State shared by all connections and timers.
pub struct Shared {
    state: Mutex<State>,
    pub(crate) timings: RwLock<Timings>,
    pub(crate) faults: RwLock<FaultInjection>,
    pub(crate) counters: Mutex<BTreeMap<String, u64>>,
    pub(crate) token_ttl: RwLock<Option<Duration>>,
    /// The most recent correlation ids received, oldest first.
    pub(crate) correlation_ids: Mutex<std::collections::VecDeque<String>>,
    /// Bytes of oversized answers generated so far ([`crate::control::BodyFault::Oversized`]).
    pub(crate) streamed_bytes: Arc<AtomicU64>,
    /// Bytes of every engine answer body (API and SSO), for benchmarks: what clients download.
    pub(crate) response_bytes: AtomicU64,
    /// Every API write received (most recent [`REMEMBERED_WRITES`]), with who sent it: tests check that two
    /// replicas never wrote at once.
    pub(crate) writes: Mutex<std::collections::VecDeque<WriteRecord>>,
    /// False while the simulator refuses connections (its port closed, open connections dropped), as a stopped
    /// engine or a host that is down; see [`crate::Control::set_refusing_connections`].
    pub(crate) listening: tokio::sync::watch::Sender<bool>,
}

/// Counter prefix of request bodies refused by the model check.
pub(crate) const REJECTED_BODY: &str = "rejected-body ";
/// One API write (`POST`, `PUT`, `DELETE`) as the engine received it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct WriteRecord {
    /// When it arrived, in milliseconds since the Unix epoch.
    pub received_ms: u64,
    pub method: String,
    pub path: String,
    /// The sender's User-Agent (CAPOV's names its replica).
    pub user_agent: String,
    /// The answer's status.
    pub status: u16,
}

/// How many writes the simulator remembers.
const REMEMBERED_WRITES: usize = 100_000;

/// How many correlation ids the simulator remembers.
const REMEMBERED_CORRELATION_IDS: usize = 1000;

impl Shared {
    /// The engine state. Never held across an await.
    pub fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub fn timings(&self) -> Timings {
        *self.timings.read().unwrap_or_else(|e| e.into_inner())
    }

    pub fn faults(&self) -> FaultInjection {
        self.faults.read().unwrap_or_else(|e| e.into_inner()).clone()
    }

    pub fn token_ttl(&self) -> Option<Duration> {
        *self.token_ttl.read().unwrap_or_else(|e| e.into_inner())
    }

    /// Runs delayed transitions on a tokio timer (no thread per VM): the steps of one operation in one task, in
    /// their order. On separate timers, a late runtime (a busy machine) could wake a later step first, e.g. a boot's
    /// device report before its `up`, which then never came.
    pub fn schedule(self: &Arc<Self>, mut items: Vec<Scheduled>) {
        if items.is_empty() {
            return;
        }
        items.sort_by_key(|item| item.after);
        let shared = Arc::clone(self);
        let start = tokio::time::Instant::now();
        tokio::spawn(async move {
            for item in items {
                tokio::time::sleep_until(start + item.after).await;
                let timings = shared.timings();
                let more = engine::apply(&mut shared.lock(), &timings, &item);
                shared.schedule(more);
            }
        });
    }

    /// An injected error for this API request, if the fault settings call for one.
    fn injected_error(&self, req: &Incoming, format: Format) -> Option<Reply> {
        let mut faults = self.faults.write().unwrap_or_else(|e| e.into_inner());
        if !fault_matches(&faults, req) {
            return None;
        }
        let hit = if faults.fail_next > 0 {
            faults.fail_next -= 1;
            true
        } else {
            faults.error_rate > 0.0 && fastrand::f64() < faults.error_rate
        };
        if !hit {
            return None;
        }
        Some(match &faults.error_detail {
            Some(detail) => crate::wire::error(&engine::operation_failed(faults.error_status, detail), format),
            None => Reply::empty(faults.error_status),
        })
    }

    /// The outcome of the disk copy of an accepted add, consuming one injected copy failure if any.
    pub(crate) fn take_copy_fault(&self) -> crate::state::CopyOutcome {
        let mut faults = self.faults.write().unwrap_or_else(|e| e.into_inner());
        if faults.vanishing_creates > 0 {
            faults.vanishing_creates -= 1;
            crate::state::CopyOutcome::Vanishes
        } else if faults.illegal_creates > 0 {
            faults.illegal_creates -= 1;
            crate::state::CopyOutcome::Illegal
        } else {
            crate::state::CopyOutcome::Succeeds
        }
    }

    /// Counts a request body the engine would refuse, under `rejected-body {service/methods/name}` (outside `total`).
    pub(crate) fn count_rejected_body(&self, usage: &str) {
        let mut counters = self.counters.lock().unwrap_or_else(|e| e.into_inner());
        *counters.entry(format!("{REJECTED_BODY}{usage}")).or_insert(0) += 1;
    }

    fn record_write(&self, record: WriteRecord) {
        let mut writes = self.writes.lock().unwrap_or_else(|e| e.into_inner());
        if writes.len() == REMEMBERED_WRITES {
            writes.pop_front();
        }
        writes.push_back(record);
    }

    fn count(&self, key: String) {
        let mut counters = self.counters.lock().unwrap_or_else(|e| e.into_inner());
        *counters.entry(key).or_insert(0) += 1;
        *counters.entry("total".to_string()).or_insert(0) += 1;
    }
}

/// Whether injected faults apply to this request (`path_contains`, `method`).
fn fault_matches(faults: &FaultInjection, req: &Incoming) -> bool {
    faults.path_contains.as_deref().is_none_or(|p| req.path.contains(p))
        && faults
            .method
            .as_deref()
            .is_none_or(|m| m.eq_ignore_ascii_case(req.method.as_str()))
}

/// The answer a [`BodyFault`] puts in place of `reply`.
fn faulty_body(fault: &BodyFault, reply: Reply) -> Reply {
    let xml = |body: String| Reply {
        status: 200,
        headers: vec![("Content-Type", "application/xml;charset=UTF-8".into())],
        body: body.into_bytes(),
        streamed: None,
    };
    match fault {
        BodyFault::Oversized { bytes, announce_length } => {
            let mut headers = vec![("Content-Type", "application/xml;charset=UTF-8".to_string())];
            if *announce_length {
                headers.push(("Content-Length", bytes.to_string()));
            }
            Reply {
                status: 200,
                headers,
                body: Vec::new(),
                streamed: Some(crate::wire::Streamed {
                    bytes: *bytes,
                    then_stall: false,
                }),
            }
        }
        BodyFault::Stalled { bytes } => Reply {
            status: 200,
            headers: vec![("Content-Type", "application/xml;charset=UTF-8".into())],
            body: Vec::new(),
            streamed: Some(crate::wire::Streamed {
                bytes: *bytes,
                then_stall: true,
            }),
        },
        BodyFault::ForeignRoot { root } => xml(format!(
            "{}\n<{root}>\n    <detail>not what was asked for</detail>\n</{root}>\n",
            capov_ovirt::xml::XML_DECLARATION
        )),
        BodyFault::Html => Reply {
            status: 200,
            headers: vec![("Content-Type", "text/html;charset=UTF-8".into())],
            body: b"<!DOCTYPE html>\n<html><head><title>Sign in</title></head><body><h1>Sign in</h1></body></html>\n"
                .to_vec(),
            streamed: None,
        },
        BodyFault::Truncated => {
            let mut reply = reply;
            let keep = reply.body.len() / 2;
            reply.body.truncate(keep);
            reply
        }
    }
}

/// Chunks of an oversized answer: an XML-looking start, then filler, made one at a time as the connection takes
/// them (hyper polls the body only when the socket can take more), each counted into `streamed`.
fn oversized_stream(
    body: crate::wire::Streamed,
    streamed: Arc<AtomicU64>,
) -> impl futures::Stream<Item = Result<Bytes, Infallible>> + Send + Sync + 'static {
    use futures::StreamExt as _;
    let total = body.bytes;
    const CHUNK: usize = 64 << 10;
    let filler = Bytes::from({
        let mut chunk = b"<vms>".to_vec();
        chunk.resize(CHUNK, b' ');
        chunk
    });
    let chunks = total.div_ceil(CHUNK as u64);
    let made = futures::stream::iter((0..chunks).map(move |index| {
        let len = (total - index * CHUNK as u64).min(CHUNK as u64) as usize;
        streamed.fetch_add(len as u64, Ordering::Relaxed);
        Ok(filler.slice(..len))
    }));
    // An Option of a stream is no stream; a stream of zero or one `pending` streams, flattened, is.
    let stall = futures::stream::iter(
        body.then_stall
            .then(futures::stream::pending::<Result<Bytes, Infallible>>),
    );
    made.chain(stall.flatten())
}

/// One received request.
pub struct Incoming {
    pub method: Method,
    pub path: String,
    pub query: Vec<(String, String)>,
    pub headers: HeaderMap,
    pub body: Bytes,
}

impl Incoming {
    pub fn param(&self, name: &str) -> Option<&str> {
        self.query.iter().find(|(k, _)| k == name).map(|(_, v)| v.as_str())
    }

    /// The engine's boolean parameter rules: empty = true, t/true/y/yes/1 and f/false/n/no/0,
    /// anything else is ignored.
    pub fn bool_param(&self, name: &str) -> Option<bool> {
        match self.param(name)?.to_ascii_lowercase().as_str() {
            "" | "t" | "true" | "y" | "yes" | "1" => Some(true),
            "f" | "false" | "n" | "no" | "0" => Some(false),
            _ => None,
        }
    }

    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }

    /// URL-encoded form fields of the body.
    pub fn form(&self) -> Vec<(String, String)> {
        form_urlencoded::parse(&self.body).into_owned().collect()
    }
}

/// `GET /vms/{id}/nics` style key: every second segment is an id.
fn endpoint_key(method: &Method, path: &str) -> String {
    let pattern: Vec<&str> = path
        .split('/')
        .filter(|s| !s.is_empty())
        .enumerate()
        .map(|(i, s)| if i % 2 == 1 { "{id}" } else { s })
        .collect();
    format!("{method} /{}", pattern.join("/"))
}

fn api_path(path: &str) -> Option<&str> {
    let rest = path.strip_prefix(API_PREFIX)?;
    let rest = rest
        .strip_prefix("/v4")
        .filter(|r| r.is_empty() || r.starts_with('/'))
        .unwrap_or(rest);
    (rest.is_empty() || rest.starts_with('/')).then_some(rest)
}

async fn respond(shared: Arc<Shared>, req: Incoming) -> Reply {
    if let Some(rest) = req.path.strip_prefix("/sim/") {
        let path: Vec<&str> = rest.split('/').filter(|s| !s.is_empty()).collect();
        return control::handle(&Control { shared: shared.clone() }, &req, &path);
    }
    let correlation_id = req
        .header("correlation-id")
        .or_else(|| req.param("correlation_id"))
        .map(str::to_string);
    if let Some(id) = &correlation_id {
        let mut seen = shared.correlation_ids.lock().unwrap_or_else(|e| e.into_inner());
        if seen.len() == REMEMBERED_CORRELATION_IDS {
            seen.pop_front();
        }
        seen.push_back(id.clone());
    }
    let reply = engine_reply(&shared, &req).await;
    shared
        .response_bytes
        .fetch_add(reply.body.len() as u64, std::sync::atomic::Ordering::Relaxed);
    if let Some(slow) = shared.faults().slow_replies
        && slow.matches(req.method.as_str(), &req.path)
    {
        tokio::time::sleep(Duration::from_millis(slow.delay_ms)).await;
    }
    match correlation_id {
        Some(id) => reply.with_header("Correlation-Id", id),
        None => reply,
    }
}

async fn engine_reply(shared: &Arc<Shared>, req: &Incoming) -> Reply {
    let faults = shared.faults();
    let api_rest = api_path(&req.path);
    let key = match (api_rest, req.path.as_str()) {
        (Some(rest), _) => endpoint_key(&req.method, rest),
        (None, path @ ("/ovirt-engine/sso/oauth/token" | "/ovirt-engine/services/sso-logout")) => {
            format!("{} {path}", req.method)
        }
        // Arbitrary paths must not grow the counter map without bound.
        (None, _) => format!("{} (other)", req.method),
    };
    shared.count(key);
    if faults.latency_ms > 0 {
        tokio::time::sleep(Duration::from_millis(faults.latency_ms)).await;
    }
    if faults.outage {
        return Reply::empty(503);
    }
    match (&req.method, req.path.as_str(), api_rest) {
        (&Method::POST, "/ovirt-engine/sso/oauth/token", _) => sso::token(shared, req),
        (&Method::POST, "/ovirt-engine/services/sso-logout", _) => sso::logout(shared, req),
        (_, _, Some(rest)) => {
            let Some(user) = sso::authorized(shared, req) else {
                return Reply::empty(401).with_header("WWW-Authenticate", "Basic realm=\"RESTAPI\"");
            };
            let caller = api::Caller::of(shared, req, user);
            let format = Format::from_accept(req.header("accept"));
            let injection_armed = faults.fail_next > 0 || faults.error_rate > 0.0;
            if let Some(injected) = injection_armed.then(|| shared.injected_error(req, format)).flatten() {
                return injected;
            }
            let segments: Vec<&str> = rest.split('/').filter(|s| !s.is_empty()).collect();
            let received_ms = u64::try_from(crate::ids::now_millis()).unwrap_or_default();
            let matching = (faults.body_fault.is_some() || faults.writes_without_effect) && fault_matches(&faults, req);
            let write = matches!(req.method, Method::PUT | Method::POST | Method::DELETE);
            let reply = if matching && faults.writes_without_effect && write {
                let read = Incoming {
                    method: Method::GET,
                    path: req.path.clone(),
                    query: Vec::new(),
                    headers: req.headers.clone(),
                    body: Bytes::new(),
                };
                api::handle(shared, &read, &segments, format, &caller)
            } else {
                api::handle(shared, req, &segments, format, &caller)
            };
            if write {
                shared.record_write(WriteRecord {
                    received_ms,
                    method: req.method.to_string(),
                    path: req.path.clone(),
                    user_agent: req.header("user-agent").unwrap_or_default().to_string(),
                    status: reply.status,
                });
            }
            match faults.body_fault.as_ref().filter(|_| matching) {
                Some(fault) => faulty_body(fault, reply),
                None => reply,
            }
        }
        _ => Reply::empty(404),
    }
}

fn into_response(reply: Reply, streamed: &Arc<AtomicU64>) -> warp::reply::Response {
    use warp::Reply as _;
    let mut response = match reply.streamed {
        Some(body) => warp::reply::stream(oversized_stream(body, streamed.clone())).into_response(),
        None => http::Response::new(Bytes::from(reply.body)).into_response(),
    };
    *response.status_mut() =
        http::StatusCode::from_u16(reply.status).unwrap_or(http::StatusCode::INTERNAL_SERVER_ERROR);
    for (name, value) in reply.headers {
        if let Ok(value) = http::HeaderValue::from_str(&value) {
            response.headers_mut().append(name, value);
        }
    }
    response
}

/// Configures and starts a simulator.
pub struct SimulatorBuilder {
    listen: SocketAddr,
    tls: bool,
    users: Vec<(String, String)>,
    inventory: Inventory,
    timings: Timings,
    token_ttl: Option<Duration>,
    tls_names: Vec<String>,
    engine_version: EngineVersion,
    non_admin_users: Vec<String>,
}

/// Entry point: `Simulator::builder()...start().await`.
pub struct Simulator;

impl Simulator {
    /// Defaults: `127.0.0.1:0`, HTTPS with a generated CA, user `admin@internal`/`admin`, the
    /// default inventory, fast timings, tokens that do not expire.
    pub fn builder() -> SimulatorBuilder {
        SimulatorBuilder {
            listen: SocketAddr::from(([127, 0, 0, 1], 0)),
            tls: true,
            users: Vec::new(),
            inventory: inventory::default_inventory(),
            timings: Timings::fast(),
            token_ttl: None,
            tls_names: Vec::new(),
            engine_version: EngineVersion::DEFAULT,
            non_admin_users: Vec::new(),
        }
    }
}

impl SimulatorBuilder {
    pub fn listen(mut self, addr: SocketAddr) -> Self {
        self.listen = addr;
        self
    }

    /// Serve plain HTTP instead of HTTPS.
    pub fn plain_http(mut self) -> Self {
        self.tls = false;
        self
    }

    /// Adds a user (`name@domain`) with an administrative role; without any user, `admin@internal`/`admin` exists.
    pub fn user(mut self, name: &str, password: &str) -> Self {
        self.users.push((name.to_string(), password.to_string()));
        self
    }

    /// Adds a user without an administrative role (see [`crate::Control::set_user_admin`]).
    pub fn non_admin_user(mut self, name: &str, password: &str) -> Self {
        self.users.push((name.to_string(), password.to_string()));
        self.non_admin_users.push(name.to_string());
        self
    }

    pub fn inventory(mut self, inventory: Inventory) -> Self {
        self.inventory = inventory;
        self
    }

    pub fn timings(mut self, timings: Timings) -> Self {
        self.timings = timings;
        self
    }

    pub fn token_ttl(mut self, ttl: Duration) -> Self {
        self.token_ttl = Some(ttl);
        self
    }

    /// The engine release to play (default 4.4.10): gates request elements such as `use_ignition` (from 4.4.0).
    pub fn engine_version(mut self, version: EngineVersion) -> Self {
        self.engine_version = version;
        self
    }

    /// Extra DNS names / IPs for the server certificate.
    pub fn tls_name(mut self, name: &str) -> Self {
        self.tls_names.push(name.to_string());
        self
    }

    pub async fn start(self) -> std::io::Result<SimulatorHandle> {
        // Processes embedding the simulator talk HTTPS too: make ring the process default.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let io_err = |e: String| std::io::Error::other(e);
        let mut state = State {
            engine_version: self.engine_version,
            ..State::default()
        };
        inventory::seed(&mut state, &self.inventory).map_err(io_err)?;
        if self.users.is_empty() {
            state.users.insert("admin@internal".into(), "admin".into());
        }
        state.non_admin_users.extend(self.non_admin_users.iter().cloned());
        for (name, password) in &self.users {
            state.users.insert(name.clone(), password.clone());
        }
        let shared = Arc::new(Shared {
            state: Mutex::new(state),
            timings: RwLock::new(self.timings),
            faults: RwLock::new(FaultInjection::default()),
            counters: Mutex::new(BTreeMap::new()),
            token_ttl: RwLock::new(self.token_ttl),
            correlation_ids: Mutex::new(std::collections::VecDeque::new()),
            writes: Mutex::new(std::collections::VecDeque::new()),
            listening: tokio::sync::watch::channel(true).0,
            streamed_bytes: Arc::new(AtomicU64::new(0)),
            response_bytes: AtomicU64::new(0),
        });

        let listener = TcpListener::bind(self.listen).await?;
        let addr = listener.local_addr()?;
        let (acceptor, ca_pem) = if self.tls {
            let mut names = self.tls_names.clone();
            names.push(addr.ip().to_string());
            let generated = crate::tls::generate(&names).map_err(io_err)?;
            (
                Some(tokio_rustls::TlsAcceptor::from(generated.server_config)),
                Some(generated.ca_pem),
            )
        } else {
            (None, None)
        };

        let filter_shared = shared.clone();
        let filter = warp::method()
            .and(warp::path::full())
            .and(warp::query::raw().or(warp::any().map(String::new)).unify())
            .and(warp::header::headers_cloned())
            .and(warp::body::bytes())
            .and_then(
                move |method: Method, path: warp::path::FullPath, query: String, headers: HeaderMap, body: Bytes| {
                    let shared = filter_shared.clone();
                    async move {
                        let query = form_urlencoded::parse(query.as_bytes()).into_owned().collect();
                        let request = Incoming {
                            method,
                            path: path.as_str().to_string(),
                            query,
                            headers,
                            body,
                        };
                        let streamed = shared.streamed_bytes.clone();
                        Ok::<_, Infallible>(into_response(respond(shared, request).await, &streamed))
                    }
                },
            );
        let service = warp::service(filter);

        let (stop_tx, mut stop_rx) = oneshot::channel::<()>();
        let mut listening = shared.listening.subscribe();
        let task = tokio::spawn(async move {
            let mut listener = Some(listener);
            loop {
                let Some(open) = &listener else {
                    // Refusing connections: the port stays closed until the control interface opens it again.
                    tokio::select! {
                        changed = listening.wait_for(|up| *up) => if changed.is_err() { break },
                        _ = &mut stop_rx => break,
                    }
                    listener = rebind(addr).await;
                    continue;
                };
                let accepted = tokio::select! {
                    accepted = open.accept() => accepted,
                    _ = listening.wait_for(|up| !*up) => {
                        listener = None;
                        continue;
                    }
                    _ = &mut stop_rx => break,
                };
                let Ok((tcp, _)) = accepted else { continue };
                let _ = tcp.set_nodelay(true);
                let service = service.clone();
                let acceptor = acceptor.clone();
                let mut closing = listening.clone();
                tokio::spawn(async move {
                    let serve = async move {
                        let builder = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new());
                        let hyper_service = TowerToHyperService::new(service);
                        match acceptor {
                            Some(acceptor) => {
                                let Ok(tls) = acceptor.accept(tcp).await else {
                                    return;
                                };
                                let _ = builder.serve_connection(TokioIo::new(tls), hyper_service).await;
                            }
                            None => {
                                let _ = builder.serve_connection(TokioIo::new(tcp), hyper_service).await;
                            }
                        }
                    };
                    // Going down drops open connections too: a kept-alive connection must not outlive the outage.
                    tokio::select! {
                        () = serve => {}
                        _ = closing.wait_for(|up| !*up) => {}
                    }
                });
            }
        });

        let scheme = if self.tls { "https" } else { "http" };
        let host = if addr.ip().is_unspecified() {
            "127.0.0.1".to_string()
        } else {
            addr.ip().to_string()
        };
        let host = if host.contains(':') { format!("[{host}]") } else { host };
        Ok(SimulatorHandle {
            addr,
            base_url: format!("{scheme}://{host}:{}", addr.port()),
            ca_pem,
            control: Control { shared },
            stop: Some(stop_tx),
            task,
        })
    }
}

/// Opens the simulator's port again after an outage (the same address, so that clients find it where it was).
async fn rebind(addr: SocketAddr) -> Option<TcpListener> {
    for _ in 0..50 {
        if let Ok(listener) = TcpListener::bind(addr).await {
            return Some(listener);
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    None
}

/// A running simulator; stops accepting connections when dropped.
pub struct SimulatorHandle {
    addr: SocketAddr,
    base_url: String,
    ca_pem: Option<String>,
    control: Control,
    stop: Option<oneshot::Sender<()>>,
    task: tokio::task::JoinHandle<()>,
}

impl SimulatorHandle {
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `https://127.0.0.1:PORT`.
    pub fn base_url(&self) -> &str {
        &self.base_url
    }

    /// `https://127.0.0.1:PORT/ovirt-engine/api`.
    pub fn api_url(&self) -> String {
        format!("{}{API_PREFIX}", self.base_url)
    }

    /// PEM of the CA that signed the server certificate (None for plain HTTP).
    pub fn ca_pem(&self) -> Option<&str> {
        self.ca_pem.as_deref()
    }

    pub fn control(&self) -> &Control {
        &self.control
    }

    /// Stops accepting connections and waits for the listener to close.
    pub async fn shutdown(mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        let _ = (&mut self.task).await;
    }
}

impl Drop for SimulatorHandle {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn endpoint_keys_hide_ids() {
        assert_eq!(
            endpoint_key(&Method::GET, "/vms/abc/nics/def"),
            "GET /vms/{id}/nics/{id}"
        );
        assert_eq!(endpoint_key(&Method::POST, "/vms/abc/start"), "POST /vms/{id}/start");
        assert_eq!(endpoint_key(&Method::GET, ""), "GET /");
    }

    #[test]
    fn api_prefix_with_and_without_version() {
        assert_eq!(api_path("/ovirt-engine/api/vms"), Some("/vms"));
        assert_eq!(api_path("/ovirt-engine/api/v4/vms"), Some("/vms"));
        assert_eq!(api_path("/ovirt-engine/api"), Some(""));
        assert_eq!(api_path("/ovirt-engine/apix"), None);
    }
}
