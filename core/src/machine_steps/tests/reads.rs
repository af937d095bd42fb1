//! Facts read one way: a fact that costs a request is [`Fact::NotRead`] until a decision asks for it
//! ([`Action::Read`]); the actor reads it and decides again. Which action needs which fact first is said once, in
//! [`crate::machine_steps::ActionClass::reads_first`].

use capov_crds::{AntiAffinity, Nic};

use super::fixtures::{deleting, running, with_vm};
use crate::machine_steps::{
    Action, EngineLookup, Fact, GroupsObservation, NodeObservation, NodeRelease, Observed, ReadRequest, VmAction,
    VmHost, decide,
};
use crate::network::nics::NicAssessment;
use crate::placement::affinity_groups::wanted_groups;

/// A VM never started, down, whose spec names one NIC and whose machine belongs in an anti-affinity group; neither
/// its NICs nor its groups read.
fn about_to_start() -> Observed {
    let mut o = with_vm("down", false);
    o.settings.nics = vec![Nic {
        vnicprofile: "ovirtmgmt".into(),
        ..Nic::default()
    }];
    o.groups_wanted = wanted_groups(
        &o.group_owner,
        Some("control-plane"),
        AntiAffinity::Soft,
        &o.failure_domain,
        "Default",
    );
    o.nics = Fact::NotRead;
    o.groups = Fact::NotRead;
    o
}

fn no_groups() -> Fact<GroupsObservation> {
    Fact::Read(GroupsObservation::Unavailable {
        message: "refused".into(),
    })
}

#[test]
fn a_first_start_asks_for_the_nics_then_the_groups_then_starts() {
    let mut o = about_to_start();
    assert_eq!(decide(&o).action, Action::Read(ReadRequest::Nics));
    o.nics = Fact::Read(NicAssessment::InSync);
    assert_eq!(decide(&o).action, Action::Read(ReadRequest::Groups));
    o.groups = no_groups();
    assert!(matches!(decide(&o).action, Action::Vm(VmAction::Start { .. })));
}

#[test]
fn facts_that_cannot_matter_are_not_asked_for() {
    let mut o = about_to_start();
    o.settings.nics.clear();
    o.groups_wanted.clear();
    assert!(
        matches!(decide(&o).action, Action::Vm(VmAction::Start { .. })),
        "no spec.nics keeps the template's NICs, no group to join: nothing to read"
    );
}

#[test]
fn nics_read_before_the_start_decide_step_5_again() {
    let mut o = about_to_start();
    let changes = vec![crate::network::nics::NicChange::Remove { nic_id: "n1".into() }];
    o.nics = Fact::Read(NicAssessment::Changes(changes.clone()));
    assert_eq!(
        decide(&o).action,
        Action::Prepare(crate::machine_steps::PrepareAction::SyncNics(changes)),
        "the groups are not read for a decision that is not a start"
    );
}

#[test]
fn a_stop_or_removal_asks_for_the_groups_but_a_held_back_one_reads_nothing() {
    let mut o = deleting(running());
    o.groups_wanted = about_to_start().groups_wanted;
    o.vm.as_mut().expect("vm").status = "down".into();
    assert_eq!(decide(&o).action, Action::Read(ReadRequest::Groups));
    // A VM on a non-responsive host gets no engine write, so nothing is read for one either.
    let vm = o.vm.as_mut().expect("vm");
    vm.status = "up".into();
    vm.host = Some(VmHost {
        id: "h1".into(),
        name: Some("host-1".into()),
        status: Some("non_responsive".into()),
        inventoried: true,
    });
    assert!(matches!(decide(&o).action, Action::Wait(_)));
}

#[test]
fn engine_reads_hold_the_permit_and_workload_reads_do_not() {
    for (request, permit) in [
        (ReadRequest::Nics, true),
        (ReadRequest::Groups, true),
        (ReadRequest::Node, false),
        (ReadRequest::NodeRelease, false),
        (
            ReadRequest::Lookup(EngineLookup::OvirtCluster { name: "Default".into() }),
            true,
        ),
    ] {
        let class = Action::Read(request.clone()).class();
        assert_eq!(class.reads.as_ref(), Some(&request));
        assert_eq!(class.needs_permit, permit, "{request:?}");
        assert!(!class.writes_engine && !class.destroys, "{request:?}");
    }
}

#[test]
fn the_node_is_asked_for_at_step_7_and_a_read_one_is_not_asked_again() {
    let mut o = running();
    o.node = Fact::NotRead;
    assert_eq!(decide(&o).action, Action::Read(ReadRequest::Node));
    o.node = Fact::Read(NodeObservation::NotFound);
    assert!(matches!(decide(&o).action, Action::Wait(_)));
    assert!(!o.unread(&ReadRequest::Node));
    o.node_release = Fact::Read(NodeRelease::Released { node: "n".into() });
    assert!(!o.unread(&ReadRequest::NodeRelease));
}
