//! Hosts, affinity groups and affinity labels as the engine renders them (`HostMapper`, `AffinityGroupMapper`,
//! `AffinityLabelMapper`), with their hrefs, links and actions.

use capov_ovirt::model::*;

use crate::render::API;
use crate::state::*;

fn href(path: &str) -> String {
    format!("{API}/{path}")
}

fn links(base: &str, rels: &[&str]) -> Vec<Link> {
    rels.iter()
        .map(|rel| Link::new(format!("{base}/{rel}"), *rel))
        .collect()
}

fn linked(collection: &str, id: &str) -> Ref {
    Ref::linked(href(&format!("{collection}/{id}")), id)
}

pub fn host(state: &State, h: &HostRecord) -> Host {
    let base = href(&format!("hosts/{}", h.id));
    let on_it: Vec<&VmRecord> = state.vms_on_host(&h.id).collect();
    let migrating = on_it.iter().filter(|vm| vm.placement.migrating_to.is_some()).count() as u64;
    Host {
        href: Some(base.clone()),
        id: Some(h.id.clone()),
        actions: Some(Actions {
            links: links(
                &base,
                &[
                    "activate",
                    "deactivate",
                    "fence",
                    "forceselectspm",
                    "install",
                    "refresh",
                    "upgrade",
                    "upgradecheck",
                ],
            ),
        }),
        name: Some(h.name.clone()),
        description: Some(String::new()),
        comment: Some(String::new()),
        links: links(
            &base,
            &[
                "affinitylabels",
                "devices",
                "hooks",
                "nics",
                "numanodes",
                "permissions",
                "statistics",
                "storage",
                "tags",
            ],
        ),
        address: Some(format!("{}.sim.local", h.name)),
        cpu: Some(Cpu {
            topology: Some(CpuTopology {
                cores: Some(h.cores),
                sockets: Some(h.sockets),
                threads: Some(h.threads),
            }),
            ..Cpu::default()
        }),
        memory: Some(h.memory),
        max_scheduling_memory: Some(state.free_memory(&h.id)),
        status: Some(h.status.clone()),
        summary: Some(VmSummary {
            active: Some(on_it.len() as u64),
            migrating: Some(migrating),
            total: Some(on_it.len() as u64),
        }),
        kind: Some("rhel".into()),
        cluster: Some(linked("clusters", &h.cluster_id)),
    }
}

fn rule(r: Rule) -> AffinityRule {
    AffinityRule {
        enabled: Some(r.enabled),
        enforcing: Some(r.enforcing),
        positive: Some(r.positive),
    }
}

fn ids(ids: &[String]) -> Vec<Ref> {
    ids.iter().map(|id| Ref::id(id.clone())).collect()
}

pub fn affinity_group(g: &AffinityGroupRecord) -> AffinityGroup {
    let base = href(&format!("clusters/{}/affinitygroups/{}", g.cluster_id, g.id));
    AffinityGroup {
        href: Some(base.clone()),
        id: Some(g.id.clone()),
        name: Some(g.name.clone()),
        description: Some(g.description.clone()),
        links: links(&base, &["vms", "hosts", "vmlabels", "hostlabels"]),
        broken: Some(false),
        // Kept for version 4 clients: `positive` only while the VM rule is enabled.
        enforcing: Some(g.vms_rule.enforcing),
        positive: g.vms_rule.enabled.then_some(g.vms_rule.positive),
        priority: Some(g.priority),
        hosts_rule: Some(rule(g.hosts_rule)),
        vms_rule: Some(rule(g.vms_rule)),
        cluster: Some(linked("clusters", &g.cluster_id)),
        host_labels: Some(AffinityLabelRefs {
            items: ids(&g.host_label_ids),
        }),
        hosts: Some(HostRefs {
            items: ids(&g.host_ids),
        }),
        vm_labels: Some(AffinityLabelRefs {
            items: ids(&g.vm_label_ids),
        }),
        vms: Some(VmRefs { items: ids(&g.vm_ids) }),
    }
}

pub fn affinity_label(l: &AffinityLabelRecord) -> AffinityLabel {
    let base = href(&format!("affinitylabels/{}", l.id));
    AffinityLabel {
        href: Some(base.clone()),
        id: Some(l.id.clone()),
        name: Some(l.name.clone()),
        links: links(&base, &["hosts", "vms"]),
        has_implicit_affinity_group: Some(false),
        read_only: Some(false),
    }
}

