//! Hosts changing state and the VMs on them following: maintenance migrates the running VMs away (the host is
//! `preparing_for_maintenance` until the last one has left, then `maintenance`), a host that stops answering leaves
//! its VMs `unknown` until it is back or fenced, and live migration moves a VM through `migrating` to its new host.

use capov_ovirt::model::{HostStatus, VmStatus};

use super::scheduling::{Choice, choose_host};
use super::*;
use crate::state::*;

/// `POST /hosts/{id}/deactivate` (`MaintenanceNumberOfVdssCommand`): the host turns `preparing_for_maintenance` and
/// each VM running on it is live-migrated to a host the scheduler picks, hard VM-to-VM affinity ignored
/// (`IgnoreVmToVmAffinityForHostMaintenance`). A VM no host can take stays, and so does the host's state.
pub fn deactivate_host(state: &mut State, timings: &Timings, host_id: &str) -> EngineResult<Vec<Scheduled>> {
    let host = state.hosts.get_mut(host_id).ok_or(EngineError::NotFound)?;
    if host.status == HostStatus::NonResponsive {
        return Err(action_failed(
            409,
            "Cannot switch Host to Maintenance mode. Host is in non responsive state.",
        ));
    }
    host.status = HostStatus::PreparingForMaintenance;
    let running: Vec<String> = state
        .vms_on_host(host_id)
        .filter(|vm| vm.status == VmStatus::Up && vm.placement.migrating_to.is_none())
        .map(|vm| vm.id.clone())
        .collect();
    let mut scheduled = Vec::new();
    for vm_id in running {
        let Some(vm) = state.vms.get(&vm_id) else {
            continue;
        };
        if let Choice::Host(target) = choose_host(state, vm, "migrate", Some(host_id), true) {
            scheduled.extend(start_migration(state, timings, &vm_id, target));
        }
    }
    settle_maintenance(state, host_id);
    Ok(scheduled)
}

/// `POST /hosts/{id}/activate`: a host in maintenance (or one that answers again) is up.
pub fn activate_host(state: &mut State, host_id: &str) -> EngineResult<()> {
    let host = state.hosts.get_mut(host_id).ok_or(EngineError::NotFound)?;
    host.status = HostStatus::Up;
    Ok(())
}

/// The engine lost contact with the host: it is `non_responsive`, and so are its VMs' states (`unknown`): they may
/// still run, or not, until the host answers again or is fenced. Highly available VMs with a lease are restarted
/// elsewhere after `ha_restart_ms` (`engine::ha`).
pub fn host_lost(state: &mut State, timings: &Timings, host_id: &str) -> EngineResult<Vec<Scheduled>> {
    let host = state.hosts.get_mut(host_id).ok_or(EngineError::NotFound)?;
    host.status = HostStatus::NonResponsive;
    for vm in state.vms.values_mut() {
        if vm.placement.host.as_deref() == Some(host_id) {
            vm.generation += 1;
            vm.status = VmStatus::Unknown;
        }
    }
    Ok(super::ha::lease_restarts(state, timings, host_id))
}

/// The host answers again: it is up and its VMs, which ran all along, are `up` again.
pub fn host_back(state: &mut State, host_id: &str) -> EngineResult<()> {
    let host = state.hosts.get_mut(host_id).ok_or(EngineError::NotFound)?;
    host.status = HostStatus::Up;
    for vm in state.vms.values_mut() {
        if vm.placement.host.as_deref() == Some(host_id) && vm.status == VmStatus::Unknown {
            vm.generation += 1;
            vm.status = VmStatus::Up;
        }
    }
    Ok(())
}

/// The host was fenced (power-cycled through its power management, or "confirm host has been rebooted"): its VMs
/// are down and no longer on it, the highly available ones are restarted on other hosts (`engine::ha`), and the host
/// comes back up.
pub fn fence_host(state: &mut State, timings: &Timings, host_id: &str) -> EngineResult<Vec<Scheduled>> {
    let host = state.hosts.get_mut(host_id).ok_or(EngineError::NotFound)?;
    host.status = HostStatus::Up;
    let mut highly_available = Vec::new();
    for vm in state.vms.values_mut() {
        if vm.placement.host.as_deref() == Some(host_id) {
            power::power_off(vm);
            if vm.workload.high_availability.enabled {
                highly_available.push(vm.id.clone());
            }
        }
    }
    Ok(super::ha::restart_all(state, timings, highly_available, host_id))
}

/// Starts a live migration of a running VM to `target`: `migrating` on its source until the transition lands it.
fn start_migration(state: &mut State, timings: &Timings, vm_id: &str, target: String) -> Option<Scheduled> {
    let vm = state.vms.get_mut(vm_id)?;
    vm.generation += 1;
    vm.status = VmStatus::Migrating;
    vm.placement.migrating_to = Some(target);
    Some(later(
        timings.migration_ms,
        vm_id,
        vm.generation,
        Transition::VmMigrated,
    ))
}

