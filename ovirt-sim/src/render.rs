//! Records → engine representations, with the hrefs, links and actions a real engine adds.

use capov_ovirt::model::*;

use crate::ids::{format_time, guest_ipv4, link_local_ipv6};
use crate::state::*;

pub const API: &str = "/ovirt-engine/api";

fn href(path: &str) -> String {
    format!("{API}/{path}")
}

fn linked(collection: &str, id: &str) -> Ref {
    Ref::linked(href(&format!("{collection}/{id}")), id)
}

fn links(base: &str, rels: &[&str]) -> Vec<Link> {
    rels.iter()
        .map(|rel| Link::new(format!("{base}/{rel}"), *rel))
        .collect()
}

fn actions(base: &str, rels: &[&str]) -> Option<Actions> {
    Some(Actions {
        links: links(base, rels),
    })
}

pub fn api_root(state: &State) -> Api {
    let collections = [
        "affinitylabels",
        "clusters",
        "datacenters",
        "disks",
        "hosts",
        "jobs",
        "networks",
        "storagedomains",
        "templates",
        "vms",
        "vnicprofiles",
    ];
    let mut api_links = Vec::new();
    for collection in collections {
        api_links.push(Link::new(href(collection), collection));
        if !matches!(collection, "vnicprofiles" | "jobs" | "affinitylabels") {
            api_links.push(Link::new(
                format!("{}?search={{query}}", href(collection)),
                format!("{collection}/search"),
            ));
        }
    }
    let user_id = "bfd9c4d2-0000-4000-8000-0000000000ad";
    let running = state.vms.values().filter(|vm| vm.status == VmStatus::Up).count() as u64;
    Api {
        links: api_links,
        product_info: Some(ProductInfo {
            instance_id: Some("5e1a7c3d-0000-4000-8000-00000000c0de".into()),
            name: Some("oVirt Engine".into()),
            vendor: Some("ovirt.org".into()),
            version: Some(Version {
                build: Some(state.engine_version.build),
                full_version: Some(format!("{}.7-1.el8", state.engine_version)),
                major: Some(state.engine_version.major),
                minor: Some(state.engine_version.minor),
                revision: Some(0),
            }),
        }),
        special_objects: Some(SpecialObjects {
            blank_template: Some(linked("templates", BLANK_TEMPLATE_ID)),
            root_tag: Some(linked("tags", BLANK_TEMPLATE_ID)),
        }),
        summary: Some(ApiSummary {
            hosts: Some(SummaryCount {
                active: Some(state.hosts.values().filter(|h| h.status == HostStatus::Up).count() as u64),
                total: Some(state.hosts.len() as u64),
            }),
            storage_domains: Some(SummaryCount {
                active: Some(state.storage_domains.values().filter(|s| s.status == "active").count() as u64),
                total: Some(state.storage_domains.len() as u64),
            }),
            users: Some(SummaryCount {
                active: Some(1),
                total: Some(state.users.len() as u64),
            }),
            vms: Some(SummaryCount {
                active: Some(running),
                total: Some(state.vms.len() as u64),
            }),
        }),
        time: Some(format_time(crate::ids::now_millis())),
        authenticated_user: Some(linked("users", user_id)),
        effective_user: Some(linked("users", user_id)),
    }
}

pub fn data_center(dc: &DataCenterRecord) -> DataCenter {
    let base = href(&format!("datacenters/{}", dc.id));
    DataCenter {
        href: Some(base.clone()),
        id: Some(dc.id.clone()),
        name: Some(dc.name.clone()),
        description: Some(String::new()),
        links: links(
            &base,
            &["clusters", "networks", "storagedomains", "permissions", "quotas"],
        ),
        local: Some(false),
        status: Some("up".into()),
        version: Some(Version {
            major: Some(4),
            minor: Some(6),
            ..Version::default()
        }),
    }
}

pub fn cluster(c: &ClusterRecord) -> Cluster {
    let base = href(&format!("clusters/{}", c.id));
    Cluster {
        href: Some(base.clone()),
        id: Some(c.id.clone()),
        name: Some(c.name.clone()),
        description: Some(String::new()),
        comment: Some(String::new()),
        links: links(&base, &["networks", "permissions", "affinitygroups", "cpuprofiles"]),
        cpu: Some(Cpu {
            architecture: Some("x86_64".into()),
            kind: Some(c.cpu_type.clone()),
            ..Cpu::default()
        }),
        version: Some(Version {
            major: Some(4),
            minor: Some(6),
            ..Version::default()
        }),
        data_center: Some(linked("datacenters", &c.data_center_id)),
    }
}

