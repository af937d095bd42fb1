//! Every watch of the runtime, and the readiness they give. A watch is one of two kinds:
//!
//! - **Forwarded**: the objects the supervisor acts on (OVirtProviders, credential Secrets, OVirtClusters,
//!   OVirtMachines). Each event goes to the supervisor as its own [`SupervisorMsg`] variant ([`forward`]); the
//!   supervisor routes it, and counts the watch as listed at its `InitDone` ([`SyncedWatches::note`]).
//! - **Stored**: the objects machines read (CAPI Machines and Clusters, Namespaces). They fill a store whose reader
//!   is in [`Shared`]; the watch sends [`SupervisorMsg::Synced`] with its name once the store is ready, and wakes
//!   the machines a change concerns with [`SupervisorMsg::CapiChanged`] (its wake rule: one machine, or a
//!   namespace) and every machine with [`SupervisorMsg::CapiListed`] after each complete list.
//!
//! A new watch is spawned in [`spawn`], runs on the watch client (`Shared::watch_client`, never the request client),
//! keeps only what CAPOV reads (`slim`), honours `--namespace` ([`namespaced`]) and the watch filter label ([`watch_config`]) where it applies, and adds its name to [`WATCHES`]: the runtime is
//! ready only once every watch named there has listed its objects once.

use std::collections::HashSet;
use std::sync::Arc;

use capov_crds::labels::WATCH_FILTER_LABEL;
use capov_crds::{OVirtCluster, OVirtMachine, OVirtMachineTemplate, OVirtProvider};
use futures::StreamExt;
use k8s_openapi::api::core::v1::{Namespace, Secret};
use kube::ResourceExt;
use kube::api::Api;
use kube::runtime::WatchStreamExt;
use kube::runtime::reflector::Store;
use kube::runtime::reflector::store::Writer;
use kube::runtime::watcher::{self, Event};
use ractor::ActorRef;
use tokio::task::JoinHandle;

use super::capi;
use super::mailbox;
use super::messages::SupervisorMsg;
use super::settings::RuntimeSettings;
use super::shared::{Shared, Stores};
use super::slim;
use super::template_status;
use crate::metrics::Metrics;

pub const NAMESPACES: &str = "namespaces";
pub const PROVIDERS: &str = "ovirtproviders";
pub const SECRETS: &str = "secrets";
pub const CLUSTERS: &str = "ovirtclusters";
pub const MACHINES: &str = "ovirtmachines";
pub const CAPI_MACHINES: &str = "machines";
pub const CAPI_CLUSTERS: &str = "clusters";

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
}

impl StoreWriters {
    pub fn new() -> StoreWriters {
        StoreWriters {
            capi_machines: Writer::new(()),
            capi_clusters: Writer::new(()),
            namespaces: Writer::new(()),
        }
    }

    pub fn readers(&self) -> Stores {
        Stores {
            capi_machines: self.capi_machines.as_reader(),
            capi_clusters: self.capi_clusters.as_reader(),
            namespaces: self.namespaces.as_reader(),
        }
    }
}

/// Starts every watch; the tasks end when aborted or when the supervisor is gone.
pub fn spawn(me: &ActorRef<SupervisorMsg>, shared: &Arc<Shared>, stores: StoreWriters) -> Vec<JoinHandle<()>> {
    let mut tasks = spawn_forwarded(me, shared);
    tasks.extend(spawn_capi_watch(
        me,
        shared,
        stores.capi_machines,
        CAPI_MACHINES,
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
        |cluster: &capi::Cluster| cluster.namespace().map(|namespace| (namespace, None)),
    ));
    tasks.extend(spawn_namespace_watch(me, shared, stores.namespaces));
    // Not in WATCHES: machines never wait for templates, so readiness does not either.
    let templates = watcher(
        namespaced::<OVirtMachineTemplate>(shared),
        watch_config(&shared.settings),
    )
    .modify(slim::crd);
    tasks.push(template_status::spawn(
        templates,
        shared.status_writer.clone(),
        shared.metrics.clone(),
    ));
    tasks
}

/// The watches of the objects the supervisor acts on.
fn spawn_forwarded(me: &ActorRef<SupervisorMsg>, shared: &Arc<Shared>) -> Vec<JoinHandle<()>> {
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
            SupervisorMsg::Provider,
        ),
        forward(
            me,
            &shared.metrics,
            watcher(secrets, watcher::Config::default()).modify(slim::secret),
            SupervisorMsg::Secret,
        ),
        forward(
            me,
            &shared.metrics,
            watcher(namespaced::<OVirtCluster>(shared), filtered.clone()).modify(slim::crd),
            SupervisorMsg::Cluster,
        ),
        forward(
            me,
            &shared.metrics,
            watcher(namespaced::<OVirtMachine>(shared), filtered.clone()).modify(slim::machine),
            SupervisorMsg::Machine,
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
    let ready = report_ready(me, &shared.metrics, writer.as_reader(), watch);
    let api = namespaced::<K>(shared);
    let stream = watcher::watcher(api, watch_config(&shared.settings))
        .default_backoff()
        .modify(slim::capi)
        .reflect(writer);
    let (me, metrics) = (me.clone(), shared.metrics.clone());
    let forward = tokio::spawn(async move {
        let mut stream = std::pin::pin!(stream);
        while let Some(item) = stream.next().await {
            let object = match item {
                Ok(Event::Apply(object) | Event::Delete(object)) => object,
                Ok(Event::InitDone) => {
                    if mailbox::cast(&metrics, &me, SupervisorMsg::CapiListed).is_err() {
                        return;
                    }
                    continue;
                }
                // Not in the store before InitDone; InitDone wakes every machine.
                Ok(Event::Init | Event::InitApply(_)) | Err(_) => continue,
            };
            let Some((namespace, machine)) = wakes(&object) else {
                continue;
            };
            if mailbox::cast(&metrics, &me, SupervisorMsg::CapiChanged { namespace, machine }).is_err() {
                return;
            }
        }
    });
    vec![ready, forward]
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
    let ready = report_ready(me, &shared.metrics, writer.as_reader(), NAMESPACES);
    let stream = watcher::watcher(Api::<Namespace>::all(shared.watch_client.clone()), config)
        .default_backoff()
        .modify(slim::namespace)
        .reflect(writer)
        .touched_objects();
    let (me, metrics) = (me.clone(), shared.metrics.clone());
    let forward = tokio::spawn(async move {
        let mut stream = std::pin::pin!(stream);
        while let Some(item) = stream.next().await {
            if let Ok(namespace) = item
                && mailbox::cast(
                    &metrics,
                    &me,
                    SupervisorMsg::CapiChanged {
                        namespace: namespace.name_any(),
                        machine: None,
                    },
                )
                .is_err()
            {
                return;
            }
        }
    });
    vec![ready, forward]
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

fn watch_config(settings: &RuntimeSettings) -> watcher::Config {
    let config = watcher::Config::default();
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

fn watcher<K>(
    api: Api<K>,
    config: watcher::Config,
) -> impl futures::Stream<Item = Result<Event<K>, watcher::Error>> + Send
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug + Send + 'static,
{
    watcher::watcher(api, config).default_backoff()
}

/// Sends each event of `stream` to the supervisor as `wrap(event)`; a watch error is retried by the stream's backoff.
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
        while let Some(item) = stream.next().await {
            match item {
                Ok(event) => {
                    if mailbox::cast(&metrics, &me, wrap(event)).is_err() {
                        return;
                    }
                }
                Err(err) => tracing::debug!(error = %err, "watch error; retrying with backoff"),
            }
        }
    })
}