/// A device of a host (`HostDeviceMapper`): its id is the hex of its name; a running VM that holds it is linked.
pub fn host_device(state: &State, host: &HostRecord, d: &HostDeviceRecord) -> HostDevice {
    let id = device_id(&d.name);
    HostDevice {
        href: Some(href(&format!("hosts/{}/devices/{id}", host.id))),
        id: Some(id),
        name: Some(d.name.clone()),
        capability: Some(d.capability.clone()),
        driver: d.driver.clone(),
        iommu_group: d.iommu_group,
        placeholder: Some(false),
        product: Some(DeviceIdentity {
            id: Some(d.product_id.clone()),
            name: Some(d.product_name.clone()),
        }),
        vendor: Some(DeviceIdentity {
            id: Some(d.vendor_id.clone()),
            name: Some(d.vendor_name.clone()),
        }),
        virtual_functions: None,
        m_dev_types: (!d.mdev_types.is_empty()).then(|| MdevTypes {
            items: d
                .mdev_types
                .iter()
                .map(|t| MdevType {
                    name: Some(t.name.clone()),
                    human_readable_name: Some(t.human_readable_name.clone()),
                    available_instances: Some(state.mdev_available(&host.id, d, &t.name)),
                    description: (!t.description.is_empty()).then(|| t.description.clone()),
                })
                .collect(),
        }),
        host: Some(linked("hosts", &host.id)),
        parent_device: d.parent.as_ref().map(|p| {
            Ref::linked(
                href(&format!("hosts/{}/devices/{}", host.id, device_id(p))),
                device_id(p),
            )
        }),
        vm: state.device_holder(&host.id, &d.name).map(|vm| linked("vms", &vm.id)),
    }
}

/// A host device of a VM (`/vms/{id}/hostdevices`): the host's device under the VM's path, with the placeholder flag.
pub fn vm_host_device(state: &State, vm: &VmRecord, device: &VmHostDevice) -> Option<HostDevice> {
    let host = vm.workload.dedicated_hosts.first().and_then(|h| state.hosts.get(h))?;
    let record = host.devices.iter().find(|d| d.name == device.name)?;
    let rendered = host_device(state, host, record);
    Some(HostDevice {
        href: Some(href(&format!("vms/{}/hostdevices/{}", vm.id, device_id(&device.name)))),
        placeholder: Some(device.placeholder),
        vm: Some(linked("vms", &vm.id)),
        ..rendered
    })
}

/// A mediated device of a VM (`VmMediatedDeviceMapper`): its type as the `mdevType` spec parameter.
pub fn mediated_device(vm_id: &str, m: &MediatedDeviceRecord) -> VmMediatedDevice {
    VmMediatedDevice {
        href: Some(href(&format!("vms/{vm_id}/mediateddevices/{}", m.id))),
        id: Some(m.id.clone()),
        spec_params: Some(Properties {
            items: vec![Property {
                name: Some(MDEV_TYPE.to_string()),
                value: Some(m.mdev_type.clone()),
            }],
        }),
        vm: Some(linked("vms", vm_id)),
    }
}

/// A virtual NUMA node (`NumaMapper`): memory in MiB, its vCPUs as cores.
pub fn numa_node(vm_id: &str, n: &NumaNodeRecord) -> VirtualNumaNode {
    VirtualNumaNode {
        href: Some(href(&format!("vms/{vm_id}/numanodes/{}", n.id))),
        id: Some(n.id.clone()),
        numa_node_pins: (!n.pinned_to.is_empty()).then(|| NumaNodePins {
            items: n.pinned_to.iter().map(|i| NumaNodePin { index: Some(*i) }).collect(),
        }),
        numa_tune_mode: Some(NumaTuneMode::parse(n.tune_mode.as_deref().unwrap_or("interleave"))),
        vm: Some(linked("vms", vm_id)),
        ..VirtualNumaNode::new(n.index, n.memory_mib, n.vcpus.iter().copied())
    }
}

/// An instance type (`InstanceTypeMapper`, a template without disks).
pub fn instance_type(t: &InstanceTypeRecord) -> InstanceType {
    let base = href(&format!("instancetypes/{}", t.id));
    InstanceType {
        href: Some(base.clone()),
        id: Some(t.id.clone()),
        name: Some(t.name.clone()),
        description: Some(t.description.clone()),
        links: links(&base, &["graphicsconsoles", "nics", "watchdogs"]),
        cpu: Some(Cpu {
            architecture: Some("undefined".into()),
            topology: Some(CpuTopology {
                cores: Some(t.cores),
                sockets: Some(t.sockets),
                threads: Some(t.threads),
            }),
            ..Cpu::default()
        }),
        high_availability: Some(capov_ovirt::model::HighAvailability {
            enabled: Some(t.high_availability.enabled),
            priority: Some(t.high_availability.priority),
        }),
        memory: Some(t.memory),
        memory_policy: Some(MemoryPolicy {
            guaranteed: Some(t.guaranteed),
            max: Some(t.memory.saturating_mul(4)),
            ..MemoryPolicy::default()
        }),
        placement_policy: Some(PlacementPolicy {
            affinity: Some(t.affinity.clone()),
            hosts: None,
        }),
    }
}
