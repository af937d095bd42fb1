//! The network settings of a VM's initialization (`dns_servers`, `dns_search`, `nic_configurations`) as the engine
//! takes, checks, shows and delivers them (ovirt-engine):
//!
//! * Taking them (`restapi/types/InitializationMapper`): only the elements given are set; a NIC configuration's
//!   protocols default to `none` (`VmInitNetwork`). `boot_protocol` `autoconf`/`poly_dhcp_autoconf` is refused at
//!   once with 400 "Invalid value" (`Ipv4BootProtocolMapper`); the IPv6 `netmask` is parsed as the prefix length
//!   (`IntegerParser.parseUnsignedInt`), and anything else fails the request's mapping: 500 with a bare
//!   "Operation Failed" fault (`MappingExceptionMapper`).
//! * Checking them (`CloudInitHandler.validate` → `VmInitToOpenStackMetadataAdapter.validate`, run by
//!   `AddVmCommand`; cloud-init's network protocol is OpenStack metadata unless another is asked for): every NIC
//!   configuration must have `on_boot` true, a static IPv4/IPv6 needs its address, IPv6 `autoconf` is refused. All
//!   are `BAD_PARAMETERS` (400) with the texts of `AppErrors.properties`.
//! * Showing them (`InitializationMapper`, entity → model): each NIC configuration with its name, `on_boot`, both
//!   protocols and an `<ip>`/`<ipv6>` element (empty when nothing is set); the IPv6 netmask is the prefix.
//! * Delivering them (`VmInitToOpenStackMetadataAdapter.asMap`): the config drive's
//!   `openstack/latest/network_data.json` with a `vif` link per NIC configuration that has an IPv4 or IPv6 network,
//!   the networks (`ipv4`/`ipv4_dhcp`/`ipv6`/`ipv6_dhcp`, the DNS settings on each), and a `dns` service per name
//!   server. Ignition guests get the same drive (`IgnitionHandler` goes through `CloudInitHandler`), but Ignition
//!   does not read `network_data.json`.

use capov_ovirt::model::{self, BootProtocol, Ip, NicConfiguration, NicConfigurations};
use serde_json::{Value, json};

use super::*;
use crate::state::{InitNetwork, InitNic, Protocol};

impl Protocol {
    fn wire(self) -> BootProtocol {
        match self {
            Protocol::None => BootProtocol::None,
            Protocol::Dhcp => BootProtocol::Dhcp,
            Protocol::Static => BootProtocol::Static,
            Protocol::Autoconf => BootProtocol::Autoconf,
            Protocol::PolyDhcpAutoconf => BootProtocol::PolyDhcpAutoconf,
        }
    }
}

/// The request's network settings, as the REST layer maps them.
pub fn from_request(init: &model::Initialization) -> EngineResult<InitNetwork> {
    let nics = match &init.nic_configurations {
        None => None,
        Some(list) => Some(
            list.items
                .iter()
                .map(nic_from_request)
                .collect::<EngineResult<Vec<_>>>()?,
        ),
    };
    Ok(InitNetwork {
        dns_servers: init.dns_servers.clone(),
        dns_search: init.dns_search.clone(),
        nics,
    })
}

