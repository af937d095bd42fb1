//! `manager check-engine PROVIDER`: diagnoses the connection to one OVirtProvider's engine with the operator's own
//! code — the provider and credentials are read and resolved as the provider actor does
//! (`capov_actors::runtime::provider::connection`), and the client is the one it builds — step by step: the provider and its
//! settings, DNS, TCP, TLS with the configured trust, SSO authentication, the API's product version. One line per
//! step (`OK`, `FAIL` with a hint, or `SKIP` after a failure) on stdout; the password and the token never appear.

use std::collections::BTreeMap;
use std::fmt;
use std::io::Write;
use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use capov_actors::runtime::provider::connection::{self, ConnectionSettings};
use capov_core::conditions::reasons;
use capov_crds::OVirtProvider;
use capov_ovirt::{Client, Error as EngineError, TlsMode, redact_url};
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use kube::Api;

const DNS_TIMEOUT: Duration = Duration::from_secs(10);
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// Addresses tried in the connect step (a name may resolve to many).
const MAX_ADDRESSES: usize = 4;

/// The steps, in order; each needs the ones before it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Step {
    Provider,
    Settings,
    Dns,
    Connect,
    Tls,
    Auth,
    Api,
}

impl Step {
    pub const ALL: [Step; 7] = [
        Step::Provider,
        Step::Settings,
        Step::Dns,
        Step::Connect,
        Step::Tls,
        Step::Auth,
        Step::Api,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Step::Provider => "provider",
            Step::Settings => "settings",
            Step::Dns => "dns",
            Step::Connect => "connect",
            Step::Tls => "tls",
            Step::Auth => "auth",
            Step::Api => "api",
        }
    }
}

/// What one step found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Verdict {
    Ok(String),
    Fail { problem: String, hint: String },
    Skip(String),
}

impl Verdict {
    fn fail(problem: impl Into<String>, hint: impl Into<String>) -> Verdict {
        Verdict::Fail {
            problem: problem.into(),
            hint: hint.into(),
        }
    }
}

/// One report line, e.g. `FAIL tls       the engine's certificate is not trusted: … — hint: …`.
pub fn line(step: Step, verdict: &Verdict) -> String {
    match verdict {
        Verdict::Ok(detail) => format!("OK   {:<9}{detail}", step.name()),
        Verdict::Fail { problem, hint } => format!("FAIL {:<9}{problem} — hint: {hint}", step.name()),
        Verdict::Skip(why) => format!("SKIP {:<9}{why}", step.name()),
    }
}

/// Where the engine listens, from its API URL.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Endpoint {
    /// Without IPv6 brackets.
    pub host: String,
    pub port: u16,
    pub https: bool,
}

impl fmt::Display for Endpoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.host.contains(':') {
            write!(f, "[{}]:{}", self.host, self.port)
        } else {
            write!(f, "{}:{}", self.host, self.port)
        }
    }
}

/// The host and port of an http(s) engine URL (the port defaults by scheme).
pub fn endpoint(url: &str) -> Result<Endpoint, String> {
    let uri: http::Uri = url
        .trim()
        .parse()
        .map_err(|err| format!("engine URL {:?} does not parse: {err}", redact_url(url)))?;
    let https = match uri.scheme_str() {
        Some("https") => true,
        Some("http") => false,
        _ => return Err(format!("engine URL {:?} is not an http(s) URL", redact_url(url))),
    };
    let host = uri
        .host()
        .map(|host| host.trim_start_matches('[').trim_end_matches(']'))
        .filter(|host| !host.is_empty())
        .ok_or_else(|| format!("engine URL {:?} has no host", redact_url(url)))?;
    let port = uri.port_u16().unwrap_or(if https { 443 } else { 80 });
    Ok(Endpoint {
        host: host.to_string(),
        port,
        https,
    })
}

/// The hint for a TLS failure: how to make the engine's certificate trusted under `tls`.
pub fn tls_hint(error: &EngineError, tls: &TlsMode, endpoint: &Endpoint) -> String {
    let ca_url =
        format!("https://{endpoint}/ovirt-engine/services/pki-resource?resource=ca-certificate&format=X509-PEM-CA");
    match (error, tls) {
        (EngineError::Tls(_), TlsMode::Verify { extra_ca_pem, .. }) if !extra_ca_pem.is_empty() => format!(
            "spec.tls.certs does not hold the CA that signed the engine's certificate (or the certificate does not \
             name {}): download the engine CA from {ca_url}, check it, and put it base64-encoded into spec.tls.certs",
            endpoint.host
        ),
        (EngineError::Tls(_), _) => format!(
            "no trusted CA signed the engine's certificate (or it does not name {}): download the engine CA from \
             {ca_url}, check it, and put it base64-encoded into spec.tls.certs (spec.tls.insecure: true skips \
             verification, for tests only)",
            endpoint.host
        ),
        _ => format!(
            "{endpoint} did not complete a TLS handshake: does spec.engine name the engine's HTTPS port, with https://?"
        ),
    }
}

