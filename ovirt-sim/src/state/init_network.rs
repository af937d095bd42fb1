//! The network settings of a VM's initialization as the engine keeps them (`VmInit`'s DNS settings and its
//! `VmInitNetwork`s); `engine::init_network` takes, checks, shows and delivers them.

/// An IPv4 or IPv6 boot protocol as the engine keeps it (IPv4 knows only none, DHCP and static).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Protocol {
    #[default]
    None,
    Dhcp,
    Static,
    Autoconf,
    PolyDhcpAutoconf,
}

/// One `VmInitNetwork`.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct InitNic {
    pub name: Option<String>,
    pub start_on_boot: Option<bool>,
    pub ipv4: Protocol,
    pub ip: Option<String>,
    pub netmask: Option<String>,
    pub gateway: Option<String>,
    pub ipv6: Protocol,
    pub ipv6_address: Option<String>,
    pub ipv6_prefix: Option<u32>,
    pub ipv6_gateway: Option<String>,
}

/// The network part of a VM's `VmInit`.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct InitNetwork {
    pub dns_servers: Option<String>,
    pub dns_search: Option<String>,
    /// None: no `nic_configurations` were given (the engine then writes no network data).
    pub nics: Option<Vec<InitNic>>,
}
