//! The supervisor: keeps one provider actor per OVirtProvider and one machine actor per OVirtMachine (or, while the
//! machine has nothing to do, its dormant state: `machine::dormant`), routes the events of the watches (`watches`)
//! to them, restarts a failed child with backoff (a failing child never stops the supervisor or its siblings), and
//! stops the actors of deleted objects. OVirtClusters need no actor of their own:
//! they are handled here, and the finalizers the supervisor writes are retried by `provider_finalizers`.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use capov_crds::{OVirtMachine, OVirtProvider};
use capov_ovirt::{FairQueue, Tenant};
use k8s_openapi::api::core::v1::Secret;
use kube::ResourceExt;
use kube::runtime::watcher::Event;
use ractor::{Actor, ActorId, ActorProcessingErr, ActorRef, MessagingErr, SupervisionEvent};
use tokio::task::JoinHandle;

use crate::metrics::{Metrics, kind};
use crate::runtime::credential_secrets::CredentialSecrets;
use crate::runtime::held_mail::HeldMail;
use crate::runtime::keys::ObjectKey;
use crate::runtime::kube::clients::KubeClients;
use crate::runtime::kube::pulse::probe_while_silent;
use crate::runtime::kube::slim;
use crate::runtime::machine::{self, MachineActor};
use crate::runtime::mailbox::{self, ActorMetrics, Alive, Mail};
use crate::runtime::messages::{Dormant, MachineMsg, ProviderMsg, SupervisorMsg};
use crate::runtime::provider::finalizers::{self, ProviderFinalizers};
use crate::runtime::provider::{ProviderActor, ProviderArgs, restart};
use crate::runtime::relisting::Relisting;
use crate::runtime::settings::RuntimeSettings;
use crate::runtime::shared::Shared;
use crate::runtime::status::writer::{StatusWriter, StatusWriterArgs, StatusWriterMsg};
use crate::runtime::watches::{self, StoreWriters, SyncedWatches};

impl Mail for SupervisorMsg {
    const KIND: &'static str = kind::SUPERVISOR;
}

pub struct Supervisor;

struct Child {
    actor: Option<ActorRef<MachineMsg>>,
    /// The machine's state while it has no actor; mail for it starts the actor again ([`wake`]).
    dormant: Option<Box<dyn Dormant>>,
    /// Mail that found the actor stopped (resting, or failed), for the next actor.
    held: HeldMail,
    /// The machine waits in `SupervisorState::waking` for its actor to start.
    wake_queued: bool,
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
    /// Dormant machines whose actor is to start, taken [`WAKES_PER_TURN`] at a time, the namespaces in turn.
    waking: FairQueue<ObjectKey>,
    /// A `WakeTurn` is in the mailbox.
    wake_turn_sent: bool,
    relisting_providers: Relisting<String>,
    relisting_machines: Relisting<ObjectKey>,
    synced: SyncedWatches,
    finalizers: ProviderFinalizers,
}

pub struct SupervisorArgs {
    /// The management cluster's clients, and what their requests say of its apiserver (`kube::pulse`).
    pub clients: KubeClients,
    pub settings: RuntimeSettings,
    pub metrics: Metrics,
}

