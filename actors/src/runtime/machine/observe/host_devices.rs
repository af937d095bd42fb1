//! Reading what spec.hostdevices needs ([`EngineLookup::DeviceHosts`], [`EngineLookup::VmHostDevices`]): the hosts
//! of the oVirt cluster with the devices asked for and who holds each (a running VM, as the engine shows it, or a
//! machine of this process creating its VM with it), and the devices already added to the VM. The choice of host
//! is the creation step's (`capov_core::placement::host_devices`).
//!
//! [`EngineLookup::DeviceHosts`]: capov_core::machine_steps::EngineLookup::DeviceHosts
//! [`EngineLookup::VmHostDevices`]: capov_core::machine_steps::EngineLookup::VmHostDevices

use capov_ovirt::Client;
use capov_ovirt::model::HostDevice;

use crate::runtime::machine::state::MachineState;
use capov_core::placement::host_devices::{DeviceHostFact, HostDeviceFact};

/// The hosts of the oVirt cluster, each with those of `names` it has: one request for the hosts, and, when devices
/// are asked for, one per host of the cluster for its devices.
pub async fn device_hosts(
    state: &MachineState,
    client: &Client,
    provider: &str,
    cluster_id: &str,
    names: &[String],
) -> capov_ovirt::Result<Vec<DeviceHostFact>> {
    let hosts = client.hosts().await?;
    let mut found = Vec::new();
    for host in hosts {
        let in_cluster = host.cluster.as_ref().and_then(|c| c.id.as_deref()) == Some(cluster_id);
        let (Some(host_id), true) = (host.id.clone(), in_cluster) else {
            continue;
        };
        // Without devices asked for (virtual NUMA nodes only need the hosts), none are read.
        let devices: Vec<HostDeviceFact> = if names.is_empty() {
            Vec::new()
        } else {
            client
                .host_devices(&host_id)
                .await?
                .into_iter()
                .filter_map(|device| device_fact(state, provider, &host_id, device, names))
                .collect()
        };
        found.push(DeviceHostFact {
            host_name: host.name.unwrap_or_else(|| host_id.clone()),
            host_id,
            devices,
        });
    }
    Ok(found)
}

/// One device of those asked for, with who holds it.
fn device_fact(
    state: &MachineState,
    provider: &str,
    host_id: &str,
    device: HostDevice,
    names: &[String],
) -> Option<HostDeviceFact> {
    let name = device.name.filter(|name| names.contains(name))?;
    let running_vm = device.vm.and_then(|vm| vm.name.or(vm.id)).map(|vm| format!("VM {vm}"));
    let held_by = running_vm.or_else(|| {
        let claims = &state.shared.device_claims;
        claims
            .holder(provider, host_id, &name, &state.key)
            .map(|machine| format!("machine {machine}, whose VM is being made with it"))
    });
    Some(HostDeviceFact { name, held_by })
}

/// The names of the devices added to the VM, without the placeholders the engine added beside them (the other
/// devices of an IOMMU group).
pub async fn attached(client: &Client, vm_id: &str) -> capov_ovirt::Result<Vec<String>> {
    let devices = client.vm_host_devices(vm_id).await?;
    Ok(devices
        .into_iter()
        .filter(|device| device.placeholder != Some(true))
        .filter_map(|device| device.name)
        .collect())
}

/// The indexes of the VM's virtual NUMA nodes.
pub async fn numa_nodes(client: &Client, vm_id: &str) -> capov_ovirt::Result<Vec<u32>> {
    let nodes = client.vm_numa_nodes(vm_id).await?;
    Ok(nodes.into_iter().filter_map(|node| node.index).collect())
}
