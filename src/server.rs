//! Serving a warp filter on a TCP listener, over plain HTTP or TLS (warp 0.4 has no TLS of its own): each
//! connection is handed to hyper-util's HTTP/1 + HTTP/2 builder, with graceful shutdown.

use std::future::Future;
use std::io;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto::Builder;
use hyper_util::server::graceful::GracefulShutdown;
use hyper_util::service::TowerToHyperService;
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio_rustls::TlsAcceptor;
use warp::{Filter, Reply};

use crate::cli::ListenAddress;

/// How long open connections may finish their requests after shutdown was asked for.
const DRAIN_TIMEOUT: Duration = Duration::from_secs(5);
/// A TLS handshake that takes longer is dropped (slow or idle clients must not pile up).
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

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

/// Serves `filter` on `listener` (TLS when `tls` is given) in a background task until the handle is shut down or
/// dropped.
pub fn spawn<F>(listener: TcpListener, filter: F, tls: Option<Arc<rustls::ServerConfig>>) -> io::Result<ServerHandle>
where
    F: Filter + Clone + Send + Sync + 'static,
    F::Extract: Reply,
{
    let local_addr = listener.local_addr()?;
    let (stop, stopped) = watch::channel(false);
    let task = tokio::spawn(run(listener, filter, tls.map(TlsAcceptor::from), wait_true(stopped)));
    Ok(ServerHandle { local_addr, stop, task })
}

async fn wait_true(mut stopped: watch::Receiver<bool>) {
    // Sender dropped (the handle went away) also stops the server.
    let _ = stopped.wait_for(|stop| *stop).await;
}

async fn run<F>(listener: TcpListener, filter: F, tls: Option<TlsAcceptor>, shutdown: impl Future<Output = ()>)
where
    F: Filter + Clone + Send + Sync + 'static,
    F::Extract: Reply,
{
    let service = warp::service(filter);
    let graceful = GracefulShutdown::new();
    let builder = Builder::new(TokioExecutor::new());
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
        let service = TowerToHyperService::new(service.clone());
        match &tls {
            None => {
                let connection = builder.serve_connection(TokioIo::new(tcp), service).into_owned();
                let connection = graceful.watch(connection);
                tokio::spawn(async move {
                    if let Err(err) = connection.await {
                        tracing::debug!(%peer, error = %err, "connection ended with an error");
                    }
                });
            }
            Some(acceptor) => {
                let acceptor = acceptor.clone();
                let watcher = graceful.watcher();
                let builder = builder.clone();
                tokio::spawn(async move {
                    let stream = match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(tcp)).await {
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
