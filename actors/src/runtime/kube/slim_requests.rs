//! Requests whose answers a tenant controls, decoded slim (`capov_core::trust::workload_answers`): a workload apiserver's Nodes and
//! VolumeAttachments, the patches of its Nodes, and the `<cluster>-kubeconfig` Secret. They go through kube's raw
//! `Client::send`, so that neither a success nor an error answer is ever decoded into k8s-openapi's or kube's full
//! types (kube decodes an error body into a `Status` whose `details.causes` can be 350,000 entries): a success is
//! decoded by the slim decoders (a patch's answer too, the object after the write), an error kept as a slim status.
//! Listings go by bounded pages ([`list`]), shared by the Node step and the deletion's Node-release read.

use std::pin::Pin;

use bytes::Bytes;
use http_body::Body as _;
use kube::client::Body;
use serde::Deserialize;

use crate::runtime::kube::body_limit::ResponseTooLarge;
use capov_core::trust::workload_answers::{self, AnswerError, KubeconfigSecret, Page, SlimStatus};

/// Why a request got no usable answer. Its text is bounded: every part from the server is cut.
#[derive(Debug, thiserror::Error)]
pub enum RequestError {
    /// No answer, or one past the byte cap or the deadline.
    #[error("{}", capov_core::trust::bounded_text::cut(&.0.to_string(), workload_answers::ERROR_TEXT))]
    Transport(kube::Error),
    /// The server answered with an error status.
    #[error("{}", describe(*code, status))]
    Status { code: u16, status: SlimStatus },
    /// The answer was refused or could not be decoded.
    #[error(transparent)]
    Answer(AnswerError),
    /// The request could not be built (an empty name).
    #[error("{0}")]
    Request(String),
}

impl From<crate::runtime::kube::clients::RequestTimedOut> for RequestError {
    fn from(timed_out: crate::runtime::kube::clients::RequestTimedOut) -> RequestError {
        RequestError::Transport(timed_out.into())
    }
}

fn describe(code: u16, status: &SlimStatus) -> String {
    let mut text = format!("the apiserver answered {code}");
    if let Some(reason) = &status.reason {
        text.push_str(&format!(" {reason}"));
    }
    if let Some(message) = &status.message {
        text.push_str(&format!(": {message}"));
    }
    text
}

impl RequestError {
    /// Whether the answer was larger than the client's byte cap (`body_limit`).
    pub fn too_large(&self) -> bool {
        matches!(self, RequestError::Transport(err) if ResponseTooLarge::caused(err))
    }

    /// The HTTP status of an error answer.
    pub fn code(&self) -> Option<u16> {
        match self {
            RequestError::Status { code, .. } => Some(*code),
            _ => None,
        }
    }
}

fn built(
    request: Result<http::Request<Vec<u8>>, kube::core::request::Error>,
) -> Result<http::Request<Body>, RequestError> {
    request
        .map(|request| request.map(Body::from))
        .map_err(|err| RequestError::Request(err.to_string()))
}

/// Sends `request` and reads its answer whole, up to `limit` bytes (the workload client's own cap stops it at 1 MiB
/// first): the status and the body. An error status becomes [`RequestError::Status`].
async fn exchange(client: &kube::Client, request: http::Request<Body>, limit: usize) -> Result<Bytes, RequestError> {
    let response = client.send(request).await.map_err(RequestError::Transport)?;
    let status = response.status();
    let body = read(response.into_body(), limit).await;
    if status.is_client_error() || status.is_server_error() {
        return Err(error_status(status, &body));
    }
    body.map_err(RequestError::Transport)
}

/// An error answer, slim: a body that did not arrive whole (past the cap, cut off) is still an error of this
/// status, and says why it was not read.
fn error_status(status: http::StatusCode, body: &Result<Bytes, kube::Error>) -> RequestError {
    let status_text = match body {
        Ok(body) => SlimStatus::of(body),
        Err(err) => SlimStatus {
            reason: None,
            message: Some(capov_core::trust::bounded_text::cut(
                &err.to_string(),
                workload_answers::ERROR_TEXT,
            )),
        },
    };
    RequestError::Status {
        code: status.as_u16(),
        status: status_text,
    }
}

/// The body, up to `limit` bytes.
async fn read(mut body: Body, limit: usize) -> Result<Bytes, kube::Error> {
    let announced = usize::try_from(body.size_hint().exact().unwrap_or(0)).unwrap_or(usize::MAX);
    let mut bytes = Vec::with_capacity(announced.min(limit));
    while let Some(frame) = std::future::poll_fn(|cx| Pin::new(&mut body).poll_frame(cx)).await {
        let Ok(data) = frame?.into_data() else {
            continue;
        };
        if bytes.len().saturating_add(data.len()) > limit {
            return Err(kube::Error::Service(Box::new(ResponseTooLarge { limit: limit as u64 })));
        }
        bytes.extend_from_slice(&data);
    }
    Ok(Bytes::from(bytes))
}

/// The largest answer read from a workload apiserver (its client's own cap, `kube::clients::WORKLOAD_BODY_LIMIT`).
const WORKLOAD_ANSWER: usize = crate::runtime::kube::clients::WORKLOAD_BODY_LIMIT as usize;

