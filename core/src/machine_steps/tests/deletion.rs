//! §2.1, deletion ([`crate::machine_steps::deletion`]).

use crate::machine_steps::{
    Action, BookkeepingAction, ConnectionFailure, FoundBy, Observed, ObservedVm, ProviderConnection, Requeue, VmAction,
    decide,
};
use std::time::Duration;

use capov_crds::Severity;
use capov_ovirt_model::model::VmStatus;

use super::fixtures::{VM_ID, deleting, disk, ready_to_create, running, state_of, vm, with_vm};
use crate::conditions::{State, reasons, types};
use crate::trust::identity::{NotOwned, Ownership};

#[test]
fn deletion_without_finalizer_does_nothing() {
    let d = decide(&Observed {
        has_finalizer: false,
        ..deleting(running())
    });
    assert_eq!(d.action, Action::Done(Requeue::OnChange));
}

#[test]
fn deletion_with_no_vm_removes_the_finalizer() {
    let d = decide(&deleting(ready_to_create()));
    assert_eq!(
        d.action,
        Action::Bookkeeping(BookkeepingAction::RemoveFinalizer { left_alone: None })
    );
}

#[test]
fn deletion_leaves_a_same_named_vm_without_marker_alone() {
    let foreign = ObservedVm {
        ownership: Ownership::NotOwned(NotOwned::NoMarker),
        found_by: FoundBy::Name,
        ..vm("up", true)
    };
    let d = decide(&deleting(Observed {
        vm: Some(foreign),
        ..ready_to_create()
    }));
    assert!(
        matches!(&d.action, Action::Bookkeeping(BookkeepingAction::RemoveFinalizer { left_alone: Some(note) }) if note.contains("no CAPOV marker")),
        "{:?}",
        d.action
    );
}

#[test]
fn deletion_never_touches_a_vm_named_by_provider_id_that_is_not_this_objects() {
    for why in [
        NotOwned::NoMarker,
        NotOwned::OtherManagementCluster,
        NotOwned::EarlierObject,
    ] {
        let mut o = deleting(running());
        if let Some(vm) = o.vm.as_mut() {
            vm.ownership = Ownership::NotOwned(why);
        }
        let d = decide(&o);
        assert!(
            matches!(&d.action, Action::Bookkeeping(BookkeepingAction::RemoveFinalizer { left_alone: Some(note) }) if note.contains(why.explain())),
            "{why:?}: {:?}",
            d.action
        );
    }
}

#[test]
fn deletion_deletes_a_recorded_vm_with_a_legacy_marker_but_not_one_found_by_name() {
    let mut o = deleting(with_vm("down", true));
    if let Some(vm) = o.vm.as_mut() {
        vm.ownership = Ownership::Legacy;
    }
    assert_eq!(decide(&o).action, Action::Vm(VmAction::Delete { vm_id: VM_ID.into() }));
    if let Some(vm) = o.vm.as_mut() {
        vm.found_by = FoundBy::Name;
    }
    assert!(matches!(
        decide(&o).action,
        Action::Bookkeeping(BookkeepingAction::RemoveFinalizer { left_alone: Some(_) })
    ));
}

/// After `clusterctl move`, the VM's marker names the UID the owner-uid annotation carried: the VM spec.providerID
/// names is this machine's and is deleted with it; one found by name (a tenant's forged annotation on a new object
/// of the same name) is left alone.
#[test]
fn deletion_deletes_a_recorded_vm_with_a_moved_marker_but_not_one_found_by_name() {
    let mut o = deleting(with_vm("down", true));
    if let Some(vm) = o.vm.as_mut() {
        vm.ownership = Ownership::Moved;
    }
    assert_eq!(decide(&o).action, Action::Vm(VmAction::Delete { vm_id: VM_ID.into() }));
    if let Some(vm) = o.vm.as_mut() {
        vm.found_by = FoundBy::Name;
    }
    assert!(
        matches!(&decide(&o).action, Action::Bookkeeping(BookkeepingAction::RemoveFinalizer { left_alone: Some(note) }) if note.contains("owner-uid")),
        "{:?}",
        decide(&o).action
    );
}

