//! The client handle: TLS, SSO session, rate limiting, correlation ids and the HTTP exchange.
//! Typed operations live in `ops`.

use std::error::Error as _;
use std::num::NonZeroU32;
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

use governor::Quota;
use reqwest::{Method, Url};
use serde::de::DeserializeOwned;

use crate::config::{ClientConfig, Credentials, TlsMode};
use crate::error::{Error, Result};
use crate::fair_queue::{PROVIDER_TENANT, Tenant};
use crate::limiter::{FairLimiter, Lane};
use crate::model::{Action, Fault};
use crate::observe::{Outcome, RequestEvent, RequestObserver};
use crate::redact::{redact_parsed, redact_url};
use crate::sso;
use crate::xml;

/// Largest response body read: 16 MiB, five times a listing of 10,000 VMs (about 3 MiB), and far below the
/// operator's memory limit, which one answer must never come near (several providers read at once). Bodies are
/// read in chunks as they arrive and the read stops at this size ([`Error::BodyTooLarge`]).
pub const MAX_BODY_BYTES: usize = 16 << 20;

/// Most bytes of answer bodies held at once by all clients of the process together: two answers of the largest
/// size. Without it, each concurrent read may hold [`MAX_BODY_BYTES`] (and a buffer being grown briefly holds one
/// and a half times that): ten reconciles reading oversized answers at once measured 284 MiB.
pub const MAX_BODY_BYTES_IN_FLIGHT: usize = 2 * MAX_BODY_BYTES;

/// Bytes of answer bodies currently held by the reads of every client (their buffers' capacity).
static BODY_BYTES_IN_FLIGHT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// One read's share of [`BODY_BYTES_IN_FLIGHT`], given back when the read ends, however it ends.
struct BodyReservation {
    held: usize,
}

impl BodyReservation {
    /// Grows the share to `bytes`; false (and unchanged) when the process-wide total would pass the limit.
    fn grow_to(&mut self, bytes: usize) -> bool {
        use std::sync::atomic::Ordering;
        let more = bytes.saturating_sub(self.held);
        if more == 0 {
            return true;
        }
        let before = BODY_BYTES_IN_FLIGHT.fetch_add(more, Ordering::AcqRel);
        if before + more > MAX_BODY_BYTES_IN_FLIGHT {
            BODY_BYTES_IN_FLIGHT.fetch_sub(more, Ordering::AcqRel);
            return false;
        }
        self.held = bytes;
        true
    }
}

impl BodyReservation {
    /// Gives back what is held beyond `bytes`.
    fn shrink_to(&mut self, bytes: usize) {
        let less = self.held.saturating_sub(bytes);
        BODY_BYTES_IN_FLIGHT.fetch_sub(less, std::sync::atomic::Ordering::AcqRel);
        self.held -= less;
    }
}

impl Drop for BodyReservation {
    fn drop(&mut self) {
        BODY_BYTES_IN_FLIGHT.fetch_sub(self.held, std::sync::atomic::Ordering::AcqRel);
    }
}

/// Header carrying the caller's correlation id; the engine echoes it and tags jobs with it.
pub const CORRELATION_ID_HEADER: &str = "Correlation-Id";

/// An oVirt Engine client. Cheap to clone (shares one session, one rate limiter, one connection
/// pool); `Send + Sync`. The SSO token is revoked when the last clone is dropped.
#[derive(Clone)]
pub struct Client {
    inner: Arc<Inner>,
    correlation_id: Option<Arc<str>>,
    /// Whose requests these are, for the fair share of the rate limit (`limiter.rs`); None: the provider's own.
    lane: Option<Lane>,
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client")
            .field("url", &redact_url(self.inner.api_url.as_str()))
            .field("correlation_id", &self.correlation_id)
            .finish_non_exhaustive()
    }
}

struct Inner {
    http: reqwest::Client,
    api_url: Url,
    token_url: Url,
    logout_url: Url,
    credentials: RwLock<Credentials>,
    /// The current SSO token; the async mutex makes concurrent callers share one login.
    session: tokio::sync::Mutex<Option<String>>,
    limiter: Arc<FairLimiter>,
    observer: Option<Arc<dyn RequestObserver>>,
    write_gate: Option<Arc<dyn crate::config::WriteGate>>,
}

