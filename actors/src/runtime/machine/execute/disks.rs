//! The VM's disks: growing one to its spec size, renaming a disk's alias, and creating the data disks.

use capov_ovirt::Client;
use capov_ovirt::model::{Disk, DiskAttachment, Ref, StorageDomainRefs};

use crate::runtime::machine::outcome::{Executed, Failure};
use capov_core::machine_steps::{DataDiskPlan, Requeue};

pub async fn resize(
    client: &Client,
    vm_id: &str,
    attachment_id: &str,
    size_bytes: u64,
) -> capov_ovirt::Result<Executed> {
    client.resize_disk_attachment(vm_id, attachment_id, size_bytes).await?;
    // The poll shows the new size and the disk's lock ending (its search inlines the disks of VMs in a transition);
    // a resize that changed nothing is read again by the watch's guard timer.
    Ok(Executed::Requeue(Requeue::PollVm))
}

pub async fn rename_alias(client: &Client, disk_id: &str, new_alias: &str) -> capov_ovirt::Result<Executed> {
    client.update_disk_alias(disk_id, new_alias).await?;
    Ok(Executed::Continue)
}

/// Creates one data disk of spec.datadisks on the VM, on the storage domain and with the disk profile its step
/// resolved; the engine creates the disk locked until its image exists, which the watch's poll shows.
pub async fn add_data_disk(client: &Client, vm_id: &str, plan: &DataDiskPlan) -> Result<Executed, Failure> {
    let attachment = DiskAttachment {
        bootable: Some(false),
        active: Some(true),
        interface: Some(plan.interface.as_ovirt().to_string()),
        disk: Some(Disk {
            alias: Some(plan.alias.clone()),
            provisioned_size: Some(plan.size_bytes),
            format: Some(plan.format.as_ovirt().to_string()),
            sparse: Some(plan.sparse),
            storage_domains: Some(StorageDomainRefs {
                items: vec![Ref::id(plan.storage_domain_id.clone())],
            }),
            disk_profile: plan.disk_profile_id.clone().map(Ref::id),
            ..Disk::default()
        }),
        ..DiskAttachment::default()
    };
    client.add_vm_disk(vm_id, &attachment).await?;
    tracing::info!(vm = %vm_id, disk = %plan.alias, "data disk created");
    Ok(Executed::Requeue(Requeue::PollVm))
}
