//! The hot-loop guard: an action that reported success but changed nothing ([`crate::machine_steps::without_effect`]).

use super::fixtures::{ready_to_create, with_vm};
use crate::machine_steps::{Action, BookkeepingAction, Observed, PrepareAction, Requeue, decide, without_effect};
use crate::policy::feature_gates::FeatureGates;

#[test]
fn an_action_followed_by_the_same_observation_had_no_effect() {
    // An engine that answers 200 to a disk rename without applying it: the VM looks the same afterwards.
    let gates = FeatureGates {
        disk_add_vm_name: true,
        ..FeatureGates::default()
    };
    let before = Observed {
        gates,
        ..with_vm("down", false)
    };
    let acted = decide(&before).action;
    assert!(
        matches!(acted, Action::Prepare(PrepareAction::RenameDiskAlias { .. })),
        "{acted:?}"
    );
    let after = before.clone();
    let next = decide(&after).action;
    assert!(without_effect(&before, &acted, &after, &next));
}

#[test]
fn an_action_whose_effect_shows_is_progress() {
    // The finalizer was added: the next observation differs, whatever comes next.
    let before = Observed {
        has_finalizer: false,
        ..ready_to_create()
    };
    let acted = decide(&before).action;
    assert_eq!(acted, Action::Bookkeeping(BookkeepingAction::AddFinalizer));
    let after = ready_to_create();
    assert!(!without_effect(&before, &acted, &after, &decide(&after).action));
    // The same observation with another action (e.g. NICs read and re-decided) is not taken for a loop either.
    assert!(!without_effect(
        &before,
        &acted,
        &before,
        &Action::Wait(Requeue::OnChange)
    ));
}