/// `capov-ovirt/<version>`, with ` (<instance>)` when given (characters a header value cannot carry dropped).
fn user_agent(instance: Option<&str>) -> String {
    let base = concat!("capov-ovirt/", env!("CARGO_PKG_VERSION"));
    let instance: String = instance
        .unwrap_or_default()
        .chars()
        .filter(|c| c.is_ascii_graphic() && !matches!(c, '(' | ')'))
        .take(63)
        .collect();
    if instance.is_empty() {
        base.to_string()
    } else {
        format!("{base} ({instance})")
    }
}

/// One HTTP request against the API.
pub(crate) struct Call {
    pub method: Method,
    pub segments: Vec<String>,
    pub query: Vec<(&'static str, String)>,
    pub body: Option<String>,
    pub resource: &'static str,
}

impl Call {
    pub fn new(method: Method, resource: &'static str, segments: &[&str]) -> Self {
        Self {
            method,
            segments: segments.iter().map(|s| s.to_string()).collect(),
            query: Vec::new(),
            body: None,
            resource,
        }
    }

    pub fn query(mut self, key: &'static str, value: impl Into<String>) -> Self {
        self.query.push((key, value.into()));
        self
    }

    pub fn xml_body<T: serde::Serialize>(mut self, value: &T) -> Result<Self> {
        let body = xml::to_xml(value).map_err(|e| Error::InvalidConfig(format!("cannot encode request: {e}")))?;
        self.body = Some(body);
        Ok(self)
    }

    fn describe(&self) -> String {
        format!("/{}", self.segments.join("/"))
    }
}

impl Client {
    /// Builds a client; no request is sent until the first call.
    pub fn new(config: ClientConfig) -> Result<Client> {
        Self::build(config, None)
    }

    /// Like [`Client::new`], reporting every HTTP request to `observer`.
    pub fn with_observer(config: ClientConfig, observer: Arc<dyn RequestObserver>) -> Result<Client> {
        Self::build(config, Some(observer))
    }

    fn build(config: ClientConfig, observer: Option<Arc<dyn RequestObserver>>) -> Result<Client> {
        // One crypto provider for the process: ring. An already installed provider is fine.
        let _ = rustls::crypto::ring::default_provider().install_default();

        let mut api_url = Url::parse(config.url.trim_end_matches('/'))
            .map_err(|e| Error::InvalidConfig(format!("engine URL {:?}: {e}", redact_url(&config.url))))?;
        if !matches!(api_url.scheme(), "http" | "https") || api_url.host_str().is_none() {
            return Err(Error::InvalidConfig(format!(
                "engine URL {:?} is not an http(s) URL",
                redact_url(&config.url)
            )));
        }
        // The client logs in with `config.credentials` only. Userinfo left in the URL would be sent as a Basic
        // Authorization header (in clear over http) and shown in every error that names a request URL.
        let _ = api_url.set_username("");
        let _ = api_url.set_password(None);
        let token_url = api_url
            .join(sso::TOKEN_PATH)
            .map_err(|e| Error::InvalidConfig(e.to_string()))?;
        let logout_url = api_url
            .join(sso::LOGOUT_PATH)
            .map_err(|e| Error::InvalidConfig(e.to_string()))?;

        let qps = NonZeroU32::new(config.qps).ok_or_else(|| Error::InvalidConfig("qps must be > 0".into()))?;
        let burst = NonZeroU32::new(config.burst.max(1)).unwrap_or(qps);
        let limiter = FairLimiter::new(Quota::per_second(qps).allow_burst(burst));

        let mut builder = reqwest::Client::builder()
            .connect_timeout(config.connect_timeout)
            .timeout(config.request_timeout)
            .user_agent(user_agent(config.instance.as_deref()));
        let has_extra_ca = matches!(&config.tls, TlsMode::Verify { extra_ca_pem, .. } if !extra_ca_pem.is_empty());
        builder = match &config.tls {
            TlsMode::Insecure => builder.tls_danger_accept_invalid_certs(true),
            TlsMode::Verify {
                system_roots,
                extra_ca_pem,
            } => {
                let certs = if extra_ca_pem.iter().all(|b| b.is_ascii_whitespace()) {
                    Vec::new()
                } else {
                    parse_ca_bundle(extra_ca_pem)?
                };
                if *system_roots {
                    builder.tls_certs_merge(certs)
                } else {
                    builder.tls_certs_only(certs)
                }
            }
        };
        // A bundle whose PEM armour parses but whose DER does not only fails here.
        let http = builder.build().map_err(|e| {
            if has_extra_ca {
                Error::InvalidCaBundle(e.to_string())
            } else {
                Error::InvalidConfig(format!("HTTP client: {e}"))
            }
        })?;

        Ok(Client {
            inner: Arc::new(Inner {
                http,
                api_url,
                token_url,
                logout_url,
                credentials: RwLock::new(config.credentials),
                session: tokio::sync::Mutex::new(None),
                limiter,
                observer,
                write_gate: config.write_gate,
            }),
            correlation_id: None,
            lane: None,
        })
    }