/// clusterctl move deletes the source's copy right after creating the target's: the VM belongs to the target's
/// copy. No engine request, and the finalizer stays for clusterctl to remove (a tenant setting the annotation
/// gains nothing: the object waits, its VM is not orphaned by CAPOV).
#[test]
fn an_object_clusterctl_move_deletes_leaves_its_vm_and_its_finalizer_alone() {
    for o in [
        deleting(running()),
        deleting(with_vm("down", true)),
        deleting(ready_to_create()),
    ] {
        let d = decide(&Observed {
            deleted_for_move: true,
            ..o
        });
        assert_eq!(d.action, Action::Wait(Requeue::OnChange));
        assert_eq!(
            state_of(&d, types::MACHINE_DELETED),
            Some((State::False(Severity::Info), reasons::DELETED_FOR_MOVE))
        );
    }
}

#[test]
fn deletion_of_a_machine_refused_by_its_provider_releases_it_unless_it_recorded_a_vm() {
    let refused = ProviderConnection::Failed {
        failure: ConnectionFailure::NamespaceNotAllowed,
        message: "not allowed".into(),
        persisted_for: Duration::ZERO,
    };
    let never_had_a_vm = deleting(Observed {
        connection: refused.clone(),
        ..ready_to_create()
    });
    assert_eq!(
        decide(&never_had_a_vm).action,
        Action::Bookkeeping(BookkeepingAction::RemoveFinalizer { left_alone: None })
    );
    let had_one = deleting(Observed {
        connection: refused,
        ..running()
    });
    let d = decide(&had_one);
    assert_eq!(d.action, Action::Wait(Requeue::Backoff));
    assert_eq!(
        state_of(&d, types::CAN_CONNECT_TO_OVIRT),
        Some((State::False(Severity::Error), reasons::NAMESPACE_NOT_ALLOWED))
    );
}

#[test]
fn deletion_by_name_with_marker_deletes_our_vm() {
    let d = decide(&deleting(Observed {
        vm: Some(vm("down", false)),
        ..ready_to_create()
    }));
    assert_eq!(d.action, Action::Vm(VmAction::Delete { vm_id: VM_ID.into() }));
}

#[test]
fn non_system_disk_blocks_deletion_and_retries_every_minute() {
    let mut o = deleting(running());
    if let Some(vm) = o.vm.as_mut() {
        vm.disks.push(disk("csi-1", "pvc-123", false, 5));
    }
    let d = decide(&o);
    assert_eq!(d.action, Action::Wait(Requeue::After(Duration::from_secs(60))));
    let deleted = d.condition(types::MACHINE_DELETED).unwrap();
    assert_eq!(deleted.reason, "VMHasNonSystemDisk");
    assert_eq!(deleted.message, "VM has non system disk, cannot delete");
    assert!(matches!(deleted.state, State::False(_)));
}

#[test]
fn without_annotation_a_started_vm_counts_only_its_bootable_disk_as_system() {
    let mut o = Observed {
        system_disks: None,
        ..deleting(running())
    };
    assert_eq!(
        decide(&o).action,
        Action::Vm(VmAction::StopForce { vm_id: VM_ID.into() })
    );
    if let Some(vm) = o.vm.as_mut() {
        vm.disks.push(disk("csi-1", "pvc-123", false, 5));
    }
    let d = decide(&o);
    assert_eq!(d.action, Action::Wait(Requeue::After(Duration::from_secs(60))));
    let deleted = d.condition(types::MACHINE_DELETED).unwrap();
    assert_eq!(deleted.reason, reasons::VM_HAS_NON_SYSTEM_DISK);
    assert!(deleted.message.starts_with("VM has non system disk, cannot delete"));
    assert!(deleted.message.contains("system-disks"), "{}", deleted.message);
}

#[test]
fn without_annotation_a_never_started_vm_counts_all_disks_as_system() {
    let mut o = Observed {
        system_disks: None,
        ..deleting(with_vm("down", false))
    };
    if let Some(vm) = o.vm.as_mut() {
        vm.disks.push(disk("d2", "extra", false, 5));
    }
    assert_eq!(decide(&o).action, Action::Vm(VmAction::Delete { vm_id: VM_ID.into() }));
}

#[test]
fn down_or_unassigned_vm_is_deleted_without_stopping() {
    for status in ["down", "unassigned"] {
        let d = decide(&deleting(with_vm(status, true)));
        assert_eq!(
            d.action,
            Action::Vm(VmAction::Delete { vm_id: VM_ID.into() }),
            "{status}"
        );
    }
}

