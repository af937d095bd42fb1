//! Naming the Kubernetes API request that failed. kube's own trace line for a failed request is a bare "failed with
//! status 504 Gateway Timeout" (its span, which holds the URL, is off at the info level), and the error handed to the
//! caller says nothing of the request either. This layer, outermost on the management and workload clients (after
//! kube's retries, so once per request), logs each request that ends in an error with its verb, resource, namespace, name and
//! subresource, taken from the request line alone: never a body, a query (label selectors) or a header.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use tower::{BoxError, Layer, Service};

/// A request as named in the logs: what Kubernetes' own audit log calls verb, resource, namespace, name and
/// subresource.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RequestName {
    pub verb: &'static str,
    /// `ovirtmachines.infrastructure.cluster.x-k8s.io`, `secrets`, …
    pub resource: String,
    pub namespace: Option<String>,
    pub name: Option<String>,
    pub subresource: Option<String>,
}

impl std::fmt::Display for RequestName {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {}", self.verb, self.resource)?;
        if let Some(subresource) = &self.subresource {
            write!(f, "/{subresource}")?;
        }
        match (&self.namespace, &self.name) {
            (Some(namespace), Some(name)) => write!(f, " {namespace}/{name}"),
            (Some(namespace), None) => write!(f, " in {namespace}"),
            (None, Some(name)) => write!(f, " {name}"),
            (None, None) => Ok(()),
        }
    }
}

impl RequestName {
    /// Names a request from its method, path and query (only `watch` is read of the query) and whether its body is
    /// a server-side apply.
    pub fn of(method: &http::Method, uri: &http::Uri, apply: bool) -> RequestName {
        let segments: Vec<&str> = uri.path().split('/').filter(|s| !s.is_empty()).collect();
        // /api/v1/… (core) or /apis/<group>/<version>/…; anything else (/version, /metrics) is named by its path.
        let (group, rest) = match segments.as_slice() {
            ["api", _version, rest @ ..] => ("", rest),
            ["apis", group, _version, rest @ ..] => (*group, rest),
            _ => {
                return RequestName {
                    verb: verb(method, false, false, apply),
                    resource: uri.path().to_string(),
                    ..RequestName::default()
                };
            }
        };
        let (namespace, rest) = match rest {
            ["namespaces", namespace, rest @ ..] if !rest.is_empty() => (Some(namespace.to_string()), rest),
            _ => (None, rest),
        };
        let (resource, name, subresource) = match rest {
            [resource] => (*resource, None, None),
            [resource, name] => (*resource, Some(name.to_string()), None),
            [resource, name, subresource, ..] => (*resource, Some(name.to_string()), Some(subresource.to_string())),
            [] => ("", None, None),
        };
        let watch = uri
            .query()
            .is_some_and(|q| q.split('&').any(|pair| pair == "watch=true" || pair == "watch=1"));
        RequestName {
            verb: verb(method, name.is_some(), watch, apply),
            resource: match group {
                "" => resource.to_string(),
                group => format!("{resource}.{group}"),
            },
            namespace,
            name,
            subresource,
        }
    }
}

fn verb(method: &http::Method, named: bool, watch: bool, apply: bool) -> &'static str {
    match *method {
        http::Method::GET if watch => "watch",
        http::Method::GET if named => "get",
        http::Method::GET => "list",
        http::Method::POST => "create",
        http::Method::PUT => "update",
        http::Method::PATCH if apply => "apply",
        http::Method::PATCH => "patch",
        http::Method::DELETE if named => "delete",
        http::Method::DELETE => "deletecollection",
        _ => "request",
    }
}

/// How a failed request is logged: answers that are part of normal work (404 for a lookup, 409 for a conflict, 422
/// for a JSON patch whose `test` found the object changed, each retried by its caller) at debug, every other error
/// at warn.
fn expected(status: http::StatusCode, json_patch: bool) -> bool {
    match status.as_u16() {
        404 | 409 => true,
        422 => json_patch,
        _ => false,
    }
}

/// The layer.
#[derive(Clone, Copy, Debug)]
pub struct NameFailuresLayer;

impl<S> Layer<S> for NameFailuresLayer {
    type Service = NameFailures<S>;

    fn layer(&self, inner: S) -> NameFailures<S> {
        NameFailures { inner }
    }
}

#[derive(Clone, Debug)]
pub struct NameFailures<S> {
    inner: S,
}

