//! A throw-away CA and a server certificate it signs, so clients can verify the simulator like a
//! real engine whose CA they were given.

use std::sync::Arc;

use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair, KeyUsagePurpose};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};

pub struct GeneratedTls {
    pub ca_pem: String,
    pub server_config: Arc<rustls::ServerConfig>,
}

/// Generates the CA and a certificate for `localhost`, loopback addresses and `extra_names`.
pub fn generate(extra_names: &[String]) -> Result<GeneratedTls, String> {
    let err = |e: rcgen::Error| e.to_string();
    let mut ca_params = CertificateParams::new(Vec::<String>::new()).map_err(err)?;
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca_params.distinguished_name.push(DnType::CommonName, "ovirt-sim CA");
    ca_params.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    let ca_key = KeyPair::generate().map_err(err)?;
    let ca_cert = ca_params.self_signed(&ca_key).map_err(err)?;

    let mut names = vec!["localhost".to_string(), "127.0.0.1".to_string(), "::1".to_string()];
    names.extend(extra_names.iter().cloned());
    names.sort();
    names.dedup();
    let mut params = CertificateParams::new(names).map_err(err)?;
    params.distinguished_name.push(DnType::CommonName, "ovirt-sim");
    let key = KeyPair::generate().map_err(err)?;
    let issuer = Issuer::from_params(&ca_params, &ca_key);
    let cert = params.signed_by(&key, &issuer).map_err(err)?;

    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?
        .with_no_client_auth()
        .with_single_cert(
            vec![CertificateDer::from(cert.der().to_vec())],
            PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der())),
        )
        .map_err(|e| e.to_string())?;
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(GeneratedTls {
        ca_pem: ca_cert.pem(),
        server_config: Arc::new(config),
    })
}
