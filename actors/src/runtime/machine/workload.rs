//! The workload cluster (SPEC §2 step 7): a client from the Secret `<cluster>-kubeconfig` (key `value`), the Node
//! of the VM (systemUUID equals the VM id, case-insensitive, or the Node is named like the VM), and setting its
//! spec.providerID. The kubeconfig is tenant-written: it goes through [`crate::workload_kubeconfig`] before any
//! client is built (a client is reused only for the same version of its Secret), and its server is checked
//! (`workload_targets`: no loopback, link-local or management cluster addresses). The server is the tenant's too:
//! every answer is capped (`clients::workload_client`) and decoded slim (`slim_requests`), a listing bounded by
//! its pages and time, and requests take turns per cluster and in all (`workload_clients`).

use std::hash::{Hash, Hasher};
use std::time::Duration;

use kube::ResourceExt;

use super::held_permit::GIVE_UP_AFTER;
use super::state::MachineState;
use crate::runtime::capi;
use crate::runtime::kube::clients::{self, answer_within};
use crate::runtime::kube::slim_requests::{self, Listing, RequestError, failed};
use crate::runtime::workload::clients::{Known, NoTurn, SecretVersion, TURN_WAIT, Turn, Wanted, WorkloadClient};
use crate::runtime::workload::targets::{self, Refusal};
use crate::workload_kubeconfig;
use capov_core::machine_steps::NodeObservation;
use capov_core::trust::workload_answers::KubeconfigSecret;
use capov_core::trust::workload_answers::{SecretValue, SlimNode};

/// Why there is no client for the workload cluster.
pub(super) enum NoClient {
    /// The kubeconfig was refused; nothing was sent anywhere.
    Rejected(String),
    /// The Secret is missing or holds no kubeconfig, or no client could be built from it.
    Unreachable(String),
    /// The management cluster did not answer the read of the kubeconfig Secret: nothing is known of the workload
    /// cluster, so a Ready machine must not report it unreachable; the pass retries with backoff.
    ManagementCluster(String),
    /// Too many passes are in their workload step (`workload::clients::NoTurn::Busy`): nothing is reported; the
    /// machine waits for the places it lacked and tries again.
    Busy(Wanted),
}

impl NoClient {
    pub(super) fn into_message(self) -> String {
        match self {
            NoClient::Rejected(message) | NoClient::Unreachable(message) | NoClient::ManagementCluster(message) => {
                message
            }
            NoClient::Busy(_) => BUSY.to_string(),
        }
    }
}

const BUSY: &str = "too many machines are at their Node step at once; retrying";

/// Why the Node is not known, when nothing is to be reported: only a retry.
pub enum NodeUnknown {
    /// The management cluster did not answer ([`NoClient::ManagementCluster`]).
    ManagementCluster(String),
    /// [`NoClient::Busy`]: the places to wait for.
    Busy(Wanted),
}

/// A write to the workload cluster's Node that failed.
pub enum NodeWriteError {
    /// Only a retry: the management cluster did not answer, or too many passes were at their Node step.
    Retry(String),
    /// The workload cluster could not be reached, or refused the write.
    Failed(String),
}

impl From<NoClient> for NodeWriteError {
    fn from(no_client: NoClient) -> Self {
        match no_client {
            NoClient::ManagementCluster(message) => NodeWriteError::Retry(message),
            NoClient::Busy(_) => NodeWriteError::Retry(BUSY.to_string()),
            other => NodeWriteError::Failed(other.into_message()),
        }
    }
}

pub async fn observe_node(
    state: &mut MachineState,
    cluster: &capi::Cluster,
    vm_id: &str,
    vm_name: &str,
) -> Result<NodeObservation, NodeUnknown> {
    let (client, _turn) = match connect(state, cluster).await {
        Ok(connected) => connected,
        Err(NoClient::Rejected(message)) => return Ok(NodeObservation::Rejected { message }),
        Err(NoClient::Unreachable(message)) => return Ok(NodeObservation::Unreachable { message }),
        Err(NoClient::ManagementCluster(message)) => return Err(NodeUnknown::ManagementCluster(message)),
        Err(NoClient::Busy(wanted)) => return Err(NodeUnknown::Busy(wanted)),
    };
    Ok(node_of_vm(&client, vm_id, vm_name).await)
}