/// How many machine actors the supervisor starts before it reads its mailbox again. Mail for many machines at once
/// (the CAPI lists' first list, a provider's connection, its first searches after a restart) would otherwise start
/// an actor for each of them before the supervisor takes back the state of the first ones to rest: at 10,000
/// machines, 10,000 actors at once (about 7 KB each) where a few dozen are working.
const WAKES_PER_TURN: usize = 64;

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
        let pulse = args.clients.pulse.clone();
        let writer_args = StatusWriterArgs {
            client: args.clients.requests.clone(),
            metrics: args.metrics.clone(),
            spacing: args.settings.status_spacing,
            apiserver_returns: pulse.returns(),
        };
        let (status_writer, _) = Actor::spawn_linked(None, StatusWriter, writer_args, me.get_cell()).await?;
        let stores = StoreWriters::new();
        let mail = ActorMetrics::of::<SupervisorMsg>(&args.metrics);
        let shared = Arc::new(Shared::new(
            args.clients,
            args.metrics,
            args.settings,
            status_writer,
            me.clone(),
            stores.readers(),
        ));
        let mut tasks = watches::spawn(&me, &shared, stores);
        tasks.push(tokio::spawn(probe_while_silent(shared.client.clone(), pulse)));
        Ok(SupervisorState {
            finalizers: ProviderFinalizers::new(me.clone(), shared.clone()),
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
            waking: FairQueue::new(1),
            wake_turn_sent: false,
            relisting_providers: Relisting::default(),
            relisting_machines: Relisting::default(),
            synced: SyncedWatches::default(),
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
                state.synced.note(watches::PROVIDERS, &*event);
                on_provider_event(&me, state, *event).await;
                let listed = state.synced.contains(watches::PROVIDERS);
                if listed
                    && !state
                        .shared
                        .providers_listed
                        .swap(true, std::sync::atomic::Ordering::Relaxed)
                {
                    // Failure domains of providers that do not exist can be told now (issue 39).
                    crate::runtime::cluster::refresh_all(&state.shared).await;
                }
                note_providers_started(state);
            }
            SupervisorMsg::Secret(event) => {
                state.synced.note(watches::SECRETS, &*event);
                on_secret_event(&me, state, *event).await;
                note_providers_started(state);
            }
            SupervisorMsg::Cluster(event) => {
                state.synced.note(watches::CLUSTERS, &*event);
                state.finalizers.on_cluster_event(*event).await;
            }
            SupervisorMsg::Machine(event) => {
                state.synced.note(watches::MACHINES, &*event);
                on_machine_event(&me, state, *event).await
            }
            SupervisorMsg::Synced(watch) => state.synced.insert(watch),
            SupervisorMsg::IsSynced(reply) => {
                let _ = reply.send(state.synced.all());
            }
            SupervisorMsg::CaughtUp(reply) => {
                let _ = reply.send(());
            }
            SupervisorMsg::CapiChanged { namespace, machine } => {
                if machine.is_none() {
                    // A CAPI Cluster (or the Namespace) changed: its OVirtClusters may have to say so (a pause lifted).
                    state.finalizers.reconcile_clusters_in(&namespace).await;
                }
                wake_machines(&me, state, &namespace, machine).await
            }
            SupervisorMsg::CapiListed => poke(&me, state, |_| true).await,
            SupervisorMsg::RetryFinalizer(owner) => {
                let machines = &state.machines;
                let in_use = |provider: &str| provider_in_use(&state.shared, machines, provider);
                state.finalizers.retry(owner, in_use).await
            }
            SupervisorMsg::Restart(key) => restart_machine(&me, state, key),
            SupervisorMsg::Dormant(dormant) => rest(&me, state, dormant).await,
            SupervisorMsg::WakeTurn => wake_turn(&me, state).await,
            SupervisorMsg::ToMachine { key, message } => deliver(&me, state, &key, message).await,
            SupervisorMsg::InventoryPolled => crate::runtime::cluster::refresh_all(&state.shared).await,
            SupervisorMsg::RestartProvider(name) => restart_provider(&me, state, name).await,
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
                    let delay = restart_later(&me, &state.shared.metrics, key.clone(), child.restarts);
                    tracing::error!(object = %key, error = %reason, ?delay, "machine actor failed; restarting");
                    let restarts = &state.shared.metrics.actor_restarts_total;
                    restarts.with_label_values(&[kind::MACHINE]).inc();
                }
            }
        } else if let Some(name) = state.provider_cells.remove(&cell.get_id()) {
            if state.providers.remove(&name).is_some() {
                if let Ok(mut providers) = state.shared.providers.write() {
                    providers.remove(&name);
                }
                if failure.is_some() {
                    tracing::error!(provider = %name, "provider actor failed; restarting");
                    let restarts = &state.shared.metrics.actor_restarts_total;
                    restarts.with_label_values(&[kind::PROVIDER]).inc();
                    let (delay, retry) = (Duration::from_secs(1), move || SupervisorMsg::RestartProvider(name));
                    mailbox::cast_after(
                        &state.shared.metrics,
                        capov_core::policy::backoff::jittered_retry(delay),
                        me,
                        retry,
                    );
                }
            }
        } else if cell.get_id() == state.shared.status_writer.get_id() {
            // Without the status writer nothing the actors decide reaches the API server: a runtime that goes on
            // would renew its Lease and do no visible work. It stops instead, and the process exits non-zero.
            let failure = failure.as_deref().unwrap_or("terminated");
            return Err(format!("the status writer stopped ({failure}); stopping the runtime").into());
        } else if failure.is_some() {
            return Err(format!("a runtime actor failed: {failure:?}").into());
        }
        Ok(())
    }
}