/// `in_data_center`: rendered under `/datacenters/{id}/storagedomains` (status always shown);
/// otherwise `/storagedomains`, where attached domains omit their status as the engine does.
pub fn storage_domain(sd: &StorageDomainRecord, in_data_center: bool) -> StorageDomain {
    let base = href(&format!("storagedomains/{}", sd.id));
    let attached = sd.data_center_id.is_some();
    let status = if in_data_center {
        Some(StorageDomainStatus::parse(&sd.status))
    } else if attached {
        None
    } else {
        Some(StorageDomainStatus::Unattached)
    };
    StorageDomain {
        href: Some(match (&sd.data_center_id, in_data_center) {
            (Some(dc), true) => href(&format!("datacenters/{dc}/storagedomains/{}", sd.id)),
            _ => base.clone(),
        }),
        id: Some(sd.id.clone()),
        actions: actions(&base, &["isattached", "updateovfstore", "refreshluns", "reduceluns"]),
        name: Some(sd.name.clone()),
        description: Some(String::new()),
        comment: Some(String::new()),
        links: links(
            &base,
            &[
                "diskprofiles",
                "disks",
                "storageconnections",
                "permissions",
                "templates",
                "vms",
            ],
        ),
        available: Some(sd.available),
        committed: Some(sd.used),
        critical_space_action_blocker: Some(sd.critical_space_action_blocker),
        external_status: Some(sd.external_status.clone()),
        master: Some(sd.master),
        status,
        storage: Some(StorageConnection {
            address: Some("storage.sim.local".into()),
            path: Some(format!("/exports/{}", sd.name)),
            kind: Some(sd.storage_type.clone()),
        }),
        storage_format: Some("v5".into()),
        kind: Some(sd.kind.clone()),
        used: Some(sd.used),
        data_centers: sd.data_center_id.as_ref().map(|dc| DataCenterRefs {
            items: vec![linked("datacenters", dc)],
        }),
        data_center: None,
    }
}

pub fn network(n: &NetworkRecord) -> Network {
    let base = href(&format!("networks/{}", n.id));
    Network {
        href: Some(base.clone()),
        id: Some(n.id.clone()),
        name: Some(n.name.clone()),
        description: Some(String::new()),
        links: links(&base, &["permissions", "vnicprofiles", "networklabels"]),
        mtu: Some(0),
        data_center: Some(linked("datacenters", &n.data_center_id)),
    }
}

pub fn vnic_profile(p: &VnicProfileRecord) -> VnicProfile {
    let base = href(&format!("vnicprofiles/{}", p.id));
    VnicProfile {
        href: Some(base.clone()),
        id: Some(p.id.clone()),
        name: Some(p.name.clone()),
        links: links(&base, &["permissions"]),
        pass_through: Some(PassThrough {
            mode: Some("disabled".into()),
        }),
        port_mirroring: Some(false),
        network: Some(linked("networks", &p.network_id)),
        network_filter: Some(linked("networkfilters", "d2370ab4-fee3-11e9-a310-8c1645ce738e")),
    }
}

pub fn template(t: &TemplateRecord) -> Template {
    let base = href(&format!("templates/{}", t.id));
    Template {
        href: Some(base.clone()),
        id: Some(t.id.clone()),
        actions: actions(&base, &["export"]),
        name: Some(t.name.clone()),
        description: Some(t.description.clone()),
        comment: Some(String::new()),
        links: links(&base, &["diskattachments", "nics", "permissions", "tags", "watchdogs"]),
        cpu: Some(Cpu {
            architecture: Some("x86_64".into()),
            topology: Some(CpuTopology {
                cores: Some(t.cores),
                sockets: Some(t.sockets),
                threads: Some(t.threads),
            }),
            ..Cpu::default()
        }),
        creation_time: Some(format_time(t.creation_time)),
        memory: Some(t.memory),
        os: Some(OperatingSystem {
            kind: Some(t.os_type.clone()),
        }),
        kind: Some("server".into()),
        status: Some(TemplateStatus::parse(&t.status)),
        version: Some(TemplateVersion {
            version_name: t.version_name.clone(),
            version_number: Some(t.version_number),
            base_template: t.base_template_id.as_ref().map(|id| linked("templates", id)),
        }),
        cluster: t.cluster_id.as_ref().map(|id| linked("clusters", id)),
    }
}

