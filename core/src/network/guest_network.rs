//! What a guest is told about its network when its machine has static addresses (issue 25) or DNS settings, and
//! how it is told (docs/decisions.md, "Static addresses reach the guest"):
//!
//! * cloud-init guests: through the engine's initialization network settings. `nic_configurations` name each
//!   interface as the guest calls it; the engine writes them as the config drive's `network_data.json`, which
//!   cloud-init matches by interface name (the engine writes no MAC addresses). A NIC with addresses from pools is
//!   `static` for each family it has an address of (`none` for the other), every other NIC `dhcp` (IPv4): once the
//!   data names one interface, cloud-init configures only the interfaces it names. The IPv4 netmask goes out dotted,
//!   the IPv6 one as the prefix length (the engine parses it as a number). DNS: `dns_servers`/`dns_search`,
//!   space-separated.
//! * Ignition guests: Ignition does not read `network_data.json`, so CAPOV adds files to the Ignition config: a
//!   NetworkManager keyfile (`/etc/NetworkManager/system-connections/capov-<if>.nmconnection`, mode 0600, as
//!   NetworkManager requires; Fedora CoreOS, RHCOS) and a systemd-networkd unit (`/etc/systemd/network/
//!   10-capov-<if>.network`; Flatcar) for each NIC with static addresses. Each system ignores the other's file.
//!   NICs without static addresses keep the image's default (DHCP). The engine still gets the same initialization
//!   settings, so its administrators see the VM's addresses.
//!
//! Without static addresses and without DNS settings nothing is sent: DHCP and the image's network configuration
//! stay as they were.

use std::net::IpAddr;

use capov_crds::{MachineAddress, MachineSettings};
use capov_ovirt_model::model::{BootProtocol, Initialization, Ip, NicConfiguration, NicConfigurations};
use serde_json::{Value, json};

use crate::network::addresses::{INTERNAL_DNS, INTERNAL_IP};

/// One static address with its network.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StaticAddress {
    pub address: IpAddr,
    pub prefix: u8,
    pub gateway: Option<IpAddr>,
}

/// The addresses of one NIC, as its claims gave them (`crate::network::ip_claims`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct NicAddresses {
    pub ipv4: Option<StaticAddress>,
    pub ipv6: Option<StaticAddress>,
}

/// One interface of the guest.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GuestNic {
    /// The interface's name inside the guest.
    pub name: String,
    pub ipv4: Option<StaticAddress>,
    pub ipv6: Option<StaticAddress>,
}

impl GuestNic {
    fn is_static(&self) -> bool {
        self.ipv4.is_some() || self.ipv6.is_some()
    }
}

/// The guest's network settings: its interfaces in NIC order (empty when no NIC has static addresses) and DNS.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct GuestNetwork {
    pub nics: Vec<GuestNic>,
    pub dns_servers: Vec<String>,
    pub search_domains: Vec<String>,
}

impl GuestNetwork {
    /// Whether there is anything to tell the guest.
    pub fn is_empty(&self) -> bool {
        !self.nics.iter().any(GuestNic::is_static) && self.dns_servers.is_empty() && self.search_domains.is_empty()
    }

    /// The static addresses, IPv4 first, each family in NIC order (the order of `status.addresses`).
    pub fn addresses(&self) -> Vec<IpAddr> {
        let v4 = self.nics.iter().filter_map(|nic| nic.ipv4.as_ref());
        let v6 = self.nics.iter().filter_map(|nic| nic.ipv6.as_ref());
        v4.chain(v6).map(|a| a.address).collect()
    }
}

/// The guest's network for `settings` with the addresses its claims gave (`crate::network::ip_claims`, one entry per NIC of
/// spec.nics; fewer entries: those NICs have none): each NIC's guest interface name (spec, else `eth<index>`), its
/// static addresses, and spec.dns.
pub fn from_spec(settings: &MachineSettings, addresses: &[NicAddresses]) -> GuestNetwork {
    let nics = settings
        .nics
        .iter()
        .enumerate()
        .map(|(index, nic)| {
            let claimed = addresses.get(index).cloned().unwrap_or_default();
            GuestNic {
                name: nic
                    .guest_interface_name
                    .clone()
                    .unwrap_or_else(|| format!("eth{index}")),
                ipv4: claimed.ipv4,
                ipv6: claimed.ipv6,
            }
        })
        .collect();
    let dns = settings.dns.clone().unwrap_or_default();
    GuestNetwork {
        nics,
        dns_servers: dns.servers,
        search_domains: dns.search_domains,
    }
}

