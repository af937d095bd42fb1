//! Choosing a host for a VM to start on or migrate to, as `SchedulingManager` does: the up hosts of the VM's cluster
//! run through the filters (CPU, Memory, VmAffinityGroups, VmToHostsAffinityGroups), the survivors are weighed (soft
//! affinity rules first, then the most free memory), and a refusal carries the engine's messages.
//!
//! The messages follow `SchedulingResult.getReasonMessages` and `ErrorTranslatorImpl.resolveMessages`: every host
//! filtered out adds a line, but the variables of all lines live in one map where the first definition wins, so
//! every line names the first host filtered out, its filter and its detail — the engine's own quirk, reproduced.

use std::collections::HashMap;

use capov_ovirt::model::HostStatus;

use crate::state::{AffinityGroupRecord, State, VmRecord};

const MIB: u64 = 1 << 20;

/// `SCHEDULING_ALL_HOSTS_FILTERED_OUT` with `${action}` and `${type}` filled in.
fn all_filtered_out(action: &str) -> String {
    format!(
        "Cannot {action} VM. There is no host that satisfies current scheduling constraints. See below for details:"
    )
}

/// `SCHEDULING_NO_HOSTS`.
pub const NO_HOSTS: &str = "There are no hosts to use. Check that the cluster contains at least one host in Up state.";

/// Why a filter dropped a host (the `VAR__DETAIL__*` message and its variables).
#[derive(Debug, Clone, PartialEq)]
enum Detail {
    NotEnoughCores,
    NotEnoughMemory { available_mb: u64 },
    MatchedNegativeRules,
    MissedPositiveRules,
    NotPinnedToHost,
    WrongHostForHostDevices,
    HostDevicesUnavailable,
    MdevsMissing(String),
    MdevsUnavailable(String),
}

impl Detail {
    /// The detail message with its variables substituted (`$affinityRules` is always empty in the engine: "TODO
    /// compute the affinity rule names").
    fn text(&self) -> String {
        match self {
            Detail::NotEnoughCores => "it has an insufficient amount of CPU cores to run the VM".into(),
            Detail::NotEnoughMemory { available_mb } => {
                format!("its available memory is too low ({available_mb} MB) to run the VM")
            }
            Detail::MatchedNegativeRules => "it matched negative affinity rules ".into(),
            Detail::MissedPositiveRules => "it did not match positive affinity rules ".into(),
            // The message ends with a full stop of its own, before the line's.
            Detail::NotPinnedToHost => "the host is not present in the pinning list.".into(),
            Detail::WrongHostForHostDevices => "the host does not provide requested host devices".into(),
            Detail::HostDevicesUnavailable => "some of the required host devices are unavailable".into(),
            Detail::MdevsMissing(types) => format!("some of the required mDev devices are missing ({types})"),
            Detail::MdevsUnavailable(types) => format!("some of the required mDev devices are unavailable ({types})"),
        }
    }
}

/// A host a filter dropped.
struct Dropped {
    host: String,
    filter: &'static str,
    detail: Detail,
}

/// What the scheduler decided.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Choice {
    Host(String),
    /// No host: the engine's messages, in order (the fault detail lists them).
    Refused(Vec<String>),
}