pub fn disk(d: &DiskRecord) -> Disk {
    let base = href(&format!("disks/{}", d.id));
    Disk {
        href: Some(base.clone()),
        id: Some(d.id.clone()),
        actions: actions(&base, &["reduce", "sparsify", "copy", "export", "move", "refreshlun"]),
        name: Some(d.alias.clone()),
        description: Some(d.description.clone()),
        links: links(&base, &["permissions", "disksnapshots", "statistics"]),
        actual_size: Some(d.actual_size),
        alias: Some(d.alias.clone()),
        content_type: Some("data".into()),
        format: Some(d.format.clone()),
        image_id: Some(d.image_id.clone()),
        provisioned_size: Some(d.provisioned_size),
        shareable: Some(false),
        sparse: Some(d.sparse),
        status: Some(d.status.clone()),
        storage_type: Some("image".into()),
        total_size: Some(d.actual_size),
        wipe_after_delete: Some(false),
        disk_profile: Some(linked("diskprofiles", "0f9c5266-0000-4000-8000-00000000d15c")),
        storage_domains: Some(StorageDomainRefs {
            items: d
                .storage_domain_ids
                .iter()
                .map(|id| linked("storagedomains", id))
                .collect(),
        }),
    }
}

/// An attachment of `d` to a VM (`owner` = `vms/{id}`) or template (`templates/{id}`).
pub fn disk_attachment(d: &DiskRecord, owner_collection: &str, owner_id: &str, inline_disk: bool) -> DiskAttachment {
    let owner = Some(linked(owner_collection, owner_id));
    DiskAttachment {
        href: Some(href(&format!("{owner_collection}/{owner_id}/diskattachments/{}", d.id))),
        id: Some(d.id.clone()),
        active: Some(d.active),
        bootable: Some(d.bootable),
        interface: Some(d.interface.clone()),
        logical_name: None,
        pass_discard: Some(false),
        read_only: Some(false),
        uses_scsi_reservation: Some(false),
        disk: Some(if inline_disk {
            disk(d)
        } else {
            Disk {
                href: Some(href(&format!("disks/{}", d.id))),
                id: Some(d.id.clone()),
                ..Disk::default()
            }
        }),
        template: if owner_collection == "templates" {
            owner.clone()
        } else {
            None
        },
        vm: if owner_collection == "vms" { owner } else { None },
    }
}

pub fn nic(vm_id: &str, n: &NicRecord) -> Nic {
    let base = href(&format!("vms/{vm_id}/nics/{}", n.id));
    Nic {
        href: Some(base.clone()),
        id: Some(n.id.clone()),
        actions: actions(&base, &["activate", "deactivate"]),
        name: Some(n.name.clone()),
        links: links(&base, &["reporteddevices", "networkfilterparameters", "statistics"]),
        vm: Some(linked("vms", vm_id)),
        interface: Some(n.interface.clone()),
        linked: Some(n.linked),
        mac: Some(Mac {
            address: Some(n.mac.clone()),
        }),
        plugged: Some(n.plugged),
        synced: Some(true),
        vnic_profile: n.vnic_profile_id.as_ref().map(|id| linked("vnicprofiles", id)),
    }
}

/// One interface of the guest, as its agent reports it.
struct GuestInterface {
    name: String,
    mac: String,
    ips: Vec<String>,
}

