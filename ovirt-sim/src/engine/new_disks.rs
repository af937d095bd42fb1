//! `POST /vms/{id}/diskattachments` with a new disk (no id): `AddDiskCommand`'s rules and error texts, for the data
//! disks CAPOV adds to a VM before its first start.

use capov_ovirt::model::{self, DiskStatus, VmStatus};

use super::*;
use crate::ids::new_id;
use crate::state::*;

/// The interfaces the REST API's `DiskInterface` enum knows.
const INTERFACES: &[&str] = &["ide", "virtio", "virtio_scsi", "sata", "spapr_vscsi"];

/// Creates the disk and attaches it to the VM; the disk is `locked` until its image exists (`disk_operation_ms`).
/// Returns the new disk's id and the transition that unlocks it.
pub fn add_vm_disk(
    state: &mut State,
    timings: &Timings,
    vm_id: &str,
    attachment: &model::DiskAttachment,
) -> EngineResult<(String, Vec<Scheduled>)> {
    let vm = state.vms.get(vm_id).ok_or(EngineError::NotFound)?;
    let disk = attachment
        .disk
        .as_ref()
        .ok_or_else(|| incomplete("DiskAttachment [disk] required for add"))?;
    let interface = attachment
        .interface
        .clone()
        .ok_or_else(|| incomplete("DiskAttachment [interface] required for add"))?;
    let (Some(size), Some(format)) = (disk.provisioned_size, disk.format.clone()) else {
        return Err(incomplete("Disk [provisionedSize|size, format] required for add"));
    };
    if !INTERFACES.contains(&interface.as_str()) {
        return Err(EngineError::Fault {
            status: 400,
            reason: "Invalid value".into(),
            detail: format!("The value \"{interface}\" isn't valid for field \"interface\""),
        });
    }
    if vm.status == VmStatus::ImageLocked || vm.removing {
        return Err(operation_failed(
            409,
            "Cannot add Virtual Disk: VM is locked. Please try again in a few minutes.",
        ));
    }
    let data_center_id = state
        .clusters
        .get(&vm.cluster_id)
        .map(|c| c.data_center_id.clone())
        .unwrap_or_default();
    let domain = storage_domain(state, disk)?;
    if domain.data_center_id.as_deref() != Some(data_center_id.as_str()) || domain.status != "active" {
        let status = if domain.data_center_id.as_deref() == Some(data_center_id.as_str()) {
            status_name(&domain.status)
        } else {
            "Unknown".to_string()
        };
        return Err(operation_failed(
            409,
            &format!("Cannot add Virtual Disk. The relevant Storage Domain's status is {status}."),
        ));
    }
    if size == 0 {
        return Err(operation_failed(
            400,
            "Cannot add Virtual Disk. Disk's provisioned size has to be greater than 0.",
        ));
    }
    let sparse = disk.sparse.unwrap_or(true);
    check_configuration(domain, &format, sparse)?;
    let disk_profile_id = disk_profile(state, disk, domain)?;
    let (domain_id, alias) = (domain.id.clone(), disk.alias.clone().or(disk.name.clone()));
    let disk_id = new_id();
    let alias = alias.unwrap_or_else(|| format!("{}_Disk{}", vm.name, vm.disk_ids.len() + 1));
    state.disks.insert(
        disk_id.clone(),
        DiskRecord {
            id: disk_id.clone(),
            alias,
            description: disk.description.clone().unwrap_or_default(),
            provisioned_size: size,
            actual_size: 0,
            status: DiskStatus::Locked,
            format,
            sparse,
            storage_domain_ids: vec![domain_id],
            image_id: new_id(),
            vm_id: Some(vm_id.to_string()),
            bootable: attachment.bootable == Some(true),
            interface,
            active: attachment.active != Some(false),
            generation: 1,
            pending_size: None,
            disk_profile_id,
        },
    );
    vm_mut(state, vm_id)?.disk_ids.push(disk_id.clone());
    let unlock = later(timings.disk_operation_ms, &disk_id, 1, Transition::DiskJobDone);
    Ok((disk_id, vec![unlock]))
}

/// The storage domain the disk names, by id or name; 400 "Storage Domain doesn't exist." otherwise.
fn storage_domain<'s>(state: &'s State, disk: &model::Disk) -> EngineResult<&'s StorageDomainRecord> {
    let named = disk.storage_domains.as_ref().and_then(|d| d.items.first());
    let found = named.and_then(|r| match (&r.id, &r.name) {
        (Some(id), _) => state.storage_domains.get(id),
        (None, Some(name)) => state.storage_domains.values().find(|sd| &sd.name == name),
        _ => None,
    });
    match (named, found) {
        (None, _) => Err(incomplete(
            "Disk [storageDomains.storageDomain.id|name] required for add",
        )),
        (Some(_), None) => Err(operation_failed(
            400,
            "Cannot add Virtual Disk. Storage Domain doesn't exist.",
        )),
        (Some(_), Some(domain)) => Ok(domain),
    }
}

/// `ImagesHandler.checkImageConfiguration`: preallocated copy-on-write is refused everywhere, sparse raw on block
/// storage (`ACTION_TYPE_FAILED_DISK_CONFIGURATION_NOT_SUPPORTED`, a CONFLICT).
fn check_configuration(domain: &StorageDomainRecord, format: &str, sparse: bool) -> EngineResult<()> {
    let cow = format == "cow";
    let refused = (cow && !sparse) || (domain.is_block() && sparse && !cow) || !matches!(format, "cow" | "raw");
    if refused {
        let volume_format = format.to_ascii_uppercase();
        let volume_type = if sparse { "Sparse" } else { "Preallocated" };
        return Err(operation_failed(
            409,
            &format!(
                "Cannot add Virtual Disk. Disk configuration ({volume_format} {volume_type} backup-None) is \
                 incompatible with the storage domain type."
            ),
        ));
    }
    Ok(())
}

/// The disk profile named by id: it must exist and belong to the disk's storage domain (`DiskProfileValidator`).
/// None named: the domain's first profile, as `DiskProfileHelper` picks one the user may use.
fn disk_profile(state: &State, disk: &model::Disk, domain: &StorageDomainRecord) -> EngineResult<Option<String>> {
    let Some(id) = disk.disk_profile.as_ref().and_then(|p| p.id.clone()) else {
        return Ok(state
            .disk_profiles
            .values()
            .find(|p| p.storage_domain_id == domain.id)
            .map(|p| p.id.clone()));
    };
    let Some(profile) = state.disk_profiles.get(&id) else {
        return Err(operation_failed(
            400,
            "Cannot add Virtual Disk. Disk Profile wasn't found.",
        ));
    };
    if profile.storage_domain_id != domain.id {
        return Err(operation_failed(
            400,
            &format!(
                "Cannot add Virtual Disk. Disk Profile {} with id {} is not assigned to Storage Domain {}.",
                profile.name, profile.id, domain.name
            ),
        ));
    }
    Ok(Some(id))
}

/// The engine's `StorageDomainStatus` name for a REST status (`maintenance` → `Maintenance`).
pub(super) fn status_name(status: &str) -> String {
    let mut name = String::new();
    for part in status.split('_') {
        let mut chars = part.chars();
        if let Some(first) = chars.next() {
            name.push(first.to_ascii_uppercase());
            name.extend(chars);
        }
    }
    name
}
