//! Issue #25: failure domains and affinity groups, `MachinePlacementSet` ([`crate::machine_steps::placement`]),
//! joined before the first start and left before deletion.

use crate::machine_steps::{
    Action, Fact, GroupAction, GroupsObservation, JoinGroup, Observed, ReadRequest, Requeue, VmAction, decide,
};
use std::collections::BTreeMap;

use capov_crds::{AntiAffinity, Severity};

use super::fixtures::{VM_ID, deleting, ready_to_create, running, state_of, with_vm};
use crate::conditions::{State, reasons, types};
use crate::placement::affinity_groups::{GroupFact, GroupRule, GroupState, wanted_groups};
use crate::placement::failure_domains::{FailureDomainChoice, FailureDomainPlacement};

/// A control-plane machine of cluster prod with this anti-affinity, its VM down and never started.
fn control_plane(antiaffinity: AntiAffinity, groups: Fact<GroupsObservation>) -> Observed {
    let o = with_vm("down", false);
    let wanted = wanted_groups(
        &o.group_owner,
        Some("control-plane"),
        antiaffinity,
        &o.failure_domain,
        "Default",
    );
    Observed {
        groups_wanted: wanted,
        groups,
        ..o
    }
}

fn our_group(o: &Observed, members: &[&str]) -> GroupFact {
    GroupFact {
        id: "g1".into(),
        name: o.groups_wanted[0].name.clone(),
        description: o.groups_wanted[0].marker.clone(),
        vm_ids: members.iter().map(|m| m.to_string()).collect(),
    }
}

fn read(groups: Vec<GroupFact>) -> Fact<GroupsObservation> {
    Fact::Read(GroupsObservation::Read {
        groups,
        labels: BTreeMap::new(),
    })
}

#[test]
fn a_machine_of_no_group_starts_and_says_so() {
    let d = decide(&with_vm("down", false));
    assert!(matches!(d.action, Action::Vm(VmAction::Start { .. })));
    let placed = d.condition(types::MACHINE_PLACEMENT_SET).expect("MachinePlacementSet");
    assert_eq!((placed.state, placed.reason), (State::True, reasons::PLACEMENT_SET));
    assert!(placed.message.contains("no affinity group"), "{}", placed.message);
}

#[test]
fn a_vm_joins_its_group_before_its_first_start_and_starts_once_in_it() {
    let unread = control_plane(AntiAffinity::Hard, Fact::NotRead);
    assert_eq!(
        decide(&unread).action,
        Action::Read(ReadRequest::Groups),
        "the groups are read when the decision is to start"
    );
    let missing = control_plane(AntiAffinity::Hard, read(vec![]));
    let d = decide(&missing);
    assert_eq!(
        d.action,
        Action::Groups(GroupAction::Join(Box::new(JoinGroup {
            group: missing.groups_wanted[0].clone(),
            cluster_id: "cluster-1".into(),
            vm_id: VM_ID.into(),
        })))
    );
    assert_eq!(
        state_of(&d, types::MACHINE_PLACEMENT_SET),
        Some((State::False(Severity::Info), reasons::JOINING_AFFINITY_GROUP))
    );
    let mut joined = control_plane(AntiAffinity::Hard, Fact::NotRead);
    joined.groups = read(vec![our_group(&joined, &["sibling", VM_ID])]);
    let d = decide(&joined);
    assert!(matches!(d.action, Action::Vm(VmAction::Start { .. })));
    let placed = d.condition(types::MACHINE_PLACEMENT_SET).expect("condition");
    assert_eq!((placed.state, placed.reason), (State::True, reasons::PLACEMENT_SET));
    assert!(placed.message.contains("hard anti-affinity"), "{}", placed.message);
}

#[test]
fn a_foreign_group_of_the_name_stops_a_hard_rule_but_not_a_soft_one() {
    for (antiaffinity, starts) in [(AntiAffinity::Hard, false), (AntiAffinity::Soft, true)] {
        let mut o = control_plane(antiaffinity, Fact::NotRead);
        let mut foreign = our_group(&o, &[]);
        foreign.description = "made by the oVirt admins".into();
        o.groups = read(vec![foreign]);
        let d = decide(&o);
        let placed = d.condition(types::MACHINE_PLACEMENT_SET).expect("condition").clone();
        if starts {
            assert!(matches!(d.action, Action::Vm(VmAction::Start { .. })));
            assert_eq!(
                (placed.state, placed.reason),
                (State::True, reasons::ANTI_AFFINITY_SKIPPED)
            );
        } else {
            assert_eq!(d.action, Action::Wait(Requeue::Backoff));
            assert_eq!(
                (placed.state, placed.reason),
                (State::False(Severity::Error), reasons::AFFINITY_GROUP_CONFLICT)
            );
        }
        assert!(placed.message.contains("CAPOV leaves it alone"), "{}", placed.message);
    }
}

