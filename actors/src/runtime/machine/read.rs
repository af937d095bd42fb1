//! Reading the one fact a decision asked for (`Action::Read`), so that the pass can decide again: the VM's NICs and
//! affinity groups and the lookups of the VM's and its data disks' creation from the engine, with the pass's permit;
//! the workload cluster's Node, and during deletion its release, without it (a tenant's workload apiserver may be
//! slow or hung).

use super::node_release;
use super::observe::engine_lookups::{RetryLater, look_up};
use super::observe::{self, Observation, ObserveError};
use super::schedule::Next;
use super::state::MachineState;
use super::workload;
use crate::runtime::workload::clients::Wanted;
use capov_core::machine_steps::{Fact, NodeObservation, ReadRequest};

/// Reads what `request` names into the observation. Err: the pass ends with what follows (a backoff after a failed
/// read, or a wait for a place at the Node step).
pub async fn read(state: &mut MachineState, observation: &mut Observation, request: ReadRequest) -> Result<(), Next> {
    if !request.needs_permit() {
        // Workload I/O: without the permit.
        state.permit.clear();
    }
    match request {
        ReadRequest::Nics => {
            let nics = match (&observation.engine, &observation.observed.vm) {
                (Some(engine), Some(vm)) => observe::read_nics(state, engine, &observation.observed, &vm.id).await,
                _ => Err(no_engine_or_vm()),
            };
            observation.observed.nics = Fact::Read(nics.map_err(|failed| backoff(state, failed))?);
        }
        ReadRequest::Groups => {
            let groups = match (&observation.engine, &observation.observed.vm) {
                (Some(engine), Some(vm)) => observe::read_groups(engine, &observation.observed, vm).await,
                _ => Err(no_engine_or_vm()),
            };
            observation.observed.groups = Fact::Read(groups.map_err(|failed| backoff(state, failed))?);
        }
        ReadRequest::Node => observation.observed.node = Fact::Read(node(state, observation).await?),
        ReadRequest::NodeRelease => {
            let vm_id = observation
                .observed
                .vm
                .as_ref()
                .map(|vm| vm.id.clone())
                .unwrap_or_default();
            let vm_name = observation.observed.vm_name();
            let cluster = observation.cluster.as_deref();
            let release = node_release::observe_node_release(state, cluster, &vm_id, &vm_name).await;
            // Too many passes at their Node step, as at the Node read.
            observation.observed.node_release = Fact::Read(release.map_err(|wanted| await_place(state, wanted))?);
        }
        ReadRequest::Lookup(lookup) => {
            let Some(engine) = &observation.engine else {
                return Err(backoff(state, no_engine_or_vm()));
            };
            // An engine error is read as the fact (the step reports it); only a "busy, retry" ends the pass here.
            let read = look_up(state, &engine.client, &mut observation.observed, lookup).await;
            read.map_err(|RetryLater| Next::Backoff)?;
        }
    }
    Ok(())
}

/// The workload cluster's Node of the VM (step 7).
async fn node(state: &mut MachineState, observation: &Observation) -> Result<NodeObservation, Next> {
    let (Some(cluster), Some(vm)) = (&observation.cluster, &observation.observed.vm) else {
        return Ok(NodeObservation::NotFound);
    };
    // The answer of this pass's own write to the Node is the Node as it is now.
    if let Some(node) = state.node_written.take() {
        return Ok(*node);
    }
    let vm_name = observation.observed.vm_name();
    match workload::observe_node(state, cluster, &vm.id, &vm_name).await {
        Ok(node) => Ok(node),
        // Nothing is known of the Node, and nothing is reported.
        Err(workload::NodeUnknown::ManagementCluster(message)) => Err(backoff(state, ObserveError::apiserver(message))),
        // Too many passes at their Node step.
        Err(workload::NodeUnknown::Busy(wanted)) => Err(await_place(state, wanted)),
    }
}

/// An engine fact is asked for only by a decision taken with a connection and a VM; without either nothing can be
/// read, and the pass backs off as after a failed read.
fn no_engine_or_vm() -> ObserveError {
    ObserveError::new("no engine connection or no VM to read from".to_string())
}

/// A read that failed ends the pass with a backoff; nothing is reported.
fn backoff(state: &MachineState, failed: ObserveError) -> Next {
    tracing::warn!(object = %state.key, message = %failed.message, "cannot observe; retrying");
    Next::after_failure(failed.apiserver)
}

/// A pass that found no place at the Node step ends: its actor waits for the places it lacked (`run_pass`), and
/// the next pass goes on from what this one saw.
pub fn await_place(state: &mut MachineState, wanted: Wanted) -> Next {
    state.workload_place_wanted = Some(wanted);
    Next::Resume
}
