//! Messages between the runtime's actors.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use capov_crds::{OVirtCluster, OVirtMachine, OVirtProvider};
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use kube::runtime::watcher::Event;
use ractor::{ActorRef, RpcReplyPort};

pub use capov_core::machine_steps::ProviderDefaults;

use crate::runtime::keys::ObjectKey;
use crate::runtime::provider::connection::ConnectionProblem;
use capov_core::vm::vm_snapshot::{Fingerprints, VmSnapshot};

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
        engine: capov_core::trust::identity::EngineIdentity,
        /// The management cluster ids this provider's VM markers name (its annotation and this cluster's id).
        management_clusters: capov_core::trust::management_clusters::ManagementClusters,
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
    /// The reconcile permit of the ticket the machine left in the queue (`permits`): its pass runs now.
    Permitted(crate::runtime::permits::Permit),
    /// The Node-step places the machine's last pass lacked, waited for outside its actor (`pass::wait_for_place`):
    /// its pass runs now, with them. None: they did not come within `workload::clients::PLACE_WAIT`, and the pass
    /// tries for them again.
    Placed(Option<crate::runtime::workload::clients::StepPlace>),
}

/// A machine's state while it has no actor (`machine::dormant`): the supervisor holds it until mail comes for the
/// machine, then starts its actor again with it.
pub trait Dormant: Send + Sync + 'static {
    fn key(&self) -> &ObjectKey;
    /// The uid of the object the state is of: an object deleted and created again under the same name is another.
    fn uid(&self) -> Option<&str>;
    /// The actor had a pass queued when it stopped: it must start again at once.
    fn wants_pass(&self) -> bool;
    /// Takes a newer object as the actor would; true when the machine must pass on it (a pass is then queued).
    fn takes_object(&mut self, object: Arc<OVirtMachine>) -> bool;
    /// The machine is gone for good: gives back what its actor's stop would.
    fn release(self: Box<Self>);
    /// For the actor that starts again with it.
    fn into_any(self: Box<Self>) -> Box<dyn std::any::Any + Send>;
}

/// Messages the supervisor handles: the events of its watches, and its own timers.
pub enum SupervisorMsg {
    /// Boxed, as clusters and machines are: an OVirtProvider (access lists, TLS, defaults) or a Secret is much larger
    /// than the other messages.
    Provider(Box<Event<OVirtProvider>>),
    Secret(Box<Event<Secret>>),
    /// Boxed, as machines are: an OVirtCluster or OVirtMachine (failure domains, capacity, the VM's shape) is much
    /// larger than the other messages.
    Cluster(Box<Event<OVirtCluster>>),
    Machine(Box<Event<OVirtMachine>>),
    /// A CAPI Cluster or a Namespace changed: every machine of the namespace looks again. With `machine`, a CAPI
    /// Machine changed: only the OVirtMachine it names (spec.infrastructureRef) looks again; it is the only one that
    /// reads it, and waking the whole namespace for each Machine event costs N² messages while N Machines are listed.
    CapiChanged {
        namespace: String,
        machine: Option<String>,
    },
    /// A store (CAPI Machines, Clusters, Namespaces) has listed its objects for the first time: every machine looks
    /// again. Listed objects reach the store only when the list is complete, so a machine woken by one of them earlier
    /// may not have found it. A later relist wakes only the machines whose objects changed (`CapiChanged`).
    CapiListed,
    Restart(ObjectKey),
    /// A machine actor with nothing to do stopped and left its state.
    Dormant(Box<dyn Dormant>),
    /// Time to start the actors of the next dormant machines queued to wake (`supervisor::wake_turn`).
    WakeTurn,
    /// Mail for a machine whose actor has stopped (to rest, or for good): held for the machine, which is woken.
    ToMachine {
        key: ObjectKey,
        message: MachineMsg,
    },
    /// Time to start again the actor of the OVirtProvider of this name, which failed: from the object as it is
    /// now, not as it was when the actor failed.
    RestartProvider(String),
    /// Time to try a failed finalizer write again.
    RetryFinalizer(FinalizerOwner),
    /// A watch has listed everything once.
    Synced(&'static str),
    /// Whether every watch has listed everything once (readiness).
    IsSynced(ractor::RpcReplyPort<bool>),
    /// Answered once handled, so once every message sent before it was: a watch waits for it every few events
    /// (`watches::forward`), so that a list of 10,000 objects waits in the watch's page instead of in the mailbox.
    CaughtUp(ractor::RpcReplyPort<()>),
    /// A provider polled its engine's inventory: the OVirtClusters' capacity is written again (unchanged ones are
    /// not written).
    InventoryPolled,
}

/// An object whose finalizer CAPOV must add or remove. A failed write is retried with jittered backoff until it
/// succeeds or the object is gone: no later watch event may come to trigger it again (`provider_finalizers`).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum FinalizerOwner {
    Cluster { namespace: String, name: String },
    Provider(String),
}

/// What the provider actor of an OVirtProvider is told: its object and Secret, checks and their outcomes, the
/// machines that subscribe to its connection or watch a VM through its poll, and the poll's and inventory's results.
pub enum ProviderMsg {
    Spec(Box<OVirtProvider>),
    Secret(Option<BTreeMap<String, ByteString>>),
    Check,
    /// The outcome of the check task started as number `generation` (older ones are ignored).
    Checked {
        generation: u64,
        outcome: Result<String, ConnectionProblem>,
    },
    /// A request of this provider failed in a way that may mean the connection broke.
    Trouble,
    Subscribe {
        machine: ObjectKey,
        actor: ActorRef<MachineMsg>,
    },
    Unsubscribe(ObjectKey),
    /// The machine rested (`machine::dormant`): its mail goes to the supervisor from now on, in the order sent.
    Rests(ObjectKey),
    GetConnection(RpcReplyPort<Connection>),
    /// Report `vm_id` to `machine` whenever its fingerprint ([`VmSnapshot::fingerprint`]) differs from `seen` (None:
    /// never seen, or not found); each report becomes the new `seen`.
    WatchVm {
        machine: ObjectKey,
        watch: VmWatch,
        seen: Option<Fingerprints>,
    },
    UnwatchVm(ObjectKey),
    Poll,
    /// The poll task's result for `searched` (machine, VM id): the VMs that differ from what their watches last
    /// reported (None inside: not found), or None when the search failed.
    Polled {
        searched: Vec<(ObjectKey, String)>,
        changed: Option<HashMap<String, Option<Arc<VmSnapshot>>>>,
    },
    /// The inventory poll's result (None: it failed).
    Inventoried(Option<Box<capov_core::placement::capacity::Inventory>>),
}

/// A VM a machine wants the batched search to watch, and how often.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VmWatch {
    pub vm_id: String,
    pub cadence: Cadence,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Cadence {
    /// A VM in a transition: every poll interval.
    EveryPoll,
    /// A running VM whose machine is Ready: every [`capov_core::policy::backoff::STEADY_POLL_EVERY`] polls.
    Steady,
}