#[test]
fn groups_the_engine_will_not_show_stop_a_hard_rule_only() {
    let refused = || {
        Fact::Read(GroupsObservation::Unavailable {
            message: "oVirt refused: insufficient permissions".into(),
        })
    };
    let d = decide(&control_plane(AntiAffinity::Hard, refused()));
    assert_eq!(d.action, Action::Wait(Requeue::Backoff));
    assert_eq!(
        state_of(&d, types::MACHINE_PLACEMENT_SET),
        Some((State::False(Severity::Error), reasons::AFFINITY_GROUP_UNAVAILABLE))
    );
    let d = decide(&control_plane(AntiAffinity::Soft, refused()));
    assert!(matches!(d.action, Action::Vm(VmAction::Start { .. })));
    assert_eq!(
        state_of(&d, types::MACHINE_PLACEMENT_SET),
        Some((State::True, reasons::ANTI_AFFINITY_SKIPPED))
    );
}

#[test]
fn a_host_label_domain_needs_its_label() {
    let mut o = with_vm("down", false);
    o.failure_domain = FailureDomainChoice::Found(FailureDomainPlacement {
        name: "rack-b".into(),
        ovirtcluster: None,
        hostlabel: Some("rack-b".into()),
        ..Default::default()
    });
    o.groups_wanted = wanted_groups(&o.group_owner, None, AntiAffinity::Soft, &o.failure_domain, "Default");
    assert_eq!(o.groups_wanted[0].rule, GroupRule::HostLabel { label: "rack-b".into() });
    o.groups = read(vec![]);
    let d = decide(&o);
    assert_eq!(
        state_of(&d, types::MACHINE_PLACEMENT_SET),
        Some((State::False(Severity::Error), reasons::AFFINITY_LABEL_NOT_FOUND))
    );
    o.groups = Fact::Read(GroupsObservation::Read {
        groups: vec![],
        labels: [("rack-b".to_string(), "l-1".to_string())].into(),
    });
    assert!(matches!(decide(&o).action, Action::Groups(GroupAction::Join(_))));
}

#[test]
fn a_machine_in_a_failure_domain_gets_its_vm_in_the_domains_cluster_and_an_unknown_domain_is_an_error() {
    let mut o = ready_to_create();
    o.failure_domain = FailureDomainChoice::Found(FailureDomainPlacement {
        name: "zone-b".into(),
        ovirtcluster: Some("Cluster-B".into()),
        hostlabel: None,
        ..Default::default()
    });
    match decide(&o).action {
        Action::Vm(VmAction::Create(plan)) => assert_eq!(plan.ovirt_cluster, "Cluster-B"),
        other => panic!("expected CreateVm, got {other:?}"),
    }
    o.failure_domain = FailureDomainChoice::Unknown {
        name: "zone-z".into(),
        known: vec!["zone-a".into()],
    };
    let d = decide(&o);
    assert_eq!(d.action, Action::Wait(Requeue::OnChange));
    let created = d.condition(types::MACHINE_CREATED).expect("MachineCreated");
    assert_eq!(
        (created.state, created.reason),
        (State::False(Severity::Error), reasons::FAILURE_DOMAIN_NOT_FOUND)
    );
    assert!(created.message.contains("\"zone-z\""), "{}", created.message);
}

#[test]
fn a_started_vm_keeps_its_placement_reported_and_its_domain_in_status() {
    let mut o = running();
    o.failure_domain = FailureDomainChoice::Found(FailureDomainPlacement {
        name: "zone-a".into(),
        ovirtcluster: None,
        hostlabel: None,
        ..Default::default()
    });
    let d = decide(&o);
    let placed = d.condition(types::MACHINE_PLACEMENT_SET).expect("condition");
    assert_eq!((placed.state, placed.reason), (State::True, reasons::PLACEMENT_SET));
    assert!(
        placed.message.contains("failure domain \"zone-a\""),
        "{}",
        placed.message
    );
    assert_eq!(d.status.failure_domain.as_deref(), Some("zone-a"));
}

#[test]
fn a_deleted_vm_leaves_its_groups_first_the_last_member_removing_them() {
    let mut o = deleting(control_plane(AntiAffinity::Soft, Fact::NotRead));
    o.vm.as_mut().expect("vm").status = "up".into();
    assert_eq!(
        decide(&o).action,
        Action::Read(ReadRequest::Groups),
        "the groups are read when the decision is to stop"
    );
    o.groups = read(vec![our_group(&o, &[VM_ID])]);
    let d = decide(&o);
    match &d.action {
        Action::Groups(GroupAction::Leave(leave)) => {
            assert!(leave.leave.delete_group, "the last member removes the group");
            assert_eq!(leave.cluster_id, "cluster-1");
        }
        other => panic!("expected LeaveAffinityGroup, got {other:?}"),
    }
    assert_eq!(
        state_of(&d, types::MACHINE_DELETED),
        Some((State::False(Severity::Info), reasons::LEAVING_AFFINITY_GROUP))
    );
    o.groups = read(vec![our_group(&o, &["sibling"])]);
    assert!(matches!(decide(&o).action, Action::Vm(VmAction::StopForce { .. })));
    o.groups = Fact::Read(GroupsObservation::Unavailable {
        message: "refused".into(),
    });
    assert!(
        matches!(decide(&o).action, Action::Vm(VmAction::StopForce { .. })),
        "deletion never waits for groups it cannot see"
    );
    assert_eq!(
        crate::placement::affinity_groups::assess(
            &o.groups_wanted[0],
            &[our_group(&o, &[VM_ID])],
            &BTreeMap::new(),
            VM_ID
        ),
        GroupState::Joined { id: "g1".into() }
    );
}

