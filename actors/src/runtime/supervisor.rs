//! The supervisor: watches the CRDs (and the CAPI objects and credential Secrets they depend on), keeps one
//! provider actor per OVirtProvider and one machine actor per OVirtMachine, routes events to them, restarts a failed
//! child with backoff (a failing child never stops the supervisor or its siblings), and stops the actors of deleted
//! objects. OVirtClusters need no actor of their own: they are handled here.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use capov_crds::labels::{PROVIDER_FINALIZER, WATCH_FILTER_LABEL};
use capov_crds::{OVirtCluster, OVirtMachine, OVirtProvider};
use futures::StreamExt;
use k8s_openapi::api::core::v1::{Namespace, Secret};
use kube::ResourceExt;
use kube::api::Api;
use kube::runtime::WatchStreamExt;
use kube::runtime::reflector::{self, Store};
use kube::runtime::watcher::{self, Event};
use ractor::{Actor, ActorId, ActorProcessingErr, ActorRef, SupervisionEvent};
use tokio::task::JoinHandle;

use super::capi;
use super::cluster;
use super::credential_secrets::CredentialSecrets;
use super::finalizers;
use super::keys::ObjectKey;
use super::lookups::{LOOKUP_TTL, Lookups};
use super::machine::{MachineActor, MachineArgs};
use super::mailbox::{self, ActorMetrics, Alive, Mail};
use super::messages::MachineMsg;
use super::permits::ReconcilePermits;
use super::provider::{ProviderActor, ProviderArgs, ProviderMsg};
use super::settings::RuntimeSettings;
use super::slim;
use super::status_writer::{StatusWriter, StatusWriterArgs, StatusWriterMsg};
use crate::metrics::{Metrics, kind, result};

/// What every actor of the runtime shares.
pub struct Shared {
    /// Every request but the watches (deadlines: `kube_clients`).
    pub client: kube::Client,
    /// The watches only: they may stay silent for minutes, which the request client's read timeout would cut.
    pub watch_client: kube::Client,
    pub metrics: Metrics,
    pub settings: RuntimeSettings,
    pub status_writer: ActorRef<StatusWriterMsg>,
    /// `--max-concurrent-reconciles` permits, taken by a machine actor for each reconcile.
    pub permits: Arc<ReconcilePermits>,
    /// CAPI Machines and Clusters, holding only the fields CAPOV reads (`capi.rs`).
    pub capi_machines: Store<capi::Machine>,
    pub capi_clusters: Store<capi::Cluster>,
    /// The namespaces machines live in (for the labels `spec.allowedNamespaces.selector` of providers matches).
    pub namespaces: Store<Namespace>,
    pub providers: RwLock<HashMap<String, ActorRef<ProviderMsg>>>,
    /// Each provider's `spec.allowedNamespaces`, as last seen by the supervisor.
    pub provider_access: RwLock<HashMap<String, Option<capov_crds::AllowedNamespaces>>>,
    pub workload_clients: Mutex<WorkloadClients>,
    /// Engine objects many machines look up alike (clusters, templates, networks …), kept briefly.
    pub lookups: Lookups,
}

/// Workload cluster clients by (namespace, kubeconfig Secret name), with the kubeconfig each was built from.
pub type WorkloadClients = HashMap<(String, String), (Vec<u8>, kube::Client)>;

impl Shared {
    pub fn provider(&self, name: &str) -> Option<ActorRef<ProviderMsg>> {
        self.providers
            .read()
            .ok()
            .and_then(|providers| providers.get(name).cloned())
    }

    /// Whether a machine in `namespace` may use provider `name` (its `spec.allowedNamespaces`).
    pub fn namespace_allowed(&self, name: &str, namespace: &str) -> bool {
        let access = self
            .provider_access
            .read()
            .ok()
            .and_then(|access| access.get(name).cloned());
        let Some(allowed) = access.flatten() else {
            return true;
        };
        let labels = self
            .namespaces
            .get(&reflector::ObjectRef::new(namespace))
            .map(|ns| ns.metadata.labels.clone().unwrap_or_default());
        crate::tenancy::namespace_allowed(Some(&allowed), namespace, labels.as_ref())
    }
}

