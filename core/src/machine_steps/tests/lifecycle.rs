//! The whole way through: every step in SPEC order, from nothing to a running machine and back.

use super::fixtures::{VM_ID, ready_to_create, running, vm, wants_disk_gb};
use crate::conditions::State;
use crate::machine_steps::{
    Action, BookkeepingAction, Bootstrap, BootstrapFormat, Fact, NodeObservation, Observed, ObservedVm, PrepareAction,
    Requeue, VmAction, WorkloadAction, decide,
};
use crate::policy::feature_gates::FeatureGates;

#[test]
fn fully_set_up_machine_is_done_with_every_step_true() {
    let d = decide(&running());
    assert_eq!(d.action, Action::Done(Requeue::Steady));
    for type_ in crate::conditions::MACHINE_READY_INPUTS {
        assert_eq!(d.condition(type_).map(|c| c.state), Some(State::True), "{type_}");
    }
}

/// Feeds each decision's expected outcome back as the next observation, from nothing to a running machine and
/// back to nothing, and checks that the actions come in SPEC order.
#[test]
fn happy_path_walks_through_every_step_in_order() {
    let gates = FeatureGates {
        disk_add_vm_name: true,
        ..FeatureGates::default()
    };
    let mut o = wants_disk_gb(
        40,
        Observed {
            has_finalizer: false,
            bootstrap: Bootstrap::NotReady,
            gates,
            ..ready_to_create()
        },
    );
    let mut seen = Vec::new();
    for _ in 0..30 {
        let d = decide(&o);
        // The action's own name: inside its family (`Vm(Start { .. })` is "Start"), or the wait family's.
        let debug = format!("{:?}", d.action);
        let mut names = debug.split(['(', ')', ' ', '{']);
        let first = names.next().unwrap_or_default();
        let label = match first {
            "Vm" | "Prepare" | "Bookkeeping" | "Groups" | "Workload" | "Read" => names.next().unwrap_or_default(),
            _ => first,
        }
        .to_string();
        seen.push(label);
        match d.action {
            Action::Bookkeeping(BookkeepingAction::AddFinalizer) => o.has_finalizer = true,
            Action::Wait(_) if o.bootstrap == Bootstrap::NotReady => {
                o.bootstrap = Bootstrap::Ready(BootstrapFormat::CloudConfig)
            }
            Action::Vm(VmAction::Create(_)) => {
                o.vm = Some(ObservedVm {
                    status: "image_locked".into(),
                    ..vm("image_locked", false)
                });
                o.provider_id = Some(format!("ovirt://{VM_ID}"));
            }
            Action::Wait(Requeue::PollVm) if o.vm.as_ref().is_some_and(|v| v.status == "image_locked") => {
                o.vm.as_mut().unwrap().status = "down".into()
            }
            Action::Bookkeeping(BookkeepingAction::RecordSystemDisks(ids)) => o.system_disks = Some(ids),
            Action::Prepare(PrepareAction::ResizeDisk { size_bytes, .. }) => {
                o.vm.as_mut().unwrap().disks[0].provisioned_size = size_bytes
            }
            Action::Prepare(PrepareAction::RenameDiskAlias { new_alias, .. }) => {
                o.vm.as_mut().unwrap().disks[0].alias = new_alias
            }
            Action::Vm(VmAction::Start { .. }) => {
                let v = o.vm.as_mut().unwrap();
                v.status = "powering_up".into();
                v.ever_started = true;
            }
            Action::Wait(Requeue::PollVm) => o.vm.as_mut().unwrap().status = "up".into(),
            Action::Wait(Requeue::AwaitNode) if matches!(o.node, Fact::Read(NodeObservation::NotFound)) => {
                assert!(d.status.mark_provisioned);
                o.provisioned = true;
                o.node = Fact::Read(NodeObservation::Found {
                    name: o.name.clone(),
                    provider_id: None,
                    labels: Default::default(),
                });
            }
            Action::Workload(WorkloadAction::SetNodeProviderId {
                provider_id,
                node_name,
                labels,
            }) => {
                o.node = Fact::Read(NodeObservation::Found {
                    name: node_name,
                    provider_id: Some(provider_id),
                    labels,
                })
            }
            Action::Workload(WorkloadAction::SetNodeLabels { labels, .. }) => {
                if let Fact::Read(NodeObservation::Found { labels: on_node, .. }) = &mut o.node {
                    on_node.extend(labels);
                }
            }
            Action::Done(_) if !o.deletion_requested => o.deletion_requested = true,
            Action::Vm(VmAction::StopForce { .. }) => o.vm.as_mut().unwrap().status = "down".into(),
            Action::Vm(VmAction::Delete { .. }) => o.vm = None,
            Action::Bookkeeping(BookkeepingAction::RemoveFinalizer { .. }) => break,
            other => panic!("unexpected {other:?} after {seen:?}"),
        }
    }
    assert_eq!(
        seen,
        [
            "AddFinalizer",
            "Wait",
            "Create",
            "Wait",
            "RecordSystemDisks",
            "ResizeDisk",
            "RenameDiskAlias",
            "Start",
            "Wait",
            "Wait",
            "SetNodeProviderId",
            "Done",
            "StopForce",
            "Delete",
            "RemoveFinalizer"
        ]
    );
}
