//! Health probes on `--health-probe-bind-address` (plain HTTP): `/healthz` answers 200 while the process serves
//! requests; `/readyz` answers 200 once the controllers' caches are synced (see [`Readiness::mark_synced`]) and the
//! API server answers, 503 with the reason otherwise.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use http::StatusCode;
use warp::Filter;
use warp::reply::Reply;

use crate::cli::ListenAddress;
use crate::server::{self, ServerHandle};

/// How long one answer of the API server counts for `/readyz` (probes come every few seconds).
const API_CHECK_TTL: Duration = Duration::from_secs(5);
/// How long `/readyz` waits for the API server.
const API_CHECK_TIMEOUT: Duration = Duration::from_secs(3);

/// Shared readiness state: cheap to clone; every clone sees the same state.
#[derive(Clone)]
pub struct Readiness {
    inner: Arc<Inner>,
}

struct Inner {
    synced: AtomicBool,
    client: Option<kube::Client>,
    last_api_check: Mutex<Option<(Instant, Result<(), String>)>>,
}

impl Readiness {
    /// Readiness that also requires `client`'s API server to answer `/version`.
    pub fn new(client: kube::Client) -> Readiness {
        Readiness::build(Some(client))
    }

    /// Readiness that only depends on [`Readiness::mark_synced`] (no API server check).
    pub fn without_api_check() -> Readiness {
        Readiness::build(None)
    }

    fn build(client: Option<kube::Client>) -> Readiness {
        Readiness {
            inner: Arc::new(Inner {
                synced: AtomicBool::new(false),
                client,
                last_api_check: Mutex::new(None),
            }),
        }
    }

    /// Marks the caches as synced: `/readyz` may answer 200 from now on.
    pub fn mark_synced(&self) {
        self.set_synced(true);
    }

    /// Sets or clears the synced state (clear it e.g. while the watches restart).
    pub fn set_synced(&self, synced: bool) {
        self.inner.synced.store(synced, Ordering::SeqCst);
    }

    /// Whether [`Readiness::mark_synced`] was called.
    pub fn is_synced(&self) -> bool {
        self.inner.synced.load(Ordering::SeqCst)
    }

    /// `Ok` when ready, else why not.
    pub async fn check(&self) -> Result<(), String> {
        if !self.is_synced() {
            return Err("caches not synced yet".into());
        }
        let Some(client) = &self.inner.client else {
            return Ok(());
        };
        if let Some((at, result)) = self
            .inner
            .last_api_check
            .lock()
            .map(|guard| guard.clone())
            .unwrap_or(None)
            && at.elapsed() < API_CHECK_TTL
        {
            return result;
        }
        let result = match tokio::time::timeout(API_CHECK_TIMEOUT, client.apiserver_version()).await {
            Ok(Ok(_)) => Ok(()),
            Ok(Err(err)) => Err(format!("API server: {err}")),
            Err(_) => Err(format!(
                "API server did not answer within {}s",
                API_CHECK_TIMEOUT.as_secs()
            )),
        };
        if let Ok(mut guard) = self.inner.last_api_check.lock() {
            *guard = Some((Instant::now(), result.clone()));
        }
        result
    }
}

/// The `/healthz` and `/readyz` routes.
pub fn routes(
    readiness: Readiness,
) -> impl Filter<Extract = (warp::reply::Response,), Error = std::convert::Infallible> + Clone {
    let healthz = warp::path!("healthz").map(|| warp::reply::with_status("ok", StatusCode::OK).into_response());
    let readyz = warp::path!("readyz").then(move || {
        let readiness = readiness.clone();
        async move {
            match readiness.check().await {
                Ok(()) => warp::reply::with_status("ok".to_string(), StatusCode::OK).into_response(),
                Err(reason) => {
                    tracing::debug!(%reason, "not ready");
                    warp::reply::with_status(format!("not ready: {reason}"), StatusCode::SERVICE_UNAVAILABLE)
                        .into_response()
                }
            }
        }
    });
    let not_found = warp::any().map(|| warp::reply::with_status("not found", StatusCode::NOT_FOUND).into_response());
    warp::get().and(healthz.or(readyz).unify()).or(not_found).unify()
}

/// Binds `address` and serves the probes in the background.
pub async fn serve(address: ListenAddress, readiness: Readiness) -> std::io::Result<ServerHandle> {
    let listener = server::bind(address).await?;
    let handle = server::spawn(listener, routes(readiness), None, server::Limits::probes())?;
    tracing::info!(address = %handle.local_addr(), "health probes listening (/healthz, /readyz)");
    Ok(handle)
}
