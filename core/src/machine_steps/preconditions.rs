//! SPEC §2 step 1, preconditions (no condition): the owner Machine, its Cluster and the Cluster's infrastructure,
//! then the finalizer. Also the gate of §2.4: a machine with failureReason set runs no creation steps. None of this
//! blocks deletion, which [`super::decide`] routes elsewhere first.

use super::action::{Action, BookkeepingAction, Requeue};
use super::decision::Decision;
use super::observed::{FailureState, Observed};

/// Whether the decision is taken on the preconditions alone: a machine that is not being deleted and waits for its
/// owner Machine, its Cluster or the Cluster's infrastructure, or still needs its finalizer. Its pass asks neither
/// the provider nor the engine: when the CAPI Machines' first list is slow, 10,000 new machines each looked their VM
/// up by name for nothing. What the engine would show of an existing VM (the host's condition) waits for the pass
/// after. A failed machine's pass still looks: its VM's host stays reported.
pub fn decided_before_the_engine(o: &Observed) -> bool {
    !o.deletion_requested && !o.paused && (awaits_owner(o) || !o.has_finalizer)
}

/// The owner Machine, its Cluster or the Cluster's infrastructure is not there yet.
fn awaits_owner(o: &Observed) -> bool {
    !o.owner_machine_found || !o.cluster_found || !o.cluster_infrastructure_provisioned
}

/// Err = the decision that waits for a precondition or fulfils it; Ok = the steps may run.
pub(super) fn check(o: &Observed) -> Result<(), Box<Decision>> {
    if awaits_owner(o) {
        return Err(Box::new(Decision::new(Action::Wait(Requeue::OnChange), vec![])));
    }
    if !o.has_finalizer {
        return Err(Box::new(Decision::new(
            Action::Bookkeeping(BookkeepingAction::AddFinalizer),
            vec![],
        )));
    }
    // SPEC §2.4: a failed machine runs no creation steps until the failure is cleared or the spec changes.
    match o.failure {
        FailureState::Set {
            spec_changed_since: true,
        } => Err(Box::new(Decision::new(
            Action::Bookkeeping(BookkeepingAction::ClearFailure),
            vec![],
        ))),
        FailureState::Set {
            spec_changed_since: false,
        } => Err(Box::new(Decision::new(Action::Wait(Requeue::OnChange), vec![]))),
        FailureState::Clear => Ok(()),
    }
}