fn nic_from_request(nic: &NicConfiguration) -> EngineResult<InitNic> {
    let ipv4 = match &nic.boot_protocol {
        None | Some(BootProtocol::None) => Protocol::None,
        Some(BootProtocol::Dhcp) => Protocol::Dhcp,
        Some(BootProtocol::Static) => Protocol::Static,
        Some(other) => {
            return Err(EngineError::Fault {
                status: 400,
                reason: "Invalid value".into(),
                detail: format!(
                    "Boot protocol = '{}' is not applicable for IPv4.",
                    other.as_str().to_uppercase()
                ),
            });
        }
    };
    let ipv6 = match &nic.ipv6_boot_protocol {
        None | Some(BootProtocol::None) => Protocol::None,
        Some(BootProtocol::Dhcp) => Protocol::Dhcp,
        Some(BootProtocol::Static) => Protocol::Static,
        Some(BootProtocol::Autoconf) => Protocol::Autoconf,
        Some(BootProtocol::PolyDhcpAutoconf) => Protocol::PolyDhcpAutoconf,
        Some(BootProtocol::Other(_)) => Protocol::None,
    };
    let v4 = nic.ip.clone().unwrap_or_default();
    let v6 = nic.ipv6.clone().unwrap_or_default();
    let ipv6_prefix = match v6.netmask.as_deref() {
        None => None,
        Some(text) => Some(unsigned_int(text).ok_or_else(mapping_failed)?),
    };
    Ok(InitNic {
        name: nic.name.clone(),
        start_on_boot: nic.on_boot,
        ipv4,
        ip: v4.address,
        netmask: v4.netmask,
        gateway: v4.gateway,
        ipv6,
        ipv6_address: v6.address,
        ipv6_prefix,
        ipv6_gateway: v6.gateway,
    })
}

/// `IntegerParser.parseUnsignedInt`: an empty text is 0; an integer between 0 and 2^32-1.
fn unsigned_int(text: &str) -> Option<u32> {
    let trimmed = text.trim();
    if trimmed.is_empty() {
        return Some(0);
    }
    trimmed.strip_prefix('+').unwrap_or(trimmed).parse::<u32>().ok()
}

/// A request the REST layer could not map to the engine's entities.
fn mapping_failed() -> EngineError {
    EngineError::Fault {
        status: 500,
        reason: "Operation Failed".into(),
        detail: String::new(),
    }
}

/// `VmInitToOpenStackMetadataAdapter.validate` for the command `action` on a VM (e.g. "add"): every message of every
/// NIC configuration, as the engine lists them.
pub fn validate(network: &InitNetwork, action: &str) -> EngineResult<()> {
    let Some(nics) = &network.nics else {
        return Ok(());
    };
    let mut messages = Vec::new();
    for nic in nics {
        if nic.start_on_boot != Some(true) {
            messages.push("Start On Boot selection in cloud-init configuration is invalid. Only 'true' is supported.");
        }
        if nic.ipv4 == Protocol::Static && nic.ip.as_deref().is_none_or(str::is_empty) {
            messages.push("Static IPv4 address is missing in cloud-init configuration.");
        }
        if nic.ipv6 == Protocol::Static && nic.ipv6_address.as_deref().is_none_or(str::is_empty) {
            messages.push("Static IPv6 address is missing in cloud-init configuration.");
        }
        if matches!(nic.ipv6, Protocol::Autoconf | Protocol::PolyDhcpAutoconf) {
            messages.push("Option 'autoconf' in cloud-init configuration is not supported.");
        }
    }
    if messages.is_empty() {
        return Ok(());
    }
    let prefix = format!("Cannot {action} VM.");
    let text: Vec<String> = messages.iter().map(|m| format!("{prefix} {m}")).collect();
    Err(operation_failed(400, &text.join(", ")))
}

/// The settings as `GET /vms/{id}` shows them inside `<initialization>`.
pub fn render(network: &InitNetwork) -> Option<NicConfigurations> {
    let nics = network.nics.as_ref()?;
    let items = nics
        .iter()
        .map(|nic| NicConfiguration {
            name: nic.name.clone(),
            ip: Some(Ip {
                address: nic.ip.clone(),
                netmask: nic.netmask.clone(),
                gateway: nic.gateway.clone(),
                version: None,
            }),
            boot_protocol: Some(nic.ipv4.wire()),
            ipv6: Some(Ip {
                address: nic.ipv6_address.clone(),
                netmask: nic.ipv6_prefix.map(|p| p.to_string()),
                gateway: nic.ipv6_gateway.clone(),
                version: None,
            }),
            ipv6_boot_protocol: Some(nic.ipv6.wire()),
            on_boot: nic.start_on_boot,
        })
        .collect();
    Some(NicConfigurations { items })
}