/// The migration landed: the VM is up on its new host, and the source, when it waits for maintenance and is empty
/// now, is in maintenance.
pub(super) fn migrated(state: &mut State, vm_id: &str) {
    let Some(vm) = state.vms.get_mut(vm_id) else {
        return;
    };
    let Some(target) = vm.placement.migrating_to.take() else {
        return;
    };
    let source = vm.placement.host.replace(target);
    vm.status = VmStatus::Up;
    if let Some(source) = source {
        settle_maintenance(state, &source);
    }
}

/// A host preparing for maintenance without VMs left is in maintenance.
fn settle_maintenance(state: &mut State, host_id: &str) {
    let empty = state.vms_on_host(host_id).next().is_none();
    if let Some(host) = state.hosts.get_mut(host_id)
        && host.status == HostStatus::PreparingForMaintenance
        && empty
    {
        host.status = HostStatus::Maintenance;
    }
}

#[cfg(test)]
mod tests {
    use capov_ovirt::model;

    use super::*;
    use crate::inventory::{default_inventory, seed};

    /// The default engine with two VMs running, both on host-1.
    fn engine_with_two_vms_on_host_1() -> (State, Vec<String>, String) {
        let mut state = State::default();
        seed(&mut state, &default_inventory()).unwrap();
        let cluster = state.clusters.keys().next().unwrap().clone();
        let template = state.templates.keys().next().unwrap().clone();
        let host_1 = state.hosts.values().find(|h| h.name == "host-1").unwrap().id.clone();
        let mut ids = Vec::new();
        for name in ["a", "b"] {
            let request = model::Vm {
                name: Some(name.into()),
                cluster: Some(model::Ref::id(cluster.clone())),
                template: Some(model::Ref::id(template.clone())),
                ..model::Vm::default()
            };
            let added = add_vm(&mut state, &Timings::fast(), &request, false).unwrap();
            let vm = state.vms.get_mut(&added.vm_id).unwrap();
            vm.status = VmStatus::Up;
            vm.placement.host = Some(host_1.clone());
            ids.push(added.vm_id);
        }
        (state, ids, host_1)
    }

    fn land(state: &mut State, scheduled: Vec<Scheduled>) {
        for item in &scheduled {
            apply(state, &Timings::fast(), item);
        }
    }

    #[test]
    fn maintenance_migrates_every_vm_away_then_the_host_is_in_maintenance() {
        let (mut state, vms, host_1) = engine_with_two_vms_on_host_1();
        let migrations = deactivate_host(&mut state, &Timings::fast(), &host_1).unwrap();
        assert_eq!(migrations.len(), 2);
        assert_eq!(state.hosts[&host_1].status, HostStatus::PreparingForMaintenance);
        for vm in &vms {
            assert_eq!(state.vms[vm].status, VmStatus::Migrating);
            assert_eq!(
                state.vms[vm].placement.host.as_deref(),
                Some(host_1.as_str()),
                "on its source meanwhile"
            );
        }
        land(&mut state, migrations);
        assert_eq!(state.hosts[&host_1].status, HostStatus::Maintenance);
        for vm in &vms {
            assert_eq!(state.vms[vm].status, VmStatus::Up);
            assert_ne!(state.vms[vm].placement.host.as_deref(), Some(host_1.as_str()));
        }
        activate_host(&mut state, &host_1).unwrap();
        assert_eq!(state.hosts[&host_1].status, HostStatus::Up);
    }

    #[test]
    fn a_lost_host_leaves_its_vms_unknown_until_it_answers_or_is_fenced() {
        let (mut state, vms, host_1) = engine_with_two_vms_on_host_1();
        host_lost(&mut state, &Timings::fast(), &host_1).unwrap();
        assert_eq!(state.hosts[&host_1].status, HostStatus::NonResponsive);
        assert!(vms.iter().all(|vm| state.vms[vm].status == VmStatus::Unknown));
        assert_eq!(
            deactivate_host(&mut state, &Timings::fast(), &host_1),
            Err(action_failed(
                409,
                "Cannot switch Host to Maintenance mode. Host is in non responsive state."
            ))
        );
        host_back(&mut state, &host_1).unwrap();
        assert!(vms.iter().all(|vm| state.vms[vm].status == VmStatus::Up));

        host_lost(&mut state, &Timings::fast(), &host_1).unwrap();
        fence_host(&mut state, &Timings::fast(), &host_1).unwrap();
        for vm in &vms {
            assert_eq!(state.vms[vm].status, VmStatus::Down);
            assert_eq!(state.vms[vm].placement, Placement::default());
        }
        assert_eq!(state.hosts[&host_1].status, HostStatus::Up);
    }
}
