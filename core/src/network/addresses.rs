//! The machine's `status.addresses` (SPEC §2 step 6): the VM's global-scope IPs as InternalIP, then the VM name as
//! InternalDNS.
//!
//! "Global scope" is meant as `ip addr` shows it: loopback, link-local (169.254/16, fe80::/10), unspecified,
//! multicast and the IPv4 broadcast address are dropped; private ranges (10/8, 192.168/16, fd00::/8) are kept,
//! because that is what nodes of an on-premises cluster use.
//!
//! Order: "NIC order, IPv4 before IPv6" is read as all IPv4 addresses first (in NIC order), then all IPv6
//! addresses (in NIC order). Consumers that take the first InternalIP then get the first NIC's IPv4 address, on
//! dual-stack guests too. Within one NIC the engine's order is kept.
//!
//! Only devices whose MAC matches one of the VM's NICs count: engines before 4.5 pass on every interface the guest
//! agent reports except `lo*`/`tun*`/`veth*` (docs/simulator-fidelity.md), so a Kubernetes node also shows
//! `docker0`, `cni0`, `flannel.1`, `vxlan.calico` and `cali*` devices with MACs of their own, which are skipped. A
//! bridge that takes the NIC's MAC (OVN-Kubernetes' `br-ex`) counts as that NIC. Addresses held on the node's own
//! NIC besides its own (keepalived VIPs) share its MAC and are kept, after the node's own address in the guest's
//! order — except the control-plane endpoint host, which is skipped wherever it shows up. Duplicates are dropped.
//! Without a guest agent nothing is reported and the machine has only its InternalDNS address (MachineOn says why).

use std::net::IpAddr;

use capov_crds::MachineAddress;

pub const INTERNAL_IP: &str = "InternalIP";
pub const INTERNAL_DNS: &str = "InternalDNS";

/// One NIC of the VM, as configured in oVirt.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VmNic {
    pub name: String,
    pub mac: String,
}

/// One device the guest agent reports, with its addresses as the engine gives them.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ReportedDevice {
    pub mac: Option<String>,
    pub ips: Vec<String>,
}

/// The addresses to write into `status.addresses`.
pub fn machine_addresses(
    vm_name: &str,
    nics: &[VmNic],
    devices: &[ReportedDevice],
    control_plane_host: Option<&str>,
) -> Vec<MachineAddress> {
    let skipped_host: Option<IpAddr> = control_plane_host.and_then(|h| h.trim().parse().ok());
    let in_nic_order: Vec<IpAddr> = nics
        .iter()
        .flat_map(|nic| {
            devices
                .iter()
                .filter(move |d| d.mac.as_deref().is_some_and(|mac| same_mac(mac, &nic.mac)))
        })
        .flat_map(|device| device.ips.iter())
        .filter_map(|ip| parse_ip(ip))
        .filter(|ip| is_global_scope(ip) && Some(*ip) != skipped_host)
        .collect();

    let mut ips: Vec<IpAddr> = Vec::new();
    for ip in in_nic_order
        .iter()
        .filter(|ip| ip.is_ipv4())
        .chain(in_nic_order.iter().filter(|ip| ip.is_ipv6()))
    {
        if !ips.contains(ip) {
            ips.push(*ip);
        }
    }
    // Exactly the room needed: the list is held in the machine's status for its life.
    let mut addresses: Vec<MachineAddress> = Vec::with_capacity(ips.len() + usize::from(!vm_name.is_empty()));
    addresses.extend(ips.iter().map(|ip| MachineAddress {
        type_: INTERNAL_IP.into(),
        address: ip.to_string(),
    }));
    if !vm_name.is_empty() {
        addresses.push(MachineAddress {
            type_: INTERNAL_DNS.into(),
            address: vm_name.to_string(),
        });
    }
    addresses
}

/// Parses an IP as reported; tolerates a `/prefix` and an IPv6 zone (`fe80::1%eth0`).
fn parse_ip(reported: &str) -> Option<IpAddr> {
    let without_prefix = reported.trim().split('/').next()?;
    let without_zone = without_prefix.split('%').next()?;
    without_zone.parse().ok()
}

