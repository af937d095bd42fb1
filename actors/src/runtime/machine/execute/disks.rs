//! The VM's disks: growing one to its spec size, renaming a disk's alias, and creating the data disks.

use capov_ovirt::Client;
use capov_ovirt::model::{Disk, DiskAttachment, Ref, StorageDomainRefs};

use crate::runtime::machine::outcome::{Executed, Failure};
use capov_core::conditions::reasons;
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

/// Creates one data disk of spec.datadisks on the VM: its storage domain and disk profile are looked up by name,
/// then the engine creates the disk (locked until its image exists, which the watch's poll shows).
pub async fn add_data_disk(client: &Client, vm_id: &str, plan: &DataDiskPlan) -> Result<Executed, Failure> {
    let engine = |err: capov_ovirt::Error| Failure::engine(&err);
    let domain = client
        .find_storage_domains_by_name(&plan.storage_domain_name)
        .await
        .map_err(engine)?
        .into_iter()
        .find_map(|sd| sd.id);
    let Some(domain_id) = domain else {
        let message = format!(
            "storage domain {:?} of data disk {} not found in oVirt: fix spec.datadisks[].storagedomainname",
            plan.storage_domain_name, plan.alias
        );
        return Err(Failure::error(reasons::STORAGE_DOMAIN_NOT_FOUND, message));
    };
    let profile = match &plan.disk_profile_name {
        None => None,
        Some(name) => Some(disk_profile(client, &domain_id, name, plan).await?),
    };
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
                items: vec![Ref::id(domain_id)],
            }),
            disk_profile: profile.map(Ref::id),
            ..Disk::default()
        }),
        ..DiskAttachment::default()
    };
    client.add_vm_disk(vm_id, &attachment).await.map_err(engine)?;
    tracing::info!(vm = %vm_id, disk = %plan.alias, "data disk created");
    Ok(Executed::Requeue(Requeue::PollVm))
}

/// The id of the storage domain's disk profile of this name.
async fn disk_profile(client: &Client, domain_id: &str, name: &str, plan: &DataDiskPlan) -> Result<String, Failure> {
    let profiles = client
        .storage_domain_disk_profiles(domain_id)
        .await
        .map_err(|err| Failure::engine(&err))?;
    if let Some(id) = profiles
        .iter()
        .find(|p| p.name.as_deref() == Some(name))
        .and_then(|p| p.id.clone())
    {
        return Ok(id);
    }
    let known: Vec<&str> = profiles.iter().filter_map(|p| p.name.as_deref()).collect();
    let message = format!(
        "disk profile {name:?} of data disk {} is not a profile of storage domain {:?} (its profiles: {}): fix \
         spec.datadisks[].diskprofile",
        plan.alias,
        plan.storage_domain_name,
        known.join(", ")
    );
    Err(Failure::error(reasons::DISK_PROFILE_NOT_FOUND, message))
}