/// Where Nodes are, in a workload apiserver.
pub(super) const NODES: &str = "/api/v1/nodes";

/// The Node named like the VM, else the one whose systemUUID is the VM's id.
async fn node_of_vm(client: &kube::Client, vm_id: &str, vm_name: &str) -> NodeObservation {
    // Kubelets name their Node after the host name, which CAPOV sets to the VM name: one GET usually finds it,
    // without listing every Node of a large cluster for each machine.
    match slim_requests::get::<SlimNode>(client, NODES, vm_name).await {
        Ok(Some(node)) => return found(node),
        Ok(None) => {}
        Err(err) => {
            return NodeObservation::Unreachable {
                message: failed("cannot read the workload cluster's Nodes", &err),
            };
        }
    }
    match tokio::time::timeout(NODE_LISTING_TIMEOUT, find_by_system_uuid(client, vm_id, vm_name)).await {
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

/// Nodes asked for per page: a page must fit in [`kube::clients::WORKLOAD_BODY_LIMIT`] (1 MiB), and a Node with the
/// images its kubelet reports is tens of kilobytes; 16 of up to 64 KiB fit. A page that does not fit is asked for
/// again at half the size, down to one Node; a page with more Nodes than asked for is refused.
pub const NODE_PAGE: u32 = 16;
/// Pages one listing reads at most: 5,120 Nodes, more than the 5,000 a Kubernetes cluster supports. A server whose
/// list never ends (a continue token on every page) stops here.
pub const MAX_NODE_PAGES: u32 = 320;
/// One listing, all its pages, takes at most this long.
pub const NODE_LISTING_TIMEOUT: Duration = Duration::from_secs(60);

const NODE_LISTING: Listing = Listing {
    what: "Nodes",
    kind: "Node",
    url_path: NODES,
    page: NODE_PAGE,
    max_pages: MAX_NODE_PAGES,
};

/// The Node whose systemUUID is the VM id (case-insensitive) or whose name is the VM's, page by page, stopping at the
/// match. Err: why the list could not be read.
pub(super) async fn find_by_system_uuid(
    client: &kube::Client,
    vm_id: &str,
    vm_name: &str,
) -> Result<Option<SlimNode>, String> {
    slim_requests::list(client, NODE_LISTING, |nodes: Vec<SlimNode>| {
        nodes.into_iter().find(|node| is_vm_node(node, vm_id, vm_name))
    })
    .await
}

fn is_vm_node(node: &SlimNode, vm_id: &str, vm_name: &str) -> bool {
    let uuid = node.system_uuid.as_deref();
    uuid.is_some_and(|uuid| uuid.eq_ignore_ascii_case(vm_id)) || node.name == vm_name
}

fn found(node: SlimNode) -> NodeObservation {
    NodeObservation::Found {
        name: node.name,
        provider_id: node.provider_id.filter(|id| !id.is_empty()),
        labels: node.labels,
    }
}

/// A JSON merge patch of the Node (labels merge: others stay as they are), and the Node as its answer shows it after
/// the write; None when the answer could not be decoded or names another Node (the write succeeded all the same).
/// `what`: the error's beginning, e.g. "cannot set the Node's providerID".
pub async fn patch_node(
    state: &mut MachineState,
    cluster: &capi::Cluster,
    node: &str,
    patch: &serde_json::Value,
    what: &str,
) -> Result<Option<NodeObservation>, NodeWriteError> {
    let (client, _turn) = connect(state, cluster).await?;
    slim_requests::merge_patch::<SlimNode>(&client, NODES, node, patch)
        .await
        // An answer about another object (a workload apiserver is the tenant's) is not the Node: the next step reads.
        .map(|written| written.filter(|answer| answer.name == node).map(found))
        .map_err(|err| NodeWriteError::Failed(failed(what, &err)))
}

/// Whether a management-cluster error is the apiserver struggling (5xx, 429, no answer): a retry, nothing to report.
fn management_cluster_struggles(err: &RequestError) -> bool {
    match err {
        RequestError::Status { code, .. } => !((400..500).contains(code) && *code != 429),
        RequestError::Transport(_) => true,
        RequestError::Answer(_) | RequestError::Request(_) => false,
    }
}

/// The workload cluster's client and a turn to use it (`workload_clients`).
/// The pass takes a place in the workload step first, unless it holds one, so that the kubeconfig Secret reads are
/// bounded too, and one of its cluster's places before it waits for a turn; it keeps them to its end
/// (`MachineState::workload_place`).
pub(super) async fn connect(
    state: &mut MachineState,
    cluster: &capi::Cluster,
) -> Result<(kube::Client, Turn), NoClient> {
    let mut place = match state.workload_place.take() {
        Some(place) => place,
        None => state.shared.workload_clients.try_place().map_err(no_turn)?,
    };
    let client = match workload_client(state, cluster).await {
        Ok(client) => client,
        Err(no_client) => {
            state.workload_place = Some(place);
            return Err(no_client);
        }
    };
    let turn = state.shared.workload_clients.turn(&client, &mut place).await;
    state.workload_place = Some(place);
    turn.map(|turn| (client.client, turn)).map_err(no_turn)
}

fn no_turn(err: NoTurn) -> NoClient {
    match err {
        NoTurn::Busy(wanted) => NoClient::Busy(wanted),
        NoTurn::TimedOut => NoClient::Unreachable(format!(
            "no turn to talk to the workload cluster within {TURN_WAIT:?}: its apiserver, or those of other \
             workload clusters, answer slowly; retrying with backoff"
        )),
    }
}

/// The workload kubeconfig Secret, decoded slim; a failure says whether the management cluster struggles (retried
/// quietly) or the user has something to fix.
async fn kubeconfig_secret(
    state: &MachineState,
    namespace: &str,
    secret_name: &str,
) -> Result<KubeconfigSecret, NoClient> {
    // Read without a permit (the workload step holds none), but with a pass's deadline: the machines of the cluster
    // wait for this read's turn, and one the apiserver held kept them all waiting until the read timeout.
    let read = slim_requests::kubeconfig_secret(
        &state.shared.client,
        namespace,
        secret_name,
        workload_kubeconfig::MAX_BYTES,
    );
    answer_within(GIVE_UP_AFTER, read)
        .await
        .map_err(|err| {
            let message = format!("cannot read Secret {secret_name}: {err}");
            match management_cluster_struggles(&err) {
                true => NoClient::ManagementCluster(message),
                // Forbidden and the like: the user has something to fix, and the condition says what.
                false => NoClient::Unreachable(message),
            }
        })?
        .ok_or_else(|| not_found(namespace, secret_name))
}

fn not_found(namespace: &str, secret_name: &str) -> NoClient {
    NoClient::Unreachable(format!(
        "Secret {namespace}/{secret_name} with the workload kubeconfig (key value) not found"
    ))
}

async fn workload_client(state: &MachineState, cluster: &capi::Cluster) -> Result<WorkloadClient, NoClient> {
    let namespace = state.key.namespace_str().to_string();
    let secret_name = format!("{}-kubeconfig", cluster.name_any());
    let cache_key = (namespace.clone(), secret_name.clone());
    let clients = &state.shared.workload_clients;
    if let Some(client) = clients.recently_checked(&cache_key) {
        return Ok(client);
    }
    // A few reads at once: each holds the Secret's answer until it is decoded, and the kubeconfig until it is parsed.
    let Some(read_turn) = clients.secret_read().await else {
        return Err(NoClient::ManagementCluster(format!(
            "too many workload kubeconfig Secrets are being read at once; Secret {namespace}/{secret_name} is read \
             again with backoff"
        )));
    };
    // Another pass of the cluster may have read it meanwhile.
    if let Some(client) = clients.recently_checked(&cache_key) {
        return Ok(client);
    }
    let not_found = || not_found(&namespace, &secret_name);
    let secret = kubeconfig_secret(state, &namespace, &secret_name).await?;
    let rejected = |why: &str| {
        NoClient::Rejected(format!(
            "the workload kubeconfig in Secret {namespace}/{secret_name} (key value) was rejected and nothing was \
             sent to its server: {why}"
        ))
    };
    let value = match secret.value {
        Some(SecretValue::Kept(value)) => value,
        Some(SecretValue::TooLarge { bytes }) => {
            let why = workload_kubeconfig::too_large(bytes).to_string();
            let version = secret_version(secret.uid, secret.resource_version, &[]);
            clients.refuse(cache_key, version, why.clone());
            return Err(rejected(&why));
        }
        None => return Err(not_found()),
    };
    // A client per pass would mean a TLS handshake with the workload apiserver per pass, and a parse of its
    // kubeconfig: one is kept per cluster for as long as its Secret stays the same version (a refusal too).
    let version = secret_version(secret.uid, secret.resource_version, &value);
    match clients.known(&cache_key, &version) {
        Some(Known::Client(client)) => return Ok(client),
        Some(Known::Refused(why)) => return Err(rejected(&why)),
        None => {}
    }
    let kubeconfig = match workload_kubeconfig::parse(&value) {
        Ok(kubeconfig) => kubeconfig,
        Err(rejection) => {
            let why = rejection.to_string();
            clients.refuse(cache_key, version, why.clone());
            return Err(rejected(&why));
        }
    };
    let kubeconfig_bytes = value.len();
    drop((value, read_turn));
    let mut config = kubeconfig.to_kube_config();
    if !state.shared.settings.allow_internal_workload_servers {
        config = match targets::admit(config, &state.shared.settings.internal_targets).await {
            Ok(config) => config,
            Err(Refusal::Internal(why)) => {
                clients.refuse(cache_key, version, why.clone());
                return Err(rejected(&why));
            }
            Err(Refusal::Unresolved(why)) => return Err(NoClient::Unreachable(why)),
        };
    }
    let client = clients::workload_client(config).map_err(|err| {
        NoClient::Unreachable(format!(
            "Secret {secret_name}: cannot build a client from the workload kubeconfig: {err}"
        ))
    })?;
    Ok(clients.insert(cache_key, version, kubeconfig_bytes, client))
}

/// The version of a kubeconfig Secret: its uid and resourceVersion, and a fingerprint of its value, so that even a
/// Secret whose resourceVersion did not come through is not taken for another.
fn secret_version(uid: String, resource_version: String, value: &[u8]) -> SecretVersion {
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    value.hash(&mut hasher);
    SecretVersion {
        uid,
        resource_version,
        value: hasher.finish(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn api_error(code: u16) -> RequestError {
        RequestError::Status {
            code,
            status: Default::default(),
        }
    }

    #[test]
    fn only_a_struggling_management_cluster_is_a_mere_retry() {
        for code in [500, 503, 504, 429] {
            assert!(management_cluster_struggles(&api_error(code)), "{code}");
        }
        let no_answer = RequestError::Transport(kube::Error::Service(Box::new(std::io::Error::other("reset"))));
        assert!(management_cluster_struggles(&no_answer));
        // Forbidden (missing RBAC on the tenant's namespace) and the like are the user's to fix: reported.
        for code in [400, 401, 403, 422] {
            assert!(!management_cluster_struggles(&api_error(code)), "{code}");
        }
    }
}