#[test]
fn image_locked_vm_waits_before_deletion() {
    let d = decide(&deleting(with_vm("image_locked", false)));
    assert_eq!(d.action, Action::Wait(Requeue::PollVm));
    assert_eq!(
        state_of(&d, types::MACHINE_DELETED),
        Some((State::False(Severity::Info), reasons::VM_LOCKED))
    );
}

#[test]
fn running_vm_is_force_stopped_before_deletion() {
    for status in [
        "up",
        "powering_up",
        "paused",
        "not_responding",
        "powering_down",
        "suspended",
    ] {
        let d = decide(&deleting(with_vm(status, true)));
        assert_eq!(
            d.action,
            Action::Vm(VmAction::StopForce { vm_id: VM_ID.into() }),
            "{status}"
        );
    }
}

/// The engine refuses stop and remove in these states: no stop is sent, the machine backs off (the VM watch wakes it
/// when the status changes) with a Warning that says what clears it.
#[test]
fn unknown_saving_or_restoring_vm_blocks_deletion_with_backoff() {
    for (status, hint) in [
        ("unknown", "lost contact"),
        ("saving_state", "suspended or resumed"),
        ("restoring_state", "suspended or resumed"),
    ] {
        let d = decide(&deleting(with_vm(status, true)));
        assert_eq!(d.action, Action::Wait(Requeue::Backoff), "{status}");
        let deleted = d.condition(types::MACHINE_DELETED).unwrap();
        assert_eq!(deleted.reason, reasons::VM_STATE_BLOCKS_DELETION, "{status}");
        assert_eq!(deleted.state, State::False(Severity::Warning), "{status}");
        assert!(deleted.message.contains(status), "{}", deleted.message);
        assert!(deleted.message.contains(hint), "{}", deleted.message);
    }
}

#[test]
fn a_vm_without_status_is_deleted_without_a_stop() {
    let d = decide(&deleting(with_vm(VmStatus::IMAGE_ILLEGAL, false)));
    assert_eq!(d.action, Action::Vm(VmAction::Delete { vm_id: VM_ID.into() }));
}

#[test]
fn vm_gone_after_delete_releases_the_machine() {
    let d = decide(&deleting(Observed { vm: None, ..running() }));
    assert_eq!(
        d.action,
        Action::Bookkeeping(BookkeepingAction::RemoveFinalizer { left_alone: None })
    );
}

/// Issue 23: `ovirt://..` (or any providerID without a UUID) was read as a listing of every VM, once per pass.
#[test]
fn deletion_with_a_provider_id_that_names_no_vm_id_releases_at_once_even_without_a_connection() {
    for provider_id in ["ovirt://..", "ovirt://.", "ovirt://1234", "vsphere://x"] {
        let o = Observed {
            provider_id: Some(provider_id.into()),
            vm: None,
            connection: ProviderConnection::Failed {
                failure: ConnectionFailure::EngineUnreachable,
                message: "down".into(),
                persisted_for: Duration::ZERO,
            },
            ..deleting(running())
        };
        assert!(crate::machine_steps::releasable_without_engine(&o), "{provider_id}");
        assert_eq!(
            decide(&o).action,
            Action::Bookkeeping(BookkeepingAction::RemoveFinalizer { left_alone: None }),
            "{provider_id}"
        );
    }
    let recorded = deleting(running());
    assert!(!crate::machine_steps::releasable_without_engine(&recorded));
    assert!(!crate::machine_steps::releasable_without_engine(&Observed {
        provider_id: Some("ovirt://..".into()),
        ..running()
    }));
}