pub enum SupervisorMsg {
    Provider(Event<OVirtProvider>),
    Secret(Event<Secret>),
    Cluster(Event<OVirtCluster>),
    Machine(Event<OVirtMachine>),
    /// A CAPI Cluster or a Namespace changed: every machine of the namespace looks again. With `machine`, a CAPI
    /// Machine changed: only the OVirtMachine it names (spec.infrastructureRef) looks again; it is the only one that
    /// reads it, and waking the whole namespace for each Machine event costs N² messages while N Machines are listed.
    CapiChanged {
        namespace: String,
        machine: Option<String>,
    },
    /// A CAPI store has (re)listed its objects: every machine looks again. Listed objects reach the store only
    /// when the list is complete, so a machine woken by one of them earlier may not have found it.
    CapiListed,
    Restart(ObjectKey),
    /// Time to try a failed finalizer write again.
    RetryFinalizer(FinalizerOwner),
    /// A watch has listed everything once.
    Synced(&'static str),
    /// Whether every watch has listed everything once (readiness).
    IsSynced(ractor::RpcReplyPort<bool>),
}

/// The watches whose first complete list makes the runtime ready.
const WATCHES: [&str; 7] = [
    "namespaces",
    "ovirtproviders",
    "secrets",
    "ovirtclusters",
    "ovirtmachines",
    "machines",
    "clusters",
];

impl Mail for SupervisorMsg {
    const KIND: &'static str = kind::SUPERVISOR;
}

pub struct Supervisor;

/// An object whose finalizer CAPOV must add or remove. A failed write is retried with jittered backoff until it
/// succeeds or the object is gone: no later watch event may come to trigger it again.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum FinalizerOwner {
    Cluster { namespace: String, name: String },
    Provider(String),
}

/// First retry of a failed finalizer write; doubling up to [`MAX_FINALIZER_RETRY`], jittered.
const FINALIZER_RETRY: Duration = Duration::from_secs(1);
const MAX_FINALIZER_RETRY: Duration = Duration::from_secs(60);

struct FinalizerRetry {
    backoff: crate::backoff::Backoff,
    scheduled: bool,
}

struct Child {
    actor: Option<ActorRef<MachineMsg>>,
    /// The object as last seen by the watch, for a restart; shared with the machine actor (one copy per machine).
    latest: Arc<OVirtMachine>,
    restarts: u32,
}

pub struct SupervisorState {
    shared: Arc<Shared>,
    mail: ActorMetrics,
    _alive: Alive,
    tasks: Vec<JoinHandle<()>>,
    providers: HashMap<String, (ActorRef<ProviderMsg>, OVirtProvider)>,
    provider_cells: HashMap<ActorId, String>,
    secrets: CredentialSecrets,
    /// Providers seen before the credential Secrets were listed; started once they are.
    pending_providers: HashMap<String, OVirtProvider>,
    machines: HashMap<ObjectKey, Child>,
    machine_cells: HashMap<ActorId, ObjectKey>,
    relisting_providers: Option<HashSet<String>>,
    relisting_machines: Option<HashSet<ObjectKey>>,
    synced: HashSet<&'static str>,
    finalizer_retries: HashMap<FinalizerOwner, FinalizerRetry>,
}

pub struct SupervisorArgs {
    pub client: kube::Client,
    pub watch_client: kube::Client,
    pub settings: RuntimeSettings,
    pub metrics: Metrics,
}

/// How long the supervisor waits for its actors to finish their current message when it stops.
const CHILDREN_STOP_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(5);

impl Actor for Supervisor {
    type Msg = SupervisorMsg;
    type State = SupervisorState;
    type Arguments = SupervisorArgs;

