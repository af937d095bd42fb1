//! The workload cluster (SPEC §2 step 7): a client from the Secret `<cluster>-kubeconfig` (key `value`), the Node
//! of the VM (systemUUID equals the VM id, case-insensitive, or the Node is named like the VM), and setting its
//! spec.providerID. The kubeconfig is tenant-written: it goes through [`crate::workload_kubeconfig`] before any
//! client is built or reused.

use k8s_openapi::api::core::v1::{Node, Secret};
use kube::ResourceExt;
use kube::api::{Api, ListParams, Patch, PatchParams};
use serde_json::json;

use super::state::MachineState;
use crate::machine_steps::NodeObservation;
use crate::runtime::capi;
use crate::workload_kubeconfig;

/// Why there is no client for the workload cluster.
enum NoClient {
    /// The kubeconfig was refused; nothing was sent anywhere.
    Rejected(String),
    /// The Secret could not be read or no client could be built from it.
    Unreachable(String),
}

impl NoClient {
    fn into_message(self) -> String {
        match self {
            NoClient::Rejected(message) | NoClient::Unreachable(message) => message,
        }
    }
}

pub async fn observe_node(state: &MachineState, cluster: &capi::Cluster, vm_id: &str) -> NodeObservation {
    let client = match workload_client(state, cluster).await {
        Ok(client) => client,
        Err(NoClient::Rejected(message)) => return NodeObservation::Rejected { message },
        Err(NoClient::Unreachable(message)) => return NodeObservation::Unreachable { message },
    };
    let api = Api::<Node>::all(client);
    // Kubelets name their Node after the host name, which CAPOV sets to the VM name: one GET usually finds it,
    // without listing every Node of a large cluster for each machine.
    let vm_name = crate::vm_name::for_object(&state.key.name);
    match api.get_opt(&vm_name).await {
        Ok(Some(node)) => return found(node),
        Ok(None) => {}
        Err(err) => {
            return NodeObservation::Unreachable {
                message: format!("cannot read the workload cluster's Nodes: {err}"),
            };
        }
    }
    // Page by page, stopping at the match: a whole list of a cluster of thousands of Nodes, decoded, is tens of MB
    // for each pass that looks (every machine waiting for its kubelet), and the passes run side by side.
    let mut params = ListParams::default().limit(NODE_PAGE);
    loop {
        let page = match api.list(&params).await {
            Ok(page) => page,
            Err(err) => {
                return NodeObservation::Unreachable {
                    message: format!("cannot list the workload cluster's Nodes: {err}"),
                };
            }
        };
        let next = page.metadata.continue_.clone().filter(|token| !token.is_empty());
        let node = page.items.into_iter().find(|node| {
            let uuid = node
                .status
                .as_ref()
                .and_then(|s| s.node_info.as_ref())
                .map(|info| info.system_uuid.as_str());
            uuid.is_some_and(|uuid| uuid.eq_ignore_ascii_case(vm_id)) || node.name_any() == vm_name
        });
        match (node, next) {
            (Some(node), _) => return found(node),
            (None, Some(token)) => params = params.continue_token(&token),
            (None, None) => return NodeObservation::NotFound,
        }
    }
}

/// Nodes read per request when looking for a VM's Node by systemUUID.
const NODE_PAGE: u32 = 200;

fn found(node: Node) -> NodeObservation {
    let labels = node
        .labels()
        .iter()
        .filter(|(key, _)| crate::node_topology::KEYS.contains(&key.as_str()))
        .map(|(key, value)| (key.clone(), value.clone()))
        .collect();
    NodeObservation::Found {
        name: node.name_any(),
        provider_id: node.spec.and_then(|spec| spec.provider_id).filter(|id| !id.is_empty()),
        labels,
    }
}

/// Sets (merges) CAPOV's topology labels on the Node; other labels stay as they are.
pub async fn set_node_labels(
    state: &MachineState,
    cluster: &capi::Cluster,
    node: &str,
    labels: &std::collections::BTreeMap<String, String>,
) -> Result<(), String> {
    let client = workload_client(state, cluster).await.map_err(NoClient::into_message)?;
    let patch = json!({"metadata": {"labels": labels}});
    Api::<Node>::all(client)
        .patch(node, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .map(|_| ())
        .map_err(|err| format!("cannot set the Node's topology labels: {err}"))
}

pub async fn set_node_provider_id(
    state: &MachineState,
    cluster: &capi::Cluster,
    node: &str,
    provider_id: &str,
) -> Result<(), String> {
    let client = workload_client(state, cluster).await.map_err(NoClient::into_message)?;
    let patch = json!({"spec": {"providerID": provider_id}});
    Api::<Node>::all(client)
        .patch(node, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .map(|_| ())
        .map_err(|err| format!("cannot set the Node's providerID: {err}"))
}

async fn workload_client(state: &MachineState, cluster: &capi::Cluster) -> Result<kube::Client, NoClient> {
    let namespace = state.key.namespace.clone().unwrap_or_default();
    let secret_name = format!("{}-kubeconfig", cluster.name_any());
    let secrets: Api<Secret> = Api::namespaced(state.shared.client.clone(), &namespace);
    let secret = secrets
        .get_opt(&secret_name)
        .await
        .map_err(|err| NoClient::Unreachable(format!("cannot read Secret {secret_name}: {err}")))?;
    let value = secret
        .and_then(|s| s.data)
        .and_then(|data| data.get("value").cloned())
        .ok_or_else(|| {
            NoClient::Unreachable(format!(
                "Secret {namespace}/{secret_name} with the workload kubeconfig (key value) not found"
            ))
        })?;
    let cache_key = (namespace.clone(), secret_name.clone());
    // Checked on every pass and before the cache, so that a client is only used for a kubeconfig that passes now,
    // and a rejected one also drops the client of the kubeconfig it replaced.
    let kubeconfig = match workload_kubeconfig::parse(&value.0) {
        Ok(kubeconfig) => kubeconfig,
        Err(rejection) => {
            lock(&state.shared.workload_clients).remove(&cache_key);
            return Err(NoClient::Rejected(format!(
                "the workload kubeconfig in Secret {namespace}/{secret_name} (key value) was rejected and nothing \
                 was sent to its server: {rejection}"
            )));
        }
    };
    // A client per pass would mean a TLS handshake with the workload apiserver per pass; one per cluster is kept
    // for as long as its kubeconfig stays the same.
    if let Some((cached_for, client)) = lock(&state.shared.workload_clients).get(&cache_key)
        && *cached_for == value.0
    {
        return Ok(client.clone());
    }
    let client = crate::runtime::kube_clients::request_client(kubeconfig.to_kube_config()).map_err(|err| {
        NoClient::Unreachable(format!(
            "Secret {secret_name}: cannot build a client from the workload kubeconfig: {err}"
        ))
    })?;
    lock(&state.shared.workload_clients).insert(cache_key, (value.0, client.clone()));
    Ok(client)
}

fn lock<T>(mutex: &std::sync::Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}
