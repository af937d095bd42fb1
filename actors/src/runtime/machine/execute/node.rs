//! The workload cluster's Node of the VM: setting its spec.providerID (SPEC §2 step 7) and CAPOV's topology labels.

use capov_crds::Severity;

use crate::runtime::capi;
use crate::runtime::machine::outcome::{Executed, Failure};
use crate::runtime::machine::state::MachineState;
use crate::runtime::machine::workload::{self, NodeWriteError};
use capov_core::conditions::{reasons, types};
use capov_core::machine_steps::Requeue;

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
    match workload::set_node_labels(state, cluster, node_name, labels).await {
        Ok(()) => Executed::Continue,
        Err(err) => failed(err),
    }
}

/// Sets the Node's providerID; backs off while the machine's Cluster is not known.
pub async fn set_provider_id(
    state: &mut MachineState,
    cluster: Option<&capi::Cluster>,
    node_name: &str,
    provider_id: &str,
) -> Executed {
    let Some(cluster) = cluster else {
        return Executed::Requeue(Requeue::Backoff);
    };
    match workload::set_node_provider_id(state, cluster, node_name, provider_id).await {
        Ok(()) => Executed::Continue,
        Err(err) => failed(err),
    }
}

/// A Node write that failed: K8sProviderIDSetup says the workload cluster is unreachable, unless it was the
/// management cluster that did not answer (then only a retry, with a log line).
fn failed(err: NodeWriteError) -> Executed {
    let failure = match err {
        NodeWriteError::Retry(message) => {
            tracing::debug!(%message, "cannot reach the workload cluster's Node for now; retrying");
            Failure::retry()
        }
        NodeWriteError::Failed(message) => Failure {
            reason: reasons::WORKLOAD_CLUSTER_UNREACHABLE,
            severity: Severity::Warning,
            message,
        },
    };
    Executed::Failed {
        type_: types::K8S_PROVIDER_ID_SETUP,
        failure,
    }
}
