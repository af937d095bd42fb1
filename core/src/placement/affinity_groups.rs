//! The oVirt affinity groups CAPOV keeps for a workload cluster (issue #25): one per machine group (control plane,
//! MachineDeployment) and oVirt cluster that keeps the group's VMs on different hosts (VM-to-VM negative, soft or
//! hard), and one per host-label failure domain and oVirt cluster that keeps its VMs on the hosts carrying the
//! label (VM-to-host positive, hard).
//!
//! A group is CAPOV's when its description carries the marker `capov-group:<namespace>/<cluster>/<purpose>
//! mc:<management cluster>`; a group of the same name without it is never touched. Names are unique in the whole
//! engine (`AddAffinityGroupCommand`), so they hold the namespace, the cluster, the purpose and the oVirt cluster,
//! written by [`crate::naming::engine_names`] so that no two of them give one name.
//!
//! A group is found by its marker first, whatever its name: the groups CAPOV created under the older rule
//! (`capov-<namespace>-<cluster>-<purpose>-<oVirt cluster>`, which two tenants could share) keep their name, their
//! VMs and their rule, new machines of their machine group join them, and the last VM to leave removes them. Only
//! when the oVirt cluster holds no group with the marker is one looked up (or created) by the current name.

use std::collections::BTreeMap;

use capov_crds::AntiAffinity;

use crate::placement::failure_domains::FailureDomainChoice;

/// Labels CAPI puts on Machines, naming the group a machine belongs to.
pub const CONTROL_PLANE_LABEL: &str = "cluster.x-k8s.io/control-plane";
pub const DEPLOYMENT_LABEL: &str = "cluster.x-k8s.io/deployment-name";
pub const MACHINE_SET_LABEL: &str = "cluster.x-k8s.io/set-name";

const MARKER_PREFIX: &str = "capov-group:";
const MC_PREFIX: &str = "mc:";
/// `AffinityGroup.name`: `@Size(max = BusinessEntitiesDefinitions.GENERAL_NAME_SIZE)`.
const NAME_LIMIT: usize = 255;

/// What a group is for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum GroupRule {
    /// Keep the VMs on different hosts; `hard`: the engine starts a VM only on a host without a sibling.
    AntiAffinity { hard: bool },
    /// Keep the VMs on the hosts carrying this affinity label (hard).
    HostLabel { label: String },
}

/// A group a machine's VM belongs in.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WantedGroup {
    /// The group's name in the engine.
    pub name: String,
    /// The ownership marker (its description).
    pub marker: String,
    pub rule: GroupRule,
}

/// Who a machine's groups belong to: its namespace and CAPI cluster, and the management cluster.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GroupOwner {
    pub namespace: String,
    pub cluster: String,
    pub management_cluster: String,
}

/// The machine group a Machine belongs to, from the labels CAPI sets: `control-plane`, `md-<deployment>` or
/// `ms-<machine set>`; None for a Machine of no group.
pub fn purpose_of(labels: &BTreeMap<String, String>) -> Option<String> {
    if labels.contains_key(CONTROL_PLANE_LABEL) {
        return Some("control-plane".into());
    }
    if let Some(deployment) = labels.get(DEPLOYMENT_LABEL).filter(|d| !d.is_empty()) {
        return Some(format!("md-{deployment}"));
    }
    labels
        .get(MACHINE_SET_LABEL)
        .filter(|set| !set.is_empty())
        .map(|set| format!("ms-{set}"))
}

