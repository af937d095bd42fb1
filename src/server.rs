//! Serving a warp filter on a TCP listener, over plain HTTP or TLS (warp 0.4 has no TLS of its own): each
//! connection is handed to hyper-util's HTTP/1 + HTTP/2 builder, with graceful shutdown.
//!
//! The servers listen on the pod network, where any pod can connect: a connection cap ([`Limits::max_connections`];
//! one more is closed at once), a deadline on a connection's first byte, a TLS handshake deadline, a deadline on each
//! HTTP/1 request head (which also ends a kept-alive connection that sends no next request) and an idle deadline on
//! every connection ([`crate::idle`]) keep slow or silent clients from holding them.

use std::future::Future;
use std::io;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto::Builder;
use hyper_util::server::graceful::GracefulShutdown;
use hyper_util::service::TowerToHyperService;
use tokio::net::TcpListener;
use tokio::sync::{Semaphore, watch};
use tokio::task::JoinHandle;
use tokio_rustls::TlsAcceptor;
use warp::{Filter, Reply};

use crate::cli::ListenAddress;

/// How long open connections may finish their requests after shutdown was asked for.
const DRAIN_TIMEOUT: Duration = Duration::from_secs(5);
/// What one server allows its clients.
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    /// Connections open at once; one more is closed as soon as it is accepted.
    pub max_connections: usize,
    /// A TLS handshake that takes longer is dropped.
    pub handshake_timeout: Duration,
    /// The first byte of a connection, and each HTTP/1 request head (and the wait for the next one on a kept-alive
    /// connection), must come within this.
    pub header_read_timeout: Duration,
    /// A connection that sends and receives nothing for this long is closed (HTTP/2 included).
    pub idle_timeout: Duration,
}