/// The object `name` at `url_path` (`/api/v1/nodes`), decoded slim; None if there is none (404).
pub async fn get<T: for<'de> Deserialize<'de>>(
    client: &kube::Client,
    url_path: &str,
    name: &str,
) -> Result<Option<T>, RequestError> {
    let request = built(kube::core::Request::new(url_path).get(name, &Default::default()))?;
    match exchange(client, request, WORKLOAD_ANSWER).await {
        Ok(answer) => workload_answers::decode(&answer)
            .map(Some)
            .map_err(RequestError::Answer),
        Err(err) if err.code() == Some(404) => Ok(None),
        Err(err) => Err(err),
    }
}

/// A JSON merge patch of the object `name` at `url_path`, and the object as the server has it after the write
/// (a patch answers with the whole object), decoded slim. None when the answer could not be read whole within the
/// cap or decoded: once the server has said 2xx the write is done, and the caller reads the object again if it needs
/// it.
pub async fn merge_patch<T: for<'de> Deserialize<'de>>(
    client: &kube::Client,
    url_path: &str,
    name: &str,
    patch: &serde_json::Value,
) -> Result<Option<T>, RequestError> {
    let patch = kube::api::Patch::Merge(patch);
    let request = built(kube::core::Request::new(url_path).patch(name, &Default::default(), &patch))?;
    let response = client.send(request).await.map_err(RequestError::Transport)?;
    let status = response.status();
    let answer = read(response.into_body(), WORKLOAD_ANSWER).await;
    if status.is_client_error() || status.is_server_error() {
        return Err(error_status(status, &answer));
    }
    Ok(answer.ok().and_then(|answer| workload_answers::decode(&answer).ok()))
}

/// How a listing goes: what it lists (for messages), its page size, and how many pages it reads at most.
#[derive(Clone, Copy, Debug)]
pub struct Listing {
    /// E.g. "Nodes": "cannot list the workload cluster's Nodes".
    pub what: &'static str,
    /// E.g. "Node": "the workload cluster's Node list did not end".
    pub kind: &'static str,
    pub url_path: &'static str,
    pub page: u32,
    pub max_pages: u32,
}

/// Lists page by page, each page asked for with `limit` and decoded slim (refused if it holds more); `visit` sees
/// each page's items and ends the listing with Some. A page over the answer cap is asked for again at half the size,
/// down to one item; a list whose continue token never ends stops at `max_pages`. Err: why the list could not be
/// read, as a message.
pub async fn list<T, R>(
    client: &kube::Client,
    listing: Listing,
    mut visit: impl FnMut(Vec<T>) -> Option<R>,
) -> Result<Option<R>, String>
where
    T: for<'de> Deserialize<'de>,
{
    let mut page_size = listing.page;
    let mut token: Option<String> = None;
    for _ in 0..listing.max_pages {
        let mut params = kube::api::ListParams::default().limit(page_size);
        if let Some(token) = &token {
            params = params.continue_token(token);
        }
        let page: Result<Page<T>, RequestError> = async {
            let request = built(kube::core::Request::new(listing.url_path).list(&params))?;
            let answer = exchange(client, request, WORKLOAD_ANSWER).await?;
            workload_answers::decode_page(&answer, page_size as usize).map_err(RequestError::Answer)
        }
        .await;
        let page = match page {
            Ok(page) => page,
            Err(err) if err.too_large() && page_size > 1 => {
                page_size /= 2;
                continue;
            }
            Err(err) => {
                return Err(failed(
                    &format!("cannot list the workload cluster's {}", listing.what),
                    &err,
                ));
            }
        };
        token = page.continue_token;
        if let Some(found) = visit(page.items) {
            return Ok(Some(found));
        }
        if token.is_none() {
            return Ok(None);
        }
    }
    Err(format!(
        "the workload cluster's {} list did not end within {} pages; retrying with backoff",
        listing.kind, listing.max_pages
    ))
}

/// What went wrong, as a message: the error's text is bounded already.
pub fn failed(what: &str, err: &RequestError) -> String {
    format!("{what}: {err}")
}

/// The largest answer read for a kubeconfig Secret from the management apiserver. A Secret's data is at most 1 MiB
/// (base64 in JSON: 1.4 MiB) and etcd stores objects up to 1.5 MiB; a larger answer is not a Secret CAPOV reads.
pub const SECRET_ANSWER: usize = 3 << 20;

/// The Secret `name` in `namespace`, read through the management cluster's `client` and decoded slim: only its uid,
/// resourceVersion and `data.value` (if at most `max_value` bytes); None if there is none.
pub async fn kubeconfig_secret(
    client: &kube::Client,
    namespace: &str,
    name: &str,
    max_value: usize,
) -> Result<Option<KubeconfigSecret>, RequestError> {
    let url_path = format!("/api/v1/namespaces/{namespace}/secrets");
    let request = built(kube::core::Request::new(url_path).get(name, &Default::default()))?;
    match exchange(client, request, SECRET_ANSWER).await {
        Ok(answer) => workload_answers::decode_kubeconfig_secret(&answer, max_value)
            .map(Some)
            .map_err(RequestError::Answer),
        Err(err) if err.code() == Some(404) => Ok(None),
        Err(err) => Err(err),
    }
}

#[cfg(test)]
pub(crate) mod tests;