    /// A handle that tags every request with `id` (one id per logical operation). Characters
    /// outside `[0-9A-Za-z_-]` are dropped and the id is cut to 36 characters, as the engine
    /// requires.
    pub fn with_correlation_id(&self, id: &str) -> Client {
        let clean: String = id
            .chars()
            .filter(|c| c.is_ascii_alphanumeric() || *c == '-' || *c == '_')
            .take(36)
            .collect();
        Client {
            inner: self.inner.clone(),
            correlation_id: (!clean.is_empty()).then(|| Arc::from(clean)),
            lane: self.lane.clone(),
        }
    }

    /// A handle whose requests queue for the rate limit in `lane` (a CAPI Cluster's turn within its namespace's, urgent
    /// or not).
    pub fn with_lane(&self, lane: Lane) -> Client {
        Client {
            lane: Some(lane),
            ..self.clone()
        }
    }

    /// Requests waiting for the rate limit, per tenant ([`crate::PROVIDER_TENANT`] for the provider's own).
    pub fn queue_depths(&self) -> std::collections::HashMap<Tenant, usize> {
        self.inner.limiter.depths()
    }

    pub fn correlation_id(&self) -> Option<&str> {
        self.correlation_id.as_deref()
    }

    /// The API URL this client talks to (never with userinfo; print it through [`crate::redact_url`] all the same,
    /// as a query given in the engine URL is kept).
    /// Whether both handles share one connection (token, limiter): clones of one client, whatever their
    /// correlation ids.
    pub fn same_as(&self, other: &Client) -> bool {
        Arc::ptr_eq(&self.inner, &other.inner)
    }

    pub fn url(&self) -> &str {
        self.inner.api_url.as_str()
    }

    /// The engine URL is plain `http`: the password (SSO form), tokens and bootstrap data cross the network
    /// unencrypted.
    pub fn plain_http(&self) -> bool {
        self.inner.api_url.scheme() == "http"
    }

    /// Replaces the credentials; the old token is revoked and the next call logs in anew.
    pub async fn set_credentials(&self, credentials: Credentials) {
        let changed = {
            let current = self.inner.credentials.read().unwrap_or_else(|e| e.into_inner());
            *current != credentials
        };
        if !changed {
            return;
        }
        let mut session = self.inner.session.lock().await;
        if let Some(token) = session.take() {
            self.revoke(&token).await;
        }
        *self.inner.credentials.write().unwrap_or_else(|e| e.into_inner()) = credentials;
    }

    /// Revokes the current token, if any. Later calls log in again.
    pub async fn logout(&self) {
        let token = self.inner.session.lock().await.take();
        if let Some(token) = token {
            self.revoke(&token).await;
        }
    }

    /// Logs in now (a connection and credentials check), reusing a cached token.
    pub async fn login(&self) -> Result<()> {
        self.token().await.map(|_| ())
    }

    /// Sends one request to the API URL without credentials and returns the HTTP status, whatever it is: `Ok`
    /// proves that transport and TLS (with this client's trust) work, before any login is tried. Diagnostics
    /// use it to tell an untrusted certificate from bad credentials.
    pub async fn probe(&self) -> Result<u16> {
        let request = self
            .inner
            .http
            .get(self.inner.api_url.clone())
            .header("Accept", "application/xml");
        self.send_observed("GET", "api", request)
            .await
            .map(|(status, _)| status)
    }

