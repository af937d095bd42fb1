//! What an OVirtProvider asks for, turned into client settings: which credentials (Secret first, deprecated
//! spec.user/pass as fallback) and which TLS trust. Pure: the provider actor feeds it what it observed.

use std::collections::BTreeMap;

use base64::Engine as _;
use capov_crds::OVirtProviderSpec;
use capov_ovirt::{ClientConfig, Credentials, TlsMode};
use k8s_openapi::ByteString;

use capov_core::conditions::reasons;

/// Why a provider cannot connect, as a condition reason with a message users can act on.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConnectionProblem {
    pub reason: &'static str,
    pub message: String,
}

impl ConnectionProblem {
    pub fn new(reason: &'static str, message: impl Into<String>) -> Self {
        ConnectionProblem {
            reason,
            message: message.into(),
        }
    }
}

/// Everything needed to build a client for one engine.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConnectionSettings {
    pub url: String,
    pub credentials: Credentials,
    pub tls: TlsMode,
}

/// Resolves a provider's connection settings from its spec and, when its credentials Secret exists, that Secret's
/// data. `secret_namespace` only serves the messages.
pub fn resolve(
    spec: &OVirtProviderSpec,
    secret: Option<&BTreeMap<String, ByteString>>,
    secret_namespace: &str,
) -> Result<ConnectionSettings, ConnectionProblem> {
    engine_url(&spec.engine)?;
    let credentials = credentials(spec, secret, secret_namespace)?;
    let tls = tls_mode(spec)?;
    Ok(ConnectionSettings {
        url: spec.engine.clone(),
        credentials,
        tls,
    })
}

/// The engine client configuration for `settings`, limited to `qps` requests per second with bursts of `burst`:
/// the one place that turns settings into a client, so `manager check-engine` tests what the provider actor uses.
pub fn client_config(settings: &ConnectionSettings, qps: u32, burst: u32) -> ClientConfig {
    ClientConfig::new(
        &settings.url,
        settings.credentials.username.clone(),
        settings.credentials.password.clone(),
    )
    .with_tls(settings.tls.clone())
    .with_rate_limit(qps, burst)
}

/// Refuses userinfo in spec.engine. The CRD rejects it, but CEL rules ratchet: an object created before the rule
/// keeps it through updates that leave spec.engine alone. The client would never send it (it logs in with the
/// credentials resolved here) but each print of the URL would show the password.
fn engine_url(engine: &str) -> Result<(), ConnectionProblem> {
    if !capov_ovirt::has_userinfo(engine) {
        return Ok(());
    }
    Err(ConnectionProblem::new(
        reasons::INVALID_ENGINE_URL,
        format!(
            "spec.engine must not carry a username or password (user:password@ in {}): remove them from the URL \
             and put the credentials into the Secret named by spec.credentialsSecretName (keys username and \
             password)",
            capov_ovirt::redact_url(engine)
        ),
    ))
}

fn credentials(
    spec: &OVirtProviderSpec,
    secret: Option<&BTreeMap<String, ByteString>>,
    secret_namespace: &str,
) -> Result<Credentials, ConnectionProblem> {
    let secret_name = spec.credentials_secret_name.as_deref().filter(|name| !name.is_empty());
    if let (Some(name), Some(data)) = (secret_name, secret) {
        let value = |key: &str| {
            data.get(key).map(|bytes| {
                String::from_utf8_lossy(&bytes.0)
                    .trim_end_matches(['\n', '\r'])
                    .to_string()
            })
        };
        return match (value("username"), value("password")) {
            (Some(username), Some(password)) if !username.is_empty() && !password.is_empty() => {
                Ok(Credentials::new(username, password))
            }
            _ => Err(ConnectionProblem::new(
                reasons::CREDENTIALS_INVALID,
                format!("Secret {secret_namespace}/{name} must have non-empty keys username and password"),
            )),
        };
    }
    match (spec.user.as_deref(), spec.pass.as_deref()) {
        (Some(user), Some(pass)) if !user.is_empty() && !pass.is_empty() => Ok(Credentials::new(user, pass)),
        _ => Err(ConnectionProblem::new(
            reasons::CREDENTIALS_NOT_FOUND,
            match secret_name {
                Some(name) => format!(
                    "Secret {secret_namespace}/{name} not found and spec.user/spec.pass are empty: create the Secret \
                     with keys username and password"
                ),
                None => "spec.credentialsSecretName is empty and spec.user/spec.pass are not set".to_string(),
            },
        )),
    }
}