/// Once the providers and the credential Secrets are listed, every listed provider has its actor: a machine that
/// finds none for its provider may say that it is missing.
fn note_providers_started(state: &SupervisorState) {
    if state.synced.contains(watches::PROVIDERS) && state.synced.contains(watches::SECRETS) {
        let started = &state.shared.providers_started;
        started.store(true, std::sync::atomic::Ordering::Relaxed);
    }
}

/// Wakes the machine a CAPI Machine names (`machine`), or every machine of the namespace.
async fn wake_machines(
    me: &ActorRef<SupervisorMsg>,
    state: &mut SupervisorState,
    namespace: &str,
    machine: Option<String>,
) {
    match machine {
        Some(name) => deliver(me, state, &ObjectKey::machine(namespace, &name), MachineMsg::Poke).await,
        None => poke(me, state, |key| key.namespace.as_deref() == Some(namespace)).await,
    }
}

/// Pokes every machine whose key `wanted` accepts.
async fn poke(me: &ActorRef<SupervisorMsg>, state: &mut SupervisorState, wanted: impl Fn(&ObjectKey) -> bool) {
    tell_every(me, state, wanted, || MachineMsg::Poke).await;
}

/// Sends `make()` to every machine whose key `wanted` accepts, dormant ones woken.
async fn tell_every(
    me: &ActorRef<SupervisorMsg>,
    state: &mut SupervisorState,
    wanted: impl Fn(&ObjectKey) -> bool,
    make: impl Fn() -> MachineMsg,
) {
    let keys: Vec<ObjectKey> = state.machines.keys().filter(|key| wanted(key)).cloned().collect();
    for key in keys {
        deliver(me, state, &key, make()).await;
    }
}

/// Hands mail to a machine: to its actor; to its dormant state, when it is an object change the machine would not
/// act on; else it is held and a dormant machine is queued to wake (at once with a permit or places). Mail for a
/// machine without a child is dropped (its object is gone).
async fn deliver(me: &ActorRef<SupervisorMsg>, state: &mut SupervisorState, key: &ObjectKey, message: MachineMsg) {
    let Some(child) = state.machines.get_mut(key) else {
        return;
    };
    if let Some(dormant) = child.dormant.as_mut() {
        match message {
            // Its own status write coming back: the dormant state takes the object and the machine rests on.
            MachineMsg::ObjectChanged(object) => {
                if !dormant.takes_object(object) {
                    return;
                }
            }
            message => child.held.hold(message),
        }
        wake_soon(me, state, key).await;
        return;
    }
    match &child.actor {
        Some(actor) => cast_or_hold(&state.shared.metrics, actor, &mut child.held, message),
        // Between the actor's stop and the state it leaves (its termination is told first), or before a restart.
        None => child.held.hold(message),
    }
}

/// Hands mail to a machine's actor, or holds it for the next actor when this one has stopped (to rest, or failed).
fn cast_or_hold(metrics: &Metrics, actor: &ActorRef<MachineMsg>, held: &mut HeldMail, message: MachineMsg) {
    if let Err(MessagingErr::SendErr(message)) = mailbox::cast(metrics, actor, message) {
        held.hold(message);
    }
}

/// Starts the machine's actor again after the backoff of its `restarts`-th restart ([`restart_machine`]); the delay.
fn restart_later(me: &ActorRef<SupervisorMsg>, metrics: &Metrics, key: ObjectKey, restarts: u32) -> Duration {
    let delay = capov_core::policy::backoff::actor_restart_delay(restarts);
    mailbox::cast_after(metrics, delay, me.clone(), move || SupervisorMsg::Restart(key));
    delay
}