    async fn revoke(&self, token: &str) {
        let form = [("scope", sso::SCOPE), ("token", token)];
        let request = self
            .inner
            .http
            .post(self.inner.logout_url.clone())
            .header("Accept", "application/json")
            .form(&form);
        let _ = self.send_observed("POST", "sso", request).await;
    }

    /// The cached token, or a fresh one; `true` when it was just issued.
    async fn token(&self) -> Result<(String, bool)> {
        let mut session = self.inner.session.lock().await;
        if let Some(token) = session.as_ref() {
            return Ok((token.clone(), false));
        }
        let credentials = self.inner.credentials.read().unwrap_or_else(|e| e.into_inner()).clone();
        let form = [
            ("grant_type", "password"),
            ("scope", sso::SCOPE),
            ("username", credentials.username.as_str()),
            ("password", credentials.password.expose()),
        ];
        let request = self
            .inner
            .http
            .post(self.inner.token_url.clone())
            .header("Accept", "application/json")
            .form(&form);
        let (status, body) = self.send_observed("POST", "sso", request).await?;
        let token = sso::parse_token_answer(status, &body)?;
        *session = Some(token.clone());
        Ok((token, true))
    }

    async fn forget_token(&self, rejected: &str) {
        let mut session = self.inner.session.lock().await;
        if session.as_deref() == Some(rejected) {
            *session = None;
        }
    }

    /// Waits for the limiter, sends, reads the body, reports to the observer.
    async fn send_observed(
        &self,
        method: &str,
        resource: &str,
        request: reqwest::RequestBuilder,
    ) -> Result<(u16, Vec<u8>)> {
        let waited = Instant::now();
        match &self.lane {
            Some(lane) => self.inner.limiter.until_ready(lane).await,
            None => self.inner.limiter.until_ready(&Lane::provider()).await,
        }
        let rate_limit_wait = waited.elapsed();
        // Checked after the limiter's wait, which can be long: the gate may have closed meanwhile.
        if method != "GET"
            && resource != "sso"
            && let Some(gate) = &self.inner.write_gate
            && let Err(why) = gate.check()
        {
            let result = Err(Error::WritesStopped(why));
            self.observe(method, resource, &result, Duration::ZERO, rate_limit_wait);
            return result;
        }
        let mut request = request;
        if let Some(id) = &self.correlation_id {
            request = request.header(CORRELATION_ID_HEADER, id.as_ref());
        }
        let started = Instant::now();
        let result = async {
            let mut response = request.send().await.map_err(classify_transport)?;
            let status = response.status().as_u16();
            // Only the path names the call: the query may carry search terms, and errors end up in conditions.
            let too_large = |response: &reqwest::Response| Error::BodyTooLarge {
                what: format!("{method} {}", response.url().path()),
                limit: MAX_BODY_BYTES,
            };
            // An announced length over the cap is refused before a byte is read.
            if response
                .content_length()
                .is_some_and(|length| length > MAX_BODY_BYTES as u64)
            {
                return Err(too_large(&response));
            }
            let mut body: Vec<u8> = Vec::new();
            let mut reservation = BodyReservation { held: 0 };
            while let Some(chunk) = response.chunk().await.map_err(classify_transport)? {
                let needed = body.len() + chunk.len();
                if needed > MAX_BODY_BYTES {
                    // Dropping the response closes the connection: the rest is never read.
                    return Err(too_large(&response));
                }
                // The buffer doubles as it grows, and while it moves the old and the new one are both held: that
                // is reserved before growing it, so the count stays an upper bound of what this read holds.
                if needed > body.capacity() {
                    let grown = needed.max(body.capacity() * 2).min(MAX_BODY_BYTES);
                    if !reservation.grow_to(body.capacity() + grown) {
                        return Err(Error::AnswersTooLarge {
                            what: format!("{method} {}", response.url().path()),
                            limit: MAX_BODY_BYTES_IN_FLIGHT,
                        });
                    }
                    body.reserve_exact(grown - body.len());
                }
                body.extend_from_slice(&chunk);
                reservation.shrink_to(body.capacity());
            }
            Ok::<_, Error>((status, body))
        }
        .await;
        self.observe(method, resource, &result, started.elapsed(), rate_limit_wait);
        result
    }