/// Where `vm` may run now: `action` is `run` or `migrate`; `exclude` a host that does not count (the source of a
/// migration). Host maintenance migrates with hard VM-to-VM affinity ignored (`IgnoreVmToVmAffinityForHostMaintenance`
/// is true from cluster level 4.3): `ignore_hard_vm_affinity`.
pub fn choose_host(
    state: &State,
    vm: &VmRecord,
    action: &str,
    exclude: Option<&str>,
    ignore_hard_vm_affinity: bool,
) -> Choice {
    let mut candidates: Vec<&str> = state
        .hosts
        .values()
        .filter(|h| h.cluster_id == vm.cluster_id && h.status == HostStatus::Up && Some(h.id.as_str()) != exclude)
        .map(|h| h.id.as_str())
        .collect();
    if candidates.is_empty() {
        return Choice::Refused(vec![NO_HOSTS.to_string()]);
    }
    // The engine walks hosts in no particular order; by name, the messages and choices are reproducible.
    candidates.sort_by_key(|host| state.hosts.get(*host).map(|h| h.name.clone()));
    let groups: Vec<&AffinityGroupRecord> = state
        .affinity_groups
        .values()
        .filter(|g| g.vm_ids.contains(&vm.id))
        .collect();
    let mut dropped = Vec::new();
    let vcpus = vm.sockets * vm.cores * vm.threads;
    // `PinToHostPolicyUnit`: a VM pinned to hosts runs only on them.
    let dedicated = &vm.workload.dedicated_hosts;
    if vm.affinity.as_deref() == Some("pinned") && !dedicated.is_empty() {
        filter(&mut candidates, &mut dropped, "PinToHost", |host| {
            (!dedicated.iter().any(|d| d == host)).then_some(Detail::NotPinnedToHost)
        });
    }
    filter(&mut candidates, &mut dropped, "CPU", |host| {
        (state.hosts.get(host).is_some_and(|h| h.cpus() < vcpus)).then_some(Detail::NotEnoughCores)
    });
    filter(&mut candidates, &mut dropped, "Memory", |host| {
        let free = state.free_memory(host);
        (free < vm.memory).then_some(Detail::NotEnoughMemory {
            available_mb: free / MIB,
        })
    });
    // `HostDeviceFilterPolicyUnit`: host devices come from the one host the VM is pinned to, and must be free there.
    if vm.workload.needs_host_devices()
        && let Some(device_host) = dedicated.first()
    {
        filter(&mut candidates, &mut dropped, "HostDevice", |host| {
            if host != device_host {
                return Some(Detail::WrongHostForHostDevices);
            }
            let all_free = vm
                .workload
                .host_devices
                .iter()
                .all(|d| state.device_free(host, &d.name, &vm.id));
            (!all_free).then_some(Detail::HostDevicesUnavailable)
        });
    }
    // `MDevicePolicyUnit`: every mdev type the VM needs offered by the host, with a free instance.
    let mdev_types = vm.workload.mdev_types();
    if !mdev_types.is_empty() {
        filter(&mut candidates, &mut dropped, "MDevice", |host| {
            let Some(record) = state.hosts.get(host) else {
                return Some(Detail::MdevsMissing(mdev_types.join(",")));
            };
            let offered = |t: &str| record.devices.iter().any(|d| d.mdev_types.iter().any(|m| m.name == t));
            let missing: Vec<&str> = mdev_types.iter().map(String::as_str).filter(|t| !offered(t)).collect();
            if !missing.is_empty() {
                return Some(Detail::MdevsMissing(missing.join(",")));
            }
            let unavailable: Vec<&str> = mdev_types
                .iter()
                .map(String::as_str)
                .filter(|t| !record.devices.iter().any(|d| state.mdev_available(host, d, t) > 0))
                .collect();
            (!unavailable.is_empty()).then(|| Detail::MdevsUnavailable(unavailable.join(",")))
        });
    }
    let occupied = occupied_hosts(state, vm, &groups);
    if !ignore_hard_vm_affinity {
        filter(&mut candidates, &mut dropped, "VmAffinityGroups", |host| {
            vm_affinity_violation(&occupied, host, true)
        });
    }
    filter(&mut candidates, &mut dropped, "VmToHostsAffinityGroups", |host| {
        host_affinity_violation(state, &groups, host, true)
    });
    if candidates.is_empty() {
        return Choice::Refused(refusal(state, action, &dropped));
    }
    candidates.sort_by_key(|host| {
        let soft_violations = usize::from(vm_affinity_violation(&occupied, host, false).is_some())
            + usize::from(host_affinity_violation(state, &groups, host, false).is_some());
        (
            soft_violations,
            std::cmp::Reverse(state.free_memory(host)),
            host.to_string(),
        )
    });
    Choice::Host(candidates[0].to_string())
}

/// Keeps the candidates `dropped_by` lets through, noting the others.
fn filter(
    candidates: &mut Vec<&str>,
    dropped: &mut Vec<Dropped>,
    name: &'static str,
    dropped_by: impl Fn(&str) -> Option<Detail>,
) {
    candidates.retain(|host| match dropped_by(host) {
        Some(detail) => {
            dropped.push(Dropped {
                host: host.to_string(),
                filter: name,
                detail,
            });
            false
        }
        None => true,
    });
}

