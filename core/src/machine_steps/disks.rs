//! SPEC §2 step 4, `MachineDiskResized`, only while the VM was never started: the bootable disk grows to
//! spec.osdisksizegb (never shrinks), then disk aliases are renamed per the feature gates (§3).

use super::action::{Action, PrepareAction, Requeue};
use capov_crds::Severity;

use super::decision::Decision;
use super::observed::{Observed, ObservedVm};
use super::passed::Passed;
use crate::conditions::{ConditionUpdate, reasons, types};
use crate::naming::disk_alias::{DiskAliasFact, alias_changes};

const GIB: u64 = 1 << 30;

/// Step 4: grow the bootable disk, never shrink it, then rename aliases per the gates. Ok = step done.
pub(super) fn check(o: &Observed, vm: &ObservedVm, passed: &mut Passed) -> Result<(), Box<Decision>> {
    let false_ = |reason, severity, message: String| {
        ConditionUpdate::false_(types::MACHINE_DISK_RESIZED, reason, severity, message)
    };
    if let Some(gb) = o.settings.osdisksizegb {
        let Some(target) = u64::try_from(gb)
            .ok()
            .filter(|gb| *gb >= 1)
            .and_then(|gb| gb.checked_mul(GIB))
        else {
            let message = format!("spec.osdisksizegb {gb} is not a valid size in GiB");
            return Err(Box::new(passed.take().wait(
                Requeue::OnChange,
                false_(reasons::INVALID_DISK_SIZE, Severity::Error, message),
            )));
        };
        let Some(boot) = vm.disks.iter().find(|d| d.bootable) else {
            let message = "the VM has no bootable disk to resize".to_string();
            return Err(Box::new(passed.take().wait(
                Requeue::OnChange,
                false_(reasons::NO_BOOTABLE_DISK, Severity::Error, message),
            )));
        };
        if boot.status != "ok" {
            let message = format!("waiting for the bootable disk (status {})", boot.status);
            return Err(Box::new(passed.take().wait(
                Requeue::PollVm,
                false_(reasons::WAITING_FOR_DISK_RESIZE, Severity::Info, message),
            )));
        }
        if target < boot.provisioned_size {
            let message = format!(
                "spec.osdisksizegb is {gb} GiB but the bootable disk already has {} bytes ({:.1} GiB); disks are \
                 never shrunk: set osdisksizegb to at least the template disk's size",
                boot.provisioned_size,
                boot.provisioned_size as f64 / GIB as f64
            );
            return Err(Box::new(passed.take().wait(
                Requeue::OnChange,
                false_(reasons::DISK_SHRINK_NOT_ALLOWED, Severity::Error, message),
            )));
        }
        if target > boot.provisioned_size {
            let message = format!("growing the bootable disk to {gb} GiB");
            return Err(Box::new(passed.take().stop(
                Action::Prepare(PrepareAction::ResizeDisk {
                    attachment_id: boot.attachment_id.clone(),
                    disk_id: boot.disk_id.clone(),
                    size_bytes: target,
                }),
                Some(false_(reasons::WAITING_FOR_DISK_RESIZE, Severity::Info, message)),
            )));
        }
    }
    let disks: Vec<DiskAliasFact> = vm
        .disks
        .iter()
        .map(|d| DiskAliasFact {
            disk_id: d.disk_id.clone(),
            alias: d.alias.clone(),
            bootable: d.bootable,
        })
        .collect();
    if let Some(change) = alias_changes(&o.vm_name(), &disks, &o.gates).into_iter().next() {
        return Err(Box::new(passed.take().stop(
            Action::Prepare(PrepareAction::RenameDiskAlias {
                disk_id: change.disk_id,
                new_alias: change.new_alias,
            }),
            None,
        )));
    }
    passed.pass(types::MACHINE_DISK_RESIZED, reasons::DISKS_READY);
    Ok(())
}