/// Wakes a dormant machine that holds mail: at once when a permit or Node-step places wait for it (few exist, and one
/// idle in the queue would hold up as many passes), else in its turn ([`queue_wake`]).
async fn wake_soon(me: &ActorRef<SupervisorMsg>, state: &mut SupervisorState, key: &ObjectKey) {
    match state.machines.get(key) {
        Some(child) if child.held.holds_permit_or_place() => wake(me, state, key).await,
        _ => queue_wake(me, state, key),
    }
}

/// Queues a dormant machine to wake in its namespace's turn ([`wake_turn`]). Before the CAPI objects are listed its
/// mail stays held: a pass then would find no owner, and their first list wakes every machine
/// (`SupervisorMsg::CapiListed`).
fn queue_wake(me: &ActorRef<SupervisorMsg>, state: &mut SupervisorState, key: &ObjectKey) {
    if !state.shared.capi_listed() {
        return;
    }
    let Some(child) = state.machines.get_mut(key) else {
        return;
    };
    if child.wake_queued {
        return;
    }
    child.wake_queued = true;
    // A namespace is the tenant: its names and labels, and how many clusters it makes, do not change its turn.
    let tenant = Tenant::cluster(key.namespace.as_deref().unwrap_or_default(), "");
    state.waking.push(0, &tenant, key.clone());
    send_wake_turn(me, state);
}

fn send_wake_turn(me: &ActorRef<SupervisorMsg>, state: &mut SupervisorState) {
    if !state.wake_turn_sent && !state.waking.is_empty() {
        state.wake_turn_sent = mailbox::cast(&state.shared.metrics, me, SupervisorMsg::WakeTurn).is_ok();
    }
}

/// Starts the actors of the next [`WAKES_PER_TURN`] queued machines, then lets the mail that came meanwhile (the
/// first of them resting again) go first.
async fn wake_turn(me: &ActorRef<SupervisorMsg>, state: &mut SupervisorState) {
    state.wake_turn_sent = false;
    for _ in 0..WAKES_PER_TURN {
        let Some((_, key)) = state.waking.pop() else {
            break;
        };
        if let Some(child) = state.machines.get_mut(&key) {
            child.wake_queued = false;
        }
        wake(me, state, &key).await;
    }
    send_wake_turn(me, state);
}

/// Starts the actor of a dormant machine with its state, and hands it the mail held for it; nothing for a machine
/// that has an actor already.
async fn wake(me: &ActorRef<SupervisorMsg>, state: &mut SupervisorState, key: &ObjectKey) {
    let Some(dormant) = state.machines.get_mut(key).and_then(|child| child.dormant.take()) else {
        return;
    };
    let spawned = Actor::spawn_linked(None, MachineActor, dormant, me.get_cell()).await;
    let Some(child) = state.machines.get_mut(key) else {
        return;
    };
    match spawned {
        Ok((actor, _)) => {
            state.machine_cells.insert(actor.get_id(), key.clone());
            for message in child.held.take() {
                cast_or_hold(&state.shared.metrics, &actor, &mut child.held, message);
            }
            child.actor = Some(actor);
        }
        Err(err) => {
            // The state went with the failed start: the machine starts afresh from its object, as after a failure.
            tracing::error!(object = %key, error = %err, "cannot wake the machine actor; restarting it");
            child.restarts += 1;
            restart_later(me, &state.shared.metrics, key.clone(), child.restarts);
        }
    }
}

/// A machine actor stopped to rest and left its state: kept, or queued to wake when mail came meanwhile or it had a
/// pass queued (at once for a permit). The state of an object that is gone is released.
async fn rest(me: &ActorRef<SupervisorMsg>, state: &mut SupervisorState, dormant: Box<dyn Dormant>) {
    let key = dormant.key().clone();
    let Some(child) = state.machines.get_mut(&key) else {
        dormant.release();
        return;
    };
    if child.latest.metadata.uid.as_deref() != dormant.uid() || child.dormant.is_some() {
        dormant.release();
        return;
    }
    if let Some(actor) = child.actor.take() {
        state.machine_cells.remove(&actor.get_id());
    }
    let wanted = dormant.wants_pass() || !child.held.is_empty();
    child.dormant = Some(dormant);
    if wanted {
        wake_soon(me, state, &key).await;
    }
}

