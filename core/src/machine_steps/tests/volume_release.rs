//! Deletion of a VM with disks CAPOV did not create under the gate `disk-detach-when-node-gone`
//! ([`crate::machine_steps::volume_release`]): every answer of the workload cluster, the VM's states once the Node is
//! released, the disks that are and are not detached, and the gate off.

use crate::machine_steps::{
    Action, BookkeepingAction, Decision, Fact, FoundBy, NodeRelease, Observed, ReadRequest, Requeue, VmAction, VmDisk,
    decide,
};
use std::time::Duration;

use capov_crds::Severity;
use capov_ovirt_model::model::VmStatus;

use super::fixtures::{VM_ID, deleting, disk, running, with_vm};
use crate::conditions::{ConditionUpdate, State, reasons, types};
use crate::policy::feature_gates::FeatureGates;
use crate::trust::identity::{NotOwned, Ownership};

const MINUTE: Duration = Duration::from_secs(60);
const CSI: &str = "csi-1";

fn gate_on() -> FeatureGates {
    FeatureGates {
        disk_detach_when_node_gone: true,
        ..FeatureGates::default()
    }
}

fn csi_disk() -> VmDisk {
    disk(CSI, "pvc-123", false, 5)
}

/// A running machine being deleted whose VM carries the CSI disk `csi-1` besides its recorded system disk, the gate
/// on, the workload cluster answering `release`.
fn releasing(status: &str, release: Fact<NodeRelease>) -> Observed {
    let mut o = deleting(Observed {
        gates: gate_on(),
        node_release: release,
        ..running()
    });
    if let Some(vm) = o.vm.as_mut() {
        vm.status = status.into();
        vm.disks.push(csi_disk());
    }
    o
}

fn released() -> Fact<NodeRelease> {
    Fact::Read(NodeRelease::Released {
        node: "worker-abc123".into(),
    })
}

fn deleted(d: &Decision) -> &ConditionUpdate {
    d.condition(types::MACHINE_DELETED).expect("MachineDeleted")
}

#[test]
fn with_the_gate_off_deletion_waits_as_the_documents_say_and_never_asks_the_workload_cluster() {
    let mut o = releasing("up", Fact::NotRead);
    o.gates = FeatureGates::default();
    for release in [Fact::NotRead, released()] {
        o.node_release = release;
        let d = decide(&o);
        assert_eq!(d.action, Action::Wait(Requeue::After(MINUTE)));
        assert_eq!(deleted(&d).reason, reasons::VM_HAS_NON_SYSTEM_DISK);
        assert_eq!(deleted(&d).message, "VM has non system disk, cannot delete");
    }
}

#[test]
fn with_the_gate_on_the_workload_cluster_is_read_only_when_a_disk_is_not_capovs() {
    let d = decide(&releasing("up", Fact::NotRead));
    assert_eq!(d.action, Action::Read(ReadRequest::NodeRelease));
    assert!(!d.action.needs_permit(), "workload I/O runs without a reconcile permit");
    // Only CAPOV's own disks: deleted with the VM as before, nothing to ask.
    let own = deleting(Observed {
        gates: gate_on(),
        ..running()
    });
    assert_eq!(
        decide(&own).action,
        Action::Vm(VmAction::StopForce { vm_id: VM_ID.into() })
    );
    let own_down = deleting(Observed {
        gates: gate_on(),
        ..with_vm("down", true)
    });
    assert_eq!(
        decide(&own_down).action,
        Action::Vm(VmAction::Delete { vm_id: VM_ID.into() })
    );
}

#[test]
fn while_the_node_exists_deletion_waits_every_minute_and_names_the_node_and_the_disks() {
    let d = decide(&releasing(
        "up",
        Fact::Read(NodeRelease::NodeExists {
            name: "worker-abc123".into(),
        }),
    ));
    assert_eq!(d.action, Action::Wait(Requeue::After(MINUTE)));
    let c = deleted(&d);
    assert_eq!(c.reason, reasons::VM_HAS_NON_SYSTEM_DISK);
    assert_eq!(c.state, State::False(Severity::Warning));
    assert!(
        c.message
            .starts_with("VM has non system disk, cannot delete: disks csi-1 "),
        "{}",
        c.message
    );
    assert!(
        c.message.contains("while the Node \"worker-abc123\" exists"),
        "{}",
        c.message
    );
    assert!(c.message.contains("not deleted"), "{}", c.message);
}

#[test]
fn while_a_volume_attachment_names_the_node_deletion_waits_and_names_it() {
    let one = NodeRelease::VolumeAttachments {
        node: "worker-node".into(),
        names: vec!["csi-va-1".into()],
        total: 1,
    };
    let d = decide(&releasing("up", Fact::Read(one)));
    assert_eq!(d.action, Action::Wait(Requeue::After(MINUTE)));
    let c = deleted(&d);
    assert_eq!(c.reason, reasons::VM_HAS_NON_SYSTEM_DISK);
    assert!(
        c.message
            .contains("the VolumeAttachment \"csi-va-1\" in the workload cluster still names the Node \"worker-node\""),
        "{}",
        c.message
    );
    let many = NodeRelease::VolumeAttachments {
        node: "worker-node".into(),
        names: vec!["a".into(), "b".into(), "c".into()],
        total: 7,
    };
    let c = decide(&releasing("down", Fact::Read(many))).conditions.clone();
    let message = &c
        .iter()
        .find(|c| c.type_ == types::MACHINE_DELETED)
        .expect("condition")
        .message;
    assert!(
        message.contains("the VolumeAttachments \"a\", \"b\", \"c\" and 4 more in the workload cluster still name"),
        "{message}"
    );
}