impl<S, Req, B> Service<http::Request<Req>> for NameFailures<S>
where
    S: Service<http::Request<Req>, Response = http::Response<B>>,
    S::Error: Into<BoxError>,
    S::Future: Send + 'static,
{
    type Response = http::Response<B>;
    type Error = BoxError;
    type Future = Pin<Box<dyn Future<Output = Result<http::Response<B>, BoxError>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        self.inner.poll_ready(cx).map_err(Into::into)
    }

    fn call(&mut self, request: http::Request<Req>) -> Self::Future {
        let content_type = request.headers().get(http::header::CONTENT_TYPE);
        let apply = content_type.is_some_and(|value| value.as_bytes().starts_with(b"application/apply-patch"));
        let json_patch = content_type.is_some_and(|value| value.as_bytes().starts_with(b"application/json-patch"));
        let (method, uri) = (request.method().clone(), request.uri().clone());
        let answer = self.inner.call(request);
        Box::pin(async move {
            let result = answer.await.map_err(Into::into);
            match &result {
                Ok(response) if response.status().is_client_error() || response.status().is_server_error() => {
                    let status = response.status();
                    let request = RequestName::of(&method, &uri, apply);
                    if expected(status, json_patch) {
                        tracing::debug!(%request, status = status.as_u16(), "Kubernetes API request failed");
                    } else {
                        tracing::warn!(%request, status = status.as_u16(), "Kubernetes API request failed");
                    }
                }
                Ok(_) => {}
                Err(err) => {
                    let request = RequestName::of(&method, &uri, apply);
                    tracing::warn!(%request, error = %err, "Kubernetes API request failed");
                }
            }
            result
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn name(method: http::Method, uri: &str) -> RequestName {
        RequestName::of(&method, &uri.parse().expect("uri"), false)
    }

    #[test]
    fn requests_are_named_by_verb_resource_namespace_and_name() {
        let status = RequestName::of(
            &http::Method::PATCH,
            &"/apis/infrastructure.cluster.x-k8s.io/v1beta1/namespaces/ns/ovirtmachines/m-1/status?fieldManager=capov&force=true"
                .parse()
                .expect("uri"),
            true,
        );
        assert_eq!(
            status.to_string(),
            "apply ovirtmachines.infrastructure.cluster.x-k8s.io/status ns/m-1"
        );
        assert_eq!(
            name(http::Method::GET, "/api/v1/namespaces/ns/secrets/bootstrap-1").to_string(),
            "get secrets ns/bootstrap-1"
        );
        assert_eq!(
            name(
                http::Method::GET,
                "/apis/cluster.x-k8s.io/v1beta2/machines?labelSelector=a%3Db&limit=500"
            )
            .to_string(),
            "list machines.cluster.x-k8s.io"
        );
        assert_eq!(
            name(
                http::Method::GET,
                "/api/v1/namespaces/ns/secrets?watch=true&resourceVersion=1"
            )
            .to_string(),
            "watch secrets in ns"
        );
        assert_eq!(
            name(http::Method::GET, "/api/v1/namespaces/ns").to_string(),
            "get namespaces ns"
        );
        assert_eq!(
            name(http::Method::POST, "/api/v1/namespaces/ns/events").to_string(),
            "create events in ns"
        );
        assert_eq!(name(http::Method::GET, "/version").to_string(), "list /version");
    }

    #[test]
    fn the_query_never_shows() {
        let named = name(
            http::Method::GET,
            "/api/v1/namespaces/ns/secrets?labelSelector=password%3Dhunter2&fieldSelector=x",
        );
        assert!(!named.to_string().contains("hunter2"), "{named}");
    }

    /// An apiserver that answers every request with `status`.
    struct Answers(http::StatusCode);

    impl Service<http::Request<()>> for Answers {
        type Response = http::Response<()>;
        type Error = std::convert::Infallible;
        type Future = std::future::Ready<Result<http::Response<()>, std::convert::Infallible>>;

        fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
            Poll::Ready(Ok(()))
        }

        fn call(&mut self, _request: http::Request<()>) -> Self::Future {
            let mut answer = http::Response::new(());
            *answer.status_mut() = self.0;
            std::future::ready(Ok(answer))
        }
    }

    #[tokio::test]
    async fn a_failed_answer_passes_through_unchanged() {
        let mut service = NameFailuresLayer.layer(Answers(http::StatusCode::GATEWAY_TIMEOUT));
        let request = http::Request::get("/api/v1/namespaces/ns/secrets/s")
            .body(())
            .expect("request");
        let answer = service.call(request).await.expect("answer");
        assert_eq!(answer.status(), http::StatusCode::GATEWAY_TIMEOUT);
    }

    #[test]
    fn lookups_and_conflicts_are_expected_failures_the_rest_are_not() {
        assert!(expected(http::StatusCode::NOT_FOUND, false) && expected(http::StatusCode::CONFLICT, false));
        assert!(
            expected(http::StatusCode::UNPROCESSABLE_ENTITY, true),
            "a JSON patch's failed test"
        );
        assert!(
            !expected(http::StatusCode::UNPROCESSABLE_ENTITY, false),
            "an invalid object"
        );
        assert!(!expected(http::StatusCode::GATEWAY_TIMEOUT, false) && !expected(http::StatusCode::FORBIDDEN, false));
    }
}