    async fn pre_start(
        &self,
        me: ActorRef<SupervisorMsg>,
        args: SupervisorArgs,
    ) -> Result<SupervisorState, ActorProcessingErr> {
        let writer_args = StatusWriterArgs {
            client: args.client.clone(),
            metrics: args.metrics.clone(),
        };
        let (status_writer, _) = Actor::spawn_linked(None, StatusWriter, writer_args, me.get_cell()).await?;
        let machine_writer = reflector::store::Writer::new(());
        let cluster_writer = reflector::store::Writer::new(());
        let (capi_machines, capi_clusters) = (machine_writer.as_reader(), cluster_writer.as_reader());
        let namespace_writer = reflector::store::Writer::new(());
        let namespaces = namespace_writer.as_reader();
        let settings = args.settings;
        let mail = ActorMetrics::of::<SupervisorMsg>(&args.metrics);
        let shared = Arc::new(Shared {
            client: args.client.clone(),
            watch_client: args.watch_client,
            metrics: args.metrics,
            permits: ReconcilePermits::new(settings.max_concurrent_reconciles.max(1)),
            settings,
            status_writer,
            capi_machines,
            capi_clusters,
            namespaces,
            providers: RwLock::new(HashMap::new()),
            provider_access: RwLock::new(HashMap::new()),
            workload_clients: Mutex::new(HashMap::new()),
            lookups: Lookups::new(LOOKUP_TTL),
        });
        let mut tasks = spawn_watches(&me, &shared, machine_writer, cluster_writer);
        tasks.extend(spawn_namespace_watch(&me, &shared, namespace_writer));
        Ok(SupervisorState {
            shared,
            _alive: mail.alive(),
            mail,
            tasks,
            providers: HashMap::new(),
            provider_cells: HashMap::new(),
            secrets: CredentialSecrets::default(),
            pending_providers: HashMap::new(),
            machines: HashMap::new(),
            machine_cells: HashMap::new(),
            relisting_providers: None,
            relisting_machines: None,
            synced: HashSet::new(),
            finalizer_retries: HashMap::new(),
        })
    }

    async fn post_stop(
        &self,
        me: ActorRef<SupervisorMsg>,
        state: &mut SupervisorState,
    ) -> Result<(), ActorProcessingErr> {
        for task in state.tasks.drain(..) {
            task.abort();
        }
        // The runtime counts as stopped only once its actors are: a leader that lost its Lease starts a fresh
        // runtime when it leads again, and must not have the old one still working beside it. Those that do not
        // finish their message in time are killed when the supervisor exits.
        me.stop_children_and_wait(Some("the runtime stops".into()), Some(CHILDREN_STOP_TIMEOUT))
            .await;
        Ok(())
    }