/// The initialization's network settings for the engine: DNS, and one NIC configuration per NIC when any NIC has
/// static addresses.
pub fn set_initialization(initialization: &mut Initialization, network: &GuestNetwork) {
    let joined = |list: &[String]| (!list.is_empty()).then(|| list.join(" "));
    initialization.dns_servers = joined(&network.dns_servers);
    initialization.dns_search = joined(&network.search_domains);
    if !network.nics.iter().any(GuestNic::is_static) {
        return;
    }
    let items = network.nics.iter().map(nic_configuration).collect();
    initialization.nic_configurations = Some(NicConfigurations { items });
}

fn nic_configuration(nic: &GuestNic) -> NicConfiguration {
    let ip = |a: &StaticAddress, netmask: String| Ip {
        address: Some(a.address.to_string()),
        netmask: Some(netmask),
        gateway: a.gateway.map(|g| g.to_string()),
        version: None,
    };
    let (boot_protocol, ipv6_boot_protocol) = match (nic.is_static(), &nic.ipv4, &nic.ipv6) {
        (false, _, _) => (BootProtocol::Dhcp, BootProtocol::None),
        (true, v4, v6) => (
            if v4.is_some() {
                BootProtocol::Static
            } else {
                BootProtocol::None
            },
            if v6.is_some() {
                BootProtocol::Static
            } else {
                BootProtocol::None
            },
        ),
    };
    NicConfiguration {
        name: Some(nic.name.clone()),
        ip: nic.ipv4.as_ref().map(|a| ip(a, ipv4_netmask(a.prefix))),
        boot_protocol: Some(boot_protocol),
        ipv6: nic.ipv6.as_ref().map(|a| ip(a, a.prefix.to_string())),
        ipv6_boot_protocol: Some(ipv6_boot_protocol),
        on_boot: Some(true),
    }
}

/// A prefix length as a dotted IPv4 netmask (24 → 255.255.255.0).
fn ipv4_netmask(prefix: u8) -> String {
    let bits = u32::MAX.checked_shl(32 - u32::from(prefix.min(32))).unwrap_or(0);
    std::net::Ipv4Addr::from(bits).to_string()
}

/// Adds the network files of every NIC with static addresses to an Ignition config (as CAPOV sends it to the engine,
/// a JSON object with `ignition.version`): spec 3 files carry `overwrite`, spec 2 files `filesystem: root`.
pub fn add_to_ignition(config: &str, network: &GuestNetwork) -> Result<String, String> {
    if !network.nics.iter().any(GuestNic::is_static) {
        return Ok(config.to_string());
    }
    let Ok(Value::Object(mut config)) = serde_json::from_str::<Value>(config) else {
        return Err("the Ignition config is not a JSON object".into());
    };
    let spec3 = config
        .get("ignition")
        .and_then(|i| i.get("version"))
        .and_then(Value::as_str)
        .is_some_and(|v| v.starts_with("3."));
    let mut files = Vec::new();
    for nic in network.nics.iter().filter(|nic| nic.is_static()) {
        let keyfile = format!("/etc/NetworkManager/system-connections/capov-{}.nmconnection", nic.name);
        files.push(ignition_file(
            &keyfile,
            0o600,
            &network_manager_keyfile(nic, network),
            spec3,
        ));
        let unit = format!("/etc/systemd/network/10-capov-{}.network", nic.name);
        files.push(ignition_file(&unit, 0o644, &networkd_unit(nic, network), spec3));
    }
    let storage = config.entry("storage").or_insert_with(|| json!({}));
    let Value::Object(storage) = storage else {
        return Err("the Ignition config's storage is not a JSON object".into());
    };
    match storage.entry("files").or_insert_with(|| json!([])) {
        Value::Array(existing) => existing.extend(files),
        _ => return Err("the Ignition config's storage.files is not a JSON array".into()),
    }
    Ok(Value::Object(config).to_string())
}

fn ignition_file(path: &str, mode: u32, contents: &str, spec3: bool) -> Value {
    let mut file =
        json!({"path": path, "mode": mode, "contents": {"source": format!("data:,{}", percent_encode(contents))}});
    if spec3 {
        file["overwrite"] = json!(true);
    } else {
        file["filesystem"] = json!("root");
    }
    file
}

fn network_manager_keyfile(nic: &GuestNic, network: &GuestNetwork) -> String {
    let mut text = format!(
        "[connection]\nid=capov-{name}\ntype=ethernet\ninterface-name={name}\nautoconnect=true\n",
        name = nic.name
    );
    let family = |section: &str, address: Option<&StaticAddress>, v4: bool| {
        let mut out = format!("[{section}]\n");
        let Some(a) = address else {
            out.push_str(if v4 { "method=disabled\n" } else { "method=ignore\n" });
            return out;
        };
        out.push_str("method=manual\n");
        match a.gateway {
            Some(gateway) => out.push_str(&format!("address1={}/{},{gateway}\n", a.address, a.prefix)),
            None => out.push_str(&format!("address1={}/{}\n", a.address, a.prefix)),
        }
        let servers: Vec<&str> = network
            .dns_servers
            .iter()
            .map(String::as_str)
            .filter(|s| s.parse::<IpAddr>().is_ok_and(|ip| ip.is_ipv4() == v4))
            .collect();
        if !servers.is_empty() {
            out.push_str(&format!("dns={};\n", servers.join(";")));
        }
        if !network.search_domains.is_empty() {
            out.push_str(&format!("dns-search={};\n", network.search_domains.join(";")));
        }
        out
    };
    text.push_str(&family("ipv4", nic.ipv4.as_ref(), true));
    text.push_str(&family("ipv6", nic.ipv6.as_ref(), false));
    text
}

