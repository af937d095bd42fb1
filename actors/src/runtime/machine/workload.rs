//! The workload cluster (SPEC §2 step 7): a client from the Secret `<cluster>-kubeconfig` (key `value`), the Node
//! of the VM (systemUUID equals the VM id, case-insensitive, or the Node is named like the VM), and setting its
//! spec.providerID.

use k8s_openapi::api::core::v1::{Node, Secret};
use kube::ResourceExt;
use kube::api::{Api, DynamicObject, ListParams, Patch, PatchParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use serde_json::json;

use super::MachineState;
use crate::machine_steps::NodeObservation;

pub async fn observe_node(state: &MachineState, cluster: &DynamicObject, vm_id: &str) -> NodeObservation {
    let client = match workload_client(state, cluster).await {
        Ok(client) => client,
        Err(message) => return NodeObservation::Unreachable { message },
    };
    let nodes = match Api::<Node>::all(client).list(&ListParams::default()).await {
        Ok(nodes) => nodes,
        Err(err) => {
            return NodeObservation::Unreachable {
                message: format!("cannot list the workload cluster's Nodes: {err}"),
            };
        }
    };
    let node = nodes.items.into_iter().find(|node| {
        let uuid = node
            .status
            .as_ref()
            .and_then(|s| s.node_info.as_ref())
            .map(|info| info.system_uuid.as_str());
        uuid.is_some_and(|uuid| uuid.eq_ignore_ascii_case(vm_id)) || node.name_any() == state.key.name
    });
    match node {
        None => NodeObservation::NotFound,
        Some(node) => NodeObservation::Found {
            name: node.name_any(),
            provider_id: node.spec.and_then(|spec| spec.provider_id).filter(|id| !id.is_empty()),
        },
    }
}

pub async fn set_node_provider_id(
    state: &MachineState,
    cluster: &DynamicObject,
    node: &str,
    provider_id: &str,
) -> Result<(), String> {
    let client = workload_client(state, cluster).await?;
    let patch = json!({"spec": {"providerID": provider_id}});
    Api::<Node>::all(client)
        .patch(node, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .map(|_| ())
        .map_err(|err| format!("cannot set the Node's providerID: {err}"))
}

async fn workload_client(state: &MachineState, cluster: &DynamicObject) -> Result<kube::Client, String> {
    let namespace = state.key.namespace.clone().unwrap_or_default();
    let secret_name = format!("{}-kubeconfig", cluster.name_any());
    let secrets: Api<Secret> = Api::namespaced(state.shared.client.clone(), &namespace);
    let secret = secrets
        .get_opt(&secret_name)
        .await
        .map_err(|err| format!("cannot read Secret {secret_name}: {err}"))?;
    let value = secret
        .and_then(|s| s.data)
        .and_then(|data| data.get("value").cloned())
        .ok_or_else(|| {
            format!("Secret {namespace}/{secret_name} with the workload kubeconfig (key value) not found")
        })?;
    let kubeconfig = Kubeconfig::from_yaml(&String::from_utf8_lossy(&value.0))
        .map_err(|err| format!("Secret {secret_name}: invalid kubeconfig: {err}"))?;
    let config = kube::Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
        .await
        .map_err(|err| format!("Secret {secret_name}: unusable kubeconfig: {err}"))?;
    kube::Client::try_from(config).map_err(|err| format!("cannot reach the workload cluster: {err}"))
}