/// The interfaces of a Kubernetes node's guest, as its agent reports them: `lo`, one `ethN` per plugged NIC (the
/// addresses its delivered network settings give it, else its own IPv4 from DHCP (`crate::guest_network`); any
/// extra address such as a keepalived VIP on the first, and the link-local IPv6 derived from the MAC),
/// and what a container runtime and CNI add with MACs of their own: `docker0`, `cni0` and `flannel.1` (flannel),
/// `vxlan.calico` and a `cali…` veth (Calico, whose veths all carry `ee:ee:ee:ee:ee:ee`), and a `veth…`.
fn guest_interfaces(vm: &VmRecord) -> Vec<GuestInterface> {
    let n = vm.address_index;
    let pod_net = (n % 250) as u8;
    let mut interfaces = vec![GuestInterface {
        name: "lo".into(),
        mac: "00:00:00:00:00:00".into(),
        ips: vec!["127.0.0.1".into(), "::1".into()],
    }];
    let network = crate::guest_network::guest_network(vm.delivered.as_ref());
    for (index, nic) in vm.nics.iter().filter(|nic| nic.plugged).enumerate() {
        let config = network.interface(&format!("eth{index}"));
        let mut ips = Vec::new();
        if config.dhcp4 {
            ips.push(guest_ipv4(n.wrapping_mul(8).wrapping_add(index as u64)));
        }
        ips.extend(config.addresses);
        if index == 0 {
            ips.extend(vm.guest_addresses.iter().cloned());
        }
        ips.push(link_local_ipv6(&nic.mac));
        interfaces.push(GuestInterface {
            name: format!("eth{index}"),
            mac: nic.mac.clone(),
            ips,
        });
    }
    let own = |prefix: &str| format!("{prefix}:{:02x}:{:02x}", (n >> 8) & 0xff, n & 0xff);
    for (name, mac, ips) in [
        ("docker0", own("02:42:ac:11"), vec!["172.17.0.1".to_string()]),
        ("cni0", own("0a:58:0a:f4"), vec![format!("10.244.{pod_net}.1")]),
        ("flannel.1", own("9e:1f:3c:5d"), vec![format!("10.244.{pod_net}.0")]),
        (
            "vxlan.calico",
            own("66:d1:ab:12"),
            vec![format!("192.168.{pod_net}.192")],
        ),
        (
            "cali1a2b3c4d5e6",
            "ee:ee:ee:ee:ee:ee".to_string(),
            vec!["fe80::ecee:eeff:feee:eeee".to_string()],
        ),
        (
            "veth3f2a1b0c",
            own("d6:4e:21:7a"),
            vec![link_local_ipv6(&own("d6:4e:21:7a"))],
        ),
    ] {
        let ips = ips.into_iter().chain(std::iter::once(link_local_ipv6(&mac))).collect();
        interfaces.push(GuestInterface {
            name: name.into(),
            mac,
            ips,
        });
    }
    interfaces
}

/// The engine's default `GuestNicNamesBlacklist` (`packaging/dbscripts/upgrade/pre_upgrade/0000_config.sql`):
/// `lo[0-9]*`, `Loopback.*`, `tun[0-9]*`, `veth[0-9a-f]*`, matched against the whole name.
fn blacklisted(name: &str) -> bool {
    let rest_matches = |prefix: &str, allowed: fn(char) -> bool| {
        name.strip_prefix(prefix).is_some_and(|rest| rest.chars().all(allowed))
    };
    rest_matches("lo", |c| c.is_ascii_digit())
        || name.starts_with("Loopback")
        || rest_matches("tun", |c| c.is_ascii_digit())
        || rest_matches("veth", |c| c.is_ascii_hexdigit() && !c.is_ascii_uppercase())
}

/// What the engine shows of the guest's interfaces (`VmAnalyzer.filterGuestAgentInterfaces`): never a blacklisted
/// name; from 4.5.0 on (commit f9de6fb, "Filter IPs of NICs that don't have profile id") only interfaces whose MAC
/// is one of the VM's NICs with a vNIC profile, before that every other interface too (CNI bridges, VXLAN devices,
/// Docker's bridge). IPv6 zone indexes are stripped. Nothing without a guest agent, or before it reported.
pub fn reported_devices(vm: &VmRecord, engine: EngineVersion) -> Vec<ReportedDevice> {
    if !vm.ips_reported {
        return Vec::new();
    }
    let filters_by_nic = engine >= EngineVersion::new(4, 5, 0);
    guest_interfaces(vm)
        .into_iter()
        .filter(|interface| !blacklisted(&interface.name))
        .filter(|interface| {
            !filters_by_nic
                || vm
                    .nics
                    .iter()
                    .any(|nic| nic.mac == interface.mac && nic.vnic_profile_id.is_some())
        })
        .map(|interface| {
            // `ReportedDeviceMapper.generateDeviceId`: a name-based id of the interface.
            let id = crate::ids::name_based_id(&format!("{}{}", interface.name, interface.mac));
            let (v4, v6): (Vec<_>, Vec<_>) = interface.ips.into_iter().partition(|ip| !ip.contains(':'));
            ReportedDevice {
                href: Some(href(&format!("vms/{}/reporteddevices/{id}", vm.id))),
                id: Some(id),
                name: Some(interface.name),
                description: Some("guest reported data".into()),
                kind: Some("network".into()),
                ips: Some(Ips {
                    items: v4
                        .into_iter()
                        .map(|address| (address, "v4"))
                        .chain(v6.into_iter().map(|address| (address, "v6")))
                        .map(|(address, version)| Ip {
                            address: Some(address),
                            version: Some(version.into()),
                            ..Ip::default()
                        })
                        .collect(),
                }),
                mac: Some(Mac {
                    address: Some(interface.mac),
                }),
                vm: Some(linked("vms", &vm.id)),
            }
        })
        .collect()
}

