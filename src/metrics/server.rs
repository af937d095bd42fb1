//! The metrics endpoint: `GET /metrics` in the Prometheus text format, over HTTPS with every request authorized by
//! the [`Authorizer`] (`--metrics-secure`, the default), or over plain HTTP without authentication.

use std::convert::Infallible;
use std::path::PathBuf;

use http::{HeaderMap, Method, StatusCode, header};
use warp::Filter;
use warp::path::FullPath;
use warp::reply::{Reply, Response};

use super::{Authorizer, Decision, Metrics, TEXT_CONTENT_TYPE, tls};
use crate::cli::ListenAddress;
use crate::server::{self, ServerHandle};

/// How to serve metrics (from [`crate::Config`]'s `metrics_*` fields).
#[derive(Debug, Clone)]
pub struct MetricsServerOptions {
    pub address: ListenAddress,
    /// HTTPS + authorization (true) or plain HTTP, no authorization (false).
    pub secure: bool,
    /// `tls.crt` + `tls.key`; `None` = self-signed.
    pub cert_dir: Option<PathBuf>,
    /// Subject alternative names of the self-signed certificate.
    pub certificate_names: Vec<String>,
}

impl MetricsServerOptions {
    /// Options for `address` from the configuration, the self-signed certificate naming the metrics Service in
    /// `namespace` (the pod's namespace).
    pub fn new(address: ListenAddress, secure: bool, cert_dir: Option<PathBuf>, namespace: &str) -> Self {
        MetricsServerOptions {
            address,
            secure,
            cert_dir,
            certificate_names: tls::self_signed_names(namespace),
        }
    }
}

/// Binds the address and serves metrics in the background. `client` sends the TokenReviews and
/// SubjectAccessReviews (unused when not secure).
pub async fn serve(
    options: MetricsServerOptions,
    metrics: Metrics,
    client: kube::Client,
) -> Result<ServerHandle, String> {
    let (tls, authorizer) = if options.secure {
        let config = tls::server_config(options.cert_dir.as_deref(), options.certificate_names.clone())?;
        (Some(config), Some(Authorizer::new(client)))
    } else {
        (None, None)
    };
    let listener = server::bind(options.address)
        .await
        .map_err(|err| format!("metrics: cannot listen on {}: {err}", options.address))?;
    let handle = server::spawn(listener, routes(metrics, authorizer), tls, server::Limits::metrics())
        .map_err(|err| format!("metrics: cannot serve on {}: {err}", options.address))?;
    tracing::info!(
        address = %handle.local_addr(),
        secure = options.secure,
        certificate = if !options.secure { "none" } else if options.cert_dir.is_some() { "from cert dir" } else { "self-signed" },
        "metrics endpoint listening (/metrics)"
    );
    Ok(handle)
}

/// Every request goes through the authorizer (when there is one) before the path is looked at, so that an
/// unauthenticated client learns nothing but 401.
pub fn routes(
    metrics: Metrics,
    authorizer: Option<Authorizer>,
) -> impl Filter<Extract = (Response,), Error = Infallible> + Clone {
    warp::method()
        .and(warp::path::full())
        .and(warp::header::headers_cloned())
        .then(move |method: Method, path: FullPath, headers: HeaderMap| {
            let (metrics, authorizer) = (metrics.clone(), authorizer.clone());
            async move { handle(metrics, authorizer, method, path.as_str(), &headers).await }
        })
}

async fn handle(
    metrics: Metrics,
    authorizer: Option<Authorizer>,
    method: Method,
    path: &str,
    headers: &HeaderMap,
) -> Response {
    if let Some(authorizer) = authorizer {
        let authorization = headers.get(header::AUTHORIZATION).and_then(|value| value.to_str().ok());
        let decision = authorizer.authorize(authorization, method.as_str(), path).await;
        match &decision {
            Decision::Allowed => {}
            Decision::Unauthenticated(reason) => {
                tracing::debug!(%path, %reason, "metrics request not authenticated");
                let mut response = text(decision.status(), "Unauthorized\n".into());
                response
                    .headers_mut()
                    .insert(header::WWW_AUTHENTICATE, http::HeaderValue::from_static("Bearer"));
                return response;
            }
            Decision::Forbidden { user, reason } => {
                tracing::debug!(%path, %user, %reason, "metrics request forbidden");
                return text(decision.status(), "Forbidden\n".into());
            }
            Decision::Error(reason) => {
                tracing::warn!(%path, %reason, "metrics request could not be authorized");
                return text(decision.status(), "Internal Server Error\n".into());
            }
            Decision::Busy => {
                tracing::debug!(%path, "every review slot is taken; answered 503");
                let mut response = text(decision.status(), "Service Unavailable\n".into());
                response
                    .headers_mut()
                    .insert(header::RETRY_AFTER, http::HeaderValue::from_static("5"));
                return response;
            }
        }
    }
    if path != "/metrics" {
        return text(StatusCode::NOT_FOUND, "Not Found\n".into());
    }
    if method != Method::GET && method != Method::HEAD {
        return text(StatusCode::METHOD_NOT_ALLOWED, "Method Not Allowed\n".into());
    }
    let mut response = warp::reply::with_status(metrics.render(), StatusCode::OK).into_response();
    response
        .headers_mut()
        .insert(header::CONTENT_TYPE, http::HeaderValue::from_static(TEXT_CONTENT_TYPE));
    response
}

fn text(status: StatusCode, body: String) -> Response {
    warp::reply::with_status(body, status).into_response()
}
