//! The HTTP(S) front: the listener that hands each request to [`crate::routes`], and the [`Simulator`] builder and
//! handle.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use bytes::Bytes;
use http::{HeaderMap, Method};
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::service::TowerToHyperService;
use tokio::net::TcpListener;
use tokio::sync::oneshot;
use warp::Filter;

use crate::control::Control;
use crate::engine::Timings;
use crate::inventory::{self, Inventory};
use crate::request::Incoming;
use crate::routes::{API_PREFIX, respond};
use crate::shared::Shared;
use crate::state::{EngineVersion, State};
use crate::wire::Reply;

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

    /// The engine state to start with: the inventory seeded, the users added (`admin@internal` when none was).
    fn initial_state(&self) -> Result<State, String> {
        let mut state = State {
            engine_version: self.engine_version,
            ..State::default()
        };
        inventory::seed(&mut state, &self.inventory)?;
        if self.users.is_empty() {
            state.users.insert("admin@internal".into(), "admin".into());
        }
        state.non_admin_users.extend(self.non_admin_users.iter().cloned());
        for (name, password) in &self.users {
            state.users.insert(name.clone(), password.clone());
        }
        Ok(state)
    }

    /// For HTTPS, the acceptor with a certificate for `addr` and the extra names, and the PEM of the CA that signed
    /// it; neither for plain HTTP.
    fn tls_acceptor(&self, addr: SocketAddr) -> std::io::Result<(Option<tokio_rustls::TlsAcceptor>, Option<String>)> {
        if !self.tls {
            return Ok((None, None));
        }
        let mut names = self.tls_names.clone();
        names.push(addr.ip().to_string());
        let generated = crate::tls::generate(&names).map_err(std::io::Error::other)?;
        Ok((
            Some(tokio_rustls::TlsAcceptor::from(generated.server_config)),
            Some(generated.ca_pem),
        ))
    }

    pub async fn start(self) -> std::io::Result<SimulatorHandle> {
        // Processes embedding the simulator talk HTTPS too: make ring the process default.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let state = self.initial_state().map_err(std::io::Error::other)?;
        let shared = Arc::new(Shared::new(state, self.timings, self.token_ttl));

        let listener = TcpListener::bind(self.listen).await?;
        let addr = listener.local_addr()?;
        let (acceptor, ca_pem) = self.tls_acceptor(addr)?;
        let service = warp::service(request_filter(shared.clone()));

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

        Ok(SimulatorHandle {
            addr,
            base_url: base_url(self.tls, addr),
            ca_pem,
            control: Control { shared },
            stop: Some(stop_tx),
            task,
        })
    }
}

/// Every request, whatever its method and path, as an [`Incoming`] handed to [`respond`].
fn request_filter(
    shared: Arc<Shared>,
) -> impl Filter<Extract = (warp::reply::Response,), Error = warp::Rejection> + Clone + Send + Sync + 'static {
    warp::method()
        .and(warp::path::full())
        .and(warp::query::raw().or(warp::any().map(String::new)).unify())
        .and(warp::header::headers_cloned())
        .and(warp::body::bytes())
        .and_then(
            move |method: Method, path: warp::path::FullPath, query: String, headers: HeaderMap, body: Bytes| {
                let shared = shared.clone();
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
        )
}

/// `https://127.0.0.1:PORT` (`http` for plain HTTP; loopback for an unspecified address; IPv6 in brackets).
fn base_url(tls: bool, addr: SocketAddr) -> String {
    let scheme = if tls { "https" } else { "http" };
    let host = if addr.ip().is_unspecified() {
        "127.0.0.1".to_string()
    } else {
        addr.ip().to_string()
    };
    let host = if host.contains(':') { format!("[{host}]") } else { host };
    format!("{scheme}://{host}:{}", addr.port())
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