fn networkd_unit(nic: &GuestNic, network: &GuestNetwork) -> String {
    let mut text = format!("[Match]\nName={}\n\n[Network]\nDHCP=no\n", nic.name);
    for address in [&nic.ipv4, &nic.ipv6].into_iter().flatten() {
        text.push_str(&format!("Address={}/{}\n", address.address, address.prefix));
        if let Some(gateway) = address.gateway {
            text.push_str(&format!("Gateway={gateway}\n"));
        }
    }
    for server in &network.dns_servers {
        text.push_str(&format!("DNS={server}\n"));
    }
    if !network.search_domains.is_empty() {
        text.push_str(&format!("Domains={}\n", network.search_domains.join(" ")));
    }
    text
}

/// RFC 3986 percent-encoding of everything but unreserved characters, for a `data:,` URL.
fn percent_encode(text: &str) -> String {
    let mut out = String::with_capacity(text.len() * 2);
    for byte in text.bytes() {
        match byte {
            b'a'..=b'z' | b'A'..=b'Z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => out.push(char::from(byte)),
            other => out.push_str(&format!("%{other:02X}")),
        }
    }
    out
}

/// `status.addresses` with the static addresses in them whether or not a guest agent reports them (they are the
/// VM's): IPv4 before IPv6, the static ones first in each family, reported ones that are not static after them,
/// the VM name last.
pub fn with_static_addresses(reported: Vec<MachineAddress>, network: &GuestNetwork) -> Vec<MachineAddress> {
    let statics: Vec<String> = network.addresses().iter().map(IpAddr::to_string).collect();
    if statics.is_empty() {
        return reported;
    }
    let mut addresses: Vec<MachineAddress> = statics
        .iter()
        .map(|address| MachineAddress {
            type_: INTERNAL_IP.into(),
            address: address.clone(),
        })
        .collect();
    let same = |a: &str, b: &str| match (a.parse::<IpAddr>(), b.parse::<IpAddr>()) {
        (Ok(a), Ok(b)) => a == b,
        _ => a == b,
    };
    for address in reported {
        let known = address.type_ == INTERNAL_IP && statics.iter().any(|s| same(s, &address.address));
        if !known {
            addresses.push(address);
        }
    }
    // IPv4 before IPv6 (each with the static ones first), the InternalDNS name last.
    let rank = |a: &MachineAddress| match (a.type_.as_str(), a.address.parse::<IpAddr>()) {
        (INTERNAL_IP, Ok(IpAddr::V4(_))) => 0,
        (INTERNAL_IP, _) => 1,
        (INTERNAL_DNS, _) => 3,
        _ => 2,
    };
    addresses.sort_by_key(rank);
    addresses
}

#[cfg(test)]
mod tests {
    use super::*;

    fn address(text: &str, prefix: u8, gateway: Option<&str>) -> Option<StaticAddress> {
        Some(StaticAddress {
            address: text.parse().unwrap(),
            prefix,
            gateway: gateway.map(|g| g.parse().unwrap()),
        })
    }

    fn dual_stack() -> GuestNetwork {
        GuestNetwork {
            nics: vec![
                GuestNic {
                    name: "eth0".into(),
                    ipv4: address("192.0.2.5", 24, Some("192.0.2.1")),
                    ipv6: address("2001:db8::5", 64, Some("2001:db8::1")),
                },
                GuestNic {
                    name: "eth1".into(),
                    ipv4: None,
                    ipv6: None,
                },
            ],
            dns_servers: vec!["192.0.2.53".into(), "2001:db8::53".into()],
            search_domains: vec!["example.com".into()],
        }
    }

