//! Connection settings, mirroring an OVirtProvider's spec.

use std::fmt;
use std::time::Duration;

/// How the engine's certificate is verified (OVirtProvider `spec.tls`).
#[derive(Clone, PartialEq, Eq)]
pub enum TlsMode {
    /// Skip verification (dev/test only).
    Insecure,
    /// Verify against the system roots (when `system_roots`) plus the PEM bundle `extra_ca_pem`
    /// (already base64-decoded by the caller).
    Verify { system_roots: bool, extra_ca_pem: Vec<u8> },
}

impl TlsMode {
    /// The OVirtProvider `spec.tls` rule: `insecure` skips verification; otherwise trust the
    /// system CAs when `cert` is true or no bundle is given, plus the (base64-decoded) `certs`
    /// bundle.
    pub fn from_provider_spec(insecure: bool, cert: bool, certs_pem: Vec<u8>) -> TlsMode {
        if insecure {
            return TlsMode::Insecure;
        }
        let system_roots = cert || certs_pem.iter().all(u8::is_ascii_whitespace);
        TlsMode::Verify {
            system_roots,
            extra_ca_pem: certs_pem,
        }
    }
}

impl Default for TlsMode {
    fn default() -> Self {
        TlsMode::Verify {
            system_roots: true,
            extra_ca_pem: Vec::new(),
        }
    }
}

impl fmt::Debug for TlsMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TlsMode::Insecure => f.write_str("Insecure"),
            TlsMode::Verify {
                system_roots,
                extra_ca_pem,
            } => f
                .debug_struct("Verify")
                .field("system_roots", system_roots)
                .field("extra_ca_pem_bytes", &extra_ca_pem.len())
                .finish(),
        }
    }
}

/// A password that never shows in `Debug` or `Display`.
#[derive(Clone, PartialEq, Eq, Default)]
pub struct Password(String);

impl Password {
    pub fn new(value: impl Into<String>) -> Self {
        Self(value.into())
    }

    /// The clear text, for the SSO form only.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Password {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("<redacted>")
    }
}

impl From<&str> for Password {
    fn from(value: &str) -> Self {
        Self(value.to_string())
    }
}

impl From<String> for Password {
    fn from(value: String) -> Self {
        Self(value)
    }
}

/// Username (`admin@internal`) and password.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct Credentials {
    pub username: String,
    pub password: Password,
}

impl Credentials {
    pub fn new(username: impl Into<String>, password: impl Into<Password>) -> Self {
        Self {
            username: username.into(),
            password: password.into(),
        }
    }
}

/// Decides whether the client may send a write (any API call but a `GET`) at this moment. The operator's leader
/// election closes it when the Lease may be about to pass to another replica, so that two replicas never write to
/// one engine at once.
pub trait WriteGate: Send + Sync {
    /// `Err` names why writes are stopped.
    fn check(&self) -> Result<(), String>;
}

/// Everything needed to build a [`crate::Client`].
#[derive(Clone)]
pub struct ClientConfig {
    /// API URL, e.g. `https://engine.example.com/ovirt-engine/api`.
    pub url: String,
    pub credentials: Credentials,
    pub tls: TlsMode,
    /// Sustained requests per second to this engine.
    pub qps: u32,
    /// Requests allowed at once above the sustained rate.
    pub burst: u32,
    pub connect_timeout: Duration,
    /// Limit for each HTTP request (not for a whole logical operation).
    pub request_timeout: Duration,
    /// Consulted right before each write is sent (after the rate limiter's wait); None: writes always allowed.
    pub write_gate: Option<std::sync::Arc<dyn WriteGate>>,
    /// Appended to the User-Agent (`capov-ovirt/<version> (<instance>)`), so that the engine's access log tells
    /// which replica sent a request.
    pub instance: Option<String>,
}

impl fmt::Debug for ClientConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ClientConfig")
            .field("url", &crate::redact_url(&self.url))
            .field("credentials", &self.credentials)
            .field("tls", &self.tls)
            .field("qps", &self.qps)
            .field("burst", &self.burst)
            .field("connect_timeout", &self.connect_timeout)
            .field("request_timeout", &self.request_timeout)
            .field("write_gate", &self.write_gate.is_some())
            .field("instance", &self.instance)
            .finish()
    }
}

impl ClientConfig {
    /// How long one request may take unless [`ClientConfig::with_timeouts`] says otherwise.
    pub const DEFAULT_REQUEST_TIMEOUT: Duration = Duration::from_secs(60);

    /// Defaults: verify with system roots, 10 qps, burst 20, 10 s connect, 60 s per request.
    pub fn new(url: impl Into<String>, username: impl Into<String>, password: impl Into<Password>) -> Self {
        Self {
            url: url.into(),
            credentials: Credentials::new(username, password),
            tls: TlsMode::default(),
            qps: 10,
            burst: 20,
            connect_timeout: Duration::from_secs(10),
            request_timeout: Self::DEFAULT_REQUEST_TIMEOUT,
            write_gate: None,
            instance: None,
        }
    }

    pub fn with_write_gate(mut self, gate: std::sync::Arc<dyn WriteGate>) -> Self {
        self.write_gate = Some(gate);
        self
    }

    pub fn with_instance(mut self, instance: impl Into<String>) -> Self {
        self.instance = Some(instance.into());
        self
    }

    pub fn with_tls(mut self, tls: TlsMode) -> Self {
        self.tls = tls;
        self
    }

    pub fn with_rate_limit(mut self, qps: u32, burst: u32) -> Self {
        self.qps = qps;
        self.burst = burst;
        self
    }

    pub fn with_timeouts(mut self, connect: Duration, request: Duration) -> Self {
        self.connect_timeout = connect;
        self.request_timeout = request;
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn provider_spec_rules() {
        assert_eq!(
            TlsMode::from_provider_spec(true, true, b"pem".to_vec()),
            TlsMode::Insecure
        );
        assert_eq!(
            TlsMode::from_provider_spec(false, false, Vec::new()),
            TlsMode::Verify {
                system_roots: true,
                extra_ca_pem: Vec::new()
            }
        );
        assert_eq!(
            TlsMode::from_provider_spec(false, false, b"pem".to_vec()),
            TlsMode::Verify {
                system_roots: false,
                extra_ca_pem: b"pem".to_vec()
            }
        );
        assert_eq!(
            TlsMode::from_provider_spec(false, true, b"pem".to_vec()),
            TlsMode::Verify {
                system_roots: true,
                extra_ca_pem: b"pem".to_vec()
            }
        );
    }

    #[test]
    fn debug_hides_the_password() {
        let config = ClientConfig::new("https://e/ovirt-engine/api", "admin@internal", "TopSecret!");
        let shown = format!("{config:?}");
        assert!(!shown.contains("TopSecret!"), "{shown}");
        assert!(shown.contains("admin@internal"));
    }

    #[test]
    fn debug_hides_userinfo_in_the_url() {
        let config = ClientConfig::new("https://admin:s3cr3t@e/ovirt-engine/api", "admin@internal", "p");
        let shown = format!("{config:?}");
        assert!(!shown.contains("s3cr3t"), "{shown}");
        assert!(shown.contains("https://e/ovirt-engine/api"), "{shown}");
    }
}