/// Whether an OVirtMachine holds the provider of this name ([`finalizers::holds_provider`]).
fn provider_in_use(shared: &Shared, machines: &HashMap<ObjectKey, Child>, provider: &str) -> bool {
    (machines.values()).any(|child| finalizers::holds_provider(shared, &child.latest, provider))
}

/// Starts again the actor of a provider that failed, from the object as the apiserver has it now; nothing when a
/// newer event started one meanwhile or the provider is gone.
async fn restart_provider(me: &ActorRef<SupervisorMsg>, state: &mut SupervisorState, name: String) {
    if state.providers.contains_key(&name) || state.pending_providers.contains_key(&name) {
        return;
    }
    match restart::current(&state.shared, &name).await {
        Ok(Some(provider)) => apply_provider(me, state, provider).await,
        Ok(None) => {}
        Err(err) => {
            tracing::warn!(provider = %name, error = %err, "cannot read the provider to restart its actor; retrying");
            let (delay, retry) = (Duration::from_secs(5), move || SupervisorMsg::RestartProvider(name));
            mailbox::cast_after(
                &state.shared.metrics,
                capov_core::policy::backoff::jittered_retry(delay),
                me.clone(),
                retry,
            );
        }
    }
}

async fn on_provider_event(me: &ActorRef<SupervisorMsg>, state: &mut SupervisorState, event: Event<OVirtProvider>) {
    match event {
        Event::Init => state.relisting_providers.start(),
        Event::InitApply(provider) | Event::Apply(provider) => {
            state.relisting_providers.saw(&provider.name_any());
            apply_provider(me, state, provider).await;
        }
        Event::Delete(provider) => stop_provider(state, &provider.name_any()),
        Event::InitDone => {
            let gone = state.relisting_providers.finish(state.providers.keys());
            for name in gone.unwrap_or_default() {
                stop_provider(state, &name);
            }
        }
    }
}

async fn apply_provider(me: &ActorRef<SupervisorMsg>, state: &mut SupervisorState, provider: OVirtProvider) {
    let name = provider.name_any();
    // Before the provider hears of its new spec: the machines it then wakes must see the new access list.
    if let Ok(mut access) = state.shared.provider_access.write() {
        access.insert(name.clone(), crate::runtime::shared::ProviderAccess::of(&provider));
    }
    let machines = &state.machines;
    let in_use = |provider: &str| provider_in_use(&state.shared, machines, provider);
    state.finalizers.sync(&provider, in_use).await;
    if let Some((actor, latest)) = state.providers.get_mut(&name) {
        *latest = provider.clone();
        let _ = mailbox::cast(&state.shared.metrics, actor, ProviderMsg::Spec(Box::new(provider)));
        return;
    }
    if !state.synced.contains(watches::SECRETS) {
        // Started now, the actor would not find a credentials Secret that exists but has not been listed yet, and
        // the provider would show CredentialsNotFound for a moment after every operator start.
        state.pending_providers.insert(name, provider);
        return;
    }
    spawn_provider(me, state, name, provider).await;
}

