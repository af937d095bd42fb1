//! What a guest makes of the network settings its last start delivered, for the addresses its agent then reports:
//!
//! * cloud-init reads the config drive's `network_data.json` (the engine's, from the initialization's NIC
//!   configurations): each interface named by a link gets the networks on it (static addresses, DHCP); an
//!   interface the data does not name is left unconfigured, since cloud-init's network configuration replaces the
//!   image's own. cloud-init matches links by name, as the engine writes no MAC addresses.
//! * Ignition does not read `network_data.json`. A NetworkManager keyfile the config writes to
//!   `/etc/NetworkManager/system-connections/` (`interface-name=`, `[ipv4]`/`[ipv6]` with `method=manual` and
//!   `address1=ADDRESS/PREFIX[,GATEWAY]`) configures its interface; every other interface keeps NetworkManager's
//!   default, DHCP.
//!
//! Without delivered settings every interface uses DHCP, as before.

use std::collections::HashMap;

use serde_json::Value;

use crate::state::Delivered;

/// How one guest interface gets its addresses.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GuestInterfaceConfig {
    /// It asks DHCP for an IPv4 address.
    pub dhcp4: bool,
    /// Addresses configured statically, IPv4 and IPv6.
    pub addresses: Vec<String>,
}

/// The guest's interface configuration by interface name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GuestNetwork {
    configured: HashMap<String, GuestInterfaceConfig>,
    /// What an interface without configuration does: DHCP (image default, NetworkManager) or nothing (cloud-init
    /// network data present).
    others_dhcp: bool,
}

impl GuestNetwork {
    /// How the interface `name` gets its addresses.
    pub fn interface(&self, name: &str) -> GuestInterfaceConfig {
        self.configured.get(name).cloned().unwrap_or(GuestInterfaceConfig {
            dhcp4: self.others_dhcp,
            addresses: Vec::new(),
        })
    }
}

/// The guest's view of what its last start delivered (None: nothing delivered).
pub fn guest_network(delivered: Option<&Delivered>) -> GuestNetwork {
    let dhcp_everywhere = GuestNetwork {
        configured: HashMap::new(),
        others_dhcp: true,
    };
    let Some(delivered) = delivered else {
        return dhcp_everywhere;
    };
    match delivered.kind.as_str() {
        "cloud-init" => match &delivered.network_data {
            Some(data) if data.get("links").is_some() => from_network_data(data),
            _ => dhcp_everywhere,
        },
        "ignition" => from_keyfiles(&delivered.user_data),
        _ => dhcp_everywhere,
    }
}

fn from_network_data(data: &Value) -> GuestNetwork {
    let mut configured: HashMap<String, GuestInterfaceConfig> = HashMap::new();
    let list = |key: &str| data.get(key).and_then(Value::as_array).cloned().unwrap_or_default();
    for link in list("links") {
        if let Some(name) = link.get("name").and_then(Value::as_str) {
            configured.entry(name.to_string()).or_default();
        }
    }
    for network in list("networks") {
        let Some(link) = network.get("link").and_then(Value::as_str) else {
            continue;
        };
        let Some(config) = configured.get_mut(link) else {
            continue;
        };
        match network.get("type").and_then(Value::as_str) {
            Some("ipv4_dhcp") => config.dhcp4 = true,
            Some("ipv4" | "ipv6") => {
                if let Some(address) = network.get("ip_address").and_then(Value::as_str) {
                    config.addresses.push(address.to_string());
                }
            }
            _ => {}
        }
    }
    GuestNetwork {
        configured,
        others_dhcp: false,
    }
}

const KEYFILE_DIR: &str = "/etc/NetworkManager/system-connections/";

fn from_keyfiles(ignition: &str) -> GuestNetwork {
    let mut configured = HashMap::new();
    let config: Value = serde_json::from_str(ignition).unwrap_or(Value::Null);
    let files = config
        .get("storage")
        .and_then(|s| s.get("files"))
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    for file in files {
        let path = file.get("path").and_then(Value::as_str).unwrap_or_default();
        if !path.starts_with(KEYFILE_DIR) || !path.ends_with(".nmconnection") {
            continue;
        }
        let source = file
            .get("contents")
            .and_then(|c| c.get("source"))
            .and_then(Value::as_str)
            .unwrap_or_default();
        let Some(text) = source.strip_prefix("data:,").and_then(percent_decode) else {
            continue;
        };
        if let Some((name, interface)) = keyfile(&text) {
            configured.insert(name, interface);
        }
    }
    GuestNetwork {
        configured,
        others_dhcp: true,
    }
}

