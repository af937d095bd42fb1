//! A VM's host devices (`/vms/{id}/hostdevices`), mediated devices (`/vms/{id}/mediateddevices`, engines 4.5 and
//! later) and virtual NUMA nodes (`/vms/{id}/numanodes`), with the engine's rules: `AbstractVmHostDevicesCommand`,
//! `AddVmHostDevicesCommand`, `AbstractMdevCommand`, `AbstractVmNumaNodeCommand` and `NumaValidator`. Whether the
//! devices are free is the scheduler's question when the VM starts (`engine::scheduling`).

use capov_ovirt::model::{self, VmStatus};

use super::disks::localized_status;
use super::*;
use crate::ids::new_id;
use crate::state::*;

/// A device name from its REST id (`HexUtils.hex2string`); None when the id is not hex of UTF-8.
fn name_of_id(id: &str) -> Option<String> {
    if !id.len().is_multiple_of(2) {
        return None;
    }
    let bytes: Option<Vec<u8>> = (0..id.len())
        .step_by(2)
        .map(|i| id.get(i..i + 2).and_then(|pair| u8::from_str_radix(pair, 16).ok()))
        .collect();
    String::from_utf8(bytes?).ok()
}

/// `POST /vms/{id}/hostdevices`: the device (by id, else by name) of the one host the VM is pinned to, with the
/// PCI devices of its IOMMU group as placeholders. Only while the VM is down. Returns the device's name.
pub fn add_vm_host_device(state: &mut State, vm_id: &str, device: &model::HostDevice) -> EngineResult<String> {
    // `BackendVmHostDevicesResource.add`: the id wins over the name.
    let name = match (&device.id, &device.name) {
        (Some(id), _) => name_of_id(id).ok_or(EngineError::NotFound)?,
        (None, Some(name)) => name.clone(),
        (None, None) => return Err(incomplete("HostDevice [id|name] required for add")),
    };
    let vm = state.vms.get(vm_id).ok_or(EngineError::NotFound)?;
    if vm.status != VmStatus::Down {
        return Err(operation_failed(
            409,
            &format!(
                "Cannot add Host devices because the VM is in {} status.",
                localized_status(&vm.status)
            ),
        ));
    }
    let host_id = match vm.workload.dedicated_hosts.as_slice() {
        [] => {
            return Err(operation_failed(
                409,
                "Cannot add Host devices. VM must be pinned to a host.",
            ));
        }
        [host] => host.clone(),
        _ => {
            return Err(operation_failed(
                409,
                "Cannot add Host devices. VM must be pinned to a single host.",
            ));
        }
    };
    let host = state.hosts.get(&host_id).ok_or(EngineError::NotFound)?;
    let Some(wanted) = host.devices.iter().find(|d| d.name == name) else {
        return Err(operation_failed(
            400,
            "Cannot add Host devices. One or more of specified host devices not found.",
        ));
    };
    // The device's atomic group: the PCI devices sharing its IOMMU group go along (`getDeviceAtomicGroup`).
    let group: Vec<String> = match (wanted.capability.as_str(), wanted.iommu_group) {
        ("pci", Some(iommu)) => host
            .devices
            .iter()
            .filter(|d| d.capability == "pci" && d.iommu_group == Some(iommu))
            .map(|d| d.name.clone())
            .collect(),
        _ => vec![name.clone()],
    };
    let vm = vm_mut(state, vm_id)?;
    for member in group {
        let asked = member == name;
        match vm.workload.host_devices.iter_mut().find(|d| d.name == member) {
            Some(existing) if asked => existing.placeholder = false,
            Some(_) => {}
            None => vm.workload.host_devices.push(VmHostDevice {
                name: member,
                placeholder: !asked,
            }),
        }
    }
    Ok(name)
}