    fn observe(
        &self,
        method: &str,
        resource: &str,
        result: &Result<(u16, Vec<u8>)>,
        latency: Duration,
        rate_limit_wait: Duration,
    ) {
        let Some(observer) = &self.inner.observer else {
            return;
        };
        let outcome = match result {
            Ok((status, _)) => Outcome::Status(*status),
            Err(err) => Outcome::Failed(err.label()),
        };
        observer.on_request(&RequestEvent {
            method,
            resource,
            outcome,
            latency,
            rate_limit_wait,
            correlation_id: self.correlation_id.as_deref(),
            tenant: self.lane.as_ref().map_or(PROVIDER_TENANT, |lane| lane.tenant.name()),
        });
    }

    fn api_request(&self, call: &Call, token: &str) -> reqwest::RequestBuilder {
        let mut url = self.inner.api_url.clone();
        if let Ok(mut path) = url.path_segments_mut() {
            path.pop_if_empty();
            for segment in &call.segments {
                path.push(segment);
            }
        }
        if !call.query.is_empty() {
            let mut pairs = url.query_pairs_mut();
            for (key, value) in &call.query {
                pairs.append_pair(key, value);
            }
        }
        let mut request = self
            .inner
            .http
            .request(call.method.clone(), url)
            .header("Version", "4")
            .header("Accept", "application/xml")
            .bearer_auth(token);
        if let Some(body) = &call.body {
            request = request.header("Content-Type", "application/xml").body(body.clone());
        }
        request
    }

    /// Sends an API call with the session token; on 401 logs in once more and retries once.
    pub(crate) async fn exchange(&self, call: &Call) -> Result<(u16, Vec<u8>)> {
        let (token, fresh) = self.token().await?;
        let method = call.method.as_str();
        let (status, body) = self
            .send_observed(method, call.resource, self.api_request(call, &token))
            .await?;
        if status != 401 {
            return Ok((status, body));
        }
        if fresh {
            return Err(rejected_fresh_token());
        }
        self.forget_token(&token).await;
        let (token, _) = self.token().await?;
        let (status, body) = self
            .send_observed(method, call.resource, self.api_request(call, &token))
            .await?;
        if status == 401 {
            return Err(rejected_fresh_token());
        }
        Ok((status, body))
    }

    /// Sends a call and decodes a 2xx body as `T`, after checking that the body is one whole XML document whose
    /// root element is `T`'s: serde reads any root as `T`, so an HTML page or another object would otherwise come
    /// back as an empty object or list.
    pub(crate) async fn fetch<T: DeserializeOwned + xml::Root>(&self, call: Call) -> Result<T> {
        let (status, body) = self.exchange(&call).await?;
        if !(200..300).contains(&status) {
            return Err(error_from_response(status, &body, &call.describe()));
        }
        let what = || format!("{} {}", call.method, call.describe());
        let found = xml::root_element(&body).map_err(|e| Error::UnexpectedBody(format!("{}: {e}", what())))?;
        if found != T::ROOT {
            return Err(Error::UnexpectedRoot {
                what: what(),
                expected: T::ROOT,
                found,
            });
        }
        xml::from_xml(&body).map_err(|e| match e {
            xml::DecodeError::TooManyItems { .. } => Error::TooManyItems {
                what: what(),
                detail: e.to_string(),
            },
            xml::DecodeError::Malformed(_) => Error::UnexpectedBody(format!("{}: {e}", what())),
        })
    }

