//! What every actor of the runtime shares: the Kubernetes clients, metrics and settings, the status writer, the
//! reconcile permits, the stores the watches fill, the provider actors, and the caches of workload clients and
//! engine lookups. The supervisor builds it once.

use std::collections::HashMap;
use std::sync::{Arc, RwLock};

use k8s_openapi::api::core::v1::Namespace;
use kube::runtime::reflector::{self, Store};
use ractor::ActorRef;

use crate::metrics::Metrics;
use crate::runtime::device_claims::DeviceClaims;
use crate::runtime::kube::clients::KubeClients;
use crate::runtime::mailbox;
use crate::runtime::messages::{MachineMsg, ProviderMsg, SupervisorMsg};
use crate::runtime::permits::{Courier, ReconcilePermits};
use crate::runtime::provider::lookups::{LOOKUP_TTL, Lookups};
use crate::runtime::provider::placements::Placements;
use crate::runtime::settings::RuntimeSettings;
use crate::runtime::status::writer::StatusWriterMsg;
use crate::runtime::timer_wheel::TimerWheel;
use crate::runtime::workload::clients::WorkloadClients;
use crate::runtime::{capi, ipam};

/// What every actor of the runtime shares.
pub struct Shared {
    /// Every request but the watches (deadlines: `kube_clients`).
    pub client: kube::Client,
    /// The watches only: they may stay silent for minutes, which the request client's read timeout would cut.
    pub watch_client: kube::Client,
    pub metrics: Metrics,
    pub settings: RuntimeSettings,
    pub status_writer: ActorRef<StatusWriterMsg>,
    /// Where dormant machines are kept and mail that finds a machine's actor stopped goes (`machine_mail::tell`).
    pub supervisor: ActorRef<SupervisorMsg>,
    /// `--max-concurrent-reconciles` permits, taken by a machine actor for each reconcile.
    pub permits: Arc<ReconcilePermits>,
    /// CAPI Machines and Clusters, holding only the fields CAPOV reads (`capi.rs`).
    pub capi_machines: Store<capi::Machine>,
    pub capi_clusters: Store<capi::Cluster>,
    /// The namespaces machines live in (for the labels `spec.allowedNamespaces.selector` of providers matches).
    pub namespaces: Store<Namespace>,
    /// The IPAddressClaims and IPAddresses of static addresses (`ipam.rs`).
    pub ip_claims: Store<ipam::IpAddressClaim>,
    pub ip_addresses: Store<ipam::IpAddress>,
    /// Whether `ip_claims` holds every claim yet (its watch fills it).
    pub ip_claims_listing: Arc<ipam::ClaimsListing>,
    /// OVirtClusters, for their failure domains (machines) and capacity (the supervisor, after inventory polls).
    pub ovirt_clusters: Store<capov_crds::OVirtCluster>,
    /// Engine inventories, where machines are, affinity group locks.
    pub placements: Arc<Placements>,
    /// The host devices machines of this process are creating their VMs with.
    pub device_claims: DeviceClaims,
    /// The timers of the machines' next passes.
    pub timers: TimerWheel,
    pub providers: RwLock<HashMap<String, ActorRef<ProviderMsg>>>,
    /// Each provider's `spec.allowedNamespaces` and `spec.tenantPlacement`, as last seen by the supervisor.
    pub provider_access: RwLock<HashMap<String, ProviderAccess>>,
    /// Whether the OVirtProvider watch has listed them once: only then is a provider `providers` lacks missing (an
    /// OVirtCluster leaves its failure domains out), not merely not seen yet.
    pub providers_listed: std::sync::atomic::AtomicBool,
    /// Whether every provider listed once has its actor (the credential Secrets were listed too, which the actors
    /// wait for): only then does a machine that finds no provider actor report its provider missing.
    pub providers_started: std::sync::atomic::AtomicBool,
    /// Whether the CAPI Machines' and Clusters' watches have listed once ([`Shared::capi_listed`]).
    pub capi_machines_listed: std::sync::atomic::AtomicBool,
    pub capi_clusters_listed: std::sync::atomic::AtomicBool,
    /// Clients of the tenants' workload apiservers, and how many requests they send at once.
    pub workload_clients: WorkloadClients,
    /// Engine objects many machines look up alike (clusters, templates, networks …), kept briefly.
    pub lookups: Lookups,
}

/// What an OVirtProvider lets tenants use: which namespaces, and where their VMs may go.
#[derive(Clone, Debug, Default)]
pub struct ProviderAccess {
    pub namespaces: Option<capov_crds::AllowedNamespaces>,
    pub placement: Option<capov_crds::TenantPlacement>,
}

impl ProviderAccess {
    pub fn of(provider: &capov_crds::OVirtProvider) -> ProviderAccess {
        ProviderAccess {
            namespaces: provider.spec.allowed_namespaces.clone(),
            placement: provider.spec.tenant_placement.clone(),
        }
    }
}