    async fn handle(
        &self,
        me: ActorRef<SupervisorMsg>,
        message: SupervisorMsg,
        state: &mut SupervisorState,
    ) -> Result<(), ActorProcessingErr> {
        let _handling = state.mail.handling();
        match message {
            SupervisorMsg::Provider(event) => {
                note_synced(state, "ovirtproviders", &event);
                on_provider_event(&me, state, event).await
            }
            SupervisorMsg::Secret(event) => {
                let listed = matches!(event, Event::InitDone);
                note_synced(state, "secrets", &event);
                on_secret_event(state, event);
                if listed {
                    for (_, provider) in std::mem::take(&mut state.pending_providers) {
                        apply_provider(&me, state, provider).await;
                    }
                }
            }
            SupervisorMsg::Cluster(event) => {
                note_synced(state, "ovirtclusters", &event);
                if let Event::Apply(object) | Event::InitApply(object) = event {
                    let started = std::time::Instant::now();
                    let outcome = cluster::reconcile(&state.shared, &object).await;
                    let owner = FinalizerOwner::Cluster {
                        namespace: object.namespace().unwrap_or_default(),
                        name: object.name_any(),
                    };
                    let label = if outcome.is_ok() {
                        result::SUCCESS
                    } else {
                        result::ERROR
                    };
                    finalizer_outcome(&me, state, owner, outcome);
                    let metrics = &state.shared.metrics;
                    metrics
                        .reconciles_total
                        .with_label_values(&[kind::CLUSTER, label])
                        .inc();
                    metrics
                        .reconcile_duration_seconds
                        .with_label_values(&[kind::CLUSTER])
                        .observe(started.elapsed().as_secs_f64());
                }
            }
            SupervisorMsg::Machine(event) => {
                note_synced(state, "ovirtmachines", &event);
                on_machine_event(&me, state, event).await
            }
            SupervisorMsg::Synced(watch) => {
                state.synced.insert(watch);
            }
            SupervisorMsg::IsSynced(reply) => {
                let _ = reply.send(WATCHES.iter().all(|watch| state.synced.contains(watch)));
            }
            SupervisorMsg::CapiChanged {
                namespace,
                machine: Some(name),
            } => {
                let key = ObjectKey::machine(&namespace, &name);
                if let Some(actor) = state.machines.get(&key).and_then(|child| child.actor.as_ref()) {
                    let _ = mailbox::cast(&state.shared.metrics, actor, MachineMsg::Poke);
                }
            }
            SupervisorMsg::CapiListed => {
                for child in state.machines.values() {
                    if let Some(actor) = &child.actor {
                        let _ = mailbox::cast(&state.shared.metrics, actor, MachineMsg::Poke);
                    }
                }
            }
            SupervisorMsg::CapiChanged {
                namespace,
                machine: None,
            } => {
                for (key, child) in &state.machines {
                    if key.namespace.as_deref() == Some(namespace.as_str())
                        && let Some(actor) = &child.actor
                    {
                        let _ = mailbox::cast(&state.shared.metrics, actor, MachineMsg::Poke);
                    }
                }
            }
            SupervisorMsg::RetryFinalizer(owner) => retry_finalizer(&me, state, owner).await,
            SupervisorMsg::Restart(key) => {
                if let Some(child) = state.machines.get(&key)
                    && child.actor.is_none()
                {
                    // Only what the supervisor holds of the status is left: the restarted actor writes its status
                    // once more, even when nothing changed.
                    let object = child.latest.clone();
                    let status = object.status.clone();
                    spawn_machine(&me, state, key, object, status).await;
                }
            }
        }
        Ok(())
    }

    async fn handle_supervisor_evt(
        &self,
        me: ActorRef<SupervisorMsg>,
        event: SupervisionEvent,
        state: &mut SupervisorState,
    ) -> Result<(), ActorProcessingErr> {
        // Never stop with a child: note the loss and bring the child back when its object still exists.
        let (cell, failure) = match &event {
            SupervisionEvent::ActorFailed(cell, err) => (cell.clone(), Some(err.to_string())),
            SupervisionEvent::ActorTerminated(cell, _, _) => (cell.clone(), None),
            _ => return Ok(()),
        };
        if let Some(key) = state.machine_cells.remove(&cell.get_id()) {
            if let Some(child) = state.machines.get_mut(&key) {
                child.actor = None;
                if let Some(reason) = failure {
                    child.restarts += 1;
                    let delay = restart_delay(child.restarts);
                    tracing::error!(object = %key, error = %reason, ?delay, "machine actor failed; restarting");
                    state
                        .shared
                        .metrics
                        .actor_restarts_total
                        .with_label_values(&[kind::MACHINE])
                        .inc();
                    mailbox::cast_after(&state.shared.metrics, delay, me, move || SupervisorMsg::Restart(key));
                }
            }
        } else if let Some(name) = state.provider_cells.remove(&cell.get_id()) {
            if let Some((_, provider)) = state.providers.remove(&name) {
                if let Ok(mut providers) = state.shared.providers.write() {
                    providers.remove(&name);
                }
                if failure.is_some() {
                    tracing::error!(provider = %name, "provider actor failed; restarting");
                    state
                        .shared
                        .metrics
                        .actor_restarts_total
                        .with_label_values(&[kind::PROVIDER])
                        .inc();
                    let delay = crate::backoff::jittered_retry(Duration::from_secs(1));
                    mailbox::cast_after(&state.shared.metrics, delay, me, move || {
                        SupervisorMsg::Provider(Event::Apply(provider))
                    });
                }
            }
        } else if cell.get_id() == state.shared.status_writer.get_id() {
            // Without the status writer nothing the actors decide reaches the API server: a runtime that goes on
            // would renew its Lease and do no visible work. It stops instead, and the process exits non-zero.
            return Err(format!(
                "the status writer stopped ({}); stopping the runtime",
                failure.as_deref().unwrap_or("terminated")
            )
            .into());
        } else if failure.is_some() {
            return Err(format!("a runtime actor failed: {failure:?}").into());
        }
        Ok(())
    }
}

