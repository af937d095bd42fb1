//! The metrics endpoint's TLS configuration: `tls.crt` + `tls.key` from `--metrics-cert-dir` (re-read when either
//! file changes, e.g. rotated by cert-manager), else a self-signed certificate generated at start. Always the ring
//! crypto provider (never a process-wide default).

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::SystemTime;

use rustls::ServerConfig;
use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;

/// Subject alternative names of the self-signed certificate: loopback plus the in-cluster names of the metrics
/// Service in `namespace`.
pub fn self_signed_names(namespace: &str) -> Vec<String> {
    let service = "capov-metrics-service";
    vec![
        "localhost".into(),
        "127.0.0.1".into(),
        "::1".into(),
        service.into(),
        format!("{service}.{namespace}"),
        format!("{service}.{namespace}.svc"),
        format!("{service}.{namespace}.svc.cluster.local"),
    ]
}

/// A TLS server configuration with ALPN `h2` and `http/1.1`: from `cert_dir` when given, else self-signed for
/// `names`.
pub fn server_config(cert_dir: Option<&Path>, names: Vec<String>) -> Result<Arc<ServerConfig>, String> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let resolver: Arc<dyn ResolvesServerCert> = match cert_dir {
        Some(dir) => Arc::new(Reloading::new(dir, provider.clone())?),
        None => {
            let (chain, key) = generate(names)?;
            let certified = CertifiedKey::from_der(chain, key, &provider).map_err(|err| format!("TLS key: {err}"))?;
            Arc::new(Fixed(Arc::new(certified)))
        }
    };
    let mut config = ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|err| format!("TLS configuration: {err}"))?
        .with_no_client_auth()
        .with_cert_resolver(resolver);
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}

/// The self-signed certificate.
#[derive(Debug)]
struct Fixed(Arc<CertifiedKey>);

impl ResolvesServerCert for Fixed {
    fn resolve(&self, _: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(self.0.clone())
    }
}

/// The certificate of a directory, re-read at a TLS handshake when a file's modification time changed (handshakes
/// are rare: scrapers keep their connections). A pair that fails to load keeps the previous one in use.
#[derive(Debug)]
struct Reloading {
    dir: PathBuf,
    provider: Arc<CryptoProvider>,
    current: Mutex<(Stamp, Arc<CertifiedKey>)>,
}

type Stamp = (Option<SystemTime>, Option<SystemTime>);

impl Reloading {
    fn new(dir: &Path, provider: Arc<CryptoProvider>) -> Result<Reloading, String> {
        let stamp = stamp(dir);
        let certified = load_certified(dir, &provider)?;
        Ok(Reloading {
            dir: dir.to_path_buf(),
            provider,
            current: Mutex::new((stamp, certified)),
        })
    }
}

impl ResolvesServerCert for Reloading {
    fn resolve(&self, _: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        let mut current = self.current.lock().ok()?;
        let now = stamp(&self.dir);
        if now != current.0 {
            match load_certified(&self.dir, &self.provider) {
                Ok(certified) => {
                    tracing::info!(dir = %self.dir.display(), "metrics certificate reloaded");
                    *current = (now, certified);
                }
                Err(err) => {
                    // Keep serving the previous pair; a half-written rotation is retried at the next handshake.
                    tracing::warn!(error = %err, "metrics certificate changed but cannot be loaded; keeping the old one");
                }
            }
        }
        Some(current.1.clone())
    }
}

fn stamp(dir: &Path) -> Stamp {
    let modified = |name: &str| std::fs::metadata(dir.join(name)).and_then(|m| m.modified()).ok();
    (modified("tls.crt"), modified("tls.key"))
}

fn load_certified(dir: &Path, provider: &CryptoProvider) -> Result<Arc<CertifiedKey>, String> {
    let (chain, key) = load(dir)?;
    CertifiedKey::from_der(chain, key, provider)
        .map(Arc::new)
        .map_err(|err| format!("{}: certificate and key do not fit: {err}", dir.display()))
}

fn load(dir: &Path) -> Result<(Vec<CertificateDer<'static>>, PrivateKeyDer<'static>), String> {
    let cert_path = dir.join("tls.crt");
    let key_path = dir.join("tls.key");
    let chain = CertificateDer::pem_file_iter(&cert_path)
        .and_then(|certs| certs.collect::<Result<Vec<_>, _>>())
        .map_err(|err| format!("reading {}: {err}", cert_path.display()))?;
    if chain.is_empty() {
        return Err(format!("{} holds no certificate", cert_path.display()));
    }
    let key =
        PrivateKeyDer::from_pem_file(&key_path).map_err(|err| format!("reading {}: {err}", key_path.display()))?;
    Ok((chain, key))
}

fn generate(names: Vec<String>) -> Result<(Vec<CertificateDer<'static>>, PrivateKeyDer<'static>), String> {
    let certified = rcgen::generate_simple_self_signed(names)
        .map_err(|err| format!("generating a self-signed certificate: {err}"))?;
    let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(certified.signing_key.serialize_der()));
    Ok((vec![certified.cert.der().clone()], key))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn self_signed_and_loaded_certificates() {
        assert!(server_config(None, self_signed_names("capov-system")).is_ok());
        let dir = tempfile_dir();
        let missing = server_config(Some(&dir), vec![]).err().unwrap();
        assert!(missing.contains("tls.crt"), "{missing}");
        let certified = rcgen::generate_simple_self_signed(vec!["localhost".to_string()]).unwrap();
        std::fs::write(dir.join("tls.crt"), certified.cert.pem()).unwrap();
        std::fs::write(dir.join("tls.key"), certified.signing_key.serialize_pem()).unwrap();
        let config = server_config(Some(&dir), vec![]).unwrap();
        assert_eq!(config.alpn_protocols, vec![b"h2".to_vec(), b"http/1.1".to_vec()]);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    fn tempfile_dir() -> std::path::PathBuf {
        let dir = std::env::temp_dir().join(format!("capov-tls-test-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }
}
