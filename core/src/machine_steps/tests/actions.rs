//! What the actor needs to know about an action: whether it runs without a reconcile permit and whether it
//! changes the VM in the engine ([`crate::machine_steps::Action`]).

use super::fixtures::{VM_ID, engine};
use crate::machine_steps::{Action, Requeue};

#[test]
fn only_workload_and_waiting_actions_run_without_a_permit() {
    let node = Action::SetNodeProviderId {
        node_name: "n".into(),
        provider_id: "ovirt://x".into(),
    };
    for action in [
        Action::ReadNode,
        Action::ReadNodeRelease,
        node,
        Action::Wait(Requeue::Backoff),
        Action::Done(Requeue::Steady),
    ] {
        assert!(!action.needs_permit(), "{action:?}");
    }
    for action in [
        Action::AddFinalizer,
        Action::StartVm { use_ignition: false },
        Action::DeleteVm { vm_id: VM_ID.into() },
        Action::DetachDisks {
            vm_id: VM_ID.into(),
            disks: vec![],
        },
        Action::RecordEngine(engine().annotation()),
    ] {
        assert!(action.needs_permit(), "{action:?}");
    }
}

#[test]
fn what_was_seen_of_a_vm_is_dropped_after_every_engine_write_and_only_then() {
    for action in [
        Action::StartVm { use_ignition: false },
        Action::StopVmForce { vm_id: VM_ID.into() },
        Action::DeleteVm { vm_id: VM_ID.into() },
        Action::DetachDisks {
            vm_id: VM_ID.into(),
            disks: vec![],
        },
        Action::ResizeDisk {
            attachment_id: "a".into(),
            disk_id: "d".into(),
            size_bytes: 1,
        },
        Action::RenameDiskAlias {
            disk_id: "d".into(),
            new_alias: "x".into(),
        },
        Action::SyncNics(vec![]),
        Action::UpgradeMarker {
            vm_id: VM_ID.into(),
            description: "m".into(),
        },
    ] {
        assert!(action.writes_engine(), "{action:?}");
    }
    for action in [
        Action::AddFinalizer,
        Action::WriteProviderId(format!("ovirt://{VM_ID}")),
        Action::RecordEngine(engine().annotation()),
        Action::RecordSystemDisks(vec!["d".into()]),
        Action::ReadNode,
        Action::ReadNodeRelease,
        Action::Wait(Requeue::PollVm),
        Action::Done(Requeue::Steady),
    ] {
        assert!(!action.writes_engine(), "{action:?}");
    }
}