/// For each VM-to-VM rule of the VM's groups (enforcing or not), the hosts where other members run or are
/// being started or migrated to: `(positive, enforcing, hosts)`.
fn occupied_hosts(state: &State, vm: &VmRecord, groups: &[&AffinityGroupRecord]) -> Vec<(bool, bool, Vec<String>)> {
    groups
        .iter()
        .filter(|g| g.vms_rule.enabled)
        .map(|g| {
            let hosts = g
                .vm_ids
                .iter()
                .filter(|id| **id != vm.id)
                .filter_map(|id| state.vms.get(id))
                .flat_map(|other| [other.placement.host.clone(), other.placement.migrating_to.clone()])
                .flatten()
                .collect();
            (g.vms_rule.positive, g.vms_rule.enforcing, hosts)
        })
        .collect()
}

/// Whether `host` breaks a VM-to-VM rule of the kind asked (`hard`: enforcing rules, else soft ones), as
/// `VmAffinityFilterPolicyUnit` and its weight unit judge it.
fn vm_affinity_violation(occupied: &[(bool, bool, Vec<String>)], host: &str, hard: bool) -> Option<Detail> {
    let rules = occupied.iter().filter(|(_, enforcing, _)| *enforcing == hard);
    let mut violation = None;
    for (positive, _, hosts) in rules {
        if *positive && !hosts.is_empty() && !hosts.iter().any(|h| h == host) {
            violation = Some(Detail::MissedPositiveRules);
        }
        if !*positive && hosts.iter().any(|h| h == host) {
            return Some(Detail::MatchedNegativeRules);
        }
    }
    violation
}

/// Whether `host` breaks a VM-to-host rule of the kind asked, as `VmToHostAffinityFilterPolicyUnit` judges it.
fn host_affinity_violation(state: &State, groups: &[&AffinityGroupRecord], host: &str, hard: bool) -> Option<Detail> {
    for group in groups
        .iter()
        .filter(|g| g.hosts_rule.enabled && g.hosts_rule.enforcing == hard)
    {
        let listed = state.group_hosts(group).iter().any(|h| h == host);
        match (group.hosts_rule.positive, listed) {
            (true, false) => return Some(Detail::MissedPositiveRules),
            (false, true) => return Some(Detail::MatchedNegativeRules),
            _ => {}
        }
    }
    None
}

