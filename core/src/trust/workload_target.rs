//! Where a tenant's workload kubeconfig may send CAPOV. The kubeconfig's `server` is the tenant's to write, so
//! without a rule CAPOV would connect wherever it says, from inside the management cluster: to the operator's own
//! host (loopback), to link-local services (cloud metadata at 169.254.169.254), to the management cluster's
//! apiserver or to any Service of the management cluster. These targets are refused (issue 23), every address the
//! server's name resolves to is checked, and the client then connects to the address that was checked (see
//! `runtime::workload_targets`). The operator's flag `--allow-internal-workload-servers` lifts the rule, for tests and
//! demos whose workload apiservers run on loopback.

use std::fmt;
use std::net::{IpAddr, SocketAddr};

use ipnet::IpNet;

/// What of the management cluster a workload kubeconfig may not point at, besides loopback and link-local
/// addresses, which are always refused.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct InternalTargets {
    /// The management cluster's service networks (its ServiceCIDRs).
    pub service_networks: Vec<IpNet>,
    /// The management cluster's apiserver: the address the operator reaches it at and its endpoints.
    pub apiserver: Vec<SocketAddr>,
}

/// Why an address is refused as a workload apiserver.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Internal {
    Loopback,
    LinkLocal,
    /// 0.0.0.0/8, `::`: this host.
    ThisHost,
    Multicast,
    ServiceNetwork(IpNet),
    ManagementApiserver,
}

impl fmt::Display for Internal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Internal::Loopback => f.write_str("a loopback address (the operator's own host)"),
            Internal::LinkLocal => f.write_str("a link-local address (169.254.0.0/16, fe80::/10)"),
            Internal::ThisHost => f.write_str("an address of the operator's own host"),
            Internal::Multicast => f.write_str("a multicast address"),
            Internal::ServiceNetwork(network) => {
                write!(f, "in the management cluster's service network {network}")
            }
            Internal::ManagementApiserver => f.write_str("the management cluster's own apiserver"),
        }
    }
}

impl InternalTargets {
    /// Why `target` is refused as a workload apiserver; None: CAPOV may connect to it.
    pub fn refusal(&self, target: SocketAddr) -> Option<Internal> {
        // `::ffff:127.0.0.1` is 127.0.0.1 to the kernel.
        let ip = target.ip().to_canonical();
        let always = match ip {
            IpAddr::V4(v4) if v4.is_loopback() => Some(Internal::Loopback),
            IpAddr::V4(v4) if v4.is_link_local() => Some(Internal::LinkLocal),
            IpAddr::V4(v4) if v4.octets()[0] == 0 => Some(Internal::ThisHost),
            IpAddr::V4(v4) if v4.is_multicast() || v4.is_broadcast() => Some(Internal::Multicast),
            IpAddr::V6(v6) if v6.is_loopback() => Some(Internal::Loopback),
            IpAddr::V6(v6) if v6.is_unicast_link_local() => Some(Internal::LinkLocal),
            IpAddr::V6(v6) if v6.is_unspecified() => Some(Internal::ThisHost),
            IpAddr::V6(v6) if v6.is_multicast() => Some(Internal::Multicast),
            _ => None,
        };
        always
            .or_else(|| {
                let target = SocketAddr::new(ip, target.port());
                self.apiserver
                    .iter()
                    .any(|apiserver| SocketAddr::new(apiserver.ip().to_canonical(), apiserver.port()) == target)
                    .then_some(Internal::ManagementApiserver)
            })
            .or_else(|| {
                self.service_networks
                    .iter()
                    .find(|network| network.contains(&ip))
                    .map(|network| Internal::ServiceNetwork(*network))
            })
    }
}

/// The condition's message for a refused server.
pub fn refused_message(server_host: &str, target: SocketAddr, why: Internal) -> String {
    let resolved = if server_host.trim_matches(['[', ']']) == target.ip().to_string() {
        String::new()
    } else {
        format!(" resolves to {}, which", target.ip())
    };
    format!(
        "its server {server_host:?}{resolved} is {why}: CAPOV does not connect there for a workload cluster. Put the \
         workload apiserver's own address in the kubeconfig (the operator's flag --allow-internal-workload-servers \
         lifts this rule, for tests and demos)"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(address: &str) -> SocketAddr {
        address.parse().expect("socket address")
    }

    fn management() -> InternalTargets {
        InternalTargets {
            service_networks: vec![
                "10.96.0.0/12".parse().expect("cidr"),
                "fd00:10:96::/112".parse().expect("cidr"),
            ],
            apiserver: vec![at("192.168.10.5:6443"), at("10.96.0.1:443")],
        }
    }

    #[test]
    fn loopback_link_local_and_this_host_are_always_refused() {
        let none = InternalTargets::default();
        for (address, why) in [
            ("127.0.0.1:6443", Internal::Loopback),
            ("127.3.4.5:443", Internal::Loopback),
            ("[::1]:6443", Internal::Loopback),
            ("[::ffff:127.0.0.1]:6443", Internal::Loopback),
            ("169.254.169.254:80", Internal::LinkLocal),
            ("[fe80::1]:6443", Internal::LinkLocal),
            ("0.0.0.0:6443", Internal::ThisHost),
            ("[::]:6443", Internal::ThisHost),
            ("224.0.0.1:6443", Internal::Multicast),
        ] {
            assert_eq!(none.refusal(at(address)), Some(why), "{address}");
        }
    }

    #[test]
    fn the_management_apiserver_and_service_network_are_refused() {
        let targets = management();
        assert_eq!(
            targets.refusal(at("192.168.10.5:6443")),
            Some(Internal::ManagementApiserver)
        );
        assert_eq!(
            targets.refusal(at("10.100.7.8:443")),
            Some(Internal::ServiceNetwork("10.96.0.0/12".parse().expect("cidr")))
        );
        assert!(matches!(
            targets.refusal(at("[fd00:10:96::a]:443")),
            Some(Internal::ServiceNetwork(_))
        ));
    }

    #[test]
    fn other_addresses_are_allowed_private_ones_too() {
        let targets = management();
        for address in [
            "10.0.1.100:6443",
            "192.168.10.5:16443",
            "172.16.0.10:6443",
            "203.0.113.7:443",
            "[2001:db8::7]:6443",
        ] {
            assert_eq!(targets.refusal(at(address)), None, "{address}");
        }
    }

    #[test]
    fn the_message_names_the_address_a_name_resolved_to_and_what_to_do() {
        let message = refused_message("api.tenant.example", at("127.0.0.1:6443"), Internal::Loopback);
        assert!(message.contains("resolves to 127.0.0.1"), "{message}");
        assert!(message.contains("--allow-internal-workload-servers"), "{message}");
        let literal = refused_message("169.254.169.254", at("169.254.169.254:443"), Internal::LinkLocal);
        assert!(!literal.contains("resolves to"), "{literal}");
    }
}
