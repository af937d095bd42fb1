//! Every watch of the runtime, and the readiness they give. A watch is one of two kinds:
//!
//! - **Forwarded**: the objects the supervisor acts on (OVirtProviders, credential Secrets, OVirtClusters,
//!   OVirtMachines). Each event goes to the supervisor as its own [`SupervisorMsg`] variant ([`forward`]); the
//!   supervisor routes it, and counts the watch as listed at its `InitDone` ([`SyncedWatches::note`]).
//!   OVirtClusters also fill a store, where machines read their failure domains.
//! - **Stored**: the objects machines read (CAPI Machines and Clusters, Namespaces). They fill a store whose reader
//!   is in [`Shared`]; the watch sends [`SupervisorMsg::Synced`] with its name once the store is ready, and wakes
//!   the machines a change concerns with [`SupervisorMsg::CapiChanged`] (its wake rule: one machine, or a
//!   namespace), every machine with [`SupervisorMsg::CapiListed`] after its first complete list, and after a relist
//!   the machines whose objects changed or went away meanwhile.
//!
//! A new watch is spawned in [`spawn`], runs on the watch client (`Shared::watch_client`, never the request client),
//! keeps only what CAPOV reads (`slim`), honours `--namespace` ([`namespaced`]) and the watch filter label ([`watch_config`]) where it applies, and adds its name to [`WATCHES`]: the runtime is
//! ready only once every watch named there has listed its objects once.

use std::collections::HashSet;
use std::sync::Arc;

use capov_crds::labels::WATCH_FILTER_LABEL;
use capov_crds::{OVirtCluster, OVirtMachine, OVirtMachineTemplate, OVirtProvider};
use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::{Namespace, Secret};
use kube::ResourceExt;
use kube::api::Api;
use kube::runtime::WatchStreamExt;
use kube::runtime::reflector::store::Writer;
use kube::runtime::reflector::{ObjectRef, Store};
use kube::runtime::watcher::{self, Event};
use ractor::ActorRef;
use tokio::task::JoinHandle;

use crate::metrics::Metrics;
use crate::runtime::kube::slim;
use crate::runtime::kube::slim_meta::{Slim, SlimKind};
use crate::runtime::messages::SupervisorMsg;
use crate::runtime::relisting::RelistChanges;
use crate::runtime::settings::RuntimeSettings;
use crate::runtime::shared::{Shared, Stores};
use crate::runtime::{capi, ipam, mailbox};

pub const NAMESPACES: &str = "namespaces";
pub const PROVIDERS: &str = "ovirtproviders";
pub const SECRETS: &str = "secrets";
pub const CLUSTERS: &str = "ovirtclusters";
pub const MACHINES: &str = "ovirtmachines";
pub const CAPI_MACHINES: &str = "machines";
pub const CAPI_CLUSTERS: &str = "clusters";
pub const IP_ADDRESS_CLAIMS: &str = "ipaddressclaims";
pub const IP_ADDRESSES: &str = "ipaddresses";

/// The watches whose first complete list makes the runtime ready.
const WATCHES: [&str; 7] = [
    NAMESPACES,
    PROVIDERS,
    SECRETS,
    CLUSTERS,
    MACHINES,
    CAPI_MACHINES,
    CAPI_CLUSTERS,
];

