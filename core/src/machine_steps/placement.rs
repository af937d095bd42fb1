//! Issue #25, `MachinePlacementSet`, only while the VM was never started (between steps 5 and 6): the VM is in the
//! affinity groups of its machine group and failure domain ([`crate::placement::affinity_groups`]), each created on demand. The
//! groups are read only when a decision would start the VM; before deletion the VM leaves them again, the last
//! member removing the group.

use super::action::{Action, GroupAction, JoinGroup, LeaveGroup, Requeue};
use capov_crds::{AntiAffinity, Severity};

use super::decision::Decision;
use super::fact::Fact;
use super::observed::{GroupsObservation, Observed, ObservedVm};
use super::passed::Passed;
use crate::conditions::{ConditionUpdate, reasons, types};
use crate::placement::affinity_groups::{GroupRule, GroupState, WantedGroup, assess, leaving};
use crate::placement::failure_domains::FailureDomainChoice;
use crate::trust::tenancy::host_label_refusal;

/// Ok = the VM is in its groups (or may start without a soft one); Err = the decision that joins one or says why it
/// cannot.
pub(super) fn check(o: &Observed, vm: &ObservedVm, passed: &mut Passed) -> Result<(), Box<Decision>> {
    let (groups, labels) = match &o.groups {
        // Nothing to join, or not read yet: the pass reads the groups before it starts the VM, and decides again.
        _ if o.groups_wanted.is_empty() => return set(o, passed),
        Fact::NotRead => return set(o, passed),
        Fact::Read(GroupsObservation::Unavailable { message }) => return unavailable(o, message, passed),
        Fact::Read(GroupsObservation::Read { groups, labels }) => (groups, labels),
    };
    let Some(cluster_id) = &vm.cluster_id else {
        return unavailable(o, "the engine did not say which oVirt cluster the VM is in", passed);
    };
    let mut skipped = Vec::new();
    for wanted in &o.groups_wanted {
        let false_ = |reason, severity, message: String| {
            ConditionUpdate::false_(types::MACHINE_PLACEMENT_SET, reason, severity, message)
        };
        match assess(wanted, groups, labels, &vm.id) {
            GroupState::Joined { .. } => {}
            GroupState::Missing { .. } | GroupState::NotJoined { .. } => {
                if let Some(refusal) = refused(o, wanted) {
                    let message = format!("{refusal}; the VM is not started");
                    return Err(Box::new(passed.take().wait(
                        Requeue::OnChange,
                        false_(reasons::PLACEMENT_NOT_ALLOWED, Severity::Error, message),
                    )));
                }
                let join = JoinGroup {
                    group: wanted.clone(),
                    cluster_id: cluster_id.clone(),
                    vm_id: vm.id.clone(),
                };
                let joining = format!(
                    "putting the VM into affinity group {:?} ({})",
                    wanted.name,
                    rule(wanted)
                );
                return Err(Box::new(passed.take().stop(
                    Action::Groups(GroupAction::Join(Box::new(join))),
                    Some(false_(reasons::JOINING_AFFINITY_GROUP, Severity::Info, joining)),
                )));
            }
            GroupState::Conflict { .. } if is_soft(wanted) => skipped.push(conflict(wanted)),
            GroupState::Conflict { .. } => {
                let message = format!("{}; the VM is not started", conflict(wanted));
                return Err(Box::new(passed.take().wait(
                    Requeue::Backoff,
                    false_(reasons::AFFINITY_GROUP_CONFLICT, Severity::Error, message),
                )));
            }
            GroupState::LabelNotFound => {
                let message = label_not_found(o, wanted);
                return Err(Box::new(passed.take().wait(
                    Requeue::Backoff,
                    false_(reasons::AFFINITY_LABEL_NOT_FOUND, Severity::Error, message),
                )));
            }
        }
    }
    if skipped.is_empty() {
        return set(o, passed);
    }
    passed.pass_with(
        types::MACHINE_PLACEMENT_SET,
        reasons::ANTI_AFFINITY_SKIPPED,
        format!("{}; the VM starts without its soft anti-affinity", skipped.join("; ")),
    );
    Ok(())
}

/// The True condition of a VM placed as wanted.
fn set(o: &Observed, passed: &mut Passed) -> Result<(), Box<Decision>> {
    passed.pass_with(types::MACHINE_PLACEMENT_SET, reasons::PLACEMENT_SET, describe(o));
    Ok(())
}

/// MachinePlacementSet of a VM that runs: what it said before the first start when a soft group was skipped (the
/// groups are not read again, and the VM is in none of them), else the placement.
pub(super) fn report_started(o: &Observed, passed: &mut Passed) {
    match &o.placement_skipped {
        Some(message) => passed.pass_with(
            types::MACHINE_PLACEMENT_SET,
            reasons::ANTI_AFFINITY_SKIPPED,
            message.clone(),
        ),
        None => passed.pass_with(types::MACHINE_PLACEMENT_SET, reasons::PLACEMENT_SET, describe(o)),
    }
}

