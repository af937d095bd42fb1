//! The actor runtime: a supervisor with its watches, one provider actor per OVirtProvider, one machine actor per
//! OVirtMachine, and the status writer. Pure decisions live beside it in the crate; this module does the I/O.

mod capi;
mod cluster;
pub mod connection;
mod finalizers;
pub mod keys;
mod lookups;
mod machine;
pub mod mailbox;
pub mod messages;
mod permits;
mod provider;
pub mod settings;
pub mod status_writer;
mod supervisor;

pub use settings::RuntimeSettings;
pub use supervisor::{Supervisor, SupervisorArgs, SupervisorMsg};

use ractor::{Actor, ActorRef};

use crate::metrics::Metrics;

/// Now, at the one-second precision Kubernetes stores, so a condition read back equals the one written.
pub(crate) fn now() -> jiff::Timestamp {
    jiff::Timestamp::from_second(jiff::Timestamp::now().as_second()).unwrap_or_else(|_| jiff::Timestamp::now())
}

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

/// Starts the supervisor (and with it every other actor), feeding `metrics`. Stop it with `stop_and_wait`.
pub async fn start(
    client: kube::Client,
    settings: RuntimeSettings,
    metrics: Metrics,
) -> Result<ActorRef<SupervisorMsg>, ractor::SpawnErr> {
    let args = SupervisorArgs {
        client,
        settings,
        metrics,
    };
    let (supervisor, _) = Actor::spawn(None, Supervisor, args).await?;
    Ok(supervisor)
}