/// The watches that have listed their objects once.
#[derive(Default)]
pub struct SyncedWatches(HashSet<&'static str>);

impl SyncedWatches {
    /// A forwarded watch has listed its objects once at its first `InitDone`.
    pub fn note<K>(&mut self, watch: &'static str, event: &Event<K>) {
        if matches!(event, Event::InitDone) {
            self.0.insert(watch);
        }
    }

    pub fn insert(&mut self, watch: &'static str) {
        self.0.insert(watch);
    }

    pub fn contains(&self, watch: &str) -> bool {
        self.0.contains(watch)
    }

    /// Whether every watch has listed its objects once (readiness).
    pub fn all(&self) -> bool {
        WATCHES.iter().all(|watch| self.0.contains(watch))
    }
}

/// The writers of the stores the watches fill; their readers go into [`Shared`] before the watches start.
pub struct StoreWriters {
    capi_machines: Writer<capi::Machine>,
    capi_clusters: Writer<capi::Cluster>,
    namespaces: Writer<Namespace>,
    ip_claims: Writer<ipam::IpAddressClaim>,
    ip_addresses: Writer<ipam::IpAddress>,
    ovirt_clusters: Writer<OVirtCluster>,
}

impl StoreWriters {
    pub fn new() -> StoreWriters {
        StoreWriters {
            capi_machines: Writer::new(()),
            capi_clusters: Writer::new(()),
            namespaces: Writer::new(()),
            ip_claims: Writer::new(()),
            ip_addresses: Writer::new(()),
            ovirt_clusters: Writer::new(()),
        }
    }

    pub fn readers(&self) -> Stores {
        Stores {
            capi_machines: self.capi_machines.as_reader(),
            capi_clusters: self.capi_clusters.as_reader(),
            namespaces: self.namespaces.as_reader(),
            ip_claims: self.ip_claims.as_reader(),
            ip_addresses: self.ip_addresses.as_reader(),
            ovirt_clusters: self.ovirt_clusters.as_reader(),
        }
    }
}

/// Starts every watch; the tasks end when aborted or when the supervisor is gone.
pub fn spawn(me: &ActorRef<SupervisorMsg>, shared: &Arc<Shared>, stores: StoreWriters) -> Vec<JoinHandle<()>> {
    let mut tasks = spawn_forwarded(me, shared, stores.ovirt_clusters);
    tasks.extend(spawn_capi_watch(
        me,
        shared,
        stores.capi_machines,
        CAPI_MACHINES,
        true,
        slim::capi,
        |machine: &capi::Machine| {
            // Only the OVirtMachine this Machine names reads it.
            capi::machine_infrastructure_name(machine).map(|name| (machine.namespace().unwrap_or_default(), Some(name)))
        },
    ));
    tasks.extend(spawn_capi_watch(
        me,
        shared,
        stores.capi_clusters,
        CAPI_CLUSTERS,
        true,
        slim::capi,
        |cluster: &capi::Cluster| cluster.namespace().map(|namespace| (namespace, None)),
    ));
    tasks.extend(spawn_namespace_watch(me, shared, stores.namespaces));
    tasks.extend(spawn_claims_watch(me, shared, stores.ip_claims));
    tasks.extend(spawn_capi_watch(
        me,
        shared,
        stores.ip_addresses,
        IP_ADDRESSES,
        // The IPAM provider writes them, without the watch-filter label.
        false,
        slim::ip_address,
        // An IPAddress names its claim, not the claim's owner: its namespace's machines look again (cheap: they
        // read the stores; only those with addressesFromPools act).
        |address: &ipam::IpAddress| address.namespace().map(|namespace| (namespace, None)),
    ));
    // Not in WATCHES: machines never wait for templates, so readiness does not either.
    let templates = slim_watcher(
        namespaced::<Slim<OVirtMachineTemplate>>(shared),
        watch_config(&shared.settings),
    )
    .modify(slim::crd);
    tasks.push(crate::runtime::status::templates::spawn(
        templates,
        shared.status_writer.clone(),
        shared.metrics.clone(),
    ));
    tasks
}

/// The watches of the objects the supervisor acts on.
fn spawn_forwarded(
    me: &ActorRef<SupervisorMsg>,
    shared: &Arc<Shared>,
    ovirt_clusters: Writer<OVirtCluster>,
) -> Vec<JoinHandle<()>> {
    let client = &shared.watch_client;
    let settings = &shared.settings;
    let filtered = watch_config(settings);
    let providers: Api<OVirtProvider> = Api::all(client.clone());
    // Every Secret of the credentials namespace is listed, bootstrap data and kubeconfigs included when they live
    // there too: only the credential keys are kept.
    let secrets: Api<Secret> = Api::namespaced(client.clone(), &settings.credentials_namespace);
    vec![
        forward(
            me,
            &shared.metrics,
            watcher(providers, filtered.clone()).modify(slim::crd),
            |event| SupervisorMsg::Provider(Box::new(event)),
        ),
        forward(
            me,
            &shared.metrics,
            watcher(secrets, watcher::Config::default()).modify(slim::secret),
            |event| SupervisorMsg::Secret(Box::new(event)),
        ),
        forward(
            me,
            &shared.metrics,
            // Also kept in a store: machines read their failure domains there.
            slim_watcher(namespaced::<Slim<OVirtCluster>>(shared), filtered.clone())
                .modify(slim::crd)
                .reflect(ovirt_clusters),
            |event| SupervisorMsg::Cluster(Box::new(event)),
        ),
        forward(
            me,
            &shared.metrics,
            slim_watcher(namespaced::<Slim<OVirtMachine>>(shared), filtered.clone()).modify(slim::machine),
            |event| SupervisorMsg::Machine(Box::new(event)),
        ),
    ]
}

/// The machines a CAPI object's change wakes: those of a namespace, or (with a name) one OVirtMachine in it.
type Wake = (String, Option<String>);

/// A CAPI store: its watch, and the machines each change wakes (`wakes` gives the namespace and, for one machine
/// only, its name; None wakes nobody).
fn spawn_capi_watch<K>(
    me: &ActorRef<SupervisorMsg>,
    shared: &Arc<Shared>,
    writer: Writer<K>,
    watch: &'static str,
    filtered: bool,
    slim: fn(&mut K),
    wakes: fn(&K) -> Option<Wake>,
) -> Vec<JoinHandle<()>>
where
    K: kube::Resource<Scope = k8s_openapi::NamespaceResourceScope, DynamicType = ()>
        + Clone
        + serde::de::DeserializeOwned
        + std::fmt::Debug
        + Send
        + Sync
        + 'static,
{
    let api = namespaced::<K>(shared);
    let config = if filtered {
        watch_config(&shared.settings)
    } else {
        watcher::Config::default().page_size(TENANT_PAGE)
    };
    let stream = watcher::watcher(api, config).default_backoff().modify(slim);
    spawn_store_watch(me, shared, writer, watch, stream, |_| {}, wakes)
}

/// Static addresses (issue 25). Not in WATCHES: without CAPI's IPAM API installed they never list, and only
/// machines with addressesFromPools read them (those wait until the claims they create show up here). Releases
/// wait for the first list, or for the 404 that says the API is not served (`ipam::ClaimsListing`).
fn spawn_claims_watch(
    me: &ActorRef<SupervisorMsg>,
    shared: &Arc<Shared>,
    writer: Writer<ipam::IpAddressClaim>,
) -> Vec<JoinHandle<()>> {
    let listing = shared.ip_claims_listing.clone();
    // CAPOV's claims carry their owner's watch-filter label (ip_claim_writes.rs).
    let stream = watcher::watcher(
        namespaced::<ipam::IpAddressClaim>(shared),
        watch_config(&shared.settings),
    )
    .default_backoff()
    .modify(slim::ip_claim);
    // Noted once the store holds the list (after the reflector applied it), not when the list arrives. Not through
    // `Store::wait_until_ready`: its readiness wakes only one waiter, and the readiness report already waits there.
    let noted = move |item: &Result<Event<ipam::IpAddressClaim>, watcher::Error>| match item {
        Ok(Event::InitDone) => listing.note_listed(),
        Err(err) => listing.note_error(err),
        Ok(_) => {}
    };
    spawn_store_watch(me, shared, writer, IP_ADDRESS_CLAIMS, stream, noted, |claim| {
        // The OVirtMachine that owns the claim; else (the control-plane endpoint's claim of an OVirtCluster) the
        // namespace, whose OVirtClusters are then reconciled.
        claim
            .namespace()
            .map(|namespace| (namespace, ipam::claim_owner_machine(claim)))
    })
}

/// Namespaces (only the watched one with `--namespace`), kept in a store for `spec.allowedNamespaces.selector`; a
/// change of labels makes the namespace's machines check their access again.
fn spawn_namespace_watch(
    me: &ActorRef<SupervisorMsg>,
    shared: &Arc<Shared>,
    writer: Writer<Namespace>,
) -> Vec<JoinHandle<()>> {
    let config = match &shared.settings.watch_namespace {
        Some(namespace) => watcher::Config::default().fields(&format!("metadata.name={namespace}")),
        None => watcher::Config::default(),
    };
    let stream = watcher::watcher(Api::<Namespace>::all(shared.watch_client.clone()), config)
        .default_backoff()
        .modify(slim::namespace);
    spawn_store_watch(
        me,
        shared,
        writer,
        NAMESPACES,
        stream,
        |_| {},
        |namespace| Some((namespace.name_any(), None)),
    )
}

/// A store filled by `stream`, and its wakes: each change wakes the machines `wakes` names; the first complete list
/// wakes every machine ([`SupervisorMsg::CapiListed`]), a later relist (after the watch was cut, or the apiserver
/// restarted) only the machines whose objects changed or went away meanwhile (`RelistChanges`). Objects of a list
/// reach the store only once it is complete, so its wakes are sent then.
fn spawn_store_watch<K, S>(
    me: &ActorRef<SupervisorMsg>,
    shared: &Arc<Shared>,
    writer: Writer<K>,
    watch: &'static str,
    stream: S,
    applied: impl FnMut(&Result<Event<K>, watcher::Error>) + Send + 'static,
    wakes: fn(&K) -> Option<Wake>,
) -> Vec<JoinHandle<()>>
where
    K: kube::Resource<DynamicType = ()> + Clone + Send + Sync + 'static,
    S: futures::Stream<Item = Result<Event<K>, watcher::Error>> + Send + 'static,
{
    let store = writer.as_reader();
    let ready = report_ready(me, &shared.metrics, store.clone(), watch);
    let stream = stream.reflect(writer).inspect(applied);
    let (me, metrics, shared) = (me.clone(), shared.metrics.clone(), shared.clone());
    let forward = tokio::spawn(async move {
        let mut stream = std::pin::pin!(stream);
        let mut listed_once = false;
        let mut relist: Option<RelistChanges<ObjectRef<K>, Wake>> = None;
        while let Some(item) = stream.next().await {
            let wake = match item {
                Ok(Event::Apply(object) | Event::Delete(object)) => wakes(&object).map(|wake| vec![wake]),
                Ok(Event::Init) => {
                    // The store still holds what it held before the relist.
                    let held = store.state().into_iter().map(|object| {
                        let version = object.meta().resource_version.clone();
                        (ObjectRef::from_obj(&*object), version, wakes(&object))
                    });
                    relist = Some(RelistChanges::start(held));
                    None
                }
                Ok(Event::InitApply(object)) => {
                    if let Some(relist) = &mut relist {
                        let version = object.meta().resource_version.as_deref();
                        relist.saw(&ObjectRef::from_obj(&object), version, wakes(&object));
                    }
                    None
                }
                Ok(Event::InitDone) => {
                    let changed = relist.take().map(RelistChanges::finish);
                    if !std::mem::replace(&mut listed_once, true) {
                        note_listed_once(&shared, watch);
                        if mailbox::cast(&metrics, &me, SupervisorMsg::CapiListed).is_err() {
                            return;
                        }
                        continue;
                    }
                    changed
                }
                Err(_) => None,
            };
            for (namespace, machine) in wake.into_iter().flatten() {
                if mailbox::cast(&metrics, &me, SupervisorMsg::CapiChanged { namespace, machine }).is_err() {
                    return;
                }
            }
        }
        // The watch is gone for good: machines must not wait for its list.
        note_listed_once(&shared, watch);
    });
    vec![ready, forward]
}

/// A watch listed its objects completely for the first time (its store holds them): what `Shared::capi_listed`
/// reads.
fn note_listed_once(shared: &Shared, watch: &str) {
    let listed = match watch {
        CAPI_MACHINES => &shared.capi_machines_listed,
        CAPI_CLUSTERS => &shared.capi_clusters_listed,
        _ => return,
    };
    listed.store(true, std::sync::atomic::Ordering::Release);
}

/// Tells the supervisor once `store` is ready: its watch has listed its objects once.
fn report_ready<K>(
    me: &ActorRef<SupervisorMsg>,
    metrics: &Metrics,
    store: Store<K>,
    watch: &'static str,
) -> JoinHandle<()>
where
    K: kube::Resource + Clone + Send + Sync + 'static,
    K::DynamicType: std::hash::Hash + Eq + Clone + Send + Sync,
{
    let (me, metrics) = (me.clone(), metrics.clone());
    tokio::spawn(async move {
        if store.wait_until_ready().await.is_ok() {
            let _ = mailbox::cast(&metrics, &me, SupervisorMsg::Synced(watch));
        }
    })
}

/// Objects a list page asks for, of the kinds tenants write. Each is decoded slim (`slim_meta`), but the page's text
/// is held whole while it is decoded: 100 objects of a few KB (500, kube's default, of a hostile tenant's objects
/// near etcd's 1.5 MiB limit would be 750 MiB of text). At 10,000 machines a list is 100 pages.
const TENANT_PAGE: u32 = 100;

/// The watch configuration of the kinds tenants write: [`TENANT_PAGE`], and the watch filter where it applies.
fn watch_config(settings: &RuntimeSettings) -> watcher::Config {
    let config = watcher::Config::default().page_size(TENANT_PAGE);
    match &settings.watch_filter {
        Some(value) => config.labels(&format!("{WATCH_FILTER_LABEL}={value}")),
        None => config,
    }
}

/// The objects of kind `K` to watch (`--namespace`), on the watch client: the request client's read timeout would
/// cut a quiet watch every 30 s, and the watcher's backoff then grows to 30 s, delaying events by as much.
fn namespaced<K>(shared: &Shared) -> Api<K>
where
    K: kube::Resource<Scope = k8s_openapi::NamespaceResourceScope, DynamicType = ()>,
{
    let client = shared.watch_client.clone();
    match &shared.settings.watch_namespace {
        Some(namespace) => Api::namespaced(client, namespace),
        None => Api::all(client),
    }
}

/// [`watcher`] of a kind decoded through its `slim_meta` policy, handing on the objects themselves.
fn slim_watcher<K>(
    api: Api<Slim<K>>,
    config: watcher::Config,
) -> impl futures::Stream<Item = Result<Event<K>, watcher::Error>> + Send
where
    K: SlimKind + Clone + std::fmt::Debug + Send + 'static,
{
    watcher(api, config).map_ok(|event| match event {
        Event::Apply(object) => Event::Apply(object.into_inner()),
        Event::Delete(object) => Event::Delete(object.into_inner()),
        Event::InitApply(object) => Event::InitApply(object.into_inner()),
        Event::Init => Event::Init,
        Event::InitDone => Event::InitDone,
    })
}

fn watcher<K>(
    api: Api<K>,
    config: watcher::Config,
) -> impl futures::Stream<Item = Result<Event<K>, watcher::Error>> + Send
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug + Send + 'static,
{
    watcher::watcher(api, config).default_backoff()
}

/// Events a watch sends before it waits for the supervisor to have handled them. After a restart the OVirtMachine
/// list brings 10,000 objects with their statuses, faster than the supervisor starts their actors; without the wait
/// they would all be held in its mailbox at once. With it, a watch holds at most its current page (500) and this many.
const FORWARDED_AHEAD: usize = 64;
/// The longest wait for the supervisor to catch up; past it the watch goes on (the supervisor is alive, only slow).
const CATCH_UP_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(30);

/// Sends each event of `stream` to the supervisor as `wrap(event)`, waiting for it to catch up every
/// [`FORWARDED_AHEAD`] events; a watch error is retried by the stream's backoff.
fn forward<K, S>(
    me: &ActorRef<SupervisorMsg>,
    metrics: &Metrics,
    stream: S,
    wrap: fn(Event<K>) -> SupervisorMsg,
) -> JoinHandle<()>
where
    K: Send + 'static,
    S: futures::Stream<Item = Result<Event<K>, watcher::Error>> + Send + 'static,
{
    let me = me.clone();
    let metrics = metrics.clone();
    tokio::spawn(async move {
        let mut stream = std::pin::pin!(stream);
        let mut unconfirmed = 0;
        while let Some(item) = stream.next().await {
            match item {
                Ok(event) => {
                    if mailbox::cast(&metrics, &me, wrap(event)).is_err() {
                        return;
                    }
                    unconfirmed += 1;
                    if unconfirmed == FORWARDED_AHEAD {
                        unconfirmed = 0;
                        if let Err(mailbox::CallError::Stopped) =
                            mailbox::call(&metrics, &me, SupervisorMsg::CaughtUp, CATCH_UP_TIMEOUT).await
                        {
                            return;
                        }
                    }
                }
                Err(err) => tracing::debug!(error = %err, "watch error; retrying with backoff"),
            }
        }
    })
}
