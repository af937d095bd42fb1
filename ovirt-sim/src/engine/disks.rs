//! Disk updates (alias, extend) and extra data disks.

use capov_ovirt::model::{self, DiskStatus, VmStatus};

use super::*;
use crate::ids::new_id;
use crate::state::*;

/// `PUT /disks/{id}` or `PUT /vms/{vm}/diskattachments/{id}`: alias and size.
pub fn update_disk(
    state: &mut State,
    timings: &Timings,
    disk_id: &str,
    update: &model::Disk,
) -> EngineResult<Vec<Scheduled>> {
    let vm_locked = {
        let disk = state.disks.get(disk_id).ok_or(EngineError::NotFound)?;
        disk.vm_id
            .as_ref()
            .and_then(|vm| state.vms.get(vm))
            .is_some_and(|vm| vm.status == VmStatus::ImageLocked)
    };
    let disk = state.disks.get_mut(disk_id).ok_or(EngineError::NotFound)?;
    if vm_locked || disk.status == DiskStatus::Locked {
        return Err(operation_failed(
            409,
            "Cannot edit Virtual Disk: Disk is locked. Please try again in a few minutes.",
        ));
    }
    if let Some(size) = update.provisioned_size
        && size < disk.provisioned_size
    {
        return Err(operation_failed(
            400,
            "Cannot edit Virtual Disk. New disk size must be larger than the current disk size.",
        ));
    }
    if let Some(alias) = &update.alias {
        disk.alias = alias.clone();
    }
    if let Some(description) = &update.description {
        disk.description = description.clone();
    }
    match update.provisioned_size {
        Some(size) if size > disk.provisioned_size => {
            // The extend job locks the disk; the new size shows when it finishes.
            disk.generation += 1;
            disk.status = DiskStatus::Locked;
            disk.pending_size = Some(size);
            Ok(vec![later(
                timings.disk_operation_ms,
                disk_id,
                disk.generation,
                Transition::DiskJobDone,
            )])
        }
        _ => Ok(Vec::new()),
    }
}

/// Control: attach a new data disk (not from the template) to a VM.
pub fn attach_extra_disk(state: &mut State, vm_id: &str, alias: &str, size_bytes: u64) -> EngineResult<String> {
    let storage_domain_id = {
        let vm = state.vms.get(vm_id).ok_or(EngineError::NotFound)?;
        vm.disk_ids
            .first()
            .and_then(|d| state.disks.get(d))
            .and_then(|d| d.storage_domain_ids.first().cloned())
            .or_else(|| state.storage_domains.keys().next().cloned())
            .unwrap_or_default()
    };
    let disk_id = new_id();
    state.disks.insert(
        disk_id.clone(),
        DiskRecord {
            id: disk_id.clone(),
            alias: alias.to_string(),
            description: String::new(),
            provisioned_size: size_bytes,
            actual_size: 0,
            status: DiskStatus::Ok,
            format: "cow".into(),
            sparse: true,
            storage_domain_ids: vec![storage_domain_id],
            image_id: new_id(),
            vm_id: Some(vm_id.to_string()),
            bootable: false,
            interface: "virtio_scsi".into(),
            active: true,
            generation: 0,
            pending_size: None,
            disk_profile_id: None,
        },
    );
    vm_mut(state, vm_id)?.disk_ids.push(disk_id.clone());
    Ok(disk_id)
}

/// `DELETE /vms/{vm}/diskattachments/{disk}`: detaches the disk (kept as a floating disk, the
/// engine's default `detach_only=true`), or removes it with `detach_only=false`.
pub fn detach_disk(state: &mut State, vm_id: &str, disk_id: &str, remove: bool) -> EngineResult<()> {
    let vm = state.vms.get(vm_id).ok_or(EngineError::NotFound)?;
    if !vm.disk_ids.iter().any(|d| d == disk_id) {
        return Err(EngineError::NotFound);
    }
    let running = is_running(&vm.status);
    let locked =
        vm.status == VmStatus::ImageLocked || state.disks.get(disk_id).is_some_and(|d| d.status == DiskStatus::Locked);
    if locked {
        return Err(operation_failed(
            409,
            "Cannot detach Virtual Disk: Disk is locked. Please try again in a few minutes.",
        ));
    }
    let bootable = state.disks.get(disk_id).is_some_and(|d| d.bootable);
    if running && bootable {
        return Err(operation_failed(
            409,
            "Cannot detach Virtual Disk. The disk is bootable and the VM is running.",
        ));
    }
    vm_mut(state, vm_id)?.disk_ids.retain(|d| d != disk_id);
    if remove {
        state.disks.remove(disk_id);
    } else if let Some(disk) = state.disks.get_mut(disk_id) {
        disk.vm_id = None;
    }
    Ok(())
}