/// The hint for a failed login.
pub fn auth_hint(error: &EngineError, credentials_source: &str) -> String {
    match error {
        EngineError::AuthenticationFailed { .. } => format!(
            "the engine refused the username or password: fix {credentials_source} (keys username with its \
             profile, e.g. admin@internal, and password)"
        ),
        EngineError::Sso { .. } | EngineError::Server { .. } => {
            "the engine's SSO service failed: check the engine (engine.log, ovirt-engine service)".to_string()
        }
        EngineError::Timeout(_) | EngineError::Transport(_) => {
            "the engine stopped answering: check its load and the network in between".to_string()
        }
        _ => format!("unexpected answer from the SSO ({})", error.reason()),
    }
}

/// The hint for a failed API call after a successful login.
pub fn api_hint(error: &EngineError) -> String {
    match error {
        EngineError::PermissionDenied { .. } => {
            "the user may log in but not use the API: give it a role in oVirt (e.g. UserRole on the data center)".into()
        }
        EngineError::NotFound(_) | EngineError::UnexpectedBody(_) | EngineError::UnexpectedStatus { .. } => {
            "is spec.engine the API URL, ending in /ovirt-engine/api?".into()
        }
        EngineError::UnexpectedRoot { found, .. } => format!(
            "something else answered in the engine's place (a <{found}> document): is spec.engine the API URL, \
             ending in /ovirt-engine/api, and is a proxy or sign-in portal in between?"
        ),
        EngineError::BodyTooLarge { .. } | EngineError::AnswersTooLarge { .. } | EngineError::TooManyItems { .. } => {
            "the answer was far larger than any engine answer: is a proxy in between?".into()
        }
        _ => format!("the engine answered with an error ({})", error.reason()),
    }
}

/// Runs every step against `provider`, writing one line per step to `out`; `true` when all passed. `client` is
/// the management cluster's client, or why none could be built (reported at the first step).
pub async fn check(
    client: Result<kube::Client, String>,
    provider: &str,
    credentials_namespace: &str,
    out: &mut impl Write,
) -> bool {
    let mut report = Report { out, next: 0 };
    let passed = run_steps(&mut report, client, provider, credentials_namespace)
        .await
        .is_ok();
    report.skip_rest();
    passed
}

struct Report<'a, W: Write> {
    out: &'a mut W,
    next: usize,
}

/// A failed step (already reported).
struct Failed;

impl<W: Write> Report<'_, W> {
    fn emit(&mut self, step: Step, verdict: &Verdict) {
        let _ = writeln!(self.out, "{}", line(step, verdict));
        let _ = self.out.flush();
        self.next = Step::ALL.iter().position(|s| *s == step).map_or(self.next, |i| i + 1);
    }

    fn ok(&mut self, step: Step, detail: impl Into<String>) {
        self.emit(step, &Verdict::Ok(detail.into()));
    }

    fn fail(&mut self, step: Step, problem: impl Into<String>, hint: impl Into<String>) -> Failed {
        self.emit(step, &Verdict::fail(problem, hint));
        Failed
    }

    fn skip_rest(&mut self) {
        for step in Step::ALL.iter().skip(self.next) {
            let _ = writeln!(
                self.out,
                "{}",
                line(*step, &Verdict::Skip("not run: an earlier step failed".into()))
            );
        }
        self.next = Step::ALL.len();
    }
}