/// Issue 23, item 9: a machine whose access was revoked after CAPOV created its VM, but before its disks were copied
/// and spec.providerID written, keeps its finalizer: releasing it would orphan the VM.
#[test]
fn deletion_without_access_waits_while_a_created_vm_is_recorded() {
    let refused = Observed {
        connection: ProviderConnection::Failed {
            failure: ConnectionFailure::NamespaceNotAllowed,
            message: "not allowed".into(),
            persisted_for: Duration::ZERO,
        },
        ..deleting(ready_to_create())
    };
    assert_eq!(
        decide(&refused).action,
        Action::Bookkeeping(BookkeepingAction::RemoveFinalizer { left_alone: None })
    );
    let with_created_vm = Observed {
        created_vm: Some(VM_ID.into()),
        ..refused
    };
    let d = decide(&with_created_vm);
    assert_eq!(d.action, Action::Wait(Requeue::Backoff));
    assert_eq!(
        state_of(&d, types::CAN_CONNECT_TO_OVIRT).map(|(_, reason)| reason),
        Some(reasons::NAMESPACE_NOT_ALLOWED)
    );
}

/// Issue 35: after `clusterctl move` onto a cluster whose OVirtProvider already existed, the VM's marker names this
/// very machine but the source management cluster. Releasing the machine would leave the VM running unnoticed: the
/// deletion waits and says how to adopt the VM or let it go.
fn moved_onto_an_existing_provider() -> Observed {
    let mut o = deleting(running());
    if let Some(vm) = o.vm.as_mut() {
        vm.ownership = Ownership::NotOwned(NotOwned::ThisObjectOtherManagementCluster);
        vm.foreign_management_cluster = Some("source-cluster".into());
    }
    o
}

#[test]
fn the_deletion_of_a_machine_whose_vm_another_management_cluster_marked_waits_and_says_what_to_do() {
    let d = decide(&moved_onto_an_existing_provider());
    assert_eq!(d.action, Action::Wait(Requeue::OnChange));
    assert_eq!(
        state_of(&d, types::MACHINE_DELETED),
        Some((
            State::False(Severity::Warning),
            reasons::VM_OF_ANOTHER_MANAGEMENT_CLUSTER
        ))
    );
    let message = &d
        .conditions
        .iter()
        .find(|c| c.type_ == types::MACHINE_DELETED)
        .expect("MachineDeleted")
        .message;
    for says in [
        "\"source-cluster\"",
        "kubectl annotate ovirtprovider ovirt-prod capov.infrastructure.cluster.x-k8s.io/management-cluster=mgmt-1,source-cluster --overwrite",
        "kubectl annotate ovirtmachine -n default worker-abc123 capov.infrastructure.cluster.x-k8s.io/release-vm=true",
    ] {
        assert!(message.contains(says), "{says} not in: {message}");
    }
}

#[test]
fn the_release_vm_annotation_lets_such_a_machine_go_and_leaves_its_vm() {
    let d = decide(&Observed {
        release_vm_requested: true,
        ..moved_onto_an_existing_provider()
    });
    assert!(
        matches!(&d.action, Action::Bookkeeping(BookkeepingAction::RemoveFinalizer { left_alone: Some(note) }) if note.contains("another management cluster")),
        "{:?}",
        d.action
    );
}

/// Issue 35: right after a restart the IPAddressClaims may not be listed yet; a deletion that saw none would remove
/// its finalizer and leave its claims holding their addresses for ever.
#[test]
fn a_deletion_keeps_its_finalizer_until_the_claims_are_listed() {
    let gone = deleting(ready_to_create());
    assert_eq!(
        decide(&gone).action,
        Action::Bookkeeping(BookkeepingAction::RemoveFinalizer { left_alone: None })
    );
    let d = decide(&Observed {
        ip_claims_known: false,
        ..gone
    });
    assert_eq!(d.action, Action::Wait(Requeue::Backoff));
    assert_eq!(
        state_of(&d, types::MACHINE_DELETED),
        Some((State::False(Severity::Info), reasons::WAITING_FOR_IP_CLAIMS))
    );
}

/// A created VM (no providerID yet) recorded on another engine than the provider now reaches holds the deletion as
/// a recorded providerID's would: "not found" there would not mean gone.
#[test]
fn a_deletion_with_a_created_vm_recorded_on_another_engine_waits() {
    let d = decide(&deleting(Observed {
        created_vm: Some(VM_ID.into()),
        recorded_engine: Some("admin@internal at https://old-engine.example.com/ovirt-engine/api".into()),
        ..ready_to_create()
    }));
    assert_eq!(d.action, Action::Wait(Requeue::OnChange));
    assert_eq!(
        state_of(&d, types::MACHINE_DELETED),
        Some((State::False(Severity::Error), reasons::ENGINE_CHANGED))
    );
}
