//! Step 4, MachineDiskResized ([`crate::machine_steps::disks`]).

use crate::machine_steps::{Action, Observed, PrepareAction, Requeue, VmAction, decide};
use capov_crds::Severity;

use super::fixtures::{GIB, state_of, wants_disk_gb, with_vm};
use crate::conditions::{State, reasons, types};
use crate::policy::feature_gates::FeatureGates;

#[test]
fn smaller_bootable_disk_is_resized_to_osdisksizegb() {
    let d = decide(&wants_disk_gb(40, with_vm("down", false)));
    assert_eq!(
        d.action,
        Action::Prepare(PrepareAction::ResizeDisk {
            attachment_id: "att-d-boot".into(),
            disk_id: "d-boot".into(),
            size_bytes: 40 * GIB
        })
    );
    assert_eq!(
        state_of(&d, types::MACHINE_DISK_RESIZED),
        Some((State::False(Severity::Info), reasons::WAITING_FOR_DISK_RESIZE))
    );
}

#[test]
fn locked_disk_waits_for_resize_and_polls() {
    let mut o = wants_disk_gb(40, with_vm("down", false));
    if let Some(vm) = o.vm.as_mut() {
        vm.disks[0].status = "locked".into();
    }
    let d = decide(&o);
    assert_eq!(d.action, Action::Wait(Requeue::PollVm));
    assert_eq!(
        state_of(&d, types::MACHINE_DISK_RESIZED),
        Some((State::False(Severity::Info), reasons::WAITING_FOR_DISK_RESIZE))
    );
}

#[test]
fn shrink_is_not_allowed_and_not_retried_until_the_spec_changes() {
    let d = decide(&wants_disk_gb(10, with_vm("down", false)));
    assert_eq!(d.action, Action::Wait(Requeue::OnChange));
    assert_eq!(
        state_of(&d, types::MACHINE_DISK_RESIZED),
        Some((State::False(Severity::Error), reasons::DISK_SHRINK_NOT_ALLOWED))
    );
}

#[test]
fn disk_of_exactly_the_requested_size_is_done() {
    let d = decide(&wants_disk_gb(20, with_vm("down", false)));
    assert_eq!(
        state_of(&d, types::MACHINE_DISK_RESIZED),
        Some((State::True, reasons::DISKS_READY))
    );
    assert!(matches!(d.action, Action::Vm(VmAction::Start { .. })));
}

#[test]
fn vm_without_bootable_disk_cannot_be_resized() {
    let mut o = wants_disk_gb(40, with_vm("down", false));
    if let Some(vm) = o.vm.as_mut() {
        vm.disks[0].bootable = false;
    }
    let d = decide(&o);
    assert_eq!(
        state_of(&d, types::MACHINE_DISK_RESIZED),
        Some((State::False(Severity::Error), reasons::NO_BOOTABLE_DISK))
    );
}

#[test]
fn absurd_disk_size_is_invalid_not_a_panic() {
    let d = decide(&wants_disk_gb(i64::MAX, with_vm("down", false)));
    assert_eq!(
        state_of(&d, types::MACHINE_DISK_RESIZED),
        Some((State::False(Severity::Error), reasons::INVALID_DISK_SIZE))
    );
}

#[test]
fn disk_aliases_are_renamed_per_gates_after_resizing() {
    let gates = FeatureGates {
        disk_add_vm_name: true,
        ..FeatureGates::default()
    };
    let d = decide(&Observed {
        gates,
        ..with_vm("down", false)
    });
    assert_eq!(
        d.action,
        Action::Prepare(PrepareAction::RenameDiskAlias {
            disk_id: "d-boot".into(),
            new_alias: "rhcos-4.14_worker-abc123_Disk1".into()
        })
    );
    let resize_first = decide(&wants_disk_gb(
        40,
        Observed {
            gates,
            ..with_vm("down", false)
        },
    ));
    assert!(matches!(
        resize_first.action,
        Action::Prepare(PrepareAction::ResizeDisk { .. })
    ));
}

#[test]
fn disks_are_not_touched_once_the_vm_was_started() {
    let d = decide(&wants_disk_gb(
        40,
        Observed {
            gates: FeatureGates {
                disk_add_vm_name: true,
                ..FeatureGates::default()
            },
            ..with_vm("down", true)
        },
    ));
    assert_eq!(d.action, Action::Wait(Requeue::Backoff));
    assert_eq!(
        state_of(&d, types::MACHINE_ON),
        Some((State::False(Severity::Warning), reasons::VM_DOWN))
    );
}
