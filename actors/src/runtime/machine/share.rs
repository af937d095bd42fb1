//! The machine's share of the fair queues (`crate::fair_share`), from what it holds: its namespace and cluster (the
//! cluster-name label, or its Machine's), whether its Machine is a control plane's, whether it is being deleted,
//! whether it has a VM, whether its provisioning began and whether it holds a place at the Node step.

use capov_crds::labels::{CLUSTER_NAME_LABEL, MACHINE_FINALIZER};
use kube::ResourceExt;

use super::state::MachineState;
use crate::fair_share::{MachineFacts, Share, share};
use crate::runtime::capi;

/// The machine's share now, with its CAPI Machine (`observe::owner_machine`) if found; `has_vm` also when the pass
/// knows of a VM the object does not record yet.
pub fn machine_share(state: &MachineState, machine: Option<&capi::Machine>, has_vm: bool) -> Share {
    let cluster = state
        .object
        .labels()
        .get(CLUSTER_NAME_LABEL)
        .cloned()
        .or_else(|| machine.and_then(capi::machine_cluster_name));
    share(&MachineFacts {
        namespace: state.key.namespace_str(),
        cluster: cluster.as_deref(),
        control_plane: machine.is_some_and(capi::machine_controlled_by_control_plane),
        deleting: state.object.metadata.deletion_timestamp.is_some(),
        has_vm: has_vm || state.object.spec.provider_id.is_some() || state.created_vm.is_some(),
        begun: state.object.finalizers().iter().any(|f| f == MACHINE_FINALIZER),
        holds_node_place: state.workload_place.is_some(),
    })
}