/// The groups a machine's VM belongs in, in `ovirt_cluster` (the VM's): its group's anti-affinity group unless it
/// opted out, and its failure domain's host-label group.
pub fn wanted_groups(
    owner: &GroupOwner,
    purpose: Option<&str>,
    antiaffinity: AntiAffinity,
    failure_domain: &FailureDomainChoice,
    ovirt_cluster: &str,
) -> Vec<WantedGroup> {
    let mut wanted = Vec::new();
    let hard = match antiaffinity {
        AntiAffinity::Soft => Some(false),
        AntiAffinity::Hard => Some(true),
        AntiAffinity::None => None,
    };
    if let (Some(purpose), Some(hard)) = (purpose, hard) {
        wanted.push(WantedGroup {
            name: group_name(owner, purpose, ovirt_cluster),
            marker: marker(owner, purpose),
            rule: GroupRule::AntiAffinity { hard },
        });
    }
    if let FailureDomainChoice::Found(placement) = failure_domain
        && let Some(label) = &placement.hostlabel
    {
        let purpose = format!("fd-{}", placement.name);
        wanted.push(WantedGroup {
            name: group_name(owner, &purpose, ovirt_cluster),
            marker: marker(owner, &purpose),
            rule: GroupRule::HostLabel { label: label.clone() },
        });
    }
    wanted
}

/// `capov.<namespace>.<cluster>.<purpose>.<ovirt cluster>` ([`crate::naming::engine_names`]).
fn group_name(owner: &GroupOwner, purpose: &str, ovirt_cluster: &str) -> String {
    crate::naming::engine_names::engine_wide(&[&owner.namespace, &owner.cluster, purpose, ovirt_cluster], NAME_LIMIT)
}

fn marker(owner: &GroupOwner, purpose: &str) -> String {
    format!(
        "{MARKER_PREFIX}{}/{}/{purpose} {MC_PREFIX}{}",
        owner.namespace, owner.cluster, owner.management_cluster
    )
}

/// Whether a group's description is a marker of `owner`'s groups (any purpose).
fn owned_by(description: &str, owner: &GroupOwner) -> bool {
    let words: Vec<&str> = description.split_whitespace().collect();
    let prefix = format!("{MARKER_PREFIX}{}/{}/", owner.namespace, owner.cluster);
    words.iter().any(|w| w.starts_with(&prefix))
        && words
            .iter()
            .any(|w| w.strip_prefix(MC_PREFIX) == Some(owner.management_cluster.as_str()))
}

/// A group as the engine lists it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GroupFact {
    pub id: String,
    pub name: String,
    pub description: String,
    pub vm_ids: Vec<String>,
}

/// Where a wanted group stands for a VM.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum GroupState {
    /// No group of that name: it is created with the VM in it. For a host-label group, the label's id.
    Missing { host_label_id: Option<String> },
    /// A host-label group whose label does not exist in the engine.
    LabelNotFound,
    /// CAPOV's group, without the VM yet.
    NotJoined { id: String },
    /// CAPOV's group with the VM in it.
    Joined { id: String },
    /// A group of that name that CAPOV did not create for this machine group: never touched.
    Conflict { id: String },
}

/// Where `wanted` stands for `vm_id` among the groups of the VM's cluster; `labels` maps affinity label names to
/// ids (needed only for host-label groups).
pub fn assess(
    wanted: &WantedGroup,
    groups: &[GroupFact],
    labels: &BTreeMap<String, String>,
    vm_id: &str,
) -> GroupState {
    let holds_vm = |group: &GroupFact| group.vm_ids.iter().any(|id| id == vm_id);
    // The machine group's own group, by its marker: one that already holds the VM, else the one of the current
    // name, else the first by name (one created under the older name rule).
    let marked = groups
        .iter()
        .filter(|g| g.description.trim() == wanted.marker)
        .min_by_key(|g| (!holds_vm(g), g.name != wanted.name, g.name.as_str()));
    if let Some(group) = marked {
        let id = group.id.clone();
        return if holds_vm(group) {
            GroupState::Joined { id }
        } else {
            GroupState::NotJoined { id }
        };
    }
    match groups.iter().find(|g| g.name == wanted.name) {
        Some(group) => GroupState::Conflict { id: group.id.clone() },
        None => match &wanted.rule {
            GroupRule::AntiAffinity { .. } => GroupState::Missing { host_label_id: None },
            GroupRule::HostLabel { label } => match labels.get(label) {
                Some(id) => GroupState::Missing {
                    host_label_id: Some(id.clone()),
                },
                None => GroupState::LabelNotFound,
            },
        },
    }
}

