//! The OVirtMachine lifecycle as a pure function (SPEC §2): [`decide`] takes what the machine actor observed and
//! returns the one next action with the conditions to report. The actor executes the action and asks again, so
//! each step of the SPEC is one module here (run in order by `lifecycle`) and one executor there.
//!
//! Order of checks: pause (also during deletion) → deletion (never blocked by the waits of step 1) → owner
//! Machine, Cluster, infrastructure → finalizer → failureReason → connection → steps 3–7.

mod action;
mod decision;
mod deletion;
mod engine_lookups;
mod fact;
mod lifecycle;
mod observed;
mod passed;
mod recorded_engine;
mod static_addresses;
// Deletion's parts: removing the VM by its status, and releasing the disks CAPOV did not create (gate
// disk-detach-when-node-gone).
mod removal;
mod volume_release;

// The steps lifecycle runs, one module each; in SPEC order: preconditions, connection, creation, disks, network,
// placement (issue #25), power, node; and where the VM runs (`host`, issue #27), which applies to every decision.
mod connection;
mod creation;
mod creation_targets;
mod data_disks;
mod disks;
mod host;
mod host_devices;
mod network;
mod node;
mod numa_nodes;
mod placement;
mod power;
mod preconditions;
mod tags;

#[cfg(test)]
mod tests;

pub use action::{
    Action, ActionClass, BookkeepingAction, CreateTargets, CreateVmPlan, CreatedVmRecord, DataDiskPlan, GroupAction,
    JoinGroup, LeaveGroup, PrepareAction, Requeue, VmAction, WorkloadAction,
};
pub use connection::provider_settled;
pub use data_disks::data_disk_alias;
pub use decision::{Decision, StatusChange};
pub use deletion::releasable_without_engine;
pub use engine_lookups::{
    CreationFacts, DataDiskTarget, EngineLookup, Lookup, LookupFailure, OvirtClusterFact, PlacementFacts, TemplateFact,
};
pub use fact::Fact;
pub use observed::{
    Bootstrap, ConnectionFailure, FailureState, FoundBy, GroupsObservation, NodeObservation, NodeRelease, Observed,
    ObservedVm, ProviderConnection, ProviderDefaults, ReadRequest, VmDisk, VmHost,
};
pub use preconditions::decided_before_the_engine;
// Defined with the payload it shapes; re-exported here, where the lifecycle's observation names it.
pub use crate::vm::bootstrap_payload::BootstrapFormat;

use crate::conditions::{ConditionUpdate, reasons, types};

/// Whether an action that reported success changed nothing: the observation made right after it equals the one
/// it was decided on, and the same action comes out again. `decide` is a function of the observation, so the
/// pass would repeat the action at once, and forever, at the engine's full rate (an engine that answers 200 to a
/// write without applying it, a patch that does not stick). The actor counts such an action as failed and backs
/// off.
pub fn without_effect(before: &Observed, acted: &Action, after: &Observed, next: &Action) -> bool {
    before == after && acted == next
}

/// The next action for one OVirtMachine.
pub fn decide(observed: &Observed) -> Decision {
    if observed.paused {
        return Decision::new(
            Action::WritePausedOnly,
            vec![ConditionUpdate::true_(types::PAUSED, reasons::PAUSED)],
        );
    }
    let mut decision = if observed.deletion_requested {
        static_addresses::release_before_finalizer(observed, deletion::decide(observed))
    } else {
        lifecycle::decide(observed)
    };
    host::apply(observed, &mut decision);
    read_first(observed, &mut decision);
    decision.conditions.insert(
        0,
        ConditionUpdate::false_(types::PAUSED, reasons::NOT_PAUSED, capov_crds::Severity::Info, ""),
    );
    decision
}

/// A decision whose action needs facts not read yet ([`ActionClass::reads_first`]) asks for the first of them
/// instead: the actor reads it and decides again, until every fact the action needs is read.
fn read_first(observed: &Observed, decision: &mut Decision) {
    let reads_first = decision.action.class().reads_first;
    if let Some(request) = reads_first.iter().find(|request| observed.unread(request)).cloned() {
        decision.action = Action::Read(request);
    }
}
