//! spec.hostdevices: adding the devices to a VM pinned to their host, before its first start.

use capov_ovirt::Client;

use crate::runtime::machine::outcome::Executed;

/// Adds each device by name; the first failure stops the rest (the next pass reads what is there and adds the rest).
pub async fn attach(client: &Client, vm_id: &str, names: &[String]) -> capov_ovirt::Result<Executed> {
    for name in names {
        client.add_vm_host_device(vm_id, name).await?;
        tracing::info!(vm = %vm_id, device = %name, "host device added");
    }
    Ok(Executed::Continue)
}