fn tls_mode(spec: &OVirtProviderSpec) -> Result<TlsMode, ConnectionProblem> {
    let tls = spec.tls.clone().unwrap_or_default();
    if tls.insecure {
        return Ok(TlsMode::Insecure);
    }
    let bundle = tls.certs.as_deref().map(str::trim).filter(|certs| !certs.is_empty());
    let extra_ca_pem = match bundle {
        None => Vec::new(),
        Some(encoded) => {
            let compact: String = encoded.split_whitespace().collect();
            let pem = base64::engine::general_purpose::STANDARD
                .decode(compact)
                .map_err(|err| {
                    ConnectionProblem::new(
                        reasons::INVALID_CA_BUNDLE,
                        format!("spec.tls.certs is not valid base64: {err}"),
                    )
                })?;
            if !String::from_utf8_lossy(&pem).contains("-----BEGIN CERTIFICATE-----") {
                return Err(ConnectionProblem::new(
                    reasons::INVALID_CA_BUNDLE,
                    "spec.tls.certs must be a base64-encoded PEM bundle of CA certificates",
                ));
            }
            pem
        }
    };
    let system_roots = tls.cert.unwrap_or(false) || extra_ca_pem.is_empty();
    Ok(TlsMode::Verify {
        system_roots,
        extra_ca_pem,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use capov_crds::ProviderTls;

    fn spec() -> OVirtProviderSpec {
        OVirtProviderSpec {
            engine: "https://engine.example/ovirt-engine/api".into(),
            credentials_secret_name: Some("creds".into()),
            ..Default::default()
        }
    }

    fn secret(pairs: &[(&str, &str)]) -> BTreeMap<String, ByteString> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), ByteString(v.as_bytes().to_vec())))
            .collect()
    }

    #[test]
    fn a_found_secret_wins_over_deprecated_user_and_pass() {
        let mut spec = spec();
        spec.user = Some("old".into());
        spec.pass = Some("old-pass".into());
        let data = secret(&[("username", "admin@internal"), ("password", "s3cret\n")]);
        let settings = resolve(&spec, Some(&data), "capov-system").expect("settings");
        assert_eq!(settings.credentials, Credentials::new("admin@internal", "s3cret"));
    }

    #[test]
    fn a_secret_missing_a_key_is_invalid_without_fallback() {
        let mut spec = spec();
        spec.user = Some("old".into());
        spec.pass = Some("old-pass".into());
        let data = secret(&[("username", "admin@internal")]);
        let problem = resolve(&spec, Some(&data), "capov-system").expect_err("invalid");
        assert_eq!(problem.reason, reasons::CREDENTIALS_INVALID);
        assert!(problem.message.contains("capov-system/creds"));
    }

    #[test]
    fn a_missing_secret_falls_back_to_user_and_pass() {
        let mut spec = spec();
        spec.user = Some("old".into());
        spec.pass = Some("old-pass".into());
        let settings = resolve(&spec, None, "capov-system").expect("settings");
        assert_eq!(settings.credentials, Credentials::new("old", "old-pass"));
    }

    #[test]
    fn no_secret_and_no_user_means_credentials_not_found() {
        let problem = resolve(&spec(), None, "capov-system").expect_err("no credentials");
        assert_eq!(problem.reason, reasons::CREDENTIALS_NOT_FOUND);
    }

    #[test]
    fn userinfo_in_the_engine_url_is_refused_without_showing_it() {
        let data = secret(&[("username", "admin@internal"), ("password", "p")]);
        for engine in [
            "https://admin:s3cr3t@engine.example/ovirt-engine/api",
            "http://admin@engine.example/ovirt-engine/api",
        ] {
            let spec = OVirtProviderSpec {
                engine: engine.into(),
                ..spec()
            };
            let problem = resolve(&spec, Some(&data), "capov-system").expect_err("userinfo");
            assert_eq!(problem.reason, reasons::INVALID_ENGINE_URL, "{engine}");
            assert!(!problem.message.contains("s3cr3t"), "{}", problem.message);
            assert!(!problem.message.contains("admin@"), "{}", problem.message);
            assert!(
                problem.message.contains("engine.example/ovirt-engine/api"),
                "{}",
                problem.message
            );
            assert!(
                problem.message.contains("spec.credentialsSecretName"),
                "{}",
                problem.message
            );
        }
        let plain = resolve(&spec(), Some(&data), "capov-system").expect("a URL without userinfo");
        assert_eq!(plain.url, spec().engine);
    }

    #[test]
    fn tls_modes_follow_the_spec() {
        let data = secret(&[("username", "u"), ("password", "p")]);
        let with_tls = |tls: ProviderTls| OVirtProviderSpec {
            tls: Some(tls),
            ..spec()
        };
        let insecure = resolve(
            &with_tls(ProviderTls {
                insecure: true,
                ..Default::default()
            }),
            Some(&data),
            "ns",
        );
        assert_eq!(insecure.expect("settings").tls, TlsMode::Insecure);
        let system = resolve(&spec(), Some(&data), "ns").expect("settings");
        assert_eq!(
            system.tls,
            TlsMode::Verify {
                system_roots: true,
                extra_ca_pem: Vec::new()
            }
        );
        let pem = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n";
        let encoded = base64::engine::general_purpose::STANDARD.encode(pem);
        let own = resolve(
            &with_tls(ProviderTls {
                certs: Some(encoded.clone()),
                ..Default::default()
            }),
            Some(&data),
            "ns",
        );
        assert_eq!(
            own.expect("settings").tls,
            TlsMode::Verify {
                system_roots: false,
                extra_ca_pem: pem.into()
            }
        );
        let both = ProviderTls {
            certs: Some(encoded),
            cert: Some(true),
            ..Default::default()
        };
        let both = resolve(&with_tls(both), Some(&data), "ns").expect("settings");
        assert_eq!(
            both.tls,
            TlsMode::Verify {
                system_roots: true,
                extra_ca_pem: pem.into()
            }
        );
    }

    #[test]
    fn an_undecodable_ca_bundle_is_reported() {
        let data = secret(&[("username", "u"), ("password", "p")]);
        for certs in ["not base64 !!", "aGVsbG8="] {
            let spec = OVirtProviderSpec {
                tls: Some(ProviderTls {
                    certs: Some(certs.into()),
                    ..Default::default()
                }),
                ..spec()
            };
            let problem = resolve(&spec, Some(&data), "ns").expect_err("invalid bundle");
            assert_eq!(problem.reason, reasons::INVALID_CA_BUNDLE, "{certs}");
        }
    }
}
