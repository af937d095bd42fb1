//! The OVirtMachine lifecycle as a pure function (SPEC §2): [`decide`] takes what the machine actor observed and
//! returns the one next action with the conditions to report. The actor executes the action and asks again, so
//! each step of the SPEC is one branch here and one executor there.
//!
//! Order of checks: pause (also during deletion) → deletion (never blocked by the waits of step 1) → owner
//! Machine, Cluster, infrastructure → finalizer → failureReason → connection → steps 3–7.

mod decision;
mod deletion;
mod lifecycle;
mod observed;

#[cfg(test)]
mod tests;

pub use decision::{Action, CreateVmPlan, Decision, Requeue, StatusChange};
pub use observed::{
    Bootstrap, BootstrapFormat, ConnectionFailure, FailureState, FoundBy, NodeObservation, Observed, ObservedVm,
    ProviderConnection, ProviderDefaults, VmDisk,
};

use crate::conditions::{ConditionUpdate, reasons, types};

/// The next action for one OVirtMachine.
pub fn decide(observed: &Observed) -> Decision {
    if observed.paused {
        return Decision::new(
            Action::WritePausedOnly,
            vec![ConditionUpdate::true_(types::PAUSED, reasons::PAUSED)],
        );
    }
    let mut decision = if observed.deletion_requested {
        deletion::decide(observed)
    } else {
        lifecycle::decide(observed)
    };
    decision.conditions.insert(
        0,
        ConditionUpdate::false_(types::PAUSED, reasons::NOT_PAUSED, capov_crds::Severity::Info, ""),
    );
    decision
}
