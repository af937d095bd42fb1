//! The I/O around [`capov_core::trust::workload_target`]: what of the management cluster is refused as a workload apiserver,
//! read once when the runtime starts, and the check of a workload kubeconfig's server before its client is built.
//! The server's name is resolved here and every address checked; the client then connects to the checked address
//! (the name stays the TLS server name), so that a name resolving elsewhere at connect time cannot slip past.

use std::net::SocketAddr;
use std::time::Duration;

use k8s_openapi::api::discovery::v1::EndpointSlice;
use k8s_openapi::api::networking::v1::ServiceCIDR;
use kube::api::{Api, ListParams};

use capov_core::trust::workload_target::{InternalTargets, refused_message};

/// Longest wait for a name to resolve.
const RESOLVE_TIMEOUT: Duration = Duration::from_secs(5);

/// Why a workload kubeconfig's server is not used.
#[derive(Debug, PartialEq, Eq)]
pub enum Refusal {
    /// It is (or resolves to) an internal target; nothing was sent.
    Internal(String),
    /// Its name does not resolve (now); retried.
    Unresolved(String),
}

/// The management cluster's apiserver (the address `apiserver` names, and the endpoints of the `kubernetes` Service)
/// and its service networks (ServiceCIDRs). What cannot be read is logged and left out: the operator still refuses
/// loopback and link-local targets and whatever else it could read.
pub async fn gather(client: &kube::Client, apiserver: &http::Uri) -> InternalTargets {
    let mut targets = InternalTargets::default();
    if let Some(host) = apiserver.host() {
        let port = apiserver.port_u16().unwrap_or(443);
        match resolve(host, port).await {
            Ok(addresses) => targets.apiserver.extend(addresses),
            Err(err) => tracing::warn!(%host, error = %err, "cannot resolve the management apiserver's address"),
        }
    }
    // The apiserver keeps the EndpointSlice of the `kubernetes` Service under that name.
    let slices: Api<EndpointSlice> = Api::namespaced(client.clone(), "default");
    match slices.get_opt("kubernetes").await {
        Ok(slice) => targets.apiserver.extend(slice.iter().flat_map(endpoints)),
        Err(err) => tracing::warn!(error = %err, "cannot read the management apiserver's endpoints"),
    }
    match Api::<ServiceCIDR>::all(client.clone())
        .list(&ListParams::default())
        .await
    {
        Ok(list) => {
            let cidrs = list.items.into_iter().filter_map(|cidr| cidr.spec?.cidrs).flatten();
            targets
                .service_networks
                .extend(cidrs.filter_map(|cidr| cidr.parse::<ipnet::IpNet>().ok()));
        }
        Err(err) => tracing::warn!(error = %err, "cannot read the management cluster's service networks"),
    }
    tracing::info!(
        apiserver = ?targets.apiserver,
        service_networks = ?targets.service_networks,
        "workload kubeconfigs may not point at loopback, link-local, these addresses and networks"
    );
    targets
}

fn endpoints(slice: &EndpointSlice) -> Vec<SocketAddr> {
    let ports: Vec<u16> = (slice.ports.iter().flatten())
        .filter_map(|port| u16::try_from(port.port?).ok())
        .collect();
    let addresses = (slice.endpoints.iter().flatten()).flat_map(|endpoint| endpoint.addresses.iter());
    let ips = addresses.filter_map(|address| address.parse::<std::net::IpAddr>().ok());
    ips.flat_map(|ip| ports.iter().map(move |port| SocketAddr::new(ip, *port)))
        .collect()
}

/// `config` (of a checked workload kubeconfig) once its server passed: every address its name resolves to is
/// allowed, and the client connects to the first of them.
pub async fn admit(mut config: kube::Config, targets: &InternalTargets) -> Result<kube::Config, Refusal> {
    let url = config.cluster_url.clone();
    let host = url.host().unwrap_or_default().to_string();
    let port = url.port_u16().unwrap_or(443);
    let addresses = resolve(&host, port)
        .await
        .map_err(|err| Refusal::Unresolved(format!("the workload apiserver {host:?} does not resolve: {err}")))?;
    if let Some((address, why)) = (addresses.iter()).find_map(|address| Some((*address, targets.refusal(*address)?))) {
        return Err(Refusal::Internal(refused_message(&host, address, why)));
    }
    let Some(first) = addresses.first() else {
        return Err(Refusal::Unresolved(format!(
            "the workload apiserver {host:?} resolves to no address"
        )));
    };
    if host.trim_matches(['[', ']']).parse::<std::net::IpAddr>().is_err() {
        config.tls_server_name.get_or_insert(host);
        let mut parts = url.into_parts();
        parts.authority = first.to_string().parse().ok();
        config.cluster_url = http::Uri::from_parts(parts)
            .map_err(|err| Refusal::Unresolved(format!("cannot connect to {first}: {err}")))?;
    }
    Ok(config)
}

async fn resolve(host: &str, port: u16) -> std::io::Result<Vec<SocketAddr>> {
    let host = host.trim_matches(['[', ']']);
    match tokio::time::timeout(RESOLVE_TIMEOUT, tokio::net::lookup_host((host, port))).await {
        Ok(found) => Ok(found?.collect()),
        Err(_) => Err(std::io::Error::new(
            std::io::ErrorKind::TimedOut,
            format!("no answer within {RESOLVE_TIMEOUT:?}"),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(server: &str) -> kube::Config {
        kube::Config::new(server.parse().expect("url"))
    }

    #[tokio::test]
    async fn a_name_is_resolved_checked_and_pinned_to_the_checked_address() {
        let admitted = admit(config("https://localhost:6443/prefix"), &InternalTargets::default()).await;
        assert!(
            matches!(&admitted, Err(Refusal::Internal(message)) if message.contains("loopback")),
            "{admitted:?}"
        );
        let targets = InternalTargets::default();
        let refused = admit(config("https://127.0.0.1:6443"), &targets).await;
        assert!(matches!(refused, Err(Refusal::Internal(_))), "{refused:?}");
        let allowed = admit(config("https://203.0.113.7:6443/prefix"), &targets)
            .await
            .expect("allowed");
        assert_eq!(allowed.cluster_url.to_string(), "https://203.0.113.7:6443/prefix");
        assert_eq!(allowed.tls_server_name, None);
    }

    #[tokio::test]
    async fn an_unknown_name_is_unresolved_not_refused() {
        let refused = admit(config("https://no-such-host.invalid:6443"), &InternalTargets::default()).await;
        assert!(matches!(refused, Err(Refusal::Unresolved(_))), "{refused:?}");
    }
}