/// What to inline in a VM (`?follow=`).
#[derive(Debug, Clone, Copy, Default)]
pub struct VmFollow {
    pub disk_attachments: bool,
    /// `disk_attachments.disk`: each attachment with its whole disk.
    pub attachment_disks: bool,
    pub nics: bool,
    pub reported_devices: bool,
}

pub fn vm(state: &State, v: &VmRecord, follow: VmFollow) -> Vm {
    let base = href(&format!("vms/{}", v.id));
    let is_down = v.status == VmStatus::Down;
    Vm {
        href: Some(base.clone()),
        id: Some(v.id.clone()),
        // The actions and links of a real 4.4 engine's VM (`shared/reference/ovirt-samples/vm.xml`).
        actions: actions(
            &base,
            &[
                "detach",
                "shutdown",
                "start",
                "stop",
                "suspend",
                "reset",
                "ticket",
                "migrate",
                "reboot",
                "commitsnapshot",
                "clone",
                "freezefilesystems",
                "logon",
                "maintenance",
                "previewsnapshot",
                "autopincpuandnumanodes",
                "reordermacaddresses",
                "thawfilesystems",
                "undosnapshot",
                "cancelmigration",
                "export",
            ],
        ),
        name: Some(v.name.clone()),
        description: Some(v.description.clone()),
        comment: Some(v.comment.clone()),
        links: links(
            &base,
            &[
                "graphicsconsoles",
                "cdroms",
                "watchdogs",
                "diskattachments",
                "snapshots",
                "applications",
                "hostdevices",
                "reporteddevices",
                "sessions",
                "backups",
                "checkpoints",
                "nics",
                "numanodes",
                "katelloerrata",
                "permissions",
                "affinitylabels",
                "tags",
                "statistics",
            ],
        ),
        cpu: Some(Cpu {
            architecture: Some("x86_64".into()),
            mode: v.workload.cpu_mode.clone(),
            topology: Some(CpuTopology {
                cores: Some(v.cores),
                sockets: Some(v.sockets),
                threads: Some(v.threads),
            }),
            cpu_tune: cpu_tune(&v.workload.cpu_pinning),
            ..Cpu::default()
        }),
        creation_time: Some(format_time(v.creation_time)),
        custom_cpu_model: v.workload.custom_cpu_model.clone(),
        // `VmMapper` maps the properties string; an empty one gives no element.
        custom_properties: (!v.workload.custom_properties.is_empty()).then(|| CustomProperties {
            items: v
                .workload
                .custom_properties
                .iter()
                .map(|(name, value)| CustomProperty::new(name.clone(), value.clone()))
                .collect(),
        }),
        fqdn: (v.ips_reported).then(|| format!("{}.sim.local", v.name)),
        high_availability: Some(capov_ovirt::model::HighAvailability {
            enabled: Some(v.workload.high_availability.enabled),
            priority: Some(v.workload.high_availability.priority),
        }),
        lease: v.workload.lease_domain_id.as_ref().map(|sd| StorageDomainLease {
            storage_domain: Some(linked("storagedomains", sd)),
        }),
        initialization: (v.custom_script.is_some() || v.host_name.is_some() || v.init_network != Default::default())
            .then(|| Initialization {
                custom_script: v.custom_script.clone(),
                host_name: v.host_name.clone(),
                dns_servers: v.init_network.dns_servers.clone(),
                dns_search: v.init_network.dns_search.clone(),
                nic_configurations: crate::engine::init_network::render(&v.init_network),
            }),
        memory: Some(v.memory),
        memory_policy: Some(MemoryPolicy {
            ballooning: Some(v.ballooning),
            guaranteed: Some(v.guaranteed),
            max: Some(v.memory.saturating_mul(4)),
        }),
        os: Some(OperatingSystem {
            kind: Some(v.os_type.clone()),
        }),
        placement_policy: Some(PlacementPolicy {
            affinity: Some(v.affinity.clone().unwrap_or_else(|| "migratable".into())),
            hosts: (!v.workload.dedicated_hosts.is_empty()).then(|| HostRefs {
                items: v.workload.dedicated_hosts.iter().map(|h| linked("hosts", h)).collect(),
            }),
        }),
        // The 4.4 element from 4.4.8 (model 4.4.32), replaced by `cpu_pinning_policy` in 4.5 (`VmMapper`).
        auto_pinning_policy: (state.engine_version >= EngineVersion::new(4, 4, 8)
            && state.engine_version < EngineVersion::new(4, 5, 0))
        .then(|| AutoPinningPolicy::parse(v.workload.auto_pinning_policy.as_deref().unwrap_or("disabled")))
        .filter(|p| *p != AutoPinningPolicy::Disabled),
        cpu_pinning_policy: (state.engine_version >= EngineVersion::new(4, 5, 0))
            .then(|| CpuPinningPolicy::parse(v.workload.cpu_pinning_policy.as_deref().unwrap_or("none")))
            .filter(|p| *p != CpuPinningPolicy::None),
        // `VmMapper.getVmNumaTuneIfApplies`: the mode all its virtual NUMA nodes share, if they share one.
        numa_tune_mode: {
            let mut modes: Vec<&str> = v
                .workload
                .numa_nodes
                .iter()
                .map(|n| n.tune_mode.as_deref().unwrap_or("interleave"))
                .collect();
            modes.dedup();
            match modes.as_slice() {
                [mode] => Some(NumaTuneMode::parse(mode)),
                _ => None,
            }
        },
        kind: Some(VmType::parse(&v.kind)),
        cluster: Some(linked("clusters", &v.cluster_id)),
        instance_type: v
            .workload
            .instance_type_id
            .as_ref()
            .map(|id| linked("instancetypes", id)),
        // `VmMapper` shows it only for stateless VMs, which the simulator has none of.
        use_latest_template_version: None,
        // `VmMapper` links the host the VM runs on (`run_on_vds`), none while it is not running.
        host: v.placement.host.as_ref().map(|host| linked("hosts", host)),
        // `VmMapper.mapVmStatus` maps ImageIllegal to nothing: the element is left out.
        status: (v.status.as_str() != crate::engine::IMAGE_ILLEGAL).then(|| v.status.clone()),
        start_time: if is_down { None } else { v.start_time.map(format_time) },
        stop_reason: is_down.then(String::new),
        stop_time: if is_down { v.stop_time.map(format_time) } else { None },
        disk_attachments: follow.disk_attachments.then(|| DiskAttachments {
            items: v
                .disk_ids
                .iter()
                .filter_map(|id| state.disks.get(id))
                .map(|d| disk_attachment(d, "vms", &v.id, follow.attachment_disks))
                .collect(),
        }),
        nics: follow.nics.then(|| Nics {
            items: v.nics.iter().map(|n| nic(&v.id, n)).collect(),
        }),
        reported_devices: follow.reported_devices.then(|| ReportedDevices {
            items: reported_devices(v, state.engine_version),
        }),
        original_template: Some(linked("templates", &v.original_template_id)),
        storage_domain: None,
        template: Some(linked("templates", &v.template_id)),
    }
}