async fn run_steps<W: Write>(
    report: &mut Report<'_, W>,
    client: Result<kube::Client, String>,
    name: &str,
    credentials_namespace: &str,
) -> Result<(), Failed> {
    let client = client.map_err(|err| {
        report.fail(
            Step::Provider,
            format!("no Kubernetes client: {err}"),
            "pass --kubeconfig (or KUBECONFIG), or run in a pod with a service account",
        )
    })?;
    let providers: Api<OVirtProvider> = Api::all(client.clone());
    let provider = match providers.get_opt(name).await {
        Ok(Some(provider)) => provider,
        Ok(None) => {
            return Err(report.fail(
                Step::Provider,
                format!("OVirtProvider {name} not found"),
                "OVirtProviders are cluster-scoped: list them with `kubectl get ovirtproviders`",
            ));
        }
        Err(err) => {
            return Err(report.fail(
                Step::Provider,
                format!("cannot read OVirtProvider {name}: {err}"),
                "check --kubeconfig, that the CAPOV CRDs are installed and that you may get ovirtproviders",
            ));
        }
    };
    report.ok(
        Step::Provider,
        format!("OVirtProvider {name}: engine {}", redact_url(&provider.spec.engine)),
    );

    let (settings, source) = settings(report, &client, &provider, credentials_namespace).await?;
    let engine = Client::new(connection::client_config(&settings, 10, 20)).map_err(|err| {
        report.fail(
            Step::Settings,
            format!("cannot build the engine client: {err}"),
            "spec.tls.certs must be the base64 of PEM CA certificates; spec.engine an http(s) URL",
        )
    })?;
    report.ok(
        Step::Settings,
        format!(
            "user {} from {source}; trust: {}",
            settings.credentials.username,
            trust(&settings.tls)
        ),
    );

    let endpoint = endpoint(&settings.url).map_err(|err| report.fail(Step::Dns, err, "fix spec.engine"))?;
    let addresses = resolve(report, &endpoint).await?;
    connect(report, &endpoint, &addresses).await?;

    if endpoint.https {
        match engine.probe().await {
            Ok(_) if settings.tls == TlsMode::Insecure => report.ok(
                Step::Tls,
                format!("handshake with {endpoint} done; certificate NOT verified (spec.tls.insecure: true)"),
            ),
            Ok(_) => report.ok(
                Step::Tls,
                format!(
                    "handshake with {endpoint} done; certificate trusted ({})",
                    trust(&settings.tls)
                ),
            ),
            Err(err @ EngineError::Tls(_)) => {
                let hint = tls_hint(&err, &settings.tls, &endpoint);
                return Err(report.fail(
                    Step::Tls,
                    format!("the engine's certificate is not trusted: {err}"),
                    hint,
                ));
            }
            Err(err) => {
                let hint = tls_hint(&err, &settings.tls, &endpoint);
                return Err(report.fail(Step::Tls, format!("TLS handshake failed: {err}"), hint));
            }
        }
    } else {
        report.ok(
            Step::Tls,
            "plain http:// URL: no TLS, the password, tokens and bootstrap data travel unencrypted (reason \
             InsecureTransport); use https://",
        );
    }

    let result = check_auth_and_api(report, &engine, &source).await;
    engine.logout().await;
    result
}

async fn settings<W: Write>(
    report: &mut Report<'_, W>,
    client: &kube::Client,
    provider: &OVirtProvider,
    namespace: &str,
) -> Result<(ConnectionSettings, String), Failed> {
    let secret_name = provider
        .spec
        .credentials_secret_name
        .as_deref()
        .filter(|name| !name.is_empty());
    let secret: Option<BTreeMap<String, ByteString>> = match secret_name {
        Some(secret_name) => {
            let secrets: Api<Secret> = Api::namespaced(client.clone(), namespace);
            match secrets.get_opt(secret_name).await {
                // As the supervisor's Secret watch hands it to the provider actor.
                Ok(secret) => secret.map(|secret| secret.data.unwrap_or_default()),
                Err(err) => {
                    return Err(report.fail(
                        Step::Settings,
                        format!("cannot read Secret {namespace}/{secret_name}: {err}"),
                        "check --credentials-namespace (default: POD_NAMESPACE, else capov-system) and that you may \
                         get Secrets there",
                    ));
                }
            }
        }
        None => None,
    };
    let source = match (secret_name, &secret) {
        (Some(secret_name), Some(_)) => format!("Secret {namespace}/{secret_name}"),
        _ => "the deprecated spec.user/spec.pass".to_string(),
    };
    match connection::resolve(&provider.spec, secret.as_ref(), namespace) {
        Ok(settings) => Ok((settings, source)),
        Err(problem) => Err(report.fail(
            Step::Settings,
            format!("{}: {}", problem.reason, problem.message),
            settings_hint(problem.reason, namespace),
        )),
    }
}