/// The refusal's messages: `SCHEDULING_ALL_HOSTS_FILTERED_OUT`, then `SCHEDULING_HOST_FILTERED_REASON_WITH_DETAIL`
/// per host dropped, every line resolved with the variables the first host defined.
fn refusal(state: &State, action: &str, dropped: &[Dropped]) -> Vec<String> {
    let mut lines = vec![all_filtered_out(action)];
    let Some(first) = dropped.first() else {
        return lines;
    };
    let mut variables: HashMap<&str, String> = HashMap::new();
    let host_name = state.hosts.get(&first.host).map(|h| h.name.clone()).unwrap_or_default();
    variables.entry("hostName").or_insert(host_name);
    variables.entry("filterName").or_insert(first.filter.to_string());
    variables.entry("detailMessage").or_insert(first.detail.text());
    for _ in dropped {
        lines.push(format!(
            "The host {} did not satisfy internal filter {} because {}.",
            variables["hostName"], variables["filterName"], variables["detailMessage"]
        ));
    }
    lines
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::inventory::{HostSeed, Inventory, default_inventory, seed};
    use crate::state::{Placement, Rule};

    fn state_with_hosts(count: usize, memory_gib: u64) -> State {
        let mut state = State::default();
        let mut inventory = default_inventory();
        inventory.hosts = (1..=count)
            .map(|n| HostSeed {
                name: format!("host-{n}"),
                cluster: "Default".into(),
                memory_bytes: memory_gib << 30,
                ..HostSeed::default()
            })
            .collect();
        seed(&mut state, &inventory).unwrap();
        state
    }

    fn add_running_vm(state: &mut State, name: &str, host: Option<&str>) -> String {
        seed(
            state,
            &Inventory {
                vms: vec![crate::inventory::VmSeed {
                    name: name.into(),
                    ..Default::default()
                }],
                ..Inventory::default()
            },
        )
        .unwrap();
        let id = state.vms.values().find(|vm| vm.name == name).unwrap().id.clone();
        let host_id = host.map(|h| state.hosts.values().find(|r| r.name == h).unwrap().id.clone());
        let vm = state.vms.get_mut(&id).unwrap();
        vm.placement = Placement {
            host: host_id,
            migrating_to: None,
        };
        id
    }

    fn anti_affinity(state: &mut State, members: &[&str], enforcing: bool) {
        let cluster_id = state.clusters.keys().next().unwrap().clone();
        state.affinity_groups.insert(
            "g".into(),
            AffinityGroupRecord {
                id: "g".into(),
                name: "apart".into(),
                description: String::new(),
                cluster_id,
                vms_rule: Rule {
                    enabled: true,
                    positive: false,
                    enforcing,
                },
                hosts_rule: Rule::default(),
                priority: 1.0,
                vm_ids: members.iter().map(|m| m.to_string()).collect(),
                host_ids: Vec::new(),
                vm_label_ids: Vec::new(),
                host_label_ids: Vec::new(),
            },
        );
    }

    fn host_name(state: &State, choice: &Choice) -> String {
        match choice {
            Choice::Host(id) => state.hosts[id].name.clone(),
            Choice::Refused(lines) => panic!("refused: {lines:?}"),
        }
    }

    #[test]
    fn hard_anti_affinity_spreads_members_and_refuses_when_every_host_has_one() {
        let mut state = state_with_hosts(2, 64);
        let a = add_running_vm(&mut state, "a", Some("host-1"));
        let b = add_running_vm(&mut state, "b", None);
        let c = add_running_vm(&mut state, "c", None);
        anti_affinity(&mut state, &[&a, &b, &c], true);
        let choice = choose_host(&state, &state.vms[&b], "run", None, false);
        assert_eq!(host_name(&state, &choice), "host-2");
        let host_2 = state.hosts.values().find(|h| h.name == "host-2").unwrap().id.clone();
        state.vms.get_mut(&b).unwrap().placement.host = Some(host_2);

        let Choice::Refused(lines) = choose_host(&state, &state.vms[&c], "run", None, false) else {
            panic!("a third member found a host");
        };
        assert_eq!(
            lines,
            vec![
                "Cannot run VM. There is no host that satisfies current scheduling constraints. See below for details:"
                    .to_string(),
                // The engine's translator keeps the first definition of each variable: both lines name host-1.
                "The host host-1 did not satisfy internal filter VmAffinityGroups because it matched negative affinity \
                 rules ."
                    .to_string(),
                "The host host-1 did not satisfy internal filter VmAffinityGroups because it matched negative affinity \
                 rules ."
                    .to_string(),
            ]
        );
        // Maintenance migrations ignore hard VM-to-VM affinity.
        assert!(matches!(
            choose_host(&state, &state.vms[&c], "migrate", None, true),
            Choice::Host(_)
        ));
    }

    #[test]
    fn soft_anti_affinity_prefers_a_free_host_and_stacks_when_there_is_none() {
        let mut state = state_with_hosts(2, 64);
        let a = add_running_vm(&mut state, "a", Some("host-2"));
        let b = add_running_vm(&mut state, "b", None);
        anti_affinity(&mut state, &[&a, &b], false);
        assert_eq!(
            host_name(&state, &choose_host(&state, &state.vms[&b], "run", None, false)),
            "host-1"
        );
        let host_1 = state.hosts.values().find(|h| h.name == "host-1").unwrap().id.clone();
        state.hosts.get_mut(&host_1).unwrap().status = HostStatus::Maintenance;
        assert_eq!(
            host_name(&state, &choose_host(&state, &state.vms[&b], "run", None, false)),
            "host-2"
        );
    }

    #[test]
    fn memory_refusal_names_the_hosts_free_memory_and_no_up_host_has_its_own_text() {
        let mut state = state_with_hosts(1, 2);
        let vm = add_running_vm(&mut state, "big", None);
        state.vms.get_mut(&vm).unwrap().memory = 4 << 30;
        let Choice::Refused(lines) = choose_host(&state, &state.vms[&vm], "run", None, false) else {
            panic!("a 4 GiB VM fit a 2 GiB host");
        };
        assert_eq!(
            lines[1],
            "The host host-1 did not satisfy internal filter Memory because its available memory is too low (2048 MB) \
             to run the VM."
        );
        for host in state.hosts.values_mut() {
            host.status = HostStatus::NonResponsive;
        }
        assert_eq!(
            choose_host(&state, &state.vms[&vm], "run", None, false),
            Choice::Refused(vec![NO_HOSTS.to_string()])
        );
    }
}
