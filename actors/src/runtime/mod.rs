//! The actor runtime: a supervisor with its watches, one provider actor per OVirtProvider, one machine actor per
//! OVirtMachine, and the status writer. Pure decisions live beside it in the crate; this module does the I/O.

mod capi;
mod cluster;
pub mod connection;
mod finalizers;
pub mod keys;
mod lookups;
mod machine;
pub mod messages;
mod provider;
pub mod settings;
pub mod status_writer;
mod supervisor;

pub use settings::RuntimeSettings;
pub use supervisor::{Supervisor, SupervisorArgs, SupervisorMsg};

use ractor::{Actor, ActorRef};

/// Now, at the one-second precision Kubernetes stores, so a condition read back equals the one written.
pub(crate) fn now() -> jiff::Timestamp {
    jiff::Timestamp::from_second(jiff::Timestamp::now().as_second()).unwrap_or_else(|_| jiff::Timestamp::now())
}

/// Starts the supervisor (and with it every other actor). Stop it with `stop_and_wait`.
pub async fn start(
    client: kube::Client,
    settings: RuntimeSettings,
) -> Result<ActorRef<SupervisorMsg>, ractor::SpawnErr> {
    let (supervisor, _) = Actor::spawn(None, Supervisor, SupervisorArgs { client, settings }).await?;
    Ok(supervisor)
}