    /// Sends a call whose 2xx body does not matter (actions, deletes).
    pub(crate) async fn perform(&self, call: Call) -> Result<()> {
        let (status, body) = self.exchange(&call).await?;
        if (200..300).contains(&status) {
            Ok(())
        } else {
            Err(error_from_response(status, &body, &call.describe()))
        }
    }
}

fn rejected_fresh_token() -> Error {
    Error::AuthenticationFailed {
        code: "unauthorized".to_string(),
        message: "the engine rejected a freshly issued token".to_string(),
    }
}

/// Classifies a non-2xx answer; the body may be a fault, a failed action, or anything else.
pub(crate) fn error_from_response(status: u16, body: &[u8], what: &str) -> Error {
    // Both roots decode into either struct (the root name is not checked), so look for the
    // nested fault of a failed action first.
    let fault = match xml::from_xml::<Action>(body) {
        Ok(Action { fault: Some(fault), .. }) => Some(fault),
        _ => xml::from_xml::<Fault>(body)
            .ok()
            .filter(|f| f.reason.is_some() || f.detail.is_some()),
    };
    if fault.is_none() && status == 400 {
        // e.g. a <usage_message> for an unparsable body.
        let snippet: String = String::from_utf8_lossy(body).chars().take(200).collect();
        return Error::BadRequest {
            reason: "Bad request".to_string(),
            detail: snippet,
        };
    }
    Error::from_fault(status, fault, what)
}

fn parse_ca_bundle(pem: &[u8]) -> Result<Vec<reqwest::Certificate>> {
    let certs = reqwest::Certificate::from_pem_bundle(pem).map_err(|e| Error::InvalidCaBundle(e.to_string()))?;
    if certs.is_empty() {
        return Err(Error::InvalidCaBundle("no PEM certificate found".to_string()));
    }
    Ok(certs)
}

fn classify_transport(mut err: reqwest::Error) -> Error {
    // reqwest's Display and Debug print the request URL; the message goes into conditions, Events and logs.
    if let Some(url) = err.url_mut() {
        redact_parsed(url);
    }
    let message = error_chain(&err);
    if let Some(tls) = find_tls_error(&err) {
        return Error::Tls(tls);
    }
    // Some layers flatten the rustls error into text; rustls words every verification failure
    // as "invalid peer certificate: …".
    if message.contains("invalid peer certificate") {
        return Error::Tls(message);
    }
    if err.is_timeout() {
        return Error::Timeout(message);
    }
    Error::Transport(message)
}

fn find_tls_error(err: &(dyn std::error::Error + 'static)) -> Option<String> {
    let mut current: Option<&(dyn std::error::Error + 'static)> = Some(err);
    while let Some(source) = current {
        if let Some(tls) = source.downcast_ref::<rustls::Error>() {
            return Some(tls.to_string());
        }
        if let Some(io) = source.downcast_ref::<std::io::Error>()
            && let Some(tls) = io.get_ref().and_then(|inner| inner.downcast_ref::<rustls::Error>())
        {
            return Some(tls.to_string());
        }
        current = source.source();
    }
    None
}

fn error_chain(err: &reqwest::Error) -> String {
    let mut message = err.to_string();
    let mut source = err.source();
    while let Some(inner) = source {
        message.push_str(": ");
        message.push_str(&inner.to_string());
        source = inner.source();
    }
    message
}

impl Drop for Inner {
    fn drop(&mut self) {
        // Revoke the token of the last clone, best effort, when a runtime is around to do it.
        let Some(token) = self.session.get_mut().take() else {
            return;
        };
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let request = self
            .http
            .post(self.logout_url.clone())
            .header("Accept", "application/json")
            .form(&[("scope", sso::SCOPE), ("token", token.as_str())]);
        runtime.spawn(async move {
            let _ = request.send().await;
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn assert_send_sync_clone<T: Send + Sync + Clone + 'static>() {}

    #[test]
    fn client_is_shareable_across_tasks() {
        assert_send_sync_clone::<Client>();
    }

    #[test]
    fn correlation_ids_are_sanitised() {
        let config = ClientConfig::new("http://127.0.0.1:1/ovirt-engine/api", "u@internal", "p");
        let client = Client::new(config).unwrap();
        assert_eq!(
            client.with_correlation_id("a b/c-d_e").correlation_id(),
            Some("abc-d_e")
        );
        assert_eq!(
            client
                .with_correlation_id(&"x".repeat(50))
                .correlation_id()
                .map(str::len),
            Some(36)
        );
        assert_eq!(client.with_correlation_id("///").correlation_id(), None);
    }

    #[test]
    fn invalid_urls_and_rates_are_configuration_errors() {
        let bad_url = ClientConfig::new("not a url", "u", "p");
        assert_eq!(
            Client::new(bad_url).unwrap_err().reason(),
            crate::reason::INVALID_CONFIG
        );
        let zero_qps = ClientConfig::new("https://e/ovirt-engine/api", "u", "p").with_rate_limit(0, 1);
        assert_eq!(
            Client::new(zero_qps).unwrap_err().reason(),
            crate::reason::INVALID_CONFIG
        );
    }

    #[test]
    fn configuration_errors_do_not_show_userinfo() {
        for url in [
            "ftp://admin:s3cr3t@e/api",
            "https://admin:s3cr3t@e:port/api",
            "https://admin:s3/cr3t@e/api",
        ] {
            let err = Client::new(ClientConfig::new(url, "u", "p")).unwrap_err();
            assert_eq!(err.reason(), crate::reason::INVALID_CONFIG, "{url}");
            let shown = format!("{err} {err:?}");
            assert!(!shown.contains("s3cr3t") && !shown.contains("cr3t"), "{shown}");
        }
    }

    #[test]
    fn userinfo_is_dropped_from_the_client_url() {
        let client = Client::new(ClientConfig::new(
            "http://admin:s3cr3t@engine/ovirt-engine/api",
            "u",
            "p",
        ))
        .unwrap();
        assert_eq!(client.url(), "http://engine/ovirt-engine/api");
        assert!(client.plain_http());
        assert!(!format!("{client:?}").contains("s3cr3t"));
    }

    /// The client never sends userinfo, so reqwest errors carrying it are made here: the redaction must hold for
    /// whatever URL reqwest attaches.
    #[tokio::test]
    async fn transport_errors_redact_the_url_reqwest_attaches() {
        let port = {
            let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
            listener.local_addr().expect("addr").port()
        };
        let url = Url::parse(&format!("http://127.0.0.1:{port}/x")).expect("url");
        let err = reqwest::Client::new()
            .get(url)
            .send()
            .await
            .expect_err("nothing listens");
        let with_secrets =
            Url::parse(&format!("http://admin:s3cr3t@127.0.0.1:{port}/x?access_token=t0ken")).expect("url");
        let err = classify_transport(err.with_url(with_secrets));
        let shown = format!("{err} | {err:?}");
        assert!(matches!(err, Error::Transport(_)), "{shown}");
        assert!(!shown.contains("s3cr3t") && !shown.contains("t0ken"), "{shown}");
        assert!(shown.contains(&format!("http://127.0.0.1:{port}/x")), "{shown}");
    }

    #[test]
    fn fault_bodies_map_to_typed_errors() {
        let failed_action = b"<action><fault><reason>Operation Failed</reason><detail>[Cannot run VM. VM is running.]</detail></fault><status>failed</status></action>";
        let err = error_from_response(409, failed_action, "/vms/x/start");
        assert!(err.is_vm_running());
        assert_eq!(err.detail(), Some("Cannot run VM. VM is running."));
        let fault = b"<fault><reason>Operation Failed</reason><detail>[Cannot add VM. The VM name is already in use, please choose a unique name and try again.]</detail></fault>";
        assert!(error_from_response(409, fault, "/vms").is_name_in_use());
        assert!(matches!(
            error_from_response(403, b"", "/vms"),
            Error::PermissionDenied { .. }
        ));
        assert_eq!(
            error_from_response(403, b"", "/vms").reason(),
            crate::reason::PERMISSION_DENIED
        );
        assert!(error_from_response(404, b"", "/vms/x").is_not_found());
        let refused = b"<fault><reason>Operation Failed</reason><detail>[Query execution failed due to insufficient permissions.]</detail></fault>";
        match error_from_response(400, refused, "/datacenters/d/storagedomains/s") {
            Error::PermissionDenied { detail } => {
                assert!(detail.contains("insufficient permissions"), "{detail}");
                assert!(
                    detail.contains("/datacenters/d/storagedomains/s"),
                    "names what was refused: {detail}"
                );
            }
            other => panic!("{other:?}"),
        }
        assert!(matches!(
            error_from_response(400, b"<usage_message/>", "/vms"),
            Error::BadRequest { .. }
        ));
        assert!(matches!(
            error_from_response(502, b"<html>", "/vms"),
            Error::Server { status: 502, .. }
        ));
        assert!(matches!(
            error_from_response(418, b"", "/vms"),
            Error::UnexpectedStatus { status: 418, .. }
        ));
    }
}