/// `DELETE /vms/{id}/hostdevices/{device}`: the device and the placeholders of its group, while the VM is down.
pub fn remove_vm_host_device(state: &mut State, vm_id: &str, device_id: &str) -> EngineResult<()> {
    let name = name_of_id(device_id).ok_or(EngineError::NotFound)?;
    let vm = state.vms.get(vm_id).ok_or(EngineError::NotFound)?;
    if !vm.workload.host_devices.iter().any(|d| d.name == name) {
        return Err(EngineError::NotFound);
    }
    if vm.status != VmStatus::Down {
        return Err(operation_failed(
            409,
            &format!(
                "Cannot remove Host devices because the VM is in {} status.",
                localized_status(&vm.status)
            ),
        ));
    }
    let group = vm
        .workload
        .dedicated_hosts
        .first()
        .and_then(|h| state.hosts.get(h))
        .and_then(|h| h.devices.iter().find(|d| d.name == name))
        .and_then(|d| d.iommu_group);
    let host = vm.workload.dedicated_hosts.first().cloned();
    let same_group = |state: &State, other: &str| {
        group.is_some()
            && host
                .as_ref()
                .and_then(|h| state.hosts.get(h))
                .and_then(|h| h.devices.iter().find(|d| d.name == other))
                .is_some_and(|d| d.iommu_group == group)
    };
    let keep: Vec<VmHostDevice> = vm
        .workload
        .host_devices
        .iter()
        .filter(|d| d.name != name && !(d.placeholder && same_group(state, &d.name)))
        .cloned()
        .collect();
    vm_mut(state, vm_id)?.workload.host_devices = keep;
    Ok(())
}

/// `POST /vms/{id}/mediateddevices`: a vGPU of the type its `mdevType` spec parameter names. The engine does not
/// check the type here; a type no host offers fails the start (the MDevice filter). Returns the device's id.
pub fn add_vm_mediated_device(
    state: &mut State,
    vm_id: &str,
    device: &model::VmMediatedDevice,
) -> EngineResult<String> {
    let vm = vm_mut(state, vm_id)?;
    let Some(mdev_type) = device.mdev_type().filter(|t| !t.is_empty()) else {
        // `AbstractMdevCommand.validate`; the command sets no action or type for the message, so the engine leaves
        // its variables as they are.
        return Err(operation_failed(
            400,
            "Cannot ${action} ${type}. Mediated device ID or VM/Template ID or a parameter value is null.",
        ));
    };
    let id = new_id();
    vm.workload.mediated_devices.push(MediatedDeviceRecord {
        id: id.clone(),
        mdev_type: mdev_type.to_string(),
    });
    Ok(id)
}

pub fn remove_vm_mediated_device(state: &mut State, vm_id: &str, device_id: &str) -> EngineResult<()> {
    let vm = vm_mut(state, vm_id)?;
    let before = vm.workload.mediated_devices.len();
    vm.workload.mediated_devices.retain(|m| m.id != device_id);
    if vm.workload.mediated_devices.len() == before {
        return Err(EngineError::NotFound);
    }
    Ok(())
}

/// `POST /vms/{id}/numanodes`: the VM's nodes with the new one go through `NumaValidator` (index duplicates, then
/// `checkVmNumaNodesIntegrity`: more nodes than vCPUs, index continuity, vCPU indexes, total memory, and a VM pinned
/// to at least one host). The NUMA commands set no action or type for their messages: the engine leaves
/// `${action} ${type}` as they are. Returns the node's id.
pub fn add_numa_node(state: &mut State, vm_id: &str, node: &model::VirtualNumaNode) -> EngineResult<String> {
    let (Some(index), Some(memory_mib)) = (node.index, node.memory) else {
        let missing = if node.index.is_none() { "index" } else { "memory" };
        return Err(incomplete(&format!("VirtualNumaNode [{missing}] required for add")));
    };
    let vcpus_of_node: Vec<u32> = node
        .cpu
        .iter()
        .flat_map(|c| c.cores.iter())
        .flat_map(|c| c.items.iter())
        .filter_map(|c| c.index)
        .collect();
    let vm = state.vms.get(vm_id).ok_or(EngineError::NotFound)?;
    let new = NumaNodeRecord {
        id: new_id(),
        index,
        memory_mib,
        vcpus: vcpus_of_node,
        tune_mode: node.numa_tune_mode.as_ref().map(|m| m.to_string()),
        pinned_to: node
            .numa_node_pins
            .iter()
            .flat_map(|p| p.items.iter())
            .filter_map(|p| p.index)
            .collect(),
    };
    let mut nodes = vm.workload.numa_nodes.clone();
    nodes.push(new.clone());
    check_numa_nodes(&nodes, vm)?;
    let id = new.id.clone();
    vm_mut(state, vm_id)?.workload.numa_nodes = nodes;
    Ok(id)
}

