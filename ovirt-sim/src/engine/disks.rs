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

/// `DELETE /vms/{vm}/diskattachments/{disk}`: detaches the disk (kept as a floating disk on its storage domains, the
/// engine's default `detach_only=true`: `DetachDiskFromVmCommand`), or removes it with `detach_only=false`.
///
/// The detach follows `DetachDiskFromVmCommand.validate`, in its order and with its texts: only a VM that is up or
/// down (`ACTION_TYPE_FAILED_VM_STATUS_ILLEGAL`, 409); the disk attached to this VM
/// (`ACTION_TYPE_FAILED_CANNOT_DETACH_DISK_IS_NOT_ATTACHED_TO_VM`, 400); a disk plugged into a VM that is not down
/// is hot-unplugged, which IDE and sPAPR VSCSI interfaces refuse, and the OS's hot-pluggable interfaces (VirtIO and
/// VirtIO-SCSI in `osinfo-defaults.properties`) bound (`isDiskSupportedForPlugUnPlug`, 400). A locked disk and a
/// bootable one are not checked there. Disk snapshots (`ERROR_CANNOT_DETACH_DISK_WITH_SNAPSHOT`) are not modelled, nor
/// is an unknown VM (404 here; the engine's `ACTION_TYPE_FAILED_VM_NOT_FOUND` would come after its permission check).
pub fn detach_disk(state: &mut State, vm_id: &str, disk_id: &str, remove: bool) -> EngineResult<()> {
    if remove {
        return remove_attached_disk(state, vm_id, disk_id);
    }
    let vm = state.vms.get(vm_id).ok_or(EngineError::NotFound)?;
    if vm.status != VmStatus::Up && vm.status != VmStatus::Down {
        return Err(operation_failed(
            409,
            &format!(
                "Cannot detach Virtual Disk because the VM is in {} status.",
                localized_status(&vm.status)
            ),
        ));
    }
    if !vm.disk_ids.iter().any(|d| d == disk_id) {
        return Err(operation_failed(
            400,
            &format!(
                "Cannot detach Virtual Disk. The specified disk is not attached to the VM {}.",
                vm.name
            ),
        ));
    }
    let disk = state.disks.get(disk_id).ok_or(EngineError::NotFound)?;
    if disk.active && vm.status != VmStatus::Down {
        hot_unplug_supported(disk, &vm.name)?;
    }
    vm_mut(state, vm_id)?.disk_ids.retain(|d| d != disk_id);
    if let Some(disk) = state.disks.get_mut(disk_id) {
        disk.vm_id = None;
    }
    Ok(())
}

/// `detach_only=false` (`RemoveDiskCommand`): the disk is removed. CAPOV never sends it; only what a test needs is
/// modelled (the VM and the attachment must exist).
fn remove_attached_disk(state: &mut State, vm_id: &str, disk_id: &str) -> EngineResult<()> {
    let vm = vm_mut(state, vm_id)?;
    if !vm.disk_ids.iter().any(|d| d == disk_id) {
        return Err(EngineError::NotFound);
    }
    vm.disk_ids.retain(|d| d != disk_id);
    state.disks.remove(disk_id);
    Ok(())
}

/// `VmCommand.isDiskSupportedForPlugUnPlug` for an x86 guest: its OS hot-plugs VirtIO and VirtIO-SCSI disks only.
fn hot_unplug_supported(disk: &DiskRecord, vm_name: &str) -> EngineResult<()> {
    let alias = &disk.alias;
    match disk.interface.as_str() {
        "virtio" | "virtio_scsi" => Ok(()),
        "ide" => Err(operation_failed(
            400,
            &format!("Cannot detach {alias} to {vm_name}. Hot plugging a disk to an IDE interface is not supported."),
        )),
        "spapr_vscsi" => Err(operation_failed(
            400,
            &format!(
                "Cannot detach {alias} to {vm_name}. Hot plugging a disk to a sPAPR VSCSI interface is not supported."
            ),
        )),
        _ => Err(operation_failed(
            400,
            "Cannot detach Virtual Disk: The disk interface is not supported by the VM OS: Other OS.",
        )),
    }
}

/// How the engine names a VM status in its messages (`LocalizedVmStatus`, `VAR__VM_STATUS__*` in
/// `AppErrors.properties`).
pub(super) fn localized_status(status: &VmStatus) -> &'static str {
    match status {
        VmStatus::Unassigned => "Unassigned",
        VmStatus::Down => "Down",
        VmStatus::Up => "Up",
        VmStatus::PoweringUp => "Powering Up",
        VmStatus::Paused => "Paused",
        VmStatus::Migrating => "Migrating",
        VmStatus::Unknown => "Unknown",
        VmStatus::NotResponding => "Not Responding",
        VmStatus::WaitForLaunch => "Wait for Launch",
        VmStatus::RebootInProgress => "Reboot in Progress",
        VmStatus::SavingState => "Saving State",
        VmStatus::RestoringState => "Restoring State",
        VmStatus::Suspended => "Suspended",
        VmStatus::ImageLocked => "Image Locked",
        VmStatus::PoweringDown => "Powering Down",
        VmStatus::Other(other) if other == super::IMAGE_ILLEGAL => "Image Illegal",
        VmStatus::Other(_) => "",
    }
}

#[cfg(test)]
mod tests {
    use capov_ovirt::model::Ref;

