//! The workload cluster (SPEC §2 step 7): a client from the Secret `<cluster>-kubeconfig` (key `value`), the Node
//! of the VM (systemUUID equals the VM id, case-insensitive, or the Node is named like the VM), and setting its
//! spec.providerID. The kubeconfig is tenant-written: it goes through [`crate::workload_kubeconfig`] before any
//! client is built or reused, and its server is checked (`workload_targets`: no loopback, link-local or management
//! cluster addresses). The server is the tenant's too: every answer is capped (`kube_clients::workload_client`),
//! a listing by its pages and time, and requests take turns per cluster and in all (`workload_clients`).

use std::time::Duration;

use k8s_openapi::api::core::v1::{Node, Secret};
use kube::ResourceExt;
use kube::api::{Api, ListParams, Patch, PatchParams};
use serde_json::json;

use super::state::MachineState;
use crate::bounded_text;
use crate::machine_steps::NodeObservation;
use crate::runtime::body_limit::ResponseTooLarge;
use crate::runtime::capi;
use crate::runtime::kube_clients;
use crate::runtime::workload_clients::{TURN_WAIT, Turn, WorkloadClient};
use crate::runtime::workload_targets::{self, Refusal};
use crate::workload_kubeconfig;

/// Why there is no client for the workload cluster.
pub(super) enum NoClient {
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

pub async fn observe_node(
    state: &MachineState,
    cluster: &capi::Cluster,
    vm_id: &str,
    vm_name: &str,
) -> NodeObservation {
    let (client, _turn) = match connect(state, cluster).await {
        Ok(connected) => connected,
        Err(NoClient::Rejected(message)) => return NodeObservation::Rejected { message },
        Err(NoClient::Unreachable(message)) => return NodeObservation::Unreachable { message },
    };
    let api = Api::<Node>::all(client);
    // Kubelets name their Node after the host name, which CAPOV sets to the VM name: one GET usually finds it,
    // without listing every Node of a large cluster for each machine.
    match api.get_opt(vm_name).await {
        Ok(Some(node)) => return found(node),
        Ok(None) => {}
        Err(err) => {
            return NodeObservation::Unreachable {
                message: failed("cannot read the workload cluster's Nodes", &err),
            };
        }
    }
    match tokio::time::timeout(NODE_LISTING_TIMEOUT, find_by_system_uuid(&api, vm_id, vm_name)).await {
        Ok(Ok(Some(node))) => found(node),
        Ok(Ok(None)) => NodeObservation::NotFound,
        Ok(Err(message)) => NodeObservation::Unreachable { message },
        Err(_) => NodeObservation::Unreachable {
            message: format!(
                "listing the workload cluster's Nodes took longer than {NODE_LISTING_TIMEOUT:?}; retrying with backoff"
            ),
        },
    }
}

/// Nodes asked for per page: a page must fit in [`kube_clients::WORKLOAD_BODY_LIMIT`] (1 MiB), and a Node with the images its
/// kubelet reports is tens of kilobytes; 16 of up to 64 KiB fit. A page that does not fit is asked for again at half
/// the size, down to one Node.
pub const NODE_PAGE: u32 = 16;
/// Pages one listing reads at most: 5,120 Nodes, more than the 5,000 a Kubernetes cluster supports. A server whose
/// list never ends (a continue token on every page) stops here.
pub const MAX_NODE_PAGES: u32 = 320;
/// One listing, all its pages, takes at most this long.
pub const NODE_LISTING_TIMEOUT: Duration = Duration::from_secs(60);

/// The Node whose systemUUID is the VM id (case-insensitive) or whose name is the VM's, page by page, stopping at the
/// match: a whole list of a cluster of thousands of Nodes, decoded, is tens of MB for each pass that looks. Err: why
/// the list could not be read.
pub(super) async fn find_by_system_uuid(api: &Api<Node>, vm_id: &str, vm_name: &str) -> Result<Option<Node>, String> {
    let mut page_size = NODE_PAGE;
    let mut token: Option<String> = None;
    for _ in 0..MAX_NODE_PAGES {
        let mut params = ListParams::default().limit(page_size);
        if let Some(token) = &token {
            params = params.continue_token(token);
        }
        let page = match api.list(&params).await {
            Ok(page) => page,
            Err(err) if ResponseTooLarge::caused(&err) && page_size > 1 => {
                page_size /= 2;
                continue;
            }
            Err(err) => return Err(failed("cannot list the workload cluster's Nodes", &err)),
        };
        token = page.metadata.continue_.filter(|token| !token.is_empty());
        if let Some(node) = page.items.into_iter().find(|node| is_vm_node(node, vm_id, vm_name)) {
            return Ok(Some(node));
        }
        if token.is_none() {
            return Ok(None);
        }
    }
    Err(format!(
        "the workload cluster's Node list did not end within {MAX_NODE_PAGES} pages; retrying with backoff"
    ))
}

fn is_vm_node(node: &Node, vm_id: &str, vm_name: &str) -> bool {
    let uuid = node
        .status
        .as_ref()
        .and_then(|s| s.node_info.as_ref())
        .map(|info| info.system_uuid.as_str());
    uuid.is_some_and(|uuid| uuid.eq_ignore_ascii_case(vm_id)) || node.name_any() == vm_name
}

/// What went wrong, with the error cut short: a workload apiserver's error carries its own text.
pub(super) fn failed(what: &str, err: &kube::Error) -> String {
    format!("{what}: {}", bounded_text::cut(&err.to_string(), ERROR_TEXT))
}

/// How much of a workload apiserver's error text a message keeps.
const ERROR_TEXT: usize = 300;

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
    let (client, _turn) = connect(state, cluster).await.map_err(NoClient::into_message)?;
    let patch = json!({"metadata": {"labels": labels}});
    Api::<Node>::all(client)
        .patch(node, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .map(|_| ())
        .map_err(|err| failed("cannot set the Node's topology labels", &err))
}

pub async fn set_node_provider_id(
    state: &MachineState,
    cluster: &capi::Cluster,
    node: &str,
    provider_id: &str,
) -> Result<(), String> {
    let (client, _turn) = connect(state, cluster).await.map_err(NoClient::into_message)?;
    let patch = json!({"spec": {"providerID": provider_id}});
    Api::<Node>::all(client)
        .patch(node, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .map(|_| ())
        .map_err(|err| failed("cannot set the Node's providerID", &err))
}

/// The workload cluster's client and a turn to use it (`workload_clients`).
pub(super) async fn connect(state: &MachineState, cluster: &capi::Cluster) -> Result<(kube::Client, Turn), NoClient> {
    let client = workload_client(state, cluster).await?;
    match state.shared.workload_clients.turn(&client).await {
        Some(turn) => Ok((client.client, turn)),
        None => Err(NoClient::Unreachable(format!(
            "no turn to talk to the workload cluster within {TURN_WAIT:?}: its apiserver, or those of other \
             workload clusters, answer slowly; retrying with backoff"
        ))),
    }
}

async fn workload_client(state: &MachineState, cluster: &capi::Cluster) -> Result<WorkloadClient, NoClient> {
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
    let clients = &state.shared.workload_clients;
    let rejected = |why: String| {
        NoClient::Rejected(format!(
            "the workload kubeconfig in Secret {namespace}/{secret_name} (key value) was rejected and nothing was \
             sent to its server: {why}"
        ))
    };
    // Checked on every pass and before the cache, so that a client is only used for a kubeconfig that passes now,
    // and a rejected one also drops the client of the kubeconfig it replaced.
    let kubeconfig = match workload_kubeconfig::parse(&value.0) {
        Ok(kubeconfig) => kubeconfig,
        Err(rejection) => {
            clients.remove(&cache_key);
            return Err(rejected(rejection.to_string()));
        }
    };
    // A client per pass would mean a TLS handshake with the workload apiserver per pass; one per cluster is kept
    // for as long as its kubeconfig stays the same.
    if let Some(client) = clients.get(&cache_key, &value.0) {
        return Ok(client);
    }
    let mut config = kubeconfig.to_kube_config();
    if !state.shared.settings.allow_internal_workload_servers {
        config = workload_targets::admit(config, &state.shared.settings.internal_targets)
            .await
            .map_err(|refusal| match refusal {
                Refusal::Internal(why) => rejected(why),
                Refusal::Unresolved(why) => NoClient::Unreachable(why),
            })?;
    }
    let client = kube_clients::workload_client(config).map_err(|err| {
        NoClient::Unreachable(format!(
            "Secret {secret_name}: cannot build a client from the workload kubeconfig: {err}"
        ))
    })?;
    Ok(clients.insert(cache_key, value.0, client))
}