fn note_synced<K>(state: &mut SupervisorState, watch: &'static str, event: &Event<K>) {
    if matches!(event, Event::InitDone) {
        state.synced.insert(watch);
    }
}

/// 1 s doubling to 5 min, jittered so that actors that failed together do not restart together.
fn restart_delay(restarts: u32) -> Duration {
    crate::backoff::jittered_retry(Duration::from_secs(1u64 << restarts.min(8)).min(Duration::from_secs(300)))
}

fn watch_config(settings: &RuntimeSettings) -> watcher::Config {
    let config = watcher::Config::default();
    match &settings.watch_filter {
        Some(value) => config.labels(&format!("{WATCH_FILTER_LABEL}={value}")),
        None => config,
    }
}

fn namespaced<K>(client: &kube::Client, settings: &RuntimeSettings) -> Api<K>
where
    K: kube::Resource<Scope = k8s_openapi::NamespaceResourceScope, DynamicType = ()>,
{
    match &settings.watch_namespace {
        Some(namespace) => Api::namespaced(client.clone(), namespace),
        None => Api::all(client.clone()),
    }
}

fn spawn_watches(
    me: &ActorRef<SupervisorMsg>,
    shared: &Arc<Shared>,
    machine_writer: reflector::store::Writer<capi::Machine>,
    cluster_writer: reflector::store::Writer<capi::Cluster>,
) -> Vec<JoinHandle<()>> {
    let client = &shared.watch_client;
    let settings = &shared.settings;
    let filtered = watch_config(settings);
    let mut tasks = Vec::new();

    let providers: Api<OVirtProvider> = Api::all(client.clone());
    tasks.push(forward(
        me,
        &shared.metrics,
        watcher(providers, filtered.clone()).modify(slim::crd),
        SupervisorMsg::Provider,
    ));
    // Every Secret of the credentials namespace is listed, bootstrap data and kubeconfigs included when they live
    // there too: only the credential keys are kept.
    let secrets: Api<Secret> = Api::namespaced(client.clone(), &settings.credentials_namespace);
    tasks.push(forward(
        me,
        &shared.metrics,
        watcher(secrets, watcher::Config::default()).modify(slim::secret),
        SupervisorMsg::Secret,
    ));
    tasks.push(forward(
        me,
        &shared.metrics,
        watcher(namespaced::<OVirtCluster>(client, settings), filtered.clone()).modify(slim::crd),
        SupervisorMsg::Cluster,
    ));
    tasks.push(forward(
        me,
        &shared.metrics,
        watcher(namespaced::<OVirtMachine>(client, settings), filtered.clone()).modify(slim::machine),
        SupervisorMsg::Machine,
    ));

    tasks.extend(spawn_capi_watch(
        me,
        shared,
        machine_writer,
        "machines",
        |machine: &capi::Machine| {
            // Only the OVirtMachine this Machine names reads it.
            capi::machine_infrastructure_name(machine).map(|name| (machine.namespace().unwrap_or_default(), Some(name)))
        },
    ));
    tasks.extend(spawn_capi_watch(
        me,
        shared,
        cluster_writer,
        "clusters",
        |cluster: &capi::Cluster| cluster.namespace().map(|namespace| (namespace, None)),
    ));
    tasks
}

/// The machines a CAPI object's change wakes: those of a namespace, or (with a name) one OVirtMachine in it.
type Wake = (String, Option<String>);

