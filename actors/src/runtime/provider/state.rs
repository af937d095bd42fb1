//! What a provider actor holds, shared by its handler, its checks and its poll.

use crate::metrics::Metrics;
use crate::runtime::keys::ObjectKey;
use crate::runtime::mailbox::{ActorMetrics, Alive};
use crate::runtime::messages::{Connection, MachineMsg, SupervisorMsg, VmWatch};
use crate::runtime::provider::connection::ConnectionSettings;
use crate::runtime::provider::inventory::InventoryPoll;
use crate::runtime::settings::RuntimeSettings;
use crate::runtime::status::writer::StatusWriterMsg;
use capov_core::trust::management_clusters::ManagementClusters;
use capov_core::vm::vm_snapshot::Fingerprints;
use capov_crds::{Condition, OVirtProvider};
use capov_ovirt::Client;
use k8s_openapi::ByteString;
use ractor::ActorRef;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::time::{Duration, Instant};

/// How often a working connection is checked again (one `GET /api`).
pub const RECHECK_INTERVAL: Duration = Duration::from_secs(30);
/// A failed request triggers a check at most this often.
pub(super) const TROUBLE_DEBOUNCE: Duration = Duration::from_secs(5);
/// Retries of an unreachable engine back off to at most this (one `GET /api` per interval during an outage), so
/// that the end of an outage shows within it.
pub(super) const UNREACHABLE_MAX_RETRY: Duration = Duration::from_secs(30);

pub struct ProviderState {
    pub(super) key: ObjectKey,
    pub(super) provider: OVirtProvider,
    pub(super) secret: Option<BTreeMap<String, ByteString>>,
    pub(super) settings: RuntimeSettings,
    pub(super) status_writer: ActorRef<StatusWriterMsg>,
    /// Where mail for a subscriber whose actor has stopped goes (`machine_mail::tell`).
    pub(super) supervisor: ActorRef<SupervisorMsg>,
    pub(super) applied: Option<ConnectionSettings>,
    /// The management clusters the provider's VM markers name, as last resolved.
    pub(super) management_clusters: Option<ManagementClusters>,
    pub(super) client: Option<Client>,
    pub(super) connection: Connection,
    pub(super) conditions: Vec<Condition>,
    /// The InsecureTransport Event was recorded since the provider last connected over https.
    pub(super) insecure_transport_warned: bool,
    /// Retry delay of a failed check: 5 s doubling to 5 min, jittered.
    pub(super) retry: capov_core::policy::backoff::Backoff,
    /// The machines subscribed, with their actor; None once the machine rested (its mail goes to the supervisor).
    pub(super) subscribers: HashMap<ObjectKey, Option<ActorRef<MachineMsg>>>,
    pub(super) watched: HashMap<ObjectKey, Watched>,
    /// Polls so far; steady watches are searched on every STEADY_POLL_EVERY-th.
    pub(super) polls: u64,
    pub(super) poll_timer: Option<tokio::task::JoinHandle<()>>,
    /// A poll task is running; ticks meanwhile are skipped.
    pub(super) poll_in_flight: bool,
    /// Hosts, clusters and storage domains, polled every INVENTORY_EVERY polls (issue #27).
    pub(super) inventory: InventoryPoll,
    /// The tenants whose engine queue depth was last reported above zero.
    pub(super) queued_tenants: HashSet<capov_ovirt::Tenant>,
    /// Number of the latest check task; outcomes of older ones are dropped.
    pub(super) check_generation: u64,
    pub(super) check_in_flight: bool,
    /// The next scheduled check (a retry or the periodic re-check); replaced, never doubled.
    pub(super) next_check: Option<tokio::task::JoinHandle<()>>,
    pub(super) last_trouble_check: Option<Instant>,
    /// The spec or Secret changed: machines hear of the next check's outcome even when the connection is the same
    /// (e.g. spec.allowedNamespaces changed).
    pub(super) notify_after_check: bool,
    pub(super) metrics: Metrics,
    pub(super) mail: ActorMetrics,
    pub(super) _alive: Alive,
}

/// What the provider holds per watched machine.
pub(super) struct Watched {
    pub(super) watch: VmWatch,
    pub(super) seen: Option<Fingerprints>,
    /// A search has answered for this VM since the machine began watching it.
    pub(super) searched: bool,
}

impl Watched {
    /// The machine has seen nothing of its VM and waits for a search to hand it over (its first pass after a
    /// restart): searched at the next poll whatever its cadence, and reported even when the VM is not found.
    pub(super) fn first_sight(&self) -> bool {
        self.seen.is_none() && !self.searched
    }
}