async fn spawn_provider(
    me: &ActorRef<SupervisorMsg>,
    state: &mut SupervisorState,
    name: String,
    provider: OVirtProvider,
) {
    let secret = provider
        .spec
        .credentials_secret_name
        .as_ref()
        .and_then(|secret_name| state.secrets.get(secret_name).cloned());
    let args = ProviderArgs::new(provider.clone(), secret, &state.shared, me);
    match Actor::spawn_linked(None, ProviderActor, args, me.get_cell()).await {
        Ok((actor, _)) => {
            state.provider_cells.insert(actor.get_id(), name.clone());
            if let Ok(mut providers) = state.shared.providers.write() {
                providers.insert(name.clone(), actor.clone());
            }
            state.providers.insert(name, (actor, provider));
            // Machines that waited for this provider can go on.
            tell_every(me, state, |_| true, || MachineMsg::ConnectionChanged).await;
        }
        Err(err) => tracing::error!(provider = %name, error = %err, "cannot start the provider actor"),
    }
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

/// Hands changed credentials to the providers that use them; once the Secrets are listed, starts the providers that
/// waited for them.
async fn on_secret_event(me: &ActorRef<SupervisorMsg>, state: &mut SupervisorState, event: Event<Secret>) {
    let listed = matches!(event, Event::InitDone);
    for (name, data) in state.secrets.apply(event) {
        for (actor, provider) in state.providers.values() {
            if provider.spec.credentials_secret_name.as_deref() == Some(name.as_str()) {
                let _ = mailbox::cast(&state.shared.metrics, actor, ProviderMsg::Secret(data.clone()));
            }
        }
    }
    if listed {
        for (_, provider) in std::mem::take(&mut state.pending_providers) {
            apply_provider(me, state, provider).await;
        }
    }
}

async fn on_machine_event(me: &ActorRef<SupervisorMsg>, state: &mut SupervisorState, event: Event<OVirtMachine>) {
    match event {
        Event::Init => state.relisting_machines.start(),
        Event::InitApply(machine) | Event::Apply(machine) => {
            let key = ObjectKey::machine(&machine.namespace().unwrap_or_default(), &machine.name_any());
            state.relisting_machines.saw(&key);
            let (machine, status) = slim::split_status(machine);
            match state.machines.get_mut(&key) {
                // A relist shows every object again: one the actor holds already needs no message, no copy.
                Some(child) if slim::same_version(&*child.latest, &*machine) => {}
                Some(child) => {
                    child.latest = machine.clone();
                    deliver(me, state, &key, MachineMsg::ObjectChanged(machine)).await;
                }
                None => take_up_machine(me, state, key, machine, status),
            }
        }
        Event::Delete(machine) => {
            let key = ObjectKey::machine(&machine.namespace().unwrap_or_default(), &machine.name_any());
            stop_machine(state, &key);
            release_deleting_providers(state).await;
        }
        Event::InitDone => {
            if let Some(gone) = state.relisting_machines.finish(state.machines.keys()) {
                for key in gone {
                    stop_machine(state, &key);
                }
                release_deleting_providers(state).await;
            }
        }
    }
}

/// Providers being deleted wait for their last machine to go: a machine gone may release one.
async fn release_deleting_providers(state: &mut SupervisorState) {
    let machines = &state.machines;
    let in_use = |provider: &str| provider_in_use(&state.shared, machines, provider);
    let providers = state.providers.values().map(|(_, provider)| provider);
    state.finalizers.release_deleting(providers, in_use).await;
}

/// Starts again a machine actor that failed (or could not start), when its object still exists.
fn restart_machine(me: &ActorRef<SupervisorMsg>, state: &mut SupervisorState, key: ObjectKey) {
    if let Some(child) = state.machines.get_mut(&key)
        && child.actor.is_none()
        && child.dormant.is_none()
    {
        child.held.clear();
        // Only what the supervisor holds of the status is left: the restarted actor writes its status once more,
        // even when nothing changed.
        let object = child.latest.clone();
        let status = object.status.clone();
        take_up_machine(me, state, key, object, status);
    }
}

/// Takes up a machine seen for the first time, or whose actor failed: as a dormant machine with a pass queued, woken
/// in its turn ([`queue_wake`]).
fn take_up_machine(
    me: &ActorRef<SupervisorMsg>,
    state: &mut SupervisorState,
    key: ObjectKey,
    object: Arc<OVirtMachine>,
    status: Option<capov_crds::OVirtMachineStatus>,
) {
    let restarts = state.machines.get(&key).map(|child| child.restarts).unwrap_or(0);
    let child = Child {
        actor: None,
        dormant: Some(machine::unstarted(object.clone(), status, state.shared.clone())),
        held: HeldMail::default(),
        wake_queued: false,
        latest: object,
        restarts,
    };
    state.machines.insert(key.clone(), child);
    queue_wake(me, state, &key);
}

fn stop_machine(state: &mut SupervisorState, key: &ObjectKey) {
    if let Some(child) = state.machines.remove(key) {
        if let Some(actor) = child.actor {
            state.machine_cells.remove(&actor.get_id());
            actor.stop(Some("OVirtMachine deleted".into()));
        }
        if let Some(dormant) = child.dormant {
            dormant.release();
        }
    }
    let forget = StatusWriterMsg::Forget(key.clone());
    let _ = mailbox::cast(&state.shared.metrics, &state.shared.status_writer, forget);
}
