//! The control plane's PKI: a CA, the apiserver's serving certificate for 127.0.0.1/localhost (and, for a control
//! plane that a node joins, its routable address and the `kubernetes` Service IP), the apiserver's client
//! certificate towards kubelets, and the key that signs service-account tokens.

use std::net::IpAddr;

use std::path::{Path, PathBuf};

use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair, KeyUsagePurpose,
};

use crate::HarnessError;

/// Paths of the files written by [`write`].
pub struct Pki {
    pub ca_cert: PathBuf,
    pub serving_cert: PathBuf,
    pub serving_key: PathBuf,
    pub service_account_key: PathBuf,
    pub service_account_public_key: PathBuf,
    /// The apiserver's client certificate and key for calls to kubelets (`kubectl logs`, `exec`): group
    /// `system:masters`, so a kubelet's webhook authorization lets it through.
    pub kubelet_client_cert: PathBuf,
    pub kubelet_client_key: PathBuf,
    pub ca_pem: String,
}

/// Writes the PKI into `dir`. `extra_ips` are further addresses the serving certificate names.
pub fn write(dir: &Path, extra_ips: &[IpAddr]) -> Result<Pki, HarnessError> {
    let ca_key = KeyPair::generate()?;
    let mut ca_params = CertificateParams::new(Vec::<String>::new())?;
    ca_params.distinguished_name.push(DnType::CommonName, "capov-test-ca");
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca_params.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    let ca_cert = ca_params.self_signed(&ca_key)?;
    let issuer = Issuer::new(ca_params, &ca_key);

    let serving_key = KeyPair::generate()?;
    let mut names = vec![
        "localhost".to_string(),
        "127.0.0.1".to_string(),
        "kubernetes".to_string(),
        "kubernetes.default".to_string(),
        "kubernetes.default.svc".to_string(),
    ];
    names.extend(extra_ips.iter().map(IpAddr::to_string));
    let mut serving_params = CertificateParams::new(names)?;
    serving_params
        .distinguished_name
        .push(DnType::CommonName, "kube-apiserver");
    serving_params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    let serving_cert = serving_params.signed_by(&serving_key, &issuer)?;

    let client_key = KeyPair::generate()?;
    let mut client_params = CertificateParams::new(Vec::<String>::new())?;
    client_params
        .distinguished_name
        .push(DnType::CommonName, "kube-apiserver-kubelet-client");
    client_params
        .distinguished_name
        .push(DnType::OrganizationName, "system:masters");
    client_params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
    let client_cert = client_params.signed_by(&client_key, &issuer)?;

    let service_account_key = KeyPair::generate()?;

    let pki = Pki {
        ca_cert: dir.join("ca.crt"),
        serving_cert: dir.join("apiserver.crt"),
        serving_key: dir.join("apiserver.key"),
        service_account_key: dir.join("sa.key"),
        service_account_public_key: dir.join("sa.pub"),
        kubelet_client_cert: dir.join("kubelet-client.crt"),
        kubelet_client_key: dir.join("kubelet-client.key"),
        ca_pem: ca_cert.pem(),
    };
    write_file(&pki.ca_cert, &pki.ca_pem)?;
    write_file(&pki.serving_cert, &serving_cert.pem())?;
    write_file(&pki.serving_key, &serving_key.serialize_pem())?;
    write_file(&pki.service_account_key, &service_account_key.serialize_pem())?;
    write_file(&pki.service_account_public_key, &service_account_key.public_key_pem())?;
    write_file(&pki.kubelet_client_cert, &client_cert.pem())?;
    write_file(&pki.kubelet_client_key, &client_key.serialize_pem())?;
    Ok(pki)
}

pub(crate) fn write_file(path: &Path, contents: &str) -> Result<(), HarnessError> {
    std::fs::write(path, contents).map_err(|err| HarnessError::io(path, err))
}

/// A CA of its own and a serving certificate for 127.0.0.1/localhost signed by it, written as `tls.crt` and
/// `tls.key` in `dir` (the layout controller-runtime's webhook server reads). Returns the CA's PEM, which the
/// apiserver must trust to call the server.
pub fn write_serving_pair(dir: &Path, common_name: &str) -> Result<String, HarnessError> {
    let ca_key = KeyPair::generate()?;
    let mut ca_params = CertificateParams::new(Vec::<String>::new())?;
    ca_params
        .distinguished_name
        .push(DnType::CommonName, format!("{common_name}-ca"));
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca_params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::DigitalSignature];
    let ca_cert = ca_params.self_signed(&ca_key)?;
    let issuer = Issuer::new(ca_params, &ca_key);
    let key = KeyPair::generate()?;
    let mut params = CertificateParams::new(vec!["127.0.0.1".to_string(), "localhost".to_string()])?;
    params.distinguished_name.push(DnType::CommonName, common_name);
    params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    let cert = params.signed_by(&key, &issuer)?;
    std::fs::create_dir_all(dir).map_err(|err| HarnessError::io(dir, err))?;
    write_file(&dir.join("tls.crt"), &cert.pem())?;
    write_file(&dir.join("tls.key"), &key.serialize_pem())?;
    Ok(ca_cert.pem())
}