fn is_global_scope(ip: &IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => {
            !(v4.is_loopback() || v4.is_link_local() || v4.is_unspecified() || v4.is_multicast() || v4.is_broadcast())
        }
        IpAddr::V6(v6) => {
            let mapped_v4_ok = v6.to_ipv4_mapped().is_none_or(|v4| is_global_scope(&IpAddr::V4(v4)));
            !(v6.is_loopback() || v6.is_unicast_link_local() || v6.is_unspecified() || v6.is_multicast())
                && mapped_v4_ok
        }
    }
}

/// MACs compare case-insensitively, and `-` and `:` separators count as the same.
pub fn same_mac(a: &str, b: &str) -> bool {
    let normal = |m: &str| m.trim().to_ascii_lowercase().replace('-', ":");
    !a.trim().is_empty() && normal(a) == normal(b)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn nic(name: &str, mac: &str) -> VmNic {
        VmNic {
            name: name.into(),
            mac: mac.into(),
        }
    }

    fn device(mac: &str, ips: &[&str]) -> ReportedDevice {
        ReportedDevice {
            mac: Some(mac.into()),
            ips: ips.iter().map(|s| s.to_string()).collect(),
        }
    }

    fn ip_list(addresses: &[MachineAddress]) -> Vec<&str> {
        addresses
            .iter()
            .filter(|a| a.type_ == INTERNAL_IP)
            .map(|a| a.address.as_str())
            .collect()
    }

    #[test]
    fn vm_name_is_the_last_address_as_internal_dns() {
        let addresses = machine_addresses("worker-1", &[], &[], None);
        assert_eq!(
            addresses,
            vec![MachineAddress {
                type_: "InternalDNS".into(),
                address: "worker-1".into()
            }]
        );
    }

    #[test]
    fn only_devices_matching_a_vm_nic_count_case_insensitively() {
        let nics = [nic("nic1", "56:6f:00:00:00:01")];
        let devices = [
            device("56:6F:00:00:00:01", &["10.0.0.5"]),
            device("02:42:ac:11:00:02", &["172.17.0.2"]),
        ];
        assert_eq!(
            ip_list(&machine_addresses("w", &nics, &devices, None)),
            vec!["10.0.0.5"]
        );
    }

    #[test]
    fn devices_without_mac_are_skipped() {
        let nics = [nic("nic1", "56:6f:00:00:00:01")];
        let devices = [ReportedDevice {
            mac: None,
            ips: vec!["10.0.0.9".into()],
        }];
        assert!(ip_list(&machine_addresses("w", &nics, &devices, None)).is_empty());
    }

    #[test]
    fn non_global_addresses_are_dropped() {
        let nics = [nic("nic1", "aa:bb:cc:dd:ee:01")];
        let devices = [device(
            "aa:bb:cc:dd:ee:01",
            &[
                "127.0.0.1",
                "169.254.3.4",
                "0.0.0.0",
                "224.0.0.1",
                "::1",
                "fe80::1",
                "febf::1",
                "::",
                "ff02::1",
                "10.1.2.3",
            ],
        )];
        assert_eq!(
            ip_list(&machine_addresses("w", &nics, &devices, None)),
            vec!["10.1.2.3"]
        );
    }

    #[test]
    fn private_and_unique_local_addresses_are_kept() {
        let nics = [nic("nic1", "aa:bb:cc:dd:ee:01")];
        let devices = [device(
            "aa:bb:cc:dd:ee:01",
            &["192.168.1.10", "fd00::10", "2001:db8::10"],
        )];
        assert_eq!(
            ip_list(&machine_addresses("w", &nics, &devices, None)),
            vec!["192.168.1.10", "fd00::10", "2001:db8::10"]
        );
    }

    #[test]
    fn ipv4_first_then_ipv6_each_in_nic_order() {
        let nics = [nic("nic1", "aa:00:00:00:00:01"), nic("nic2", "aa:00:00:00:00:02")];
        let devices = [
            device("aa:00:00:00:00:02", &["2001:db8::2", "10.0.2.2"]),
            device("aa:00:00:00:00:01", &["2001:db8::1", "10.0.1.1"]),
        ];
        assert_eq!(
            ip_list(&machine_addresses("w", &nics, &devices, None)),
            vec!["10.0.1.1", "10.0.2.2", "2001:db8::1", "2001:db8::2"]
        );
    }

    #[test]
    fn control_plane_endpoint_host_is_skipped() {
        let nics = [nic("nic1", "aa:00:00:00:00:01")];
        let devices = [device("aa:00:00:00:00:01", &["10.0.1.100", "10.0.1.11"])];
        assert_eq!(
            ip_list(&machine_addresses("cp-0", &nics, &devices, Some("10.0.1.100"))),
            vec!["10.0.1.11"]
        );
    }

    #[test]
    fn control_plane_endpoint_given_as_dns_name_skips_nothing() {
        let nics = [nic("nic1", "aa:00:00:00:00:01")];
        let devices = [device("aa:00:00:00:00:01", &["10.0.1.11"])];
        assert_eq!(
            ip_list(&machine_addresses("cp-0", &nics, &devices, Some("api.example.com"))),
            vec!["10.0.1.11"]
        );
    }

    #[test]
    fn duplicates_are_dropped_and_written_canonically() {
        let nics = [nic("nic1", "aa:00:00:00:00:01"), nic("nic2", "aa:00:00:00:00:02")];
        let devices = [
            device("aa:00:00:00:00:01", &["10.0.1.1", "2001:DB8:0:0::1"]),
            device("aa:00:00:00:00:02", &["10.0.1.1", "2001:db8::1"]),
        ];
        assert_eq!(
            ip_list(&machine_addresses("w", &nics, &devices, None)),
            vec!["10.0.1.1", "2001:db8::1"]
        );
    }

    #[test]
    fn garbage_prefixes_and_zones_are_handled() {
        let nics = [nic("nic1", "aa-00-00-00-00-01")];
        let devices = [device(
            "AA:00:00:00:00:01",
            &["not-an-ip", "10.0.1.1/24", "fe80::1%eth0", ""],
        )];
        assert_eq!(
            ip_list(&machine_addresses("w", &nics, &devices, None)),
            vec!["10.0.1.1"]
        );
    }

    /// What a Kubernetes node's guest agent reports through an engine before 4.5 (the simulator's default
    /// noise): only the node's own NIC counts — its address and a VIP on it — not loopback, Docker, flannel, Calico
    /// or link-local addresses; the control-plane endpoint VIP is dropped.
    #[test]
    fn a_noisy_kubernetes_guest_yields_only_its_own_nic_addresses() {
        let nics = [nic("nic1", "56:6f:00:00:00:01")];
        let devices = [
            device("00:00:00:00:00:00", &["127.0.0.1", "::1"]),
            device(
                "56:6f:00:00:00:01",
                &["10.0.1.11", "10.0.1.100", "10.0.1.200", "fe80::546f:ff:fe00:1"],
            ),
            device("02:42:ac:11:00:01", &["172.17.0.1", "fe80::42:acff:fe11:1"]),
            device("0a:58:0a:f4:00:01", &["10.244.0.1", "fe80::858:aff:fef4:1"]),
            device("9e:1f:3c:5d:00:01", &["10.244.0.0"]),
            device("66:d1:ab:12:00:01", &["192.168.0.192"]),
            device("ee:ee:ee:ee:ee:ee", &["fe80::ecee:eeff:feee:eeee"]),
        ];
        assert_eq!(
            ip_list(&machine_addresses("cp-0", &nics, &devices, Some("10.0.1.100"))),
            vec!["10.0.1.11", "10.0.1.200"]
        );
    }

    /// OVN-Kubernetes moves the node address to a bridge (`br-ex`) that takes the NIC's MAC: it still counts.
    #[test]
    fn a_bridge_carrying_the_nics_mac_counts_as_the_nic() {
        let nics = [nic("nic1", "56:6f:00:00:00:01")];
        let devices = [
            device("56:6f:00:00:00:01", &[]),
            device("56:6f:00:00:00:01", &["10.0.1.11"]),
        ];
        assert_eq!(
            ip_list(&machine_addresses("w", &nics, &devices, None)),
            vec!["10.0.1.11"]
        );
    }

    #[test]
    fn ipv4_mapped_loopback_is_dropped() {
        let nics = [nic("nic1", "aa:00:00:00:00:01")];
        let devices = [device("aa:00:00:00:00:01", &["::ffff:127.0.0.1", "::ffff:10.0.0.1"])];
        assert_eq!(
            ip_list(&machine_addresses("w", &nics, &devices, None)),
            vec!["::ffff:10.0.0.1"]
        );
    }
}