/// The engine's pinning string as `<cpu_tune>` (`VmMapper.stringToCpuTune`); None without pinning.
fn cpu_tune(pinning: &str) -> Option<CpuTune> {
    if pinning.is_empty() {
        return None;
    }
    Some(CpuTune {
        vcpu_pins: Some(VcpuPins {
            items: pinning
                .split('_')
                .filter_map(|rule| rule.split_once('#'))
                .map(|(vcpu, set)| VcpuPin {
                    vcpu: vcpu.parse().ok(),
                    cpu_set: Some(set.to_string()),
                })
                .collect(),
        }),
    })
}

pub fn tag(t: &TagRecord) -> capov_ovirt::model::Tag {
    capov_ovirt::model::Tag {
        href: Some(href(&format!("tags/{}", t.id))),
        id: Some(t.id.clone()),
        name: Some(t.name.clone()),
        description: Some(t.description.clone()),
        parent: t.parent_id.as_deref().map(|id| linked("tags", id)),
    }
}

/// A tag as `/vms/{id}/tags` lists it: under the VM's path.
pub fn vm_tag(vm_id: &str, t: &TagRecord) -> capov_ovirt::model::Tag {
    capov_ovirt::model::Tag {
        href: Some(href(&format!("vms/{vm_id}/tags/{}", t.id))),
        ..tag(t)
    }
}

pub fn disk_profile(p: &DiskProfileRecord) -> capov_ovirt::model::DiskProfile {
    capov_ovirt::model::DiskProfile {
        href: Some(href(&format!("diskprofiles/{}", p.id))),
        id: Some(p.id.clone()),
        name: Some(p.name.clone()),
        storage_domain: Some(linked("storagedomains", &p.storage_domain_id)),
    }
}