/// The stores the watches fill (`watches::StoreWriters`), as the actors read them.
pub struct Stores {
    pub capi_machines: Store<capi::Machine>,
    pub capi_clusters: Store<capi::Cluster>,
    pub namespaces: Store<Namespace>,
    pub ip_claims: Store<ipam::IpAddressClaim>,
    pub ip_addresses: Store<ipam::IpAddress>,
    pub ovirt_clusters: Store<capov_crds::OVirtCluster>,
}

/// Takes a ticket's permit to its machine through the supervisor, which hands it to the machine's actor or wakes the
/// machine with it; a permit for a machine that is gone is dropped there and goes on to the next waiter.
fn permit_courier(metrics: Metrics, supervisor: ActorRef<SupervisorMsg>) -> Courier {
    Box::new(move |key, permit| {
        let message = SupervisorMsg::ToMachine {
            key,
            message: MachineMsg::Permitted(permit),
        };
        match mailbox::cast(&metrics, &supervisor, message) {
            Err(ractor::MessagingErr::SendErr(SupervisorMsg::ToMachine {
                message: MachineMsg::Permitted(permit),
                ..
            })) => Err(permit),
            _ => Ok(()),
        }
    })
}

impl Shared {
    /// What the actors share when the runtime starts: no provider actor yet, nothing cached.
    pub fn new(
        clients: KubeClients,
        metrics: Metrics,
        settings: RuntimeSettings,
        status_writer: ActorRef<StatusWriterMsg>,
        supervisor: ActorRef<SupervisorMsg>,
        stores: Stores,
    ) -> Shared {
        let timers = TimerWheel::start(metrics.clone(), supervisor.clone(), clients.pulse.returns());
        let permits = ReconcilePermits::new(
            settings.max_concurrent_reconciles.max(1),
            Some(metrics.queues.clone()),
            permit_courier(metrics.clone(), supervisor.clone()),
        );
        Shared {
            client: clients.requests,
            watch_client: clients.watches,
            metrics,
            permits,
            settings,
            status_writer,
            supervisor,
            capi_machines: stores.capi_machines,
            capi_clusters: stores.capi_clusters,
            namespaces: stores.namespaces,
            ip_claims: stores.ip_claims,
            ip_addresses: stores.ip_addresses,
            ip_claims_listing: Arc::default(),
            ovirt_clusters: stores.ovirt_clusters,
            placements: Arc::new(Placements::default()),
            device_claims: DeviceClaims::default(),
            timers,
            providers: RwLock::new(HashMap::new()),
            provider_access: RwLock::new(HashMap::new()),
            providers_listed: std::sync::atomic::AtomicBool::new(false),
            providers_started: std::sync::atomic::AtomicBool::new(false),
            capi_machines_listed: std::sync::atomic::AtomicBool::new(false),
            capi_clusters_listed: std::sync::atomic::AtomicBool::new(false),
            workload_clients: WorkloadClients::default(),
            lookups: Lookups::new(LOOKUP_TTL),
        }
    }

    /// Whether the IPAddressClaims store can be trusted to hold every claim ([`ipam::ClaimsListing`]).
    pub fn ip_claims_known(&self) -> bool {
        self.ip_claims_listing.known()
    }

    /// Whether the CAPI Machines and Clusters have been listed once (or their watch is gone for good): before, a
    /// machine would find no owner in them.
    ///
    /// Told by the watches themselves (`watches::note_listed_once`), not by polling the stores' readiness: a store's readiness is
    /// a oneshot channel with room for one waker, and a poll from here would take the place of the task that waits
    /// for it to report the watch synced, which then never would.
    pub fn capi_listed(&self) -> bool {
        use std::sync::atomic::Ordering::Acquire;
        self.capi_machines_listed.load(Acquire) && self.capi_clusters_listed.load(Acquire)
    }

    pub fn provider(&self, name: &str) -> Option<ActorRef<ProviderMsg>> {
        self.providers
            .read()
            .ok()
            .and_then(|providers| providers.get(name).cloned())
    }

    /// Whether a machine in `namespace` may use provider `name` (its `spec.allowedNamespaces`).
    pub fn namespace_allowed(&self, name: &str, namespace: &str) -> bool {
        let Some(allowed) = self.access(name).and_then(|access| access.namespaces) else {
            return true;
        };
        let labels = self
            .namespaces
            .get(&reflector::ObjectRef::new(namespace))
            .map(|ns| ns.metadata.labels.clone().unwrap_or_default());
        capov_core::trust::tenancy::namespace_allowed(Some(&allowed), namespace, labels.as_ref())
    }

    /// Provider `name`'s `spec.tenantPlacement` (None: unrestricted, or the provider is not known yet).
    pub fn tenant_placement(&self, name: &str) -> Option<capov_crds::TenantPlacement> {
        self.access(name).and_then(|access| access.placement)
    }

    fn access(&self, name: &str) -> Option<ProviderAccess> {
        self.provider_access
            .read()
            .ok()
            .and_then(|access| access.get(name).cloned())
    }
}
