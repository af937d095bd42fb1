//! VM network interfaces.

use capov_ovirt::model::{self, VmStatus};

use super::*;
use crate::ids::{new_id, new_mac};
use crate::state::*;

fn nic_profile(state: &State, nic: &model::Nic) -> EngineResult<Option<String>> {
    match nic.vnic_profile.as_ref().and_then(|r| r.id.clone()) {
        Some(id) if !state.vnic_profiles.contains_key(&id) => Err(operation_failed(
            400,
            "Cannot add Interface. The specified vNIC profile doesn't exist.",
        )),
        other => Ok(other),
    }
}

/// `POST /vms/{id}/nics`.
pub fn add_nic(state: &mut State, vm_id: &str, nic: &model::Nic) -> EngineResult<String> {
    let name = nic
        .name
        .clone()
        .filter(|n| !n.is_empty())
        .ok_or_else(|| incomplete("Nic [name] required for add"))?;
    let profile = nic_profile(state, nic)?;
    let vm = vm_mut(state, vm_id)?;
    if vm.status == VmStatus::ImageLocked {
        return Err(operation_failed(
            409,
            "Cannot add Interface: VM is locked. Please try again in a few minutes.",
        ));
    }
    if vm.nics.iter().any(|n| n.name == name) {
        return Err(operation_failed(
            409,
            "Cannot add Interface. The VM Network Interface name is already in use.",
        ));
    }
    let id = new_id();
    vm.nics.push(NicRecord {
        id: id.clone(),
        name,
        interface: nic.interface.clone().unwrap_or_else(|| "virtio".into()),
        mac: nic.mac.as_ref().and_then(|m| m.address.clone()).unwrap_or_else(new_mac),
        vnic_profile_id: profile,
        linked: nic.linked.unwrap_or(true),
        plugged: nic.plugged.unwrap_or(true),
    });
    Ok(id)
}

/// `PUT /vms/{id}/nics/{nic}`.
pub fn update_nic(state: &mut State, vm_id: &str, nic_id: &str, update: &model::Nic) -> EngineResult<()> {
    let profile = nic_profile(state, update)?;
    let vm = vm_mut(state, vm_id)?;
    if vm.status == VmStatus::ImageLocked {
        return Err(operation_failed(
            409,
            "Cannot edit Interface: VM is locked. Please try again in a few minutes.",
        ));
    }
    if let Some(name) = &update.name
        && vm.nics.iter().any(|n| &n.name == name && n.id != nic_id)
    {
        return Err(operation_failed(
            409,
            "Cannot edit Interface. The VM Network Interface name is already in use.",
        ));
    }
    let nic = vm
        .nics
        .iter_mut()
        .find(|n| n.id == nic_id)
        .ok_or(EngineError::NotFound)?;
    if let Some(name) = &update.name {
        nic.name = name.clone();
    }
    if let Some(interface) = &update.interface {
        nic.interface = interface.clone();
    }
    if update.vnic_profile.is_some() {
        nic.vnic_profile_id = profile;
    }
    if let Some(address) = update.mac.as_ref().and_then(|m| m.address.clone()) {
        nic.mac = address;
    }
    if let Some(linked) = update.linked {
        nic.linked = linked;
    }
    if let Some(plugged) = update.plugged {
        nic.plugged = plugged;
    }
    Ok(())
}

/// `DELETE /vms/{id}/nics/{nic}`.
pub fn remove_nic(state: &mut State, vm_id: &str, nic_id: &str) -> EngineResult<()> {
    let vm = vm_mut(state, vm_id)?;
    if vm.status == VmStatus::ImageLocked {
        return Err(operation_failed(
            409,
            "Cannot remove Interface: VM is locked. Please try again in a few minutes.",
        ));
    }
    let before = vm.nics.len();
    vm.nics.retain(|n| n.id != nic_id);
    if vm.nics.len() == before {
        Err(EngineError::NotFound)
    } else {
        Ok(())
    }
}
