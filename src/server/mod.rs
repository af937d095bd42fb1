//! Serving a warp filter on a TCP listener, over plain HTTP or TLS (warp 0.4 has no TLS of its own): each
//! connection is handed to hyper-util's HTTP/1 + HTTP/2 builder and driven by [`connection::drive`].
//!
//! The servers listen on the pod network, where any pod can connect, and the kubelet's probes must get through
//! whatever other clients do:
//! - a connection's place is given by [`admission`]: a fair share per client address (a newcomer takes the oldest
//!   connection of the address that holds the most), and a few reserved places for addresses that hold none;
//! - a connection lives by requests, not bytes ([`lifetime`]): its first request must begin soon after it is
//!   accepted (TLS handshake included), the next one soon after an answer, it serves a bounded number of them and
//!   is closed at a fixed age, however busy it keeps the socket;
//! - a connection silent for too long, or whose client stops reading its answer, ends ([`crate::idle`]).

mod admission;
mod connection;
mod lifetime;

pub use admission::Shares;
pub use lifetime::ConnectionLimits;

use std::future::Future;
use std::io;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use hyper_util::rt::{TokioExecutor, TokioTimer};
use hyper_util::server::conn::auto::Builder;
use hyper_util::service::TowerToHyperService;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Notify, mpsc, watch};
use tokio::task::JoinHandle;
use tokio::time::Instant;
use tokio_rustls::TlsAcceptor;
use warp::{Filter, Reply};

use crate::cli::ListenAddress;
use admission::{Admission, Admitted, Ticket};
use connection::{Counted, Ended, Stop, Tracker};

/// How long open connections may finish their requests after shutdown was asked for.
const DRAIN_TIMEOUT: Duration = Duration::from_secs(5);

/// What one server allows its clients.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// How many connections, and how they are shared between client addresses.
    pub shares: Shares,
    /// The life of a connection in the general budget.
    pub general: ConnectionLimits,
    /// The life of a reserved connection: one request, seconds.
    pub reserved: ConnectionLimits,
    /// A connection that sends and receives nothing for this long is closed, and so is one whose client stops
    /// reading its answer for this long.
    pub idle_timeout: Duration,
}

impl Limits {
    /// The probes server. The kubelet opens a connection per probe and sends its request at once, with a 1 s
    /// timeout by default; `/readyz` answers within 3 s (its API server check).
    pub fn probes() -> Limits {
        Limits {
            shares: Shares {
                connections: 64,
                reserve: 8,
                reserve_per_address: 2,
            },
            general: ConnectionLimits {
                first_request: Duration::from_secs(10),
                between_requests: Duration::from_secs(30),
                max_age: Duration::from_secs(60),
                max_requests: 100,
                // A metrics answer takes at most 25 s: 5 s for a review slot, then two reviews of 10 s.
                drain: Duration::from_secs(30),
            },
            reserved: ConnectionLimits {
                first_request: Duration::from_secs(3),
                between_requests: Duration::from_secs(3),
                max_age: Duration::from_secs(5),
                max_requests: 1,
                drain: Duration::from_secs(5),
            },
            idle_timeout: Duration::from_secs(30),
        }
    }

    /// The metrics server: as [`Limits::probes`], but a reserved connection lives long enough for the slowest
    /// authorized answer (25 s).
    pub fn metrics() -> Limits {
        let probes = Limits::probes();
        Limits {
            reserved: ConnectionLimits {
                max_age: Duration::from_secs(30),
                drain: Duration::from_secs(30),
                ..probes.reserved
            },
            ..probes
        }
    }
}

impl Default for Limits {
    fn default() -> Limits {
        Limits::probes()
    }
}

