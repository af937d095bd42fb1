//! The workload cluster's Node of the VM: setting its spec.providerID (SPEC §2 step 7) and CAPOV's topology labels.

use capov_crds::Severity;

use crate::runtime::capi;
use crate::runtime::machine::outcome::{Executed, Failure};
use crate::runtime::machine::state::MachineState;
use crate::runtime::machine::workload::{self, NodeWriteError};
use capov_core::conditions::{reasons, types};
use capov_core::machine_steps::{NodeObservation, Requeue};

/// Sets CAPOV's topology labels on the Node; backs off while the machine's Cluster is not known.
pub async fn set_labels(
    state: &mut MachineState,
    cluster: Option<&capi::Cluster>,
    node_name: &str,
    labels: &std::collections::BTreeMap<String, String>,
) -> Executed {
    let Some(cluster) = cluster else {
        return Executed::Requeue(Requeue::Backoff);
    };
    let patch = serde_json::json!({"metadata": {"labels": labels}});
    let written = workload::patch_node(
        state,
        cluster,
        node_name,
        &patch,
        "cannot set the Node's topology labels",
    )
    .await;
    carry(state, written)
}

/// Sets the Node's providerID, with the topology labels it lacks; backs off while the machine's Cluster is not
/// known.
pub async fn set_provider_id(
    state: &mut MachineState,
    cluster: Option<&capi::Cluster>,
    node_name: &str,
    provider_id: &str,
    labels: &std::collections::BTreeMap<String, String>,
) -> Executed {
    let Some(cluster) = cluster else {
        return Executed::Requeue(Requeue::Backoff);
    };
    let mut patch = serde_json::json!({"spec": {"providerID": provider_id}});
    if !labels.is_empty() {
        patch["metadata"] = serde_json::json!({"labels": labels});
    }
    let written = workload::patch_node(state, cluster, node_name, &patch, "cannot set the Node's providerID").await;
    carry(state, written)
}

/// A write that succeeded hands its answer, the Node as it now is, to the pass's next step.
fn carry(state: &mut MachineState, written: Result<Option<NodeObservation>, NodeWriteError>) -> Executed {
    match written {
        Ok(node) => {
            state.node_written = node.map(Box::new);
            Executed::Continue
        }
        Err(err) => failed(err),
    }
}

/// A Node write that failed: K8sProviderIDSetup says the workload cluster is unreachable, unless it was the
/// management cluster that did not answer (then only a retry soon, as after any apiserver failure, with a log line).
fn failed(err: NodeWriteError) -> Executed {
    match err {
        NodeWriteError::Retry(message) => {
            tracing::debug!(%message, "cannot reach the workload cluster's Node for now; retrying");
            Executed::RetryApiserver
        }
        NodeWriteError::Failed(message) => Executed::Failed {
            type_: types::K8S_PROVIDER_ID_SETUP,
            failure: Failure {
                reason: reasons::WORKLOAD_CLUSTER_UNREACHABLE,
                severity: Severity::Warning,
                message,
            },
        },
    }
}
