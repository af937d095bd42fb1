//! Step 1, preconditions, and the failureReason gate of §2.4 ([`crate::machine_steps::preconditions`]).

use super::fixtures::{VM_ID, deleting, ready_to_create, with_vm};
use crate::machine_steps::{Action, BookkeepingAction, FailureState, Observed, Requeue, VmAction, decide};

#[test]
fn waits_for_owner_machine_without_conditions() {
    let d = decide(&Observed {
        owner_machine_found: false,
        ..ready_to_create()
    });
    assert_eq!(d.action, Action::Wait(Requeue::OnChange));
    assert_eq!(d.conditions.len(), 1, "only Paused");
}

#[test]
fn waits_for_cluster_and_its_infrastructure() {
    for o in [
        Observed {
            cluster_found: false,
            ..ready_to_create()
        },
        Observed {
            cluster_infrastructure_provisioned: false,
            ..ready_to_create()
        },
    ] {
        assert_eq!(decide(&o).action, Action::Wait(Requeue::OnChange));
    }
}

#[test]
fn adds_the_finalizer_after_the_preconditions() {
    assert_eq!(
        decide(&Observed {
            has_finalizer: false,
            ..ready_to_create()
        })
        .action,
        Action::Bookkeeping(BookkeepingAction::AddFinalizer)
    );
    let waiting = Observed {
        has_finalizer: false,
        owner_machine_found: false,
        ..ready_to_create()
    };
    assert_eq!(decide(&waiting).action, Action::Wait(Requeue::OnChange));
}

#[test]
fn precondition_waits_do_not_block_deletion() {
    let o = Observed {
        owner_machine_found: false,
        cluster_found: false,
        cluster_infrastructure_provisioned: false,
        ..deleting(with_vm("down", true))
    };
    assert_eq!(decide(&o).action, Action::Vm(VmAction::Delete { vm_id: VM_ID.into() }));
}

#[test]
fn failure_reason_stops_creation_steps() {
    let o = Observed {
        failure: FailureState::Set {
            spec_changed_since: false,
        },
        ..ready_to_create()
    };
    let d = decide(&o);
    assert_eq!(d.action, Action::Wait(Requeue::OnChange));
    assert_eq!(d.conditions.len(), 1, "only Paused");
}

#[test]
fn failure_reason_is_cleared_when_the_spec_changed() {
    let o = Observed {
        failure: FailureState::Set {
            spec_changed_since: true,
        },
        ..ready_to_create()
    };
    assert_eq!(decide(&o).action, Action::Bookkeeping(BookkeepingAction::ClearFailure));
}

#[test]
fn failure_reason_does_not_stop_deletion() {
    let o = Observed {
        failure: FailureState::Set {
            spec_changed_since: false,
        },
        ..deleting(with_vm("down", false))
    };
    assert_eq!(decide(&o).action, Action::Vm(VmAction::Delete { vm_id: VM_ID.into() }));
}

#[test]
fn the_engine_is_asked_only_once_the_preconditions_hold() {
    use crate::machine_steps::{ConnectionFailure, ProviderConnection, decided_before_the_engine};
    let waiting = [
        Observed {
            owner_machine_found: false,
            ..with_vm("up", true)
        },
        Observed {
            cluster_infrastructure_provisioned: false,
            ..ready_to_create()
        },
        Observed {
            has_finalizer: false,
            ..with_vm("down", false)
        },
    ];
    for o in waiting {
        assert!(decided_before_the_engine(&o), "{o:?}");
        // What a pass that skips the engine observes (no VM, a ready connection) decides the same action as a VM
        // and a failed connection, and reports nothing but Paused: the status stays as it was.
        let without_engine = decide(&Observed { vm: None, ..o.clone() });
        let with_failed_engine = decide(&Observed {
            connection: ProviderConnection::Failed {
                failure: ConnectionFailure::EngineUnreachable,
                message: "down".into(),
                persisted_for: std::time::Duration::from_secs(600),
            },
            ..o.clone()
        });
        assert_eq!(without_engine.action, with_failed_engine.action, "{o:?}");
        assert_eq!(
            without_engine.conditions.len(),
            1,
            "only Paused: {:?}",
            without_engine.conditions
        );
    }
    let failed = FailureState::Set {
        spec_changed_since: false,
    };
    for o in [
        ready_to_create(),
        with_vm("up", true),
        Observed {
            failure: failed,
            ..with_vm("up", true)
        },
        deleting(Observed {
            owner_machine_found: false,
            ..with_vm("down", true)
        }),
    ] {
        assert!(!decided_before_the_engine(&o), "{o:?}");
    }
}