/// Binds `address`. Without a host, listens on every interface: IPv6 `[::]` (dual-stack where the kernel allows),
/// else IPv4 `0.0.0.0` (nodes with IPv6 disabled).
pub async fn bind(address: ListenAddress) -> io::Result<TcpListener> {
    match address.host {
        Some(host) => TcpListener::bind(SocketAddr::new(host, address.port)).await,
        None => match TcpListener::bind(SocketAddr::new(IpAddr::V6(Ipv6Addr::UNSPECIFIED), address.port)).await {
            Ok(listener) => Ok(listener),
            Err(_) => TcpListener::bind(SocketAddr::new(IpAddr::V4(Ipv4Addr::UNSPECIFIED), address.port)).await,
        },
    }
}

/// A running server: its address and the handle to stop it.
pub struct ServerHandle {
    local_addr: SocketAddr,
    stop: watch::Sender<bool>,
    task: JoinHandle<()>,
}

impl ServerHandle {
    /// The address actually bound (the port is known here when `:0` was asked for).
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// Stops accepting, lets open requests finish (up to a few seconds) and waits for the server task.
    pub async fn shutdown(self) {
        let _ = self.stop.send(true);
        let _ = self.task.await;
    }

    /// Stops the server without waiting.
    pub fn abort(&self) {
        let _ = self.stop.send(true);
    }
}

/// Serves `filter` on `listener` (TLS when `tls` is given) with `limits` in a background task until the handle is
/// shut down or dropped.
pub fn spawn<F>(
    listener: TcpListener,
    filter: F,
    tls: Option<Arc<rustls::ServerConfig>>,
    limits: Limits,
) -> io::Result<ServerHandle>
where
    F: Filter + Clone + Send + Sync + 'static,
    F::Extract: Reply,
{
    let local_addr = listener.local_addr()?;
    let (stop, stopped) = watch::channel(false);
    let acceptor = tls.map(TlsAcceptor::from);
    let task = tokio::spawn(run(listener, filter, acceptor, limits, wait_true(stopped)));
    Ok(ServerHandle { local_addr, stop, task })
}

async fn wait_true(mut stopped: watch::Receiver<bool>) {
    // Sender dropped (the handle went away) also stops the server.
    let _ = stopped.wait_for(|stop| *stop).await;
}