/// A CAPI store: its watch, and the machines each change wakes (`wakes` gives the namespace and, for one machine
/// only, its name; None wakes nobody).
fn spawn_capi_watch<K>(
    me: &ActorRef<SupervisorMsg>,
    shared: &Arc<Shared>,
    writer: reflector::store::Writer<K>,
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
    let store = writer.as_reader();
    let (me_ready, metrics_ready) = (me.clone(), shared.metrics.clone());
    let ready = tokio::spawn(async move {
        if store.wait_until_ready().await.is_ok() {
            let _ = mailbox::cast(&metrics_ready, &me_ready, SupervisorMsg::Synced(watch));
        }
    });
    let api = namespaced::<K>(&shared.client, &shared.settings);
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
    writer: reflector::store::Writer<Namespace>,
) -> Vec<JoinHandle<()>> {
    let config = match &shared.settings.watch_namespace {
        Some(namespace) => watcher::Config::default().fields(&format!("metadata.name={namespace}")),
        None => watcher::Config::default(),
    };
    let store = writer.as_reader();
    let (me_ready, metrics_ready) = (me.clone(), shared.metrics.clone());
    let ready = tokio::spawn(async move {
        if store.wait_until_ready().await.is_ok() {
            let _ = mailbox::cast(&metrics_ready, &me_ready, SupervisorMsg::Synced("namespaces"));
        }
    });
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

fn watcher<K>(
    api: Api<K>,
    config: watcher::Config,
) -> impl futures::Stream<Item = Result<Event<K>, watcher::Error>> + Send
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug + Send + 'static,
{
    watcher::watcher(api, config).default_backoff()
}

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

async fn on_provider_event(me: &ActorRef<SupervisorMsg>, state: &mut SupervisorState, event: Event<OVirtProvider>) {
    match event {
        Event::Init => state.relisting_providers = Some(HashSet::new()),
        Event::InitApply(provider) | Event::Apply(provider) => {
            let name = provider.name_any();
            if let Some(seen) = &mut state.relisting_providers {
                seen.insert(name.clone());
            }
            apply_provider(me, state, provider).await;
        }
        Event::Delete(provider) => stop_provider(state, &provider.name_any()),
        Event::InitDone => {
            if let Some(seen) = state.relisting_providers.take() {
                let gone: Vec<String> = state
                    .providers
                    .keys()
                    .filter(|name| !seen.contains(*name))
                    .cloned()
                    .collect();
                for name in gone {
                    stop_provider(state, &name);
                }
            }
        }
    }
}

async fn apply_provider(me: &ActorRef<SupervisorMsg>, state: &mut SupervisorState, provider: OVirtProvider) {
    let name = provider.name_any();
    // Before the provider hears of its new spec: the machines it then wakes must see the new access list.
    if let Ok(mut access) = state.shared.provider_access.write() {
        access.insert(name.clone(), provider.spec.allowed_namespaces.clone());
    }
    let outcome = sync_provider_finalizer(state, &provider).await;
    finalizer_outcome(me, state, FinalizerOwner::Provider(name.clone()), outcome);
    if let Some((actor, latest)) = state.providers.get_mut(&name) {
        *latest = provider.clone();
        let _ = mailbox::cast(&state.shared.metrics, actor, ProviderMsg::Spec(Box::new(provider)));
        return;
    }
    if !state.synced.contains("secrets") {
        // Started now, the actor would not find a credentials Secret that exists but has not been listed yet, and
        // the provider would show CredentialsNotFound for a moment after every operator start.
        state.pending_providers.insert(name, provider);
        return;
    }
    let secret = provider
        .spec
        .credentials_secret_name
        .as_ref()
        .and_then(|secret_name| state.secrets.get(secret_name).cloned());
    let args = ProviderArgs {
        provider: provider.clone(),
        secret,
        settings: state.shared.settings.clone(),
        status_writer: state.shared.status_writer.clone(),
        metrics: state.shared.metrics.clone(),
    };
    match Actor::spawn_linked(None, ProviderActor, args, me.get_cell()).await {
        Ok((actor, _)) => {
            state.provider_cells.insert(actor.get_id(), name.clone());
            if let Ok(mut providers) = state.shared.providers.write() {
                providers.insert(name.clone(), actor.clone());
            }
            state.providers.insert(name, (actor, provider));
            // Machines that waited for this provider can go on.
            for child in state.machines.values() {
                if let Some(machine) = &child.actor {
                    let _ = mailbox::cast(&state.shared.metrics, machine, MachineMsg::ConnectionChanged);
                }
            }
        }
        Err(err) => tracing::error!(provider = %name, error = %err, "cannot start the provider actor"),
    }
}

/// Adds the provider's finalizer, or, while it is being deleted, removes it once no OVirtMachine references it.
async fn sync_provider_finalizer(state: &SupervisorState, provider: &OVirtProvider) -> Result<(), String> {
    let api: Api<OVirtProvider> = Api::all(state.shared.client.clone());
    if provider.metadata.deletion_timestamp.is_none() {
        return finalizers::ensure(&api, provider, PROVIDER_FINALIZER)
            .await
            .map(|_| ())
            .map_err(|err| format!("cannot add the finalizer {PROVIDER_FINALIZER}: {err}"));
    }
    let name = provider.name_any();
    let in_use = state
        .machines
        .values()
        .any(|child| child.latest.spec.settings.provider == name);
    if in_use {
        return Ok(());
    }
    finalizers::remove(&api, provider, PROVIDER_FINALIZER)
        .await
        .map(|_| ())
        .map_err(|err| format!("cannot remove the finalizer {PROVIDER_FINALIZER}: {err}"))
}

/// Notes how a finalizer write went: a failure is retried after a jittered, growing delay (one retry queued per
/// object at a time), a success ends the retries.
fn finalizer_outcome(
    me: &ActorRef<SupervisorMsg>,
    state: &mut SupervisorState,
    owner: FinalizerOwner,
    outcome: Result<(), String>,
) {
    let Err(message) = outcome else {
        state.finalizer_retries.remove(&owner);
        return;
    };
    let retry = state
        .finalizer_retries
        .entry(owner.clone())
        .or_insert_with(|| FinalizerRetry {
            backoff: crate::backoff::Backoff::new(FINALIZER_RETRY, MAX_FINALIZER_RETRY),
            scheduled: false,
        });
    tracing::warn!(object = ?owner, error = %message, retry_in = ?retry.backoff.nominal(), "finalizer write failed");
    if !retry.scheduled {
        retry.scheduled = true;
        let delay = retry.backoff.next_delay();
        mailbox::cast_after(&state.shared.metrics, delay, me.clone(), move || {
            SupervisorMsg::RetryFinalizer(owner)
        });
    }
}

/// Tries a failed finalizer write again on the object as it is now; nothing to do once it is gone.
async fn retry_finalizer(me: &ActorRef<SupervisorMsg>, state: &mut SupervisorState, owner: FinalizerOwner) {
    match state.finalizer_retries.get_mut(&owner) {
        Some(retry) => retry.scheduled = false,
        None => return,
    }
    let client = state.shared.client.clone();
    let outcome = match &owner {
        FinalizerOwner::Cluster { namespace, name } => {
            match Api::<OVirtCluster>::namespaced(client, namespace).get_opt(name).await {
                Ok(Some(cluster)) => cluster::reconcile(&state.shared, &cluster).await,
                Ok(None) => Ok(()),
                Err(err) => Err(format!("cannot read OVirtCluster {namespace}/{name}: {err}")),
            }
        }
        FinalizerOwner::Provider(name) => match Api::<OVirtProvider>::all(client).get_opt(name).await {
            Ok(Some(provider)) => sync_provider_finalizer(state, &provider).await,
            Ok(None) => Ok(()),
            Err(err) => Err(format!("cannot read OVirtProvider {name}: {err}")),
        },
    };
    finalizer_outcome(me, state, owner, outcome);
}

fn stop_provider(state: &mut SupervisorState, name: &str) {
    state.pending_providers.remove(name);
    if let Some((actor, _)) = state.providers.remove(name) {
        state.provider_cells.remove(&actor.get_id());
        actor.stop(Some("OVirtProvider deleted".into()));
    }
    if let Ok(mut providers) = state.shared.providers.write() {
        providers.remove(name);
    }
    let forget = StatusWriterMsg::Forget(ObjectKey::provider(name));
    let _ = mailbox::cast(&state.shared.metrics, &state.shared.status_writer, forget);
}

fn on_secret_event(state: &mut SupervisorState, event: Event<Secret>) {
    for (name, data) in state.secrets.apply(event) {
        for (actor, provider) in state.providers.values() {
            if provider.spec.credentials_secret_name.as_deref() == Some(name.as_str()) {
                let _ = mailbox::cast(&state.shared.metrics, actor, ProviderMsg::Secret(data.clone()));
            }
        }
    }
}

async fn on_machine_event(me: &ActorRef<SupervisorMsg>, state: &mut SupervisorState, event: Event<OVirtMachine>) {
    match event {
        Event::Init => state.relisting_machines = Some(HashSet::new()),
        Event::InitApply(machine) | Event::Apply(machine) => {
            let key = ObjectKey::machine(&machine.namespace().unwrap_or_default(), &machine.name_any());
            if let Some(seen) = &mut state.relisting_machines {
                seen.insert(key.clone());
            }
            let (machine, status) = slim::split_status(machine);
            match state.machines.get_mut(&key) {
                Some(child) => {
                    child.latest = machine.clone();
                    if let Some(actor) = &child.actor {
                        let _ = mailbox::cast(&state.shared.metrics, actor, MachineMsg::ObjectChanged(machine));
                    }
                }
                None => spawn_machine(me, state, key, machine, status).await,
            }
        }
        Event::Delete(machine) => {
            let key = ObjectKey::machine(&machine.namespace().unwrap_or_default(), &machine.name_any());
            stop_machine(state, &key);
            release_deleting_providers(me, state).await;
        }
        Event::InitDone => {
            if let Some(seen) = state.relisting_machines.take() {
                let gone: Vec<ObjectKey> = state
                    .machines
                    .keys()
                    .filter(|key| !seen.contains(*key))
                    .cloned()
                    .collect();
                for key in gone {
                    stop_machine(state, &key);
                }
                release_deleting_providers(me, state).await;
            }
        }
    }
}

async fn release_deleting_providers(me: &ActorRef<SupervisorMsg>, state: &mut SupervisorState) {
    let deleting: Vec<OVirtProvider> = state
        .providers
        .values()
        .map(|(_, provider)| provider)
        .filter(|provider| provider.metadata.deletion_timestamp.is_some())
        .cloned()
        .collect();
    for provider in deleting {
        let outcome = sync_provider_finalizer(state, &provider).await;
        finalizer_outcome(me, state, FinalizerOwner::Provider(provider.name_any()), outcome);
    }
}

async fn spawn_machine(
    me: &ActorRef<SupervisorMsg>,
    state: &mut SupervisorState,
    key: ObjectKey,
    object: Arc<OVirtMachine>,
    status: Option<capov_crds::OVirtMachineStatus>,
) {
    let args = MachineArgs {
        object: object.clone(),
        status,
        shared: state.shared.clone(),
    };
    let restarts = state.machines.get(&key).map(|child| child.restarts).unwrap_or(0);
    match Actor::spawn_linked(None, MachineActor, args, me.get_cell()).await {
        Ok((actor, _)) => {
            state.machine_cells.insert(actor.get_id(), key.clone());
            state.machines.insert(
                key,
                Child {
                    actor: Some(actor),
                    latest: object,
                    restarts,
                },
            );
        }
        Err(err) => {
            tracing::error!(object = %key, error = %err, "cannot start the machine actor; retrying");
            let restarts = restarts + 1;
            state.machines.insert(
                key.clone(),
                Child {
                    actor: None,
                    latest: object,
                    restarts,
                },
            );
            mailbox::cast_after(&state.shared.metrics, restart_delay(restarts), me.clone(), move || {
                SupervisorMsg::Restart(key)
            });
        }
    }
}

fn stop_machine(state: &mut SupervisorState, key: &ObjectKey) {
    if let Some(child) = state.machines.remove(key)
        && let Some(actor) = child.actor
    {
        state.machine_cells.remove(&actor.get_id());
        actor.stop(Some("OVirtMachine deleted".into()));
    }
    let forget = StatusWriterMsg::Forget(key.clone());
    let _ = mailbox::cast(&state.shared.metrics, &state.shared.status_writer, forget);
}
