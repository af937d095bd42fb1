//! High availability: the engine restarts a highly available VM elsewhere when its host went away. A VM with a lease
//! is restarted while its host is still lost (`VdsManager.handleNetworkException` → `restartVmsWithLeaseIfNeeded`,
//! `VdsEventListener.restartVmsWithLease`, after `NumberVdsRefreshesBeforeTryToStartUnknownVms` refreshes): the lease
//! on its storage domain keeps the old instance from running on. Every other highly available VM waits until its host
//! is fenced (`RestartVdsVmsOperation`, `ClearNonResponsiveVdsVmsCommand` → `HaAutoStartVmsRunner`), since it might
//! still run there; VMs without high availability stay down. Restarts go through the scheduler like any start, by
//! priority (higher first).

use capov_ovirt::model::{HostStatus, VmStatus};

use super::power::{boot, launch_on};
use super::scheduling::{Choice, choose_host};
use super::*;
use crate::state::*;

/// The restarts a lost host's leased VMs get, after `ha_restart_ms`.
pub(super) fn lease_restarts(state: &State, timings: &Timings, host_id: &str) -> Vec<Scheduled> {
    state
        .vms_on_host(host_id)
        .filter(|vm| vm.workload.high_availability.enabled && vm.workload.lease_domain_id.is_some())
        .map(|vm| later(timings.ha_restart_ms, &vm.id, vm.generation, Transition::VmLeaseRestart))
        .collect()
}

/// A leased VM of a lost host: started on another host, unless its host answered again meanwhile (the timer is then
/// stale) or no host takes it (it stays `unknown`; the engine tries again every
/// `NumberVdsRefreshesBeforeRetryToStartUnknownVms` refreshes, not modelled).
pub(super) fn restart_with_lease(state: &mut State, timings: &Timings, vm_id: &str) -> Vec<Scheduled> {
    let Some(vm) = state.vms.get(vm_id) else {
        return Vec::new();
    };
    let lost_host = vm.placement.host.clone();
    let host_lost = lost_host
        .as_ref()
        .and_then(|h| state.hosts.get(h))
        .is_some_and(|h| h.status == HostStatus::NonResponsive);
    if vm.status != VmStatus::Unknown || !host_lost {
        return Vec::new();
    }
    restart(state, timings, vm_id, lost_host.as_deref())
}

/// Highly available VMs that went down with their host: restarted elsewhere, by priority.
pub(super) fn restart_all(state: &mut State, timings: &Timings, mut vm_ids: Vec<String>, gone: &str) -> Vec<Scheduled> {
    vm_ids
        .sort_by_key(|id| std::cmp::Reverse(state.vms.get(id).map_or(0, |vm| vm.workload.high_availability.priority)));
    vm_ids
        .iter()
        .flat_map(|id| restart(state, timings, id, Some(gone)))
        .collect()
}

fn restart(state: &mut State, timings: &Timings, vm_id: &str, exclude: Option<&str>) -> Vec<Scheduled> {
    let Some(vm) = state.vms.get(vm_id) else {
        return Vec::new();
    };
    let Choice::Host(host) = choose_host(state, vm, "run", exclude, false) else {
        tracing::info!(vm = %vm_id, "no host to restart a highly available VM on");
        return Vec::new();
    };
    launch_on(state, vm_id, &host);
    let Some(vm) = state.vms.get_mut(vm_id) else {
        return Vec::new();
    };
    vm.workload.ha_restarts += 1;
    boot(vm, timings)
}

#[cfg(test)]
mod tests {
    use capov_ovirt::model;

    use super::*;
    use crate::inventory::{default_inventory, seed};

    /// The default engine with a leased HA VM running on host-1; the VM's id and host-1's.
    fn leased_vm_on_host_1() -> (State, String, String) {
        let mut state = State::default();
        seed(&mut state, &default_inventory()).unwrap();
        let cluster = state.clusters.keys().next().unwrap().clone();
        let template = state.templates.keys().next().unwrap().clone();
        let data1 = state
            .storage_domains
            .values()
            .find(|sd| sd.name == "data1")
            .unwrap()
            .id
            .clone();
        let host_1 = state.hosts.values().find(|h| h.name == "host-1").unwrap().id.clone();
        let request = model::Vm {
            name: Some("leased".into()),
            cluster: Some(model::Ref::id(cluster)),
            template: Some(model::Ref::id(template)),
            high_availability: Some(model::HighAvailability {
                enabled: Some(true),
                priority: Some(1),
            }),
            lease: Some(model::StorageDomainLease {
                storage_domain: Some(model::Ref::id(data1)),
            }),
            ..model::Vm::default()
        };
        let added = add_vm(&mut state, &Timings::fast(), &request, false).unwrap();
        let vm = state.vms.get_mut(&added.vm_id).unwrap();
        vm.status = VmStatus::Up;
        vm.placement.host = Some(host_1.clone());
        (state, added.vm_id, host_1)
    }

    #[test]
    fn a_lease_restart_after_the_host_answered_again_changes_nothing() {
        let (mut state, vm, host_1) = leased_vm_on_host_1();
        let restarts = super::super::host_lost(&mut state, &Timings::fast(), &host_1).unwrap();
        assert_eq!(restarts.len(), 1);
        assert_eq!(restarts[0].transition, Transition::VmLeaseRestart);
        super::super::host_back(&mut state, &host_1).unwrap();
        for timer in &restarts {
            apply(&mut state, &Timings::fast(), timer);
        }
        let vm = &state.vms[&vm];
        assert_eq!(vm.status, VmStatus::Up);
        assert_eq!(vm.placement.host.as_deref(), Some(host_1.as_str()));
        assert_eq!(vm.workload.ha_restarts, 0);
    }

    #[test]
    fn a_leased_vm_no_host_can_take_stays_unknown_on_its_lost_host() {
        let (mut state, vm, host_1) = leased_vm_on_host_1();
        for host in state.hosts.values_mut().filter(|h| h.id != host_1) {
            host.status = HostStatus::Maintenance;
        }
        let restarts = super::super::host_lost(&mut state, &Timings::fast(), &host_1).unwrap();
        for timer in &restarts {
            assert!(apply(&mut state, &Timings::fast(), timer).is_empty());
        }
        let vm = &state.vms[&vm];
        assert_eq!(vm.status, VmStatus::Unknown);
        assert_eq!(vm.placement.host.as_deref(), Some(host_1.as_str()));
    }

    #[test]
    fn fenced_ha_vms_restart_by_priority() {
        let (mut state, first, host_1) = leased_vm_on_host_1();
        // A second HA VM of higher priority, and only room for one VM on the other hosts.
        let mut second = state.vms[&first].clone();
        second.id = "second".into();
        second.name = "second".into();
        second.workload.high_availability.priority = 90;
        state.insert_vm(second);
        let memory = state.vms[&first].memory;
        for host in state.hosts.values_mut().filter(|h| h.id != host_1) {
            host.memory = memory;
        }
        let host_3 = state.hosts.values().find(|h| h.name == "host-3").unwrap().id.clone();
        state.hosts.get_mut(&host_3).unwrap().status = HostStatus::Maintenance;
        super::super::fence_host(&mut state, &Timings::fast(), &host_1).unwrap();
        assert_eq!(
            state.vms["second"].status,
            VmStatus::WaitForLaunch,
            "the higher priority first"
        );
        assert_eq!(state.vms[&first].status, VmStatus::Down, "no room left for the other");
    }
}
