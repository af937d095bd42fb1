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