    #[test]
    fn the_engine_gets_static_nics_and_dhcp_for_the_others() {
        let mut init = Initialization::default();
        set_initialization(&mut init, &dual_stack());
        assert_eq!(init.dns_servers.as_deref(), Some("192.0.2.53 2001:db8::53"));
        assert_eq!(init.dns_search.as_deref(), Some("example.com"));
        let nics = init.nic_configurations.expect("nic configurations").items;
        assert_eq!(nics[0].boot_protocol, Some(BootProtocol::Static));
        assert_eq!(
            nics[0].ip.as_ref().and_then(|i| i.netmask.as_deref()),
            Some("255.255.255.0")
        );
        assert_eq!(nics[0].ipv6.as_ref().and_then(|i| i.netmask.as_deref()), Some("64"));
        assert_eq!(nics[0].ipv6_boot_protocol, Some(BootProtocol::Static));
        assert_eq!(nics[0].on_boot, Some(true));
        assert_eq!(nics[1].boot_protocol, Some(BootProtocol::Dhcp));
        assert_eq!(nics[1].ipv6_boot_protocol, Some(BootProtocol::None));
        assert_eq!(nics[1].name.as_deref(), Some("eth1"));
    }

    #[test]
    fn without_static_addresses_only_dns_or_nothing_goes_out() {
        let mut dns_only = dual_stack();
        for nic in &mut dns_only.nics {
            nic.ipv4 = None;
            nic.ipv6 = None;
        }
        let mut init = Initialization::default();
        set_initialization(&mut init, &dns_only);
        assert!(init.nic_configurations.is_none());
        assert!(init.dns_servers.is_some());
        assert!(GuestNetwork::default().is_empty());
        assert!(!dns_only.is_empty());
    }

    #[test]
    fn netmasks_from_prefixes() {
        assert_eq!(ipv4_netmask(24), "255.255.255.0");
        assert_eq!(ipv4_netmask(32), "255.255.255.255");
        assert_eq!(ipv4_netmask(0), "0.0.0.0");
        assert_eq!(ipv4_netmask(20), "255.255.240.0");
    }

    #[test]
    fn ignition_gets_a_keyfile_and_a_networkd_unit_per_static_nic() {
        let config = add_to_ignition(r#"{"ignition":{"version":"3.4.0"}}"#, &dual_stack()).unwrap();
        let json: Value = serde_json::from_str(&config).unwrap();
        let files = json["storage"]["files"].as_array().unwrap();
        assert_eq!(files.len(), 2, "eth1 keeps DHCP: no files for it");
        assert_eq!(
            files[0]["path"],
            "/etc/NetworkManager/system-connections/capov-eth0.nmconnection"
        );
        assert_eq!(files[0]["mode"], 0o600);
        assert_eq!(files[0]["overwrite"], true);
        assert!(files[0].get("filesystem").is_none());
        let source = files[0]["contents"]["source"].as_str().unwrap();
        assert!(source.starts_with("data:,%5Bconnection%5D%0A"), "{source}");
        assert_eq!(files[1]["path"], "/etc/systemd/network/10-capov-eth0.network");
        let keyfile = network_manager_keyfile(&dual_stack().nics[0], &dual_stack());
        assert!(keyfile.contains("interface-name=eth0\n"), "{keyfile}");
        assert!(keyfile.contains("[ipv4]\nmethod=manual\naddress1=192.0.2.5/24,192.0.2.1\ndns=192.0.2.53;\n"));
        assert!(keyfile.contains("[ipv6]\nmethod=manual\naddress1=2001:db8::5/64,2001:db8::1\ndns=2001:db8::53;\n"));
        let unit = networkd_unit(&dual_stack().nics[0], &dual_stack());
        assert!(unit.contains("Name=eth0\n") && unit.contains("Address=2001:db8::5/64\nGateway=2001:db8::1\n"));
        // Spec 2 files name their filesystem; a config without static NICs is left as it is.
        let spec2 = add_to_ignition(r#"{"ignition":{"version":"2.3.0"}}"#, &dual_stack()).unwrap();
        assert!(spec2.contains(r#""filesystem":"root""#), "{spec2}");
        let plain = r#"{"ignition":{"version":"3.4.0"}}"#;
        assert_eq!(add_to_ignition(plain, &GuestNetwork::default()).unwrap(), plain);
        assert!(add_to_ignition(r#"{"ignition":{"version":"3.4.0"},"storage":[]}"#, &dual_stack()).is_err());
    }

    #[test]
    fn static_addresses_lead_the_machine_addresses_without_duplicates() {
        let reported = vec![
            MachineAddress {
                type_: INTERNAL_IP.into(),
                address: "192.0.2.5".into(),
            },
            MachineAddress {
                type_: INTERNAL_IP.into(),
                address: "198.51.100.7".into(),
            },
            MachineAddress {
                type_: INTERNAL_DNS.into(),
                address: "m-0".into(),
            },
        ];
        let addresses: Vec<String> = with_static_addresses(reported, &dual_stack())
            .into_iter()
            .map(|a| format!("{}={}", a.type_, a.address))
            .collect();
        assert_eq!(
            addresses,
            [
                "InternalIP=192.0.2.5",
                "InternalIP=198.51.100.7",
                "InternalIP=2001:db8::5",
                "InternalDNS=m-0"
            ]
        );
    }
}
