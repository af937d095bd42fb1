//! The VM's disks: growing one to its spec size, and renaming a disk's alias.

use capov_ovirt::Client;

use crate::machine_steps::Requeue;
use crate::runtime::machine::outcome::Executed;

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