/// The hint for connection settings that do not resolve.
pub fn settings_hint(reason: &str, namespace: &str) -> String {
    if reason == reasons::INVALID_ENGINE_URL {
        return format!(
            "remove user:password@ from spec.engine and put the credentials into the Secret in namespace {namespace} \
             named by spec.credentialsSecretName (keys username and password)"
        );
    }
    format!(
        "create or fix the Secret in namespace {namespace} named by spec.credentialsSecretName, with keys username \
         and password (check --credentials-namespace if it exists elsewhere)"
    )
}

async fn resolve<W: Write>(report: &mut Report<'_, W>, endpoint: &Endpoint) -> Result<Vec<SocketAddr>, Failed> {
    if let Ok(ip) = endpoint.host.parse::<IpAddr>() {
        report.ok(
            Step::Dns,
            format!("{} is an IP address, no lookup needed", endpoint.host),
        );
        return Ok(vec![SocketAddr::new(ip, endpoint.port)]);
    }
    let hint = format!(
        "the operator's pod must resolve {}: check the host in spec.engine and the cluster DNS (e.g. `nslookup {}` \
         from a pod in the operator's namespace)",
        endpoint.host, endpoint.host
    );
    let lookup = tokio::net::lookup_host((endpoint.host.as_str(), endpoint.port));
    match tokio::time::timeout(DNS_TIMEOUT, lookup).await {
        Ok(Ok(found)) => {
            let mut addresses: Vec<SocketAddr> = found.collect();
            addresses.dedup();
            if addresses.is_empty() {
                return Err(report.fail(Step::Dns, format!("{} has no address", endpoint.host), hint));
            }
            let shown: Vec<String> = addresses.iter().map(|a| a.ip().to_string()).collect();
            report.ok(Step::Dns, format!("{} → {}", endpoint.host, shown.join(", ")));
            Ok(addresses)
        }
        Ok(Err(err)) => Err(report.fail(Step::Dns, format!("cannot resolve {}: {err}", endpoint.host), hint)),
        Err(_) => Err(report.fail(
            Step::Dns,
            format!("resolving {} took over {}s", endpoint.host, DNS_TIMEOUT.as_secs()),
            hint,
        )),
    }
}

async fn connect<W: Write>(
    report: &mut Report<'_, W>,
    endpoint: &Endpoint,
    addresses: &[SocketAddr],
) -> Result<(), Failed> {
    let mut errors = Vec::new();
    for address in addresses.iter().take(MAX_ADDRESSES) {
        match tokio::time::timeout(CONNECT_TIMEOUT, tokio::net::TcpStream::connect(address)).await {
            Ok(Ok(_)) => {
                report.ok(Step::Connect, format!("TCP connection to {address} established"));
                return Ok(());
            }
            Ok(Err(err)) => errors.push(format!("{address}: {err}")),
            Err(_) => errors.push(format!("{address}: no answer within {}s", CONNECT_TIMEOUT.as_secs())),
        }
    }
    Err(report.fail(
        Step::Connect,
        format!("cannot connect to {endpoint}: {}", errors.join("; ")),
        format!(
            "nothing accepts connections on port {} from here: check the port in spec.engine (the engine's HTTPS is \
             443), that the engine runs, and firewalls or network policies between the operator and the engine",
            endpoint.port
        ),
    ))
}

async fn check_auth_and_api<W: Write>(report: &mut Report<'_, W>, engine: &Client, source: &str) -> Result<(), Failed> {
    match engine.login().await {
        Ok(()) => report.ok(Step::Auth, "the SSO issued a token"),
        Err(err) => {
            let hint = auth_hint(&err, source);
            return Err(report.fail(Step::Auth, format!("login failed: {err}"), hint));
        }
    }
    match engine.api().await {
        Ok(api) => {
            let product = api.product_info.unwrap_or_default();
            let name = product.name.unwrap_or_else(|| "oVirt Engine".into());
            let version = product
                .version
                .and_then(|version| version.full_version)
                .unwrap_or_else(|| "unknown version".into());
            report.ok(Step::Api, format!("{name} {version}"));
            Ok(())
        }
        Err(err) => {
            let hint = api_hint(&err);
            Err(report.fail(Step::Api, format!("GET {}: {err}", redact_url(engine.url())), hint))
        }
    }
}