fn bad(message: String) -> EngineError {
    operation_failed(400, &message)
}

fn check_numa_nodes(nodes: &[NumaNodeRecord], vm: &VmRecord) -> EngineResult<()> {
    let mut seen = Vec::new();
    for node in nodes {
        if seen.contains(&node.index) {
            return Err(bad(format!(
                "NUMA node with index {} exists at least twice.",
                node.index
            )));
        }
        seen.push(node.index);
    }
    let vcpus = vm.sockets * vm.cores * vm.threads;
    if nodes.len() as u32 > vcpus {
        return Err(bad(format!(
            "Cannot ${{action}} ${{type}}. Assigned {} NUMA nodes for {vcpus} CPU cores. Cannot assign more NUMA \
             nodes than CPU cores.",
            nodes.len()
        )));
    }
    let missing: Vec<String> = (0..nodes.len() as u32)
        .filter(|i| !seen.contains(i))
        .map(|i| i.to_string())
        .collect();
    if !missing.is_empty() {
        return Err(bad(format!(
            "Expected a continuous sequence of 0-{} for {} numa nodes. Missing indices {}. Assign indices with \
             increasing order starting from 0 to your virtual numa nodes.",
            seen.len().saturating_sub(1),
            nodes.len(),
            missing.join(", ")
        )));
    }
    let cpus: Vec<u32> = nodes.iter().flat_map(|n| n.vcpus.iter().copied()).collect();
    if let Some(out) = cpus.iter().copied().filter(|c| *c >= vcpus).max() {
        return Err(bad(format!(
            "A NUMA node has an invalid CPU index: {out}. Indexes must be between 0 and {}.",
            vcpus.saturating_sub(1)
        )));
    }
    let mut duplicates: Vec<u32> = cpus
        .iter()
        .copied()
        .filter(|c| cpus.iter().filter(|other| *other == c).count() > 1)
        .collect();
    duplicates.sort_unstable();
    duplicates.dedup();
    if !duplicates.is_empty() {
        let list: Vec<String> = duplicates.iter().map(u32::to_string).collect();
        return Err(bad(format!(
            "CPUs with the following indexes are assigned to two or more NUMA nodes: {}.",
            list.join(", ")
        )));
    }
    let total: u64 = nodes.iter().map(|n| n.memory_mib).sum();
    let vm_mib = vm.memory >> 20;
    if total > vm_mib {
        return Err(bad(format!(
            "The NUMA nodes' total memory of {total} exceeds the VM's total memory of {vm_mib}."
        )));
    }
    if vm.workload.dedicated_hosts.is_empty() {
        return Err(operation_failed(
            409,
            "Cannot ${action} ${type}. VM must be pinned to at least one host.",
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn device_ids_decode_to_names() {
        assert_eq!(
            name_of_id(&device_id("pci_0000_3b_00_0")).as_deref(),
            Some("pci_0000_3b_00_0")
        );
        assert_eq!(name_of_id("zz"), None);
        assert_eq!(name_of_id("abc"), None);
    }
}