/// hyper-util's HTTP/1 + HTTP/2 builder. hyper's own deadline on an HTTP/1 request head is the first-request one;
/// [`lifetime`] applies the rest, to HTTP/2 as well.
fn builder(limits: &Limits) -> Builder<TokioExecutor> {
    let mut builder = Builder::new(TokioExecutor::new());
    builder
        .http1()
        .timer(TokioTimer::new())
        .header_read_timeout(limits.general.first_request);
    builder.http2().timer(TokioTimer::new()).max_concurrent_streams(16);
    builder
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// A connection's place, given back when its task ends.
struct Place {
    admission: Arc<Mutex<Admission<Arc<Notify>>>>,
    ticket: Ticket,
}

impl Drop for Place {
    fn drop(&mut self) {
        lock(&self.admission).release(&self.ticket);
    }
}

async fn run<F>(
    listener: TcpListener,
    filter: F,
    tls: Option<TlsAcceptor>,
    limits: Limits,
    shutdown: impl Future<Output = ()>,
) where
    F: Filter + Clone + Send + Sync + 'static,
    F::Extract: Reply,
{
    let service = warp::service(filter);
    let builder = builder(&limits);
    let admission = Arc::new(Mutex::new(Admission::new(limits.shares)));
    let (stop, stopping) = watch::channel(Stop::Serving);
    // Each connection's task holds a sender: the channel closes when the last one ends.
    let (alive, mut all_ended) = mpsc::channel::<()>(1);
    tokio::pin!(shutdown);
    loop {
        let (tcp, peer) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(err) => {
                    // Per-connection errors (e.g. EMFILE): back off briefly instead of spinning.
                    tracing::warn!(error = %err, "accepting a connection failed");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            },
            () = &mut shutdown => break,
        };
        let accepted = Instant::now();
        let kill = Arc::new(Notify::new());
        let admitted = lock(&admission).admit(peer.ip(), kill.clone());
        let ticket = match admitted {
            Admitted::General(ticket) => ticket,
            Admitted::Reserve(ticket) => {
                tracing::debug!(%peer, "server full; one of the reserved places, for one request");
                ticket
            }
            Admitted::Evicting(ticket, evicted) => {
                tracing::debug!(%peer, "server full; the oldest connection of the address holding the most is closed");
                evicted.notify_one();
                ticket
            }
            Admitted::Refused => {
                let (general, reserved, addresses) = {
                    let admission = lock(&admission);
                    let (general, reserved) = admission.open();
                    (general, reserved, admission.addresses())
                };
                tracing::debug!(%peer, general, reserved, addresses, "no place for the connection; closed at once");
                continue;
            }
        };
        let place = Place {
            admission: admission.clone(),
            ticket,
        };
        let limits_here = if ticket.reserved() {
            limits.reserved
        } else {
            limits.general
        };
        let tracker = Tracker::new(accepted, limits_here.max_requests);
        let service = Counted {
            inner: TowerToHyperService::new(service.clone()),
            tracker,
        };
        let connection = Connection {
            tcp,
            peer,
            accepted,
            limits: limits_here,
            idle_timeout: limits.idle_timeout,
            builder: builder.clone(),
            tls: tls.clone(),
        };
        let (alive, mut stopping) = (alive.clone(), stopping.clone());
        tokio::spawn(async move {
            let _place = place;
            let _alive = alive;
            let ended = connection.serve(service, &kill, &mut stopping).await;
            match ended {
                Ended::Finished(_, Err(err)) => tracing::debug!(%peer, error = %err, "connection ended with an error"),
                Ended::Finished(Some(why), Ok(())) => tracing::debug!(%peer, why = why.as_str(), "connection closed"),
                Ended::Finished(None, Ok(())) => {}
                Ended::Dropped(why) => tracing::debug!(%peer, why = why.as_str(), "connection dropped"),
                Ended::Evicted => tracing::debug!(%peer, "connection closed to make room for another client"),
            }
        });
    }
    drop(listener);
    let _ = stop.send(Stop::Draining);
    drop(alive);
    if tokio::time::timeout(DRAIN_TIMEOUT, all_ended.recv()).await.is_err() {
        let _ = stop.send(Stop::Now);
    }
}

/// An accepted connection and how to serve it.
struct Connection {
    tcp: TcpStream,
    peer: SocketAddr,
    accepted: Instant,
    limits: ConnectionLimits,
    idle_timeout: Duration,
    builder: Builder<TokioExecutor>,
    tls: Option<TlsAcceptor>,
}

