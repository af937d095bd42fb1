//! The actor runtime: a supervisor with its watches (`watches`), one provider actor per OVirtProvider (`provider/`:
//! the actor, its poll, inventory, finalizers, restarts, connection and lookups), one machine actor per OVirtMachine
//! (`machine/`), and the status writer (`status/`); the Kubernetes clients and slim decoding (`kube/`), the workload
//! clusters' clients and targets (`workload/`); what the actors share is `shared`, their messages `messages`, the
//! time `clock`. The pure decisions live in `capov-core`; this module does the I/O.

mod capi;
pub mod clock;
mod cluster;
mod cluster_endpoint;
mod credential_secrets;
mod device_claims;
pub mod finalizers;
mod held_mail;
mod ip_claim_writes;
pub(crate) mod ipam;
pub mod keys;
pub mod kube;
mod machine;
mod machine_mail;
pub mod mailbox;
pub mod messages;
mod permits;
pub mod provider;
mod relisting;
pub mod settings;
mod shared;
pub mod status;
mod supervisor;
mod timer_wheel;
mod watches;
mod workload;

pub use kube::clients::KubeClients;
pub use messages::SupervisorMsg;
pub use settings::{EngineWriteGate, RuntimeSettings};
pub use supervisor::{Supervisor, SupervisorArgs};

use ractor::{Actor, ActorRef};

use crate::metrics::Metrics;

/// Whether the runtime's watches have all listed their objects once (for readiness). False when the supervisor does
/// not answer within a second.
pub async fn is_synced(supervisor: &ActorRef<SupervisorMsg>, metrics: &Metrics) -> bool {
    let asked = mailbox::call(
        metrics,
        supervisor,
        SupervisorMsg::IsSynced,
        std::time::Duration::from_secs(1),
    );
    asked.await.unwrap_or(false)
}

/// Resolves once the runtime has stopped or is stopping without having been asked to (the supervisor failed, e.g.
/// because its status writer died): the caller then exits non-zero, so that Kubernetes restarts a clean process
/// rather than keeping a leader that does no work.
pub async fn stopped(supervisor: ActorRef<SupervisorMsg>) {
    use ractor::ActorStatus;
    while matches!(
        supervisor.get_status(),
        ActorStatus::Unstarted | ActorStatus::Starting | ActorStatus::Running | ActorStatus::Upgrading
    ) {
        tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    }
}

/// Starts the supervisor (and with it every other actor), feeding `metrics`. Stop it with `stop_and_wait`.
pub async fn start(
    clients: KubeClients,
    settings: RuntimeSettings,
    metrics: Metrics,
) -> Result<ActorRef<SupervisorMsg>, ractor::SpawnErr> {
    let mut settings = settings;
    if !settings.allow_internal_workload_servers {
        settings.internal_targets = workload::targets::gather(&clients.requests, &clients.apiserver).await;
    }
    if settings.management_cluster_id.is_empty() {
        settings.management_cluster_id = management_cluster_id(&clients.requests)
            .await
            .map_err(ractor::SpawnErr::StartupFailed)?;
    }
    let args = SupervisorArgs {
        clients,
        settings,
        metrics,
    };
    let (supervisor, _) = Actor::spawn(None, Supervisor, args).await?;
    Ok(supervisor)
}

/// The default identity of this management cluster: the UID of its `kube-system` namespace, which every cluster has
/// and which no tenant can change. Without it CAPOV cannot mark or recognise its VMs, so it does not start.
async fn management_cluster_id(client: &::kube::Client) -> Result<String, Box<dyn std::error::Error + Send + Sync>> {
    let namespaces: ::kube::Api<k8s_openapi::api::core::v1::Namespace> = ::kube::Api::all(client.clone());
    let kube_system = namespaces.get("kube-system").await.map_err(|err| {
        format!(
            "reading the kube-system namespace for the management cluster id (or set --management-cluster-id): {err}"
        )
    })?;
    kube_system
        .metadata
        .uid
        .filter(|uid| !uid.is_empty())
        .ok_or_else(|| "the kube-system namespace has no UID; set --management-cluster-id".into())
}
