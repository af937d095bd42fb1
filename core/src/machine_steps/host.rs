//! Issue #27, where the VM runs: `status.host` (kept current when the VM migrates) and `status.failureDomain`, the
//! `HostReady` condition for the host's state, and the rule that CAPOV makes no engine write on a VM whose host is
//! non-responsive: its state is unknown (it may still run), so a stop or a removal now could act on a guest that
//! keeps running, until the host is back or fenced (fencing sets the VM down and off the host).

use super::action::{Action, GroupAction, Requeue, VmAction};
use capov_crds::Severity;

use super::decision::Decision;
use super::observed::{FoundBy, Observed, ObservedVm, VmHost};
use crate::conditions::{ConditionUpdate, State, reasons, types};
use crate::trust::identity::Ownership;

/// Adds to `decision` what it says of the VM's place: status.host and status.failureDomain, HostReady once the VM
/// was started, and — the host being non-responsive — a wait instead of any engine write.
pub(super) fn apply(o: &Observed, decision: &mut Decision) {
    let Some(vm) = own_vm(o) else {
        return;
    };
    if let Some(domain) = o.failure_domain.name() {
        decision.status.failure_domain = Some(domain.to_string());
    }
    // Seen before the provider's first host inventory (a read right after a restart): the status keeps its host and
    // HostReady until the poll names the host, rather than going Unknown for seconds and back.
    if vm.host.as_ref().is_some_and(|host| !host.inventoried) {
        return;
    }
    decision.status.host = Some(vm.host.as_ref().map(host_name));
    if !vm.ever_started && vm.host.is_none() {
        return;
    }
    let Some(host) = &vm.host else {
        let not_running = ConditionUpdate::unknown(types::HOST_READY, reasons::VM_DOWN, "the VM runs on no host");
        decision.conditions.push(not_running);
        return;
    };
    let mut condition = condition(host, vm);
    // Deletion says why it waits whatever it would do: a stop, a removal, or waiting for the engine (which refuses
    // both while the VM is unknown).
    let holds = decision.action.writes_engine() || o.deletion_requested;
    if condition.reason == reasons::HOST_NON_RESPONSIVE && holds {
        let held = format!(
            "{}; CAPOV holds back what it would do now ({})",
            condition.message,
            describe(&decision.action)
        );
        condition.message = held.clone();
        // The step's own report would describe the write that is not made.
        decision.conditions.retain(|c| c.state == State::True);
        if o.deletion_requested {
            decision.conditions.push(ConditionUpdate::false_(
                types::MACHINE_DELETED,
                reasons::HOST_NON_RESPONSIVE,
                Severity::Error,
                held,
            ));
        }
        decision.action = Action::Wait(Requeue::Backoff);
    }
    decision.conditions.push(condition);
}

/// The VM, when it is this object's (only then is it reported or changed).
fn own_vm(o: &Observed) -> Option<&ObservedVm> {
    o.vm.as_ref().filter(|vm| match vm.ownership {
        Ownership::Owned => true,
        Ownership::Legacy | Ownership::Moved => vm.found_by == FoundBy::ProviderId,
        Ownership::NotOwned(_) => false,
    })
}

fn host_name(host: &VmHost) -> String {
    host.name.clone().unwrap_or_else(|| host.id.clone())
}

/// HostReady for a VM on `host`.
fn condition(host: &VmHost, vm: &ObservedVm) -> ConditionUpdate {
    let name = host_name(host);
    let warning =
        |reason, message: String| ConditionUpdate::false_(types::HOST_READY, reason, Severity::Warning, message);
    let migrating = if vm.status == "migrating" {
        " and the VM is migrating away"
    } else {
        ""
    };
    match host.status.as_deref() {
        Some("up") => ConditionUpdate::true_(types::HOST_READY, reasons::HOST_UP)
            .with_message(format!("the VM runs on host {name:?}")),
        Some("preparing_for_maintenance") => warning(
            reasons::HOST_PREPARING_FOR_MAINTENANCE,
            format!("host {name:?} of the VM is being put into maintenance{migrating}: oVirt live-migrates its VMs"),
        ),
        Some("maintenance") => warning(
            reasons::HOST_IN_MAINTENANCE,
            format!("host {name:?} of the VM is in maintenance{migrating}"),
        ),
        Some("non_responsive") => ConditionUpdate::false_(
            types::HOST_READY,
            reasons::HOST_NON_RESPONSIVE,
            Severity::Error,
            format!(
                "host {name:?} of the VM is non-responsive: the VM's state is unknown, so CAPOV makes no engine call \
                 that changes it until the host is back or fenced (oVirt fences it through its power management, or \
                 an administrator confirms in oVirt that it was rebooted)"
            ),
        ),
        Some(other) => warning(reasons::HOST_NOT_UP, format!("host {name:?} of the VM is {other}")),
        None => ConditionUpdate::unknown(
            types::HOST_READY,
            reasons::HOST_UNKNOWN,
            format!(
                "the VM runs on host {name:?}, whose state CAPOV does not know (not polled yet, or the engine does not \
                 show the host to CAPOV's user)"
            ),
        ),
    }
}

/// The write held back, for the condition.
fn describe(action: &Action) -> &'static str {
    match action {
        Action::Vm(VmAction::StopForce { .. }) => "power the VM off",
        Action::Vm(VmAction::Delete { .. }) => "delete the VM",
        Action::Vm(VmAction::Start { .. }) => "start the VM",
        Action::Groups(GroupAction::Leave(_)) => "take the VM out of its affinity group",
        Action::Wait(_) => "wait for the engine, which refuses to stop or remove a VM in an unknown state",
        Action::Vm(
            VmAction::Create(_)
            | VmAction::UpgradeMarker { .. }
            | VmAction::Shutdown { .. }
            | VmAction::DetachDisks { .. },
        )
        | Action::Groups(GroupAction::Join(_))
        | Action::Prepare(_)
        | Action::Bookkeeping(_)
        | Action::Workload(_)
        | Action::Read(_)
        | Action::WritePausedOnly
        | Action::Done(_) => "change the VM",
    }
}
