//! Messages between the runtime's actors.

use std::sync::Arc;

use capov_crds::OVirtMachine;

pub use crate::machine_steps::ProviderDefaults;

use super::connection::ConnectionProblem;
use crate::vm_snapshot::VmSnapshot;

/// What a provider actor knows about its engine connection.
#[derive(Clone, Debug)]
pub enum Connection {
    /// Not checked yet.
    Pending,
    Ready {
        client: capov_ovirt::Client,
        engine_version: String,
        defaults: ProviderDefaults,
        /// The engine URL and user of this connection, recorded with each VM created through it.
        engine: crate::identity::EngineIdentity,
    },
    Failed {
        problem: ConnectionProblem,
        since: std::time::Instant,
    },
}

/// Messages a machine actor handles.
pub enum MachineMsg {
    /// The OVirtMachine changed (or a related object did: its Machine, Cluster, bootstrap Secret).
    ObjectChanged(std::sync::Arc<OVirtMachine>),
    /// Something the machine depends on changed; reconcile with what is known.
    Poke,
    /// The provider's connection changed (new credentials, spec, or connectivity).
    ConnectionChanged,
    /// The provider's batched poll saw this VM changed (`None`: the VM no longer exists).
    VmObserved {
        vm_id: String,
        snapshot: Option<Arc<VmSnapshot>>,
    },
    /// Time for the next reconcile.
    Tick,
}