/// The config drive's `network_data.json` (`VmInitToOpenStackMetadataAdapter.asMap`); None when the engine writes
/// none (no networks, links or services).
pub fn network_data(network: &InitNetwork) -> Option<Value> {
    let dns = |entry: &mut Value| {
        if let Some(servers) = network.dns_servers.as_deref().filter(|s| !s.is_empty()) {
            entry["dns_nameservers"] = json!(servers.split(' ').collect::<Vec<_>>());
        }
        if let Some(search) = network.dns_search.as_deref().filter(|s| !s.is_empty()) {
            entry["dns_search"] = json!(search.split(' ').collect::<Vec<_>>());
        }
    };
    let mut links = Vec::new();
    let mut networks = Vec::new();
    for nic in network.nics.iter().flatten() {
        let name = nic.name.clone().unwrap_or_default();
        let mut linked = false;
        let v4 = match nic.ipv4 {
            Protocol::Dhcp => Some(json!({"id": name, "link": name, "type": "ipv4_dhcp"})),
            Protocol::Static => {
                let mut entry = json!({"id": name, "link": name, "type": "ipv4", "ip_address": nic.ip});
                if let Some(netmask) = nic.netmask.as_deref().filter(|m| !m.is_empty()) {
                    entry["netmask"] = json!(netmask);
                }
                if let Some(gateway) = nic.gateway.as_deref().filter(|g| !g.is_empty()) {
                    entry["gateway"] = json!(gateway);
                }
                Some(entry)
            }
            _ => None,
        };
        let v6 = match nic.ipv6 {
            Protocol::Dhcp => Some(json!({"id": name, "link": name, "type": "ipv6_dhcp"})),
            Protocol::Static => {
                let mut entry = json!({"id": name, "link": name, "type": "ipv6", "ip_address": nic.ipv6_address});
                if let Some(prefix) = nic.ipv6_prefix {
                    entry["netmask"] = json!(prefix.to_string());
                }
                if let Some(gateway) = nic.ipv6_gateway.as_deref().filter(|g| !g.is_empty()) {
                    entry["gateway"] = json!(gateway);
                }
                Some(entry)
            }
            _ => None,
        };
        for mut entry in [v4, v6].into_iter().flatten() {
            dns(&mut entry);
            networks.push(entry);
            linked = true;
        }
        if linked {
            links.push(json!({"id": name, "name": name, "type": "vif"}));
        }
    }
    let services: Vec<Value> = network
        .dns_servers
        .as_deref()
        .filter(|s| !s.is_empty())
        .map(|servers| {
            servers
                .split(' ')
                .map(|a| json!({"type": "dns", "address": a}))
                .collect()
        })
        .unwrap_or_default();
    let mut data = serde_json::Map::new();
    for (key, list) in [("links", links), ("networks", networks), ("services", services)] {
        if !list.is_empty() {
            data.insert(key.into(), Value::Array(list));
        }
    }
    (!data.is_empty()).then_some(Value::Object(data))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn nic(name: &str) -> NicConfiguration {
        NicConfiguration {
            name: Some(name.into()),
            on_boot: Some(true),
            ..NicConfiguration::default()
        }
    }

    fn ip(address: &str, netmask: &str, gateway: &str) -> Option<Ip> {
        Some(Ip {
            address: Some(address.into()),
            netmask: Some(netmask.into()),
            gateway: Some(gateway.into()),
            version: None,
        })
    }

    fn init(nics: Vec<NicConfiguration>) -> model::Initialization {
        model::Initialization {
            dns_servers: Some("10.0.0.2 fd00::2".into()),
            dns_search: Some("example.com".into()),
            nic_configurations: Some(NicConfigurations { items: nics }),
            ..model::Initialization::default()
        }
    }

    #[test]
    fn static_ipv4_and_ipv6_become_the_network_data_cloud_init_reads() {
        let mut eth0 = nic("eth0");
        eth0.boot_protocol = Some(BootProtocol::Static);
        eth0.ip = ip("10.0.0.5", "255.255.255.0", "10.0.0.1");
        eth0.ipv6_boot_protocol = Some(BootProtocol::Static);
        eth0.ipv6 = ip("fd00::5", "64", "fd00::1");
        let mut eth1 = nic("eth1");
        eth1.boot_protocol = Some(BootProtocol::Dhcp);
        let network = from_request(&init(vec![eth0, eth1])).unwrap();
        assert_eq!(validate(&network, "add"), Ok(()));
        let data = network_data(&network).unwrap();
        assert_eq!(data["links"].as_array().map(Vec::len), Some(2));
        assert_eq!(data["networks"][0]["type"], "ipv4");
        assert_eq!(data["networks"][0]["ip_address"], "10.0.0.5");
        assert_eq!(data["networks"][0]["netmask"], "255.255.255.0");
        assert_eq!(data["networks"][0]["dns_nameservers"], json!(["10.0.0.2", "fd00::2"]));
        assert_eq!(data["networks"][1]["type"], "ipv6");
        assert_eq!(data["networks"][1]["netmask"], "64");
        assert_eq!(data["networks"][2]["type"], "ipv4_dhcp");
        assert_eq!(data["services"][1]["address"], "fd00::2");
        let shown = render(&network).unwrap();
        assert_eq!(
            shown.items[0].ipv6.as_ref().and_then(|i| i.netmask.as_deref()),
            Some("64")
        );
        assert_eq!(shown.items[1].ipv6_boot_protocol, Some(BootProtocol::None));
    }

    #[test]
    fn the_engines_checks_and_their_texts() {
        let mut off = nic("eth0");
        off.on_boot = Some(false);
        off.boot_protocol = Some(BootProtocol::Static);
        let network = from_request(&init(vec![off])).unwrap();
        let Err(EngineError::Fault { status, detail, .. }) = validate(&network, "add") else {
            panic!("accepted");
        };
        assert_eq!(status, 400);
        assert_eq!(
            detail,
            "[Cannot add VM. Start On Boot selection in cloud-init configuration is invalid. Only 'true' is \
             supported., Cannot add VM. Static IPv4 address is missing in cloud-init configuration.]"
        );
        let mut autoconf = nic("eth0");
        autoconf.ipv6_boot_protocol = Some(BootProtocol::Autoconf);
        let network = from_request(&init(vec![autoconf])).unwrap();
        assert!(
            matches!(validate(&network, "add"), Err(EngineError::Fault { detail, .. })
            if detail.contains("Option 'autoconf' in cloud-init configuration is not supported."))
        );
        let mut v4_autoconf = nic("eth0");
        v4_autoconf.boot_protocol = Some(BootProtocol::Autoconf);
        assert!(
            matches!(from_request(&init(vec![v4_autoconf])), Err(EngineError::Fault { status: 400, detail, .. })
            if detail == "Boot protocol = 'AUTOCONF' is not applicable for IPv4.")
        );
        let mut bad_prefix = nic("eth0");
        bad_prefix.ipv6 = ip("fd00::5", "ffff:ffff::", "fd00::1");
        assert!(matches!(
            from_request(&init(vec![bad_prefix])),
            Err(EngineError::Fault { status: 500, .. })
        ));
    }

    #[test]
    fn without_nic_configurations_only_dns_services_are_written() {
        let network = from_request(&model::Initialization {
            dns_servers: Some("10.0.0.2".into()),
            ..model::Initialization::default()
        })
        .unwrap();
        assert_eq!(validate(&network, "add"), Ok(()));
        assert_eq!(
            network_data(&network),
            Some(json!({"services": [{"type": "dns", "address": "10.0.0.2"}]}))
        );
        assert_eq!(network_data(&InitNetwork::default()), None);
    }
}