#[test]
fn a_running_vm_keeps_saying_its_soft_anti_affinity_was_skipped() {
    let skipped = "an affinity group named \"x\" exists in oVirt that CAPOV did not create".to_string();
    let o = Observed {
        placement_skipped: Some(skipped.clone()),
        ..running()
    };
    let d = decide(&o);
    let placement = d.condition(types::MACHINE_PLACEMENT_SET).expect("MachinePlacementSet");
    assert_eq!(
        (placement.state, placement.reason, placement.message.as_str()),
        (State::True, reasons::ANTI_AFFINITY_SKIPPED, skipped.as_str())
    );
    assert_eq!(
        state_of(&decide(&running()), types::MACHINE_PLACEMENT_SET),
        Some((State::True, reasons::PLACEMENT_SET))
    );
}

fn tenant_placement(labels: &[&str], clusters: &[&str]) -> Option<capov_crds::TenantPlacement> {
    let list = |l: &[&str]| Some(l.iter().map(|s| s.to_string()).collect());
    Some(capov_crds::TenantPlacement {
        host_labels: list(labels),
        ovirt_clusters: list(clusters),
    })
}

/// Issue #35 §4: a host label or oVirt cluster the provider's spec.tenantPlacement does not list gets no VM.
#[test]
fn a_placement_the_provider_does_not_allow_gets_no_vm() {
    let mut o = ready_to_create();
    o.tenant_placement = tenant_placement(&["rack-a"], &["Default"]);
    let place = |cluster: Option<&str>, label: Option<&str>| {
        FailureDomainChoice::Found(FailureDomainPlacement {
            name: "zone".into(),
            ovirtcluster: cluster.map(String::from),
            hostlabel: label.map(String::from),
            ..Default::default()
        })
    };
    for (domain, spec_cluster, field) in [
        (
            place(None, Some("rack-b")),
            "Default",
            "spec.tenantPlacement.hostLabels",
        ),
        (
            place(Some("Edge"), Some("rack-a")),
            "Default",
            "spec.tenantPlacement.ovirtClusters",
        ),
        (FailureDomainChoice::None, "Edge", "spec.tenantPlacement.ovirtClusters"),
    ] {
        o.failure_domain = domain;
        o.settings.ovirtcluster = spec_cluster.into();
        let d = decide(&o);
        assert_eq!(d.action, Action::Wait(Requeue::OnChange));
        let created = d.condition(types::MACHINE_CREATED).expect("MachineCreated");
        assert_eq!(
            (created.state, created.reason),
            (State::False(Severity::Error), reasons::PLACEMENT_NOT_ALLOWED)
        );
        assert!(created.message.contains(field), "{}", created.message);
        assert!(created.message.ends_with("; no VM is created"), "{}", created.message);
    }
    o.failure_domain = place(None, Some("rack-a"));
    o.settings.ovirtcluster = "Default".into();
    assert!(matches!(decide(&o).action, Action::Vm(VmAction::Create(_))));
    o.tenant_placement = None;
    o.failure_domain = place(Some("Edge"), Some("rack-b"));
    assert!(
        matches!(decide(&o).action, Action::Vm(VmAction::Create(_))),
        "without spec.tenantPlacement any placement is allowed"
    );
}

/// A VM created before the provider restricted its labels does not join a group that pins it to refused hosts.
#[test]
fn a_vm_never_joins_a_host_label_group_the_provider_does_not_allow() {
    let mut o = with_vm("down", false);
    o.failure_domain = FailureDomainChoice::Found(FailureDomainPlacement {
        name: "rack-b".into(),
        ovirtcluster: None,
        hostlabel: Some("rack-b".into()),
        ..Default::default()
    });
    o.groups_wanted = wanted_groups(&o.group_owner, None, AntiAffinity::Soft, &o.failure_domain, "Default");
    o.groups = Fact::Read(GroupsObservation::Read {
        groups: vec![],
        labels: [("rack-b".to_string(), "l-1".to_string())].into(),
    });
    o.tenant_placement = tenant_placement(&["rack-a"], &["Default"]);
    let d = decide(&o);
    assert_eq!(d.action, Action::Wait(Requeue::OnChange));
    let placed = d.condition(types::MACHINE_PLACEMENT_SET).expect("MachinePlacementSet");
    assert_eq!(
        (placed.state, placed.reason),
        (State::False(Severity::Error), reasons::PLACEMENT_NOT_ALLOWED)
    );
    assert!(
        placed.message.ends_with("; the VM is not started"),
        "{}",
        placed.message
    );
    o.tenant_placement = tenant_placement(&["rack-a", "rack-b"], &["Default"]);
    assert!(matches!(decide(&o).action, Action::Groups(GroupAction::Join(_))));
}
