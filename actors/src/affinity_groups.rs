//! The oVirt affinity groups CAPOV keeps for a workload cluster (issue #25): one per machine group (control plane,
//! MachineDeployment) and oVirt cluster that keeps the group's VMs on different hosts (VM-to-VM negative, soft or
//! hard), and one per host-label failure domain and oVirt cluster that keeps its VMs on the hosts carrying the
//! label (VM-to-host positive, hard).
//!
//! A group is CAPOV's when its description carries the marker `capov-group:<namespace>/<cluster>/<purpose>
//! mc:<management cluster>`; a group of the same name without it is never touched. Names are unique in the whole
//! engine (`AddAffinityGroupCommand`), so they hold the namespace, the cluster, the purpose and the oVirt cluster.

use std::collections::BTreeMap;

use capov_crds::AntiAffinity;

use crate::failure_domains::FailureDomainChoice;

/// Labels CAPI puts on Machines, naming the group a machine belongs to.
pub const CONTROL_PLANE_LABEL: &str = "cluster.x-k8s.io/control-plane";
pub const DEPLOYMENT_LABEL: &str = "cluster.x-k8s.io/deployment-name";
pub const MACHINE_SET_LABEL: &str = "cluster.x-k8s.io/set-name";

const MARKER_PREFIX: &str = "capov-group:";
const MC_PREFIX: &str = "mc:";
/// `BusinessEntitiesDefinitions.GENERAL_NAME_SIZE`.
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

/// `capov-<namespace>-<cluster>-<purpose>-<ovirt cluster>`, with characters the engine refuses in names (it takes
/// letters, digits, `.`, `_` and `-`) replaced by `-`, and cut with a hash when longer than the engine allows.
fn group_name(owner: &GroupOwner, purpose: &str, ovirt_cluster: &str) -> String {
    let raw = format!("capov-{}-{}-{purpose}-{ovirt_cluster}", owner.namespace, owner.cluster);
    let name: String = raw
        .chars()
        .map(|c| {
            if c.is_alphanumeric() || matches!(c, '.' | '_' | '-') {
                c
            } else {
                '-'
            }
        })
        .collect();
    if name.chars().count() <= NAME_LIMIT {
        return name;
    }
    use std::hash::{Hash, Hasher};
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    raw.hash(&mut hasher);
    let kept: String = name.chars().take(NAME_LIMIT - 17).collect();
    format!("{kept}-{:016x}", hasher.finish())
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
    match groups.iter().find(|g| g.name == wanted.name) {
        Some(group) if group.description.trim() != wanted.marker => GroupState::Conflict { id: group.id.clone() },
        Some(group) if group.vm_ids.iter().any(|id| id == vm_id) => GroupState::Joined { id: group.id.clone() },
        Some(group) => GroupState::NotJoined { id: group.id.clone() },
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
    use crate::failure_domains::FailureDomainPlacement;

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
                name: "capov-team-a-prod-md-workers-Default".into(),
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
        });
        let both = wanted_groups(&owner(), Some("control-plane"), AntiAffinity::Hard, &rack, "Default");
        assert_eq!(both.len(), 2);
        assert_eq!(both[1].name, "capov-team-a-prod-fd-rack-b-Default");
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
        assert_eq!(name.chars().count(), NAME_LIMIT);
        assert!(
            name.chars()
                .all(|c| c.is_alphanumeric() || matches!(c, '.' | '_' | '-'))
        );
        assert_ne!(
            name,
            group_name(&long, &format!("md-{}", "d".repeat(201)), "Cluster 1/é"),
            "cut names stay distinct"
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