/// How a deleted machine's VM leaves one of its groups.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Leave {
    pub group_id: String,
    pub group_name: String,
    /// The VM is the group's last member: the group goes with it.
    pub delete_group: bool,
}

/// The CAPOV groups of `owner` that hold `vm_id`, and how the VM leaves each: the last member takes the group with
/// it, any other is only taken out (the engine would drop it on removal too, but then nobody would remove the group
/// once the last VM is gone).
pub fn leaving(groups: &[GroupFact], owner: &GroupOwner, vm_id: &str) -> Vec<Leave> {
    groups
        .iter()
        .filter(|g| owned_by(&g.description, owner) && g.vm_ids.iter().any(|id| id == vm_id))
        .map(|g| Leave {
            group_id: g.id.clone(),
            group_name: g.name.clone(),
            delete_group: g.vm_ids.iter().all(|id| id == vm_id),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::placement::failure_domains::FailureDomainPlacement;

    fn owner() -> GroupOwner {
        GroupOwner {
            namespace: "team-a".into(),
            cluster: "prod".into(),
            management_cluster: "mgmt-1".into(),
        }
    }

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    #[test]
    fn the_machine_group_comes_from_the_labels_capi_sets() {
        assert_eq!(
            purpose_of(&labels(&[(CONTROL_PLANE_LABEL, ""), (MACHINE_SET_LABEL, "x")])),
            Some("control-plane".into())
        );
        assert_eq!(
            purpose_of(&labels(&[
                (DEPLOYMENT_LABEL, "workers"),
                (MACHINE_SET_LABEL, "workers-abc")
            ])),
            Some("md-workers".into())
        );
        assert_eq!(
            purpose_of(&labels(&[(MACHINE_SET_LABEL, "loose")])),
            Some("ms-loose".into())
        );
        assert_eq!(purpose_of(&labels(&[("cluster.x-k8s.io/cluster-name", "prod")])), None);
    }

    #[test]
    fn soft_hard_and_none_and_a_host_label_domain_make_the_groups() {
        let none = FailureDomainChoice::None;
        let soft = wanted_groups(&owner(), Some("md-workers"), AntiAffinity::Soft, &none, "Default");
        assert_eq!(
            soft,
            vec![WantedGroup {
                name: "capov.team-a.prod.md-workers.Default".into(),
                marker: "capov-group:team-a/prod/md-workers mc:mgmt-1".into(),
                rule: GroupRule::AntiAffinity { hard: false },
            }]
        );
        let hard = wanted_groups(&owner(), Some("control-plane"), AntiAffinity::Hard, &none, "Default");
        assert_eq!(hard[0].rule, GroupRule::AntiAffinity { hard: true });
        assert!(wanted_groups(&owner(), Some("control-plane"), AntiAffinity::None, &none, "Default").is_empty());
        assert!(wanted_groups(&owner(), None, AntiAffinity::Hard, &none, "Default").is_empty());

        let rack = FailureDomainChoice::Found(FailureDomainPlacement {
            name: "rack-b".into(),
            ovirtcluster: None,
            hostlabel: Some("rack-b".into()),
            ..Default::default()
        });
        let both = wanted_groups(&owner(), Some("control-plane"), AntiAffinity::Hard, &rack, "Default");
        assert_eq!(both.len(), 2);
        assert_eq!(both[1].name, "capov.team-a.prod.fd-rack-b.Default");
        assert_eq!(both[1].rule, GroupRule::HostLabel { label: "rack-b".into() });
    }

    #[test]
    fn names_keep_to_the_engines_characters_and_length() {
        let long = GroupOwner {
            namespace: "n".repeat(63),
            cluster: "c".repeat(63),
            management_cluster: "mgmt".into(),
        };
        let name = group_name(&long, &format!("md-{}", "d".repeat(200)), "Cluster 1/é");
        assert_eq!(crate::naming::vm_name::engine_length(&name), NAME_LIMIT);
        assert!(crate::naming::engine_names::engine_safe(&name), "{name}");
        assert_ne!(
            name,
            group_name(&long, &format!("md-{}", "d".repeat(201)), "Cluster 1/é"),
            "cut names stay distinct"
        );
        assert_eq!(
            name,
            group_name(&long, &format!("md-{}", "d".repeat(200)), "Cluster 1/é"),
            "and the same every time"
        );
    }

    /// Issue #35: namespace `a-b` with cluster `c`, and namespace `a` with cluster `b-c`, were both given
    /// `capov-a-b-c-control-plane-Default`; so were `team`/`a-prod` and `team-a`/`prod`.
    #[test]
    fn look_alike_tenants_get_groups_of_their_own() {
        let owner = |namespace: &str, cluster: &str| GroupOwner {
            namespace: namespace.into(),
            cluster: cluster.into(),
            management_cluster: "mgmt".into(),
        };
        let name = |o: &GroupOwner| group_name(o, "control-plane", "Default");
        assert_eq!(name(&owner("a-b", "c")), "capov.a-b.c.control-plane.Default");
        assert_eq!(name(&owner("a", "b-c")), "capov.a.b-c.control-plane.Default");
        assert_ne!(name(&owner("team", "a-prod")), name(&owner("team-a", "prod")));
        // The purpose and the oVirt cluster cannot run into each other either.
        assert_ne!(
            group_name(&owner("a", "b"), "md-x", "y-Default"),
            group_name(&owner("a", "b"), "md-x-y", "Default")
        );
        // And a group of one tenant never holds the other's marker.
        let a_b = wanted_groups(
            &owner("a-b", "c"),
            Some("control-plane"),
            AntiAffinity::Hard,
            &FailureDomainChoice::None,
            "Default",
        );
        let a = wanted_groups(
            &owner("a", "b-c"),
            Some("control-plane"),
            AntiAffinity::Hard,
            &FailureDomainChoice::None,
            "Default",
        );
        let theirs = GroupFact {
            id: "g1".into(),
            name: a_b[0].name.clone(),
            description: a_b[0].marker.clone(),
            vm_ids: vec!["their-vm".into()],
        };
        assert_eq!(
            assess(&a[0], &[theirs], &BTreeMap::new(), "vm"),
            GroupState::Missing { host_label_id: None }
        );
    }

    /// Groups CAPOV created under the older name rule keep being used, found by their marker; a group of that older
    /// name with another tenant's marker is neither joined nor a conflict.
    #[test]
    fn a_group_created_under_the_older_name_keeps_being_used() {
        let wanted = &wanted_groups(
            &owner(),
            Some("control-plane"),
            AntiAffinity::Hard,
            &FailureDomainChoice::None,
            "Default",
        )[0];
        let fact = |id: &str, name: &str, description: &str, vms: &[&str]| GroupFact {
            id: id.into(),
            name: name.into(),
            description: description.into(),
            vm_ids: vms.iter().map(|v| v.to_string()).collect(),
        };
        let older = "capov-team-a-prod-control-plane-Default";
        let none = BTreeMap::new();
        let legacy = fact("old", older, &wanted.marker, &["first-vm"]);
        assert_eq!(
            assess(wanted, std::slice::from_ref(&legacy), &none, "vm"),
            GroupState::NotJoined { id: "old".into() },
            "a new machine of the group joins the group its siblings are in"
        );
        assert_eq!(
            assess(wanted, std::slice::from_ref(&legacy), &none, "first-vm"),
            GroupState::Joined { id: "old".into() }
        );
        // Both there (e.g. one made by a newer replica): the one holding the VM, else the one of the current name.
        let current = fact("new", &wanted.name, &wanted.marker, &[]);
        assert_eq!(
            assess(wanted, &[legacy.clone(), current.clone()], &none, "first-vm"),
            GroupState::Joined { id: "old".into() }
        );
        assert_eq!(
            assess(wanted, &[legacy.clone(), current], &none, "vm"),
            GroupState::NotJoined { id: "new".into() }
        );
        // The older name of another tenant (team/a-prod) is no concern of team-a/prod's.
        let look_alike = fact(
            "theirs",
            older,
            "capov-group:team/a-prod/control-plane mc:mgmt-1",
            &["their-vm"],
        );
        assert_eq!(
            assess(wanted, &[look_alike], &none, "vm"),
            GroupState::Missing { host_label_id: None }
        );
        // The last VM to leave takes the older group along.
        assert_eq!(
            leaving(&[legacy], &owner(), "first-vm"),
            vec![Leave {
                group_id: "old".into(),
                group_name: older.into(),
                delete_group: true
            }]
        );
    }

    #[test]
    fn a_group_is_joined_created_or_left_alone_by_its_marker() {
        let wanted = &wanted_groups(
            &owner(),
            Some("md-w"),
            AntiAffinity::Hard,
            &FailureDomainChoice::None,
            "D",
        )[0];
        let group = |description: &str, vms: &[&str]| GroupFact {
            id: "g1".into(),
            name: wanted.name.clone(),
            description: description.into(),
            vm_ids: vms.iter().map(|v| v.to_string()).collect(),
        };
        let none = BTreeMap::new();
        assert_eq!(
            assess(wanted, &[], &none, "vm"),
            GroupState::Missing { host_label_id: None }
        );
        assert_eq!(
            assess(wanted, &[group(&wanted.marker, &["other"])], &none, "vm"),
            GroupState::NotJoined { id: "g1".into() }
        );
        assert_eq!(
            assess(wanted, &[group(&wanted.marker, &["other", "vm"])], &none, "vm"),
            GroupState::Joined { id: "g1".into() }
        );
        // Same name, another management cluster's marker, or none: not CAPOV's to change.
        assert_eq!(
            assess(
                wanted,
                &[group("capov-group:team-a/prod/md-w mc:mgmt-2", &[])],
                &none,
                "vm"
            ),
            GroupState::Conflict { id: "g1".into() }
        );
        assert_eq!(
            assess(wanted, &[group("the admins' group", &[])], &none, "vm"),
            GroupState::Conflict { id: "g1".into() }
        );

        let rack = FailureDomainChoice::Found(FailureDomainPlacement {
            name: "r".into(),
            ovirtcluster: None,
            hostlabel: Some("rack".into()),
            ..Default::default()
        });
        let by_label = &wanted_groups(&owner(), None, AntiAffinity::None, &rack, "D")[0];
        assert_eq!(assess(by_label, &[], &none, "vm"), GroupState::LabelNotFound);
        assert_eq!(
            assess(by_label, &[], &labels(&[("rack", "l1")]), "vm"),
            GroupState::Missing {
                host_label_id: Some("l1".into())
            }
        );
    }

    #[test]
    fn the_last_member_takes_the_group_along_and_foreign_groups_are_left_alone() {
        let fact = |id: &str, description: &str, vms: &[&str]| GroupFact {
            id: id.into(),
            name: format!("group-{id}"),
            description: description.into(),
            vm_ids: vms.iter().map(|v| v.to_string()).collect(),
        };
        let ours = "capov-group:team-a/prod/control-plane mc:mgmt-1";
        let groups = [
            fact("shared", ours, &["vm", "sibling"]),
            fact("last", "capov-group:team-a/prod/fd-r mc:mgmt-1", &["vm"]),
            fact("foreign", "capov-group:team-a/prod/control-plane mc:mgmt-2", &["vm"]),
            fact("admins", "placed by hand", &["vm"]),
            fact("other-vm", ours, &["sibling"]),
        ];
        assert_eq!(
            leaving(&groups, &owner(), "vm"),
            vec![
                Leave {
                    group_id: "shared".into(),
                    group_name: "group-shared".into(),
                    delete_group: false
                },
                Leave {
                    group_id: "last".into(),
                    group_name: "group-last".into(),
                    delete_group: true
                },
            ]
        );
    }
}
