//! Typed async client for the oVirt Engine REST API v4.
//!
//! Speaks the engine's canonical XML, logs in through the engine SSO (token cached, one re-login
//! and retry on 401, revoked on drop or credential change), verifies TLS as an OVirtProvider's
//! `spec.tls` says, rate-limits per engine with `governor` shared fairly between tenants (`limiter`), tags requests with correlation ids and
//! reports each request to an optional observer for metrics.
//!
//! ```no_run
//! # async fn demo() -> capov_ovirt::Result<()> {
//! use capov_ovirt::{Client, ClientConfig, TlsMode};
//! let config = ClientConfig::new("https://engine.example.com/ovirt-engine/api", "admin@internal", "secret")
//!     .with_tls(TlsMode::Verify { system_roots: true, extra_ca_pem: Vec::new() });
//! let client = Client::new(config)?;
//! let vm = client.with_correlation_id("create-worker-0").find_vm_by_name("worker-0").await?;
//! # Ok(()) }
//! ```

mod client;
mod config;
mod error;
mod fair_queue;
mod limiter;
mod observe;
mod ops;
mod ops_devices;
mod ops_placement;
mod redact;
mod sso;

pub mod search;

// The engine's objects and their XML live in `capov-ovirt-model`, which has no I/O; the paths stay the same.
pub use capov_ovirt_model::{model, xml};

pub use client::{CORRELATION_ID_HEADER, Client, MAX_BODY_BYTES, MAX_BODY_BYTES_IN_FLIGHT};
pub use config::{ClientConfig, Credentials, Password, TlsMode, WriteGate};
pub use error::{Error, Result, found, reason};
pub use fair_queue::{FairQueue, PROVIDER_TENANT, Tenant};
pub use limiter::Lane;
pub use observe::{Outcome, RequestEvent, RequestObserver};
pub use ops::{DiskPlacement, StartOptions, blank_template};
pub use ops_devices::{AddVmOptions, TemplateVersionSelector, host_device_id};
pub use redact::{has_userinfo, redact_url};