impl Default for Limits {
    /// Probes and scrapes come from a few clients every few seconds, and each answer takes well under a second
    /// (a metrics request at most 25 s: a review slot, then two reviews of 10 s each), so these leave room for all of
    /// them.
    fn default() -> Limits {
        Limits {
            max_connections: 64,
            handshake_timeout: Duration::from_secs(10),
            header_read_timeout: Duration::from_secs(10),
            idle_timeout: Duration::from_secs(30),
        }
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

/// Serves `filter` on `listener` (TLS when `tls` is given) with the default [`Limits`] in a background task until the
/// handle is shut down or dropped.
pub fn spawn<F>(listener: TcpListener, filter: F, tls: Option<Arc<rustls::ServerConfig>>) -> io::Result<ServerHandle>
where
    F: Filter + Clone + Send + Sync + 'static,
    F::Extract: Reply,
{
    spawn_with(listener, filter, tls, Limits::default())
}

/// [`spawn`] with these `limits`.
pub fn spawn_with<F>(
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

/// hyper-util's HTTP/1 + HTTP/2 builder with the deadlines of `limits`.
fn builder(limits: &Limits) -> Builder<TokioExecutor> {
    let mut builder = Builder::new(TokioExecutor::new());
    builder
        .http1()
        .timer(TokioTimer::new())
        .header_read_timeout(limits.header_read_timeout);
    builder.http2().timer(TokioTimer::new()).max_concurrent_streams(16);
    builder
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
    let graceful = GracefulShutdown::new();
    let builder = builder(&limits);
    let slots = Arc::new(Semaphore::new(limits.max_connections));
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
        let Ok(slot) = slots.clone().try_acquire_owned() else {
            tracing::debug!(%peer, limit = limits.max_connections, "too many connections; closed at once");
            continue;
        };
        // hyper-util reads the first bytes itself (HTTP/1 or HTTP/2?) before its request-head deadline applies.
        let tcp = crate::idle::Idle::new(tcp, limits.header_read_timeout, limits.idle_timeout);
        let service = TowerToHyperService::new(service.clone());
        match &tls {
            None => {
                let connection = builder.serve_connection(TokioIo::new(tcp), service).into_owned();
                let connection = graceful.watch(connection);
                tokio::spawn(async move {
                    let _slot = slot;
                    if let Err(err) = connection.await {
                        tracing::debug!(%peer, error = %err, "connection ended with an error");
                    }
                });
            }
            Some(acceptor) => {
                let acceptor = acceptor.clone();
                let watcher = graceful.watcher();
                let builder = builder.clone();
                let handshake_timeout = limits.handshake_timeout;
                tokio::spawn(async move {
                    let _slot = slot;
                    let stream = match tokio::time::timeout(handshake_timeout, acceptor.accept(tcp)).await {
                        Ok(Ok(stream)) => stream,
                        Ok(Err(err)) => {
                            tracing::debug!(%peer, error = %err, "TLS handshake failed");
                            return;
                        }
                        Err(_) => {
                            tracing::debug!(%peer, "TLS handshake timed out");
                            return;
                        }
                    };
                    let connection = builder.serve_connection(TokioIo::new(stream), service).into_owned();
                    if let Err(err) = watcher.watch(connection).await {
                        tracing::debug!(%peer, error = %err, "connection ended with an error");
                    }
                });
            }
        }
    }
    drop(listener);
    let _ = tokio::time::timeout(DRAIN_TIMEOUT, graceful.shutdown()).await;
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::TcpStream;

    fn limits() -> Limits {
        Limits {
            max_connections: 4,
            handshake_timeout: Duration::from_millis(300),
            header_read_timeout: Duration::from_millis(300),
            idle_timeout: Duration::from_secs(2),
        }
    }

    async fn server(limits: Limits) -> ServerHandle {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let filter = warp::any().map(|| "ok");
        spawn_with(listener, filter, None, limits).expect("server")
    }

    /// Reads until the server closes the connection; how long that took.
    async fn closed_after(stream: &mut TcpStream) -> Duration {
        let started = std::time::Instant::now();
        let mut buf = [0u8; 256];
        loop {
            match tokio::time::timeout(Duration::from_secs(10), stream.read(&mut buf)).await {
                Ok(Ok(0) | Err(_)) => return started.elapsed(),
                Ok(Ok(_)) => continue,
                Err(_) => panic!("the server kept the connection open for 10 s"),
            }
        }
    }

    async fn get(address: SocketAddr) -> String {
        let mut stream = TcpStream::connect(address).await.expect("connect");
        stream
            .write_all(b"GET / HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n")
            .await
            .expect("request");
        let mut answer = String::new();
        let _ = stream.read_to_string(&mut answer).await;
        answer
    }

    #[tokio::test]
    async fn a_client_that_sends_no_request_is_closed_at_the_header_deadline() {
        let server = server(limits()).await;
        let mut silent = TcpStream::connect(server.local_addr()).await.expect("connect");
        let waited = closed_after(&mut silent).await;
        assert!(waited < Duration::from_secs(2), "{waited:?}");
        // A request head sent one byte at a time, too slowly, is cut off the same way.
        let mut slow = TcpStream::connect(server.local_addr()).await.expect("connect");
        for byte in b"GET / HTTP/1.1\r\n" {
            if slow.write_all(&[*byte]).await.is_err() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let waited = closed_after(&mut slow).await;
        assert!(waited < Duration::from_secs(2), "{waited:?}");
        server.shutdown().await;
    }

    #[tokio::test]
    async fn connections_over_the_cap_are_closed_at_once_and_served_again_once_there_is_room() {
        let limits = Limits {
            header_read_timeout: Duration::from_secs(30),
            idle_timeout: Duration::from_secs(30),
            ..limits()
        };
        let server = server(limits).await;
        let address = server.local_addr();
        let mut held = Vec::new();
        for _ in 0..limits.max_connections {
            held.push(TcpStream::connect(address).await.expect("connect"));
        }
        // Accepted in order: once the held ones are accepted, the next one finds no room.
        let answer = get(address).await;
        assert!(answer.is_empty(), "served over the cap: {answer}");
        held.pop();
        capov_testkit::eventually(Duration::from_secs(5), "a request served again", || async {
            get(address).await.starts_with("HTTP/1.1 200").then_some(())
        })
        .await;
        server.shutdown().await;
    }
}