    use super::*;
    use crate::engine::{Timings, add_vm, apply};
    use crate::inventory::{default_inventory, seed};

    const VM_NAME: &str = "worker";

    /// A VM of the default inventory, its image ready (down), with a data disk attached (virtio_scsi, plugged).
    fn down_vm_with_data_disk() -> (State, String, String) {
        let mut state = State::default();
        seed(&mut state, &default_inventory()).expect("inventory");
        let cluster = state.clusters.keys().next().expect("cluster").clone();
        let template = state.templates.keys().next().expect("template").clone();
        let request = model::Vm {
            name: Some(VM_NAME.into()),
            cluster: Some(Ref::id(&cluster)),
            template: Some(Ref::id(&template)),
            ..model::Vm::default()
        };
        let timings = Timings::fast();
        let added = add_vm(&mut state, &timings, &request, false).expect("add");
        let mut scheduled = added.scheduled;
        scheduled.sort_by_key(|s| s.after);
        for item in &scheduled {
            apply(&mut state, &timings, item);
        }
        assert_eq!(state.vms[&added.vm_id].status, VmStatus::Down);
        let disk = attach_extra_disk(&mut state, &added.vm_id, "pvc-1", 1 << 30).expect("attach");
        (state, added.vm_id, disk)
    }

    #[test]
    fn a_detached_disk_stays_whole_on_its_storage_domain() {
        let (mut state, vm, disk) = down_vm_with_data_disk();
        let before = state.disks[&disk].clone();
        detach_disk(&mut state, &vm, &disk, false).expect("detach");
        assert!(!state.vms[&vm].disk_ids.contains(&disk));
        let after = &state.disks[&disk];
        assert_eq!(after.vm_id, None, "floating");
        assert_eq!(after.storage_domain_ids, before.storage_domain_ids);
        assert_eq!(
            (after.provisioned_size, after.image_id.as_str(), &after.status),
            (before.provisioned_size, before.image_id.as_str(), &before.status)
        );
    }

    #[test]
    fn a_disk_not_attached_to_the_vm_is_a_bad_request_naming_the_vm() {
        let (mut state, vm, disk) = down_vm_with_data_disk();
        detach_disk(&mut state, &vm, &disk, false).expect("detach");
        assert_eq!(
            detach_disk(&mut state, &vm, &disk, false),
            Err(operation_failed(
                400,
                "Cannot detach Virtual Disk. The specified disk is not attached to the VM worker."
            ))
        );
    }

    #[test]
    fn only_a_vm_that_is_up_or_down_gives_its_disks_away() {
        for (status, shown) in [
            (VmStatus::PoweringUp, "Powering Up"),
            (VmStatus::PoweringDown, "Powering Down"),
            (VmStatus::ImageLocked, "Image Locked"),
            (VmStatus::NotResponding, "Not Responding"),
            (VmStatus::Unknown, "Unknown"),
            (VmStatus::Other(crate::engine::IMAGE_ILLEGAL.into()), "Image Illegal"),
        ] {
            let (mut state, vm, disk) = down_vm_with_data_disk();
            vm_mut(&mut state, &vm).expect("vm").status = status;
            assert_eq!(
                detach_disk(&mut state, &vm, &disk, false),
                Err(operation_failed(
                    409,
                    &format!("Cannot detach Virtual Disk because the VM is in {shown} status.")
                )),
                "{shown}"
            );
            assert!(state.vms[&vm].disk_ids.contains(&disk), "{shown}: still attached");
        }
    }

    #[test]
    fn a_running_vm_hot_unplugs_only_what_its_os_hot_plugs() {
        let refusals = [
            (
                "ide",
                "Cannot detach pvc-1 to worker. Hot plugging a disk to an IDE interface is not supported.",
            ),
            (
                "spapr_vscsi",
                "Cannot detach pvc-1 to worker. Hot plugging a disk to a sPAPR VSCSI interface is not supported.",
            ),
            (
                "sata",
                "Cannot detach Virtual Disk: The disk interface is not supported by the VM OS: Other OS.",
            ),
        ];
        for (interface, refusal) in refusals {
            let (mut state, vm, disk) = down_vm_with_data_disk();
            vm_mut(&mut state, &vm).expect("vm").status = VmStatus::Up;
            state.disks.get_mut(&disk).expect("disk").interface = interface.into();
            assert_eq!(
                detach_disk(&mut state, &vm, &disk, false),
                Err(operation_failed(400, refusal)),
                "{interface}"
            );
            // Unplugged, or from a VM that is down, nothing needs hot-unplugging.
            state.disks.get_mut(&disk).expect("disk").active = false;
            detach_disk(&mut state, &vm, &disk, false).expect("an unplugged disk is detached");
        }
        let (mut state, vm, disk) = down_vm_with_data_disk();
        vm_mut(&mut state, &vm).expect("vm").status = VmStatus::Up;
        detach_disk(&mut state, &vm, &disk, false).expect("virtio_scsi is hot-unplugged");
        assert_eq!(state.disks[&disk].vm_id, None);
    }

    #[test]
    fn detach_only_false_removes_the_disk() {
        let (mut state, vm, disk) = down_vm_with_data_disk();
        detach_disk(&mut state, &vm, &disk, true).expect("remove");
        assert!(!state.disks.contains_key(&disk));
    }
}