fn trust(tls: &TlsMode) -> &'static str {
    match tls {
        TlsMode::Insecure => "verification off (spec.tls.insecure)",
        TlsMode::Verify {
            system_roots: true,
            extra_ca_pem,
        } if !extra_ca_pem.is_empty() => "system CAs and spec.tls.certs",
        TlsMode::Verify { system_roots: true, .. } => "system CAs",
        TlsMode::Verify { .. } => "spec.tls.certs only",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn endpoints_from_urls() {
        assert_eq!(
            endpoint("https://engine.example.com/ovirt-engine/api"),
            Ok(Endpoint {
                host: "engine.example.com".into(),
                port: 443,
                https: true
            })
        );
        assert_eq!(
            endpoint("http://10.0.0.5:8080/ovirt-engine/api").map(|e| (e.port, e.https)),
            Ok((8080, false))
        );
        let v6 = endpoint("https://[::1]:8443/ovirt-engine/api").expect("IPv6");
        assert_eq!(v6.host, "::1");
        assert_eq!(v6.to_string(), "[::1]:8443");
        assert!(endpoint("ftp://engine/ovirt-engine/api").is_err());
        assert!(endpoint("engine.example.com").is_err());
        assert!(endpoint("https:///ovirt-engine/api").is_err());
    }

    #[test]
    fn lines_name_the_step_and_verdict() {
        assert_eq!(
            line(Step::Dns, &Verdict::Ok("a → 1.2.3.4".into())),
            "OK   dns      a → 1.2.3.4"
        );
        let fail = line(Step::Tls, &Verdict::fail("not trusted", "add the CA"));
        assert_eq!(fail, "FAIL tls      not trusted — hint: add the CA");
        assert!(line(Step::Api, &Verdict::Skip("not run".into())).starts_with("SKIP api"));
    }

    #[test]
    fn tls_hints_follow_the_trust() {
        let endpoint = endpoint("https://engine.example.com/ovirt-engine/api").expect("endpoint");
        let untrusted = EngineError::Tls("invalid peer certificate: UnknownIssuer".into());
        let own_ca = TlsMode::Verify {
            system_roots: false,
            extra_ca_pem: b"pem".to_vec(),
        };
        let hint = tls_hint(&untrusted, &own_ca, &endpoint);
        assert!(hint.contains("spec.tls.certs does not hold"), "{hint}");
        assert!(
            hint.contains("https://engine.example.com:443/ovirt-engine/services/pki-resource"),
            "{hint}"
        );
        let hint = tls_hint(&untrusted, &TlsMode::default(), &endpoint);
        assert!(hint.contains("no trusted CA"), "{hint}");
        let hint = tls_hint(&EngineError::Transport("reset".into()), &TlsMode::default(), &endpoint);
        assert!(hint.contains("HTTPS port"), "{hint}");
    }

    #[test]
    fn auth_and_api_hints() {
        let refused = EngineError::AuthenticationFailed {
            code: "access_denied".into(),
            message: "Cannot authenticate user".into(),
        };
        assert!(auth_hint(&refused, "Secret capov-system/creds").contains("fix Secret capov-system/creds"));
        let sso = EngineError::Sso {
            code: "server_error".into(),
            message: "boom".into(),
        };
        assert!(auth_hint(&sso, "x").contains("SSO service"));
        let denied = EngineError::PermissionDenied { detail: "no".into() };
        assert!(api_hint(&denied).contains("role"));
        assert!(api_hint(&EngineError::NotFound("/".into())).contains("/ovirt-engine/api"));
        let html = EngineError::UnexpectedRoot {
            what: "GET /".into(),
            expected: "api",
            found: "html".into(),
        };
        assert!(api_hint(&html).contains("<html>") && api_hint(&html).contains("proxy"));
        let huge = EngineError::BodyTooLarge {
            what: "GET /".into(),
            limit: 16 << 20,
        };
        assert!(api_hint(&huge).contains("proxy"));
    }

    #[test]
    fn engine_urls_are_shown_without_userinfo() {
        let err = endpoint("ftp://admin:s3cr3t@engine/ovirt-engine/api").expect_err("not http");
        assert!(
            !err.contains("s3cr3t") && err.contains("ftp://engine/ovirt-engine/api"),
            "{err}"
        );
        let hint = settings_hint(reasons::INVALID_ENGINE_URL, "capov-system");
        assert!(hint.contains("remove user:password@ from spec.engine"), "{hint}");
        assert!(settings_hint(reasons::CREDENTIALS_NOT_FOUND, "ns").contains("create or fix the Secret"));
    }

    #[test]
    fn every_step_is_listed_once_in_order() {
        let names: Vec<&str> = Step::ALL.iter().map(|s| s.name()).collect();
        assert_eq!(names, ["provider", "settings", "dns", "connect", "tls", "auth", "api"]);
    }
}