/// The interface a keyfile configures and how.
fn keyfile(text: &str) -> Option<(String, GuestInterfaceConfig)> {
    let mut section = "";
    let mut name = None;
    let mut config = GuestInterfaceConfig::default();
    for line in text.lines().map(str::trim) {
        if let Some(header) = line.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
            section = header;
            continue;
        }
        let Some((key, value)) = line.split_once('=') else {
            continue;
        };
        match (section, key.trim()) {
            ("connection", "interface-name") => name = Some(value.trim().to_string()),
            ("ipv4", "method") if value.trim() == "auto" => config.dhcp4 = true,
            ("ipv4" | "ipv6", key) if key.starts_with("address") => {
                let address = value.split(['/', ',']).next().unwrap_or_default().trim();
                if !address.is_empty() {
                    config.addresses.push(address.to_string());
                }
            }
            _ => {}
        }
    }
    name.map(|name| (name, config))
}

/// RFC 3986 percent-decoding of a data URL's payload; None for a malformed escape or text that is not UTF-8.
fn percent_decode(text: &str) -> Option<String> {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut at = 0;
    while at < bytes.len() {
        if bytes[at] == b'%' {
            let hex = text.get(at + 1..at + 3)?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            at += 3;
        } else {
            out.push(bytes[at]);
            at += 1;
        }
    }
    String::from_utf8(out).ok()
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn delivered(kind: &str, user_data: &str, network_data: Option<Value>) -> Delivered {
        Delivered {
            kind: kind.into(),
            user_data: user_data.into(),
            meta_data: json!({}),
            network_data,
        }
    }

    #[test]
    fn cloud_init_configures_the_named_links_and_leaves_the_others_alone() {
        let data = json!({
            "links": [{"id": "eth0", "name": "eth0", "type": "vif"}],
            "networks": [
                {"id": "eth0", "link": "eth0", "type": "ipv4", "ip_address": "10.0.0.5"},
                {"id": "eth0", "link": "eth0", "type": "ipv6", "ip_address": "fd00::5"}
            ]
        });
        let guest = guest_network(Some(&delivered("cloud-init", "#cloud-config", Some(data))));
        assert_eq!(
            guest.interface("eth0"),
            GuestInterfaceConfig {
                dhcp4: false,
                addresses: vec!["10.0.0.5".into(), "fd00::5".into()]
            }
        );
        assert_eq!(guest.interface("eth1"), GuestInterfaceConfig::default());
        // Only DNS services: cloud-init keeps the image's network configuration.
        let dns_only = json!({"services": [{"type": "dns", "address": "10.0.0.2"}]});
        let guest = guest_network(Some(&delivered("cloud-init", "", Some(dns_only))));
        assert!(guest.interface("eth0").dhcp4);
    }

    #[test]
    fn ignition_guests_read_network_manager_keyfiles() {
        let keyfile = "[connection]\nid=eth1\ntype=ethernet\ninterface-name=eth1\n[ipv4]\nmethod=manual\n\
                       address1=10.0.0.7/24,10.0.0.1\n[ipv6]\nmethod=manual\naddress1=fd00::7/64,fd00::1\n";
        let encoded: String = keyfile
            .bytes()
            .map(|b| match b {
                b'a'..=b'z' | b'A'..=b'Z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => (b as char).to_string(),
                other => format!("%{other:02X}"),
            })
            .collect();
        let config = json!({"ignition": {"version": "3.4.0"}, "storage": {"files": [
            {"path": "/etc/NetworkManager/system-connections/eth1.nmconnection", "mode": 384,
             "contents": {"source": format!("data:,{encoded}")}}]}});
        let guest = guest_network(Some(&delivered("ignition", &config.to_string(), None)));
        assert_eq!(
            guest.interface("eth1").addresses,
            vec!["10.0.0.7".to_string(), "fd00::7".to_string()]
        );
        assert!(!guest.interface("eth1").dhcp4);
        assert!(guest.interface("eth0").dhcp4, "no keyfile: NetworkManager's DHCP");
    }
}