impl Connection {
    async fn serve<S>(self, service: Counted<S>, kill: &Notify, stop: &mut watch::Receiver<Stop>) -> Ended
    where
        S: hyper::service::Service<
                http::Request<hyper::body::Incoming>,
                Response = warp::reply::Response,
                Error = std::convert::Infallible,
            > + Send
            + 'static,
        S::Future: Send + 'static,
    {
        // Bytes: silence, and a client that stops reading its answer. Requests are the driver's.
        let tcp = crate::idle::Idle::new(self.tcp, self.limits.first_request, self.idle_timeout);
        let Some(acceptor) = self.tls else {
            return connection::drive(&self.builder, tcp, service, &self.limits, self.accepted, kill, stop).await;
        };
        // The handshake counts towards the first request's deadline.
        let deadline = self.accepted + self.limits.first_request;
        let stream = tokio::select! {
            handshake = tokio::time::timeout_at(deadline, acceptor.accept(tcp)) => match handshake {
                Ok(Ok(stream)) => stream,
                Ok(Err(err)) => return Ended::Finished(None, Err(format!("TLS handshake failed: {err}"))),
                Err(_) => return Ended::Dropped(lifetime::Why::NoRequest),
            },
            () = kill.notified() => return Ended::Evicted,
            () = connection::stopped(stop, Stop::Draining) => return Ended::Dropped(lifetime::Why::Stopping),
        };
        tracing::trace!(peer = %self.peer, "TLS handshake done");
        connection::drive(&self.builder, stream, service, &self.limits, self.accepted, kill, stop).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::{TcpSocket, TcpStream};

    fn limits() -> Limits {
        Limits {
            shares: Shares {
                connections: 4,
                reserve: 0,
                reserve_per_address: 2,
            },
            general: ConnectionLimits {
                first_request: Duration::from_millis(300),
                between_requests: Duration::from_secs(2),
                max_age: Duration::from_secs(30),
                max_requests: 100,
                drain: Duration::from_secs(2),
            },
            reserved: ConnectionLimits {
                first_request: Duration::from_millis(300),
                between_requests: Duration::from_millis(300),
                max_age: Duration::from_secs(1),
                max_requests: 1,
                drain: Duration::from_secs(1),
            },
            idle_timeout: Duration::from_secs(2),
        }
    }

    async fn server(limits: Limits) -> ServerHandle {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let filter = warp::any().map(|| "ok");
        spawn(listener, filter, None, limits).expect("server")
    }

    /// A connection to `address` from the loopback address 127.0.0.`from` (all of 127/8 is the loopback device).
    async fn connect_from(from: u8, address: SocketAddr) -> TcpStream {
        let socket = TcpSocket::new_v4().expect("socket");
        socket.bind(SocketAddr::from(([127, 0, 0, from], 0))).expect("bind");
        socket.connect(address).await.expect("connect")
    }

    /// Reads until the server closes the connection; how long that took and what was read.
    async fn closed_after(stream: &mut TcpStream) -> (Duration, String) {
        let started = std::time::Instant::now();
        let mut buf = [0u8; 256];
        let mut read = Vec::new();
        loop {
            match tokio::time::timeout(Duration::from_secs(10), stream.read(&mut buf)).await {
                Ok(Ok(0) | Err(_)) => return (started.elapsed(), String::from_utf8_lossy(&read).into_owned()),
                Ok(Ok(n)) => read.extend_from_slice(&buf[..n]),
                Err(_) => panic!("the server kept the connection open for 10 s"),
            }
        }
    }

    /// One keep-alive request and its whole answer (the filter answers "ok").
    async fn request(stream: &mut TcpStream) -> String {
        stream
            .write_all(b"GET / HTTP/1.1\r\nhost: x\r\n\r\n")
            .await
            .expect("request");
        let mut answer = Vec::new();
        let mut buf = [0u8; 256];
        while !answer.ends_with(b"\r\n\r\nok") {
            match tokio::time::timeout(Duration::from_secs(5), stream.read(&mut buf)).await {
                Ok(Ok(n)) if n > 0 => answer.extend_from_slice(&buf[..n]),
                other => panic!(
                    "no whole answer: {other:?} after {:?}",
                    String::from_utf8_lossy(&answer)
                ),
            }
        }
        String::from_utf8_lossy(&answer).into_owned()
    }

    async fn get_from(from: u8, address: SocketAddr) -> String {
        let mut stream = connect_from(from, address).await;
        if stream
            .write_all(b"GET / HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n")
            .await
            .is_err()
        {
            return String::new();
        }
        let mut answer = String::new();
        let _ = stream.read_to_string(&mut answer).await;
        answer
    }

    /// The HTTP/2 preface and SETTINGS, then one PING frame a byte at a time: busy, but asking nothing.
    async fn trickle_http2_pings(stream: &mut TcpStream, every: Duration) {
        let mut bytes = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".to_vec();
        bytes.extend_from_slice(&[0, 0, 0, 4, 0, 0, 0, 0, 0]);
        if stream.write_all(&bytes).await.is_err() {
            return;
        }
        let ping = [0, 0, 8, 6, 0, 0, 0, 0, 0, 1, 2, 3, 4, 5, 6, 7, 8];
        loop {
            for byte in ping {
                tokio::time::sleep(every).await;
                if stream.write_all(&[byte]).await.is_err() {
                    return;
                }
            }
        }
    }

    #[tokio::test]
    async fn a_client_that_sends_no_request_is_closed_at_the_first_request_deadline() {
        let server = server(limits()).await;
        let mut silent = TcpStream::connect(server.local_addr()).await.expect("connect");
        let (waited, _) = closed_after(&mut silent).await;
        assert!(waited < Duration::from_secs(2), "{waited:?}");
        // A request head sent one byte at a time, too slowly, is cut off the same way.
        let mut slow = TcpStream::connect(server.local_addr()).await.expect("connect");
        for byte in b"GET / HTTP/1.1\r\n" {
            if slow.write_all(&[*byte]).await.is_err() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let (waited, _) = closed_after(&mut slow).await;
        assert!(waited < Duration::from_secs(2), "{waited:?}");
        server.shutdown().await;
    }

    /// Issue 35: bytes every 50 ms kept the byte-level idle deadline away for ever; a PING is not a request.
    #[tokio::test]
    async fn an_http2_client_trickling_pings_is_dropped_at_the_first_request_deadline() {
        let server = server(limits()).await;
        let mut busy = TcpStream::connect(server.local_addr()).await.expect("connect");
        let (mut reader, mut writer) = busy.split();
        let started = std::time::Instant::now();
        let closed = async {
            let mut buf = [0u8; 256];
            while let Ok(Ok(n)) = tokio::time::timeout(Duration::from_secs(10), reader.read(&mut buf)).await {
                if n == 0 {
                    break;
                }
            }
            started.elapsed()
        };
        let trickle = async {
            let mut bytes = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".to_vec();
            bytes.extend_from_slice(&[0, 0, 0, 4, 0, 0, 0, 0, 0]);
            let _ = writer.write_all(&bytes).await;
            loop {
                tokio::time::sleep(Duration::from_millis(50)).await;
                if writer.write_all(&[0]).await.is_err() {
                    break;
                }
            }
        };
        let waited = tokio::select! {
            waited = closed => waited,
            () = trickle => started.elapsed(),
        };
        assert!(
            waited >= Duration::from_millis(250) && waited < Duration::from_secs(2),
            "{waited:?}"
        );
        let _ = &mut busy;
        server.shutdown().await;
    }

    #[tokio::test]
    async fn the_last_request_a_connection_may_make_is_answered_with_connection_close() {
        let limits = Limits {
            general: ConnectionLimits {
                max_requests: 3,
                ..limits().general
            },
            ..limits()
        };
        let server = server(limits).await;
        let mut stream = TcpStream::connect(server.local_addr()).await.expect("connect");
        for _ in 0..2 {
            let answer = request(&mut stream).await;
            assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
            assert!(!answer.contains("connection: close"), "{answer}");
        }
        let last = request(&mut stream).await;
        assert!(last.contains("connection: close"), "{last}");
        let (waited, rest) = closed_after(&mut stream).await;
        assert!(waited < Duration::from_secs(1), "{waited:?}");
        assert!(rest.is_empty(), "{rest}");
        server.shutdown().await;
    }

    #[tokio::test]
    async fn a_busy_connection_is_closed_at_its_maximum_age() {
        let limits = Limits {
            general: ConnectionLimits {
                max_age: Duration::from_secs(1),
                ..limits().general
            },
            ..limits()
        };
        let server = server(limits).await;
        let mut stream = TcpStream::connect(server.local_addr()).await.expect("connect");
        let opened = std::time::Instant::now();
        let mut answers = 0;
        let closed_at = loop {
            if stream.write_all(b"GET / HTTP/1.1\r\nhost: x\r\n\r\n").await.is_err() {
                break opened.elapsed();
            }
            let mut buf = [0u8; 512];
            match tokio::time::timeout(Duration::from_secs(5), stream.read(&mut buf)).await {
                Ok(Ok(0) | Err(_)) => break opened.elapsed(),
                Ok(Ok(n)) => {
                    answers += 1;
                    if String::from_utf8_lossy(&buf[..n]).contains("connection: close") {
                        let (_, rest) = closed_after(&mut stream).await;
                        assert!(rest.is_empty(), "{rest}");
                        break opened.elapsed();
                    }
                }
                Err(_) => panic!("no answer"),
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        };
        assert!(answers >= 5, "{answers} answers");
        assert!(
            closed_at >= Duration::from_millis(900) && closed_at < Duration::from_secs(3),
            "{closed_at:?}"
        );
        server.shutdown().await;
    }

    #[tokio::test]
    async fn connections_over_the_cap_are_closed_at_once_and_served_again_once_there_is_room() {
        let limits = Limits {
            general: ConnectionLimits {
                first_request: Duration::from_secs(30),
                ..limits().general
            },
            idle_timeout: Duration::from_secs(30),
            ..limits()
        };
        let server = server(limits).await;
        let address = server.local_addr();
        let mut held = Vec::new();
        for _ in 0..limits.shares.connections {
            held.push(connect_from(1, address).await);
        }
        // Accepted in order: once the held ones are accepted, the next one from the same address finds no room.
        let answer = get_from(1, address).await;
        assert!(answer.is_empty(), "served over the cap: {answer}");
        held.pop();
        capov_testkit::eventually(Duration::from_secs(5), "a request served again", || async {
            get_from(1, address).await.starts_with("HTTP/1.1 200").then_some(())
        })
        .await;
        server.shutdown().await;
    }

    /// Issue 35: one address trickling on every connection the server has does not keep another address out; it
    /// gives up its oldest connection.
    #[tokio::test]
    async fn a_full_server_takes_a_connection_from_the_address_holding_the_most() {
        let limits = Limits {
            general: ConnectionLimits {
                first_request: Duration::from_secs(30),
                ..limits().general
            },
            idle_timeout: Duration::from_secs(30),
            ..limits()
        };
        let server = server(limits).await;
        let address = server.local_addr();
        let mut hogs = Vec::new();
        for _ in 0..limits.shares.connections {
            let mut hog = connect_from(2, address).await;
            let trickling = tokio::spawn(async move {
                trickle_http2_pings(&mut hog, Duration::from_millis(100)).await;
                hog
            });
            hogs.push(trickling);
        }
        // Every place taken (the server accepts in order).
        assert!(get_from(2, address).await.is_empty());
        let answer = get_from(3, address).await;
        assert!(answer.starts_with("HTTP/1.1 200"), "{answer:?}");
        // The hog that gave up its place is the first one.
        let first = hogs.remove(0);
        let closed = tokio::time::timeout(Duration::from_secs(5), first).await;
        assert!(closed.is_ok(), "the oldest hog still trickling");
        for hog in hogs {
            hog.abort();
        }
        server.shutdown().await;
    }

    /// Issue 35: with every address holding one connection there is nobody to take from; an address holding none
    /// gets a reserved connection, which answers one request and closes.
    #[tokio::test]
    async fn a_newcomer_gets_a_reserved_connection_for_one_request() {
        let limits = Limits {
            shares: Shares {
                connections: 4,
                reserve: 1,
                reserve_per_address: 1,
            },
            general: ConnectionLimits {
                first_request: Duration::from_secs(30),
                ..limits().general
            },
            idle_timeout: Duration::from_secs(30),
            ..limits()
        };
        let server = server(limits).await;
        let address = server.local_addr();
        let mut held = Vec::new();
        for from in 10..14 {
            held.push(connect_from(from, address).await);
        }
        let mut reserved = connect_from(20, address).await;
        let answer = request(&mut reserved).await;
        assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
        assert!(answer.contains("connection: close"), "one request only: {answer}");
        let (waited, _) = closed_after(&mut reserved).await;
        assert!(waited < Duration::from_secs(1), "{waited:?}");
        // A reserved connection that asks nothing is gone at its own, shorter deadline.
        let mut silent = connect_from(21, address).await;
        let (waited, _) = closed_after(&mut silent).await;
        assert!(waited < Duration::from_secs(2), "{waited:?}");
        // An address that already holds a general connection gets no reserved one.
        assert!(get_from(10, address).await.is_empty());
        drop(held);
        server.shutdown().await;
    }
}
