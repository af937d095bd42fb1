//! What the actor needs to know about an action: whether it runs without a reconcile permit and whether it
//! changes the VM in the engine ([`crate::machine_steps::Action`]).

use super::fixtures::{VM_ID, engine};
use crate::machine_steps::{Action, BookkeepingAction, PrepareAction, ReadRequest, Requeue, VmAction, WorkloadAction};

#[test]
fn only_workload_and_waiting_actions_run_without_a_permit() {
    let node = Action::Workload(WorkloadAction::SetNodeProviderId {
        node_name: "n".into(),
        provider_id: "ovirt://x".into(),
        labels: Default::default(),
    });
    for action in [
        Action::Read(ReadRequest::Node),
        Action::Read(ReadRequest::NodeRelease),
        node,
        Action::Wait(Requeue::Backoff),
        Action::Done(Requeue::Steady),
    ] {
        assert!(!action.needs_permit(), "{action:?}");
    }
    for action in [
        Action::Bookkeeping(BookkeepingAction::AddFinalizer),
        Action::Vm(VmAction::Start { use_ignition: false }),
        Action::Vm(VmAction::Delete { vm_id: VM_ID.into() }),
        Action::Vm(VmAction::DetachDisks {
            vm_id: VM_ID.into(),
            disks: vec![],
        }),
        Action::Bookkeeping(BookkeepingAction::RecordEngine(engine().annotation())),
    ] {
        assert!(action.needs_permit(), "{action:?}");
    }
}

#[test]
fn what_was_seen_of_a_vm_is_dropped_after_every_engine_write_and_only_then() {
    for action in [
        Action::Vm(VmAction::Start { use_ignition: false }),
        Action::Vm(VmAction::StopForce { vm_id: VM_ID.into() }),
        Action::Vm(VmAction::Delete { vm_id: VM_ID.into() }),
        Action::Vm(VmAction::DetachDisks {
            vm_id: VM_ID.into(),
            disks: vec![],
        }),
        Action::Prepare(PrepareAction::ResizeDisk {
            attachment_id: "a".into(),
            disk_id: "d".into(),
            size_bytes: 1,
        }),
        Action::Prepare(PrepareAction::RenameDiskAlias {
            disk_id: "d".into(),
            new_alias: "x".into(),
        }),
        Action::Prepare(PrepareAction::SyncNics(vec![])),
        Action::Vm(VmAction::UpgradeMarker {
            vm_id: VM_ID.into(),
            description: "m".into(),
        }),
    ] {
        assert!(action.writes_engine(), "{action:?}");
    }
    for action in [
        Action::Bookkeeping(BookkeepingAction::AddFinalizer),
        Action::Bookkeeping(BookkeepingAction::WriteProviderId {
            provider_id: format!("ovirt://{VM_ID}"),
            system_disks: None,
        }),
        Action::Bookkeeping(BookkeepingAction::RecordEngine(engine().annotation())),
        Action::Bookkeeping(BookkeepingAction::RecordSystemDisks(vec!["d".into()])),
        Action::Read(ReadRequest::Node),
        Action::Read(ReadRequest::NodeRelease),
        Action::Wait(Requeue::PollVm),
        Action::Done(Requeue::Steady),
    ] {
        assert!(!action.writes_engine(), "{action:?}");
    }
}