#[test]
fn an_unreachable_workload_cluster_keeps_the_disks_attached_and_says_why() {
    let d = decide(&releasing(
        "up",
        Fact::Read(NodeRelease::Unreachable {
            message: "cannot read the workload cluster's Nodes: connection refused".into(),
        }),
    ));
    assert_eq!(
        d.action,
        Action::Wait(Requeue::Backoff),
        "nothing is stopped or detached"
    );
    let c = deleted(&d);
    assert_eq!(c.reason, reasons::WORKLOAD_CLUSTER_UNREACHABLE);
    assert_eq!(c.state, State::False(Severity::Warning));
    assert!(
        c.message.contains("csi-1") && c.message.ends_with("connection refused"),
        "{}",
        c.message
    );
}

#[test]
fn a_rejected_workload_kubeconfig_keeps_the_disks_attached_and_says_why() {
    let d = decide(&releasing(
        "down",
        Fact::Read(NodeRelease::Rejected {
            message: "field exec is refused".into(),
        }),
    ));
    assert_eq!(d.action, Action::Wait(Requeue::Backoff));
    let c = deleted(&d);
    assert_eq!(c.reason, reasons::WORKLOAD_KUBECONFIG_REJECTED);
    assert_eq!(c.state, State::False(Severity::Error));
    assert!(c.message.contains("field exec is refused"), "{}", c.message);
}

#[test]
fn once_the_node_is_released_a_running_vm_is_powered_off_first() {
    for status in [
        "up",
        "powering_up",
        "migrating",
        "not_responding",
        "paused",
        "powering_down",
    ] {
        let d = decide(&releasing(status, released()));
        assert_eq!(
            d.action,
            Action::Vm(VmAction::StopForce { vm_id: VM_ID.into() }),
            "{status}"
        );
        let c = deleted(&d);
        assert_eq!(c.reason, reasons::VM_STOPPING);
        assert!(c.message.contains("to detach disks csi-1"), "{}", c.message);
    }
}

#[test]
fn a_down_vm_gets_only_the_disks_capov_did_not_create_detached() {
    let mut o = releasing("down", released());
    let second = disk("csi-2", "pvc-456", false, 1);
    if let Some(vm) = o.vm.as_mut() {
        vm.disks.push(second.clone());
    }
    let d = decide(&o);
    assert_eq!(
        d.action,
        Action::Vm(VmAction::DetachDisks {
            vm_id: VM_ID.into(),
            disks: vec![csi_disk(), second],
        }),
        "the recorded system disk d-boot is not among them"
    );
    let c = deleted(&d);
    assert_eq!(c.reason, reasons::DETACHING_VOLUMES);
    assert_eq!(c.state, State::False(Severity::Info));
    assert!(c.message.contains("detaching disks csi-1, csi-2"), "{}", c.message);
    assert!(c.message.contains("not deleted"), "{}", c.message);
    assert!(d.action.writes_engine());
}

#[test]
fn without_the_system_disks_annotation_every_disk_but_the_bootable_one_is_detached() {
    let mut o = releasing("down", released());
    o.system_disks = None;
    let d = decide(&o);
    assert_eq!(
        d.action,
        Action::Vm(VmAction::DetachDisks {
            vm_id: VM_ID.into(),
            disks: vec![csi_disk()],
        })
    );
}

#[test]
fn after_the_detach_the_vm_is_deleted_with_its_own_disks_and_the_conditions_name_the_detached_ones() {
    let mut o = deleting(Observed {
        gates: gate_on(),
        node_release: released(),
        detached_disks: vec![CSI.into()],
        ..with_vm("down", true)
    });
    let d = decide(&o);
    assert_eq!(d.action, Action::Vm(VmAction::Delete { vm_id: VM_ID.into() }));
    let c = deleted(&d);
    assert_eq!(c.reason, reasons::VM_DELETING);
    assert_eq!(
        c.message,
        "deleting the VM; detached from the VM and kept on their storage domains: disks csi-1"
    );
    o.vm = None;
    assert_eq!(
        decide(&o).action,
        Action::Bookkeeping(BookkeepingAction::RemoveFinalizer { left_alone: None })
    );
}

#[test]
fn a_vm_the_engine_will_not_detach_from_waits() {
    for status in [
        "image_locked",
        "unknown",
        "saving_state",
        VmStatus::IMAGE_ILLEGAL,
        "unassigned",
    ] {
        let d = decide(&releasing(status, released()));
        assert!(matches!(d.action, Action::Wait(_)), "{status}: {:?}", d.action);
        let reason = deleted(&d).reason;
        let expected = if status == "image_locked" {
            reasons::VM_LOCKED
        } else {
            reasons::VM_STATE_BLOCKS_DELETION
        };
        assert_eq!(reason, expected, "{status}");
    }
    let d = decide(&releasing(VmStatus::IMAGE_ILLEGAL, released()));
    assert!(
        deleted(&d).message.contains("detach disks csi-1 in oVirt"),
        "{}",
        deleted(&d).message
    );
}

#[test]
fn a_vm_that_is_not_this_objects_is_never_detached_from() {
    let mut o = releasing("down", released());
    if let Some(vm) = o.vm.as_mut() {
        vm.ownership = Ownership::NotOwned(NotOwned::NoMarker);
    }
    assert!(matches!(
        decide(&o).action,
        Action::Bookkeeping(BookkeepingAction::RemoveFinalizer { left_alone: Some(_) })
    ));
    if let Some(vm) = o.vm.as_mut() {
        vm.ownership = Ownership::Legacy;
        vm.found_by = FoundBy::Name;
    }
    assert!(matches!(
        decide(&o).action,
        Action::Bookkeeping(BookkeepingAction::RemoveFinalizer { left_alone: Some(_) })
    ));
}