/// What MachinePlacementSet says of a placed VM: its failure domain and its groups.
pub(super) fn describe(o: &Observed) -> String {
    let domain = match &o.failure_domain {
        FailureDomainChoice::Found(placement) => format!(
            "failure domain {:?} (oVirt cluster {:?})",
            placement.name,
            o.failure_domain.ovirt_cluster(&o.settings.ovirtcluster)
        ),
        _ => "no failure domain".to_string(),
    };
    if o.groups_wanted.is_empty() {
        let why = match o.settings.antiaffinity {
            Some(AntiAffinity::None) => "spec.antiaffinity is none",
            _ => "the Machine belongs to no control plane or MachineDeployment",
        };
        return format!("{domain}; no affinity group ({why})");
    }
    let groups: Vec<String> = o
        .groups_wanted
        .iter()
        .map(|g| format!("{:?} ({})", g.name, rule(g)))
        .collect();
    format!("{domain}; affinity groups {}", groups.join(", "))
}

fn rule(group: &WantedGroup) -> String {
    match &group.rule {
        GroupRule::AntiAffinity { hard: true } => "hard anti-affinity".into(),
        GroupRule::AntiAffinity { hard: false } => "soft anti-affinity".into(),
        GroupRule::HostLabel { label } => format!("hosts labelled {label:?}"),
    }
}

/// A host-label group whose label the provider does not let tenants use (the VM was created before the provider
/// said so): joining it would pin the VM to those hosts.
fn refused(o: &Observed, group: &WantedGroup) -> Option<String> {
    let GroupRule::HostLabel { label } = &group.rule else {
        return None;
    };
    let domain = o.failure_domain.name().unwrap_or_default();
    host_label_refusal(o.tenant_placement.as_ref(), &o.settings.provider, domain, label)
}

fn is_soft(group: &WantedGroup) -> bool {
    group.rule == GroupRule::AntiAffinity { hard: false }
}

fn conflict(group: &WantedGroup) -> String {
    format!(
        "an affinity group named {:?} exists in oVirt that CAPOV did not create for this machine group (its \
         description lacks CAPOV's marker {:?}); CAPOV leaves it alone: rename or remove it in oVirt",
        group.name, group.marker
    )
}

fn label_not_found(o: &Observed, group: &WantedGroup) -> String {
    let label = match &group.rule {
        GroupRule::HostLabel { label } => label.as_str(),
        GroupRule::AntiAffinity { .. } => "",
    };
    format!(
        "affinity label {label:?} of failure domain {:?} does not exist in oVirt: create it and put it on the domain's \
         hosts (Administration → Affinity Labels), or fix spec.failureDomains[].hostlabel of the OVirtCluster",
        o.failure_domain.name().unwrap_or_default()
    )
}

/// The engine will not show CAPOV the groups: a hard rule cannot do without them (the VM waits), a soft one can.
fn unavailable(o: &Observed, why: &str, passed: &mut Passed) -> Result<(), Box<Decision>> {
    let hard = o.groups_wanted.iter().any(|g| !is_soft(g));
    let fix = "grant CAPOV's engine user an administrative role on the oVirt cluster (ClusterAdmin: affinity groups \
               and labels are administration objects)";
    if hard {
        let message =
            format!("cannot use affinity groups: {why}; {fix}, or set spec.antiaffinity: soft; the VM is not started");
        return Err(Box::new(passed.take().wait(
            Requeue::Backoff,
            ConditionUpdate::false_(
                types::MACHINE_PLACEMENT_SET,
                reasons::AFFINITY_GROUP_UNAVAILABLE,
                Severity::Error,
                message,
            ),
        )));
    }
    passed.pass_with(
        types::MACHINE_PLACEMENT_SET,
        reasons::ANTI_AFFINITY_SKIPPED,
        format!("cannot use affinity groups: {why}; the VM starts without its soft anti-affinity ({fix}, or set spec.antiaffinity: none)"),
    );
    Ok(())
}

/// Before the VM of a deleted machine is stopped or removed: the first of its CAPOV groups it still is in, as the
/// action that takes it out (None: in none, or the groups could not be read — deletion never waits for them).
pub(super) fn leave(o: &Observed, vm: &ObservedVm) -> Option<Action> {
    let (Fact::Read(GroupsObservation::Read { groups, .. }), Some(cluster_id)) = (&o.groups, &vm.cluster_id) else {
        return None;
    };
    let first = leaving(groups, &o.group_owner, &vm.id).into_iter().next()?;
    Some(Action::Groups(GroupAction::Leave(Box::new(LeaveGroup {
        cluster_id: cluster_id.clone(),
        vm_id: vm.id.clone(),
        leave: first,
    }))))
}
