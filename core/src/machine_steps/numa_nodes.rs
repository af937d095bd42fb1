//! spec.numa before the first start (MachinePlacementSet): the VM, created pinned to hosts, gets the virtual NUMA
//! nodes it does not have yet ([`crate::vm::numa_layout`]). Like the other preparations, only while it is down.

use capov_crds::Severity;

use super::action::{Action, PrepareAction};
use super::decision::Decision;
use super::engine_lookups::EngineLookup;
use super::host_devices::read_before_start;
use super::observed::{Observed, ObservedVm};
use super::passed::Passed;
use crate::conditions::{ConditionUpdate, reasons, types};
use crate::vm::numa_layout;

/// Ok = the VM has every node of spec.numa (or none is asked for); Err = the read or the adds it needs, or why the
/// engine did not say.
pub(super) fn check(o: &Observed, vm: &ObservedVm, passed: &mut Passed) -> Result<(), Box<Decision>> {
    let Some(numa) = &o.settings.numa else {
        return Ok(());
    };
    let lookup = EngineLookup::VmNumaNodes { vm_id: vm.id.clone() };
    let present = read_before_start(&o.vm_numa_nodes, lookup, "NUMA nodes", passed)?;
    let missing: Vec<_> = layout(o, numa)
        .into_iter()
        .filter(|node| !present.contains(&node.index))
        .collect();
    if missing.is_empty() {
        return Ok(());
    }
    let message = format!("adding {} virtual NUMA nodes to the VM", missing.len());
    let add = PrepareAction::AddNumaNodes {
        vm_id: vm.id.clone(),
        nodes: missing,
    };
    Err(Box::new(passed.take().stop(
        Action::Prepare(add),
        Some(ConditionUpdate::false_(
            types::MACHINE_PLACEMENT_SET,
            reasons::ADDING_NUMA_NODES,
            Severity::Info,
            message,
        )),
    )))
}

/// The nodes of spec.numa over spec.cpu and spec.memory (which the CRD requires beside it).
fn layout(o: &Observed, numa: &capov_crds::Numa) -> Vec<numa_layout::NumaNodePlan> {
    let cpu = o.settings.cpu.as_ref();
    let part = |value: Option<i32>| value.and_then(|v| u32::try_from(v).ok()).unwrap_or(0);
    let vcpus = cpu.map_or(0, |c| {
        part(c.sockets)
            .saturating_mul(part(c.cores))
            .saturating_mul(part(c.threads))
    });
    let memory_mib = o
        .settings
        .memory
        .as_ref()
        .and_then(|m| m.sizemb)
        .and_then(|mib| u64::try_from(mib).ok())
        .unwrap_or(0);
    let nodes = u32::try_from(numa.nodes).unwrap_or(0);
    numa_layout::layout(nodes, vcpus, memory_mib, numa.tunemode)
}
