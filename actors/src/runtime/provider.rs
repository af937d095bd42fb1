//! One actor per OVirtProvider: owns the engine connection (client, token, TLS, rate limiter), reports the
//! provider's status, tells the machines using it when the connection changes, and answers the VM status of every
//! machine waiting on the engine with one search request per poll interval.
//!
//! Engine I/O never runs inside the actor's handler: checks and polls run as tasks that report back, at most one
//! of each at a time, so a machine asking for the connection never waits behind a slow engine. The connection is
//! re-checked every [`RECHECK_INTERVAL`] while it works and soon after any request of this provider fails with a
//! transport error, a 5xx or a 401, so that an outage or a password changed on the engine shows on the provider
//! and its machines, and both recover by themselves.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use capov_crds::labels::MANAGEMENT_CLUSTER_ANNOTATION;
use capov_crds::{Condition, OVirtProvider, Severity};
use capov_ovirt::{Client, Outcome, RequestEvent};
use k8s_openapi::ByteString;
use kube::Resource;
use ractor::{Actor, ActorProcessingErr, ActorRef, RpcReplyPort};
use serde_json::json;

use capov_core::conditions::{ConditionUpdate, INSECURE_TRANSPORT_MESSAGE, connected, reasons, set_condition, types};
use capov_core::trust::management_clusters::{self, ManagementClusters};

use super::connection::{self, ConnectionProblem, ConnectionSettings};
use super::keys::ObjectKey;
use super::mailbox::{self, ActorMetrics, Alive, Mail};
use super::messages::{Connection, MachineMsg, ProviderDefaults};
use super::provider_inventory::{InventoryPoll, InventorySink};
use super::settings::RuntimeSettings;
use super::status_writer::StatusWriterMsg;
use crate::metrics::{Metrics, kind, result};
use capov_core::vm::vm_snapshot::{Fingerprints, VmSnapshot};

/// How often a working connection is checked again (one `GET /api`).
pub const RECHECK_INTERVAL: Duration = Duration::from_secs(30);
/// A failed request triggers a check at most this often.
const TROUBLE_DEBOUNCE: Duration = Duration::from_secs(5);
/// Retries of an unreachable engine back off to at most this (one `GET /api` per interval during an outage), so
/// that the end of an outage shows within it.
const UNREACHABLE_MAX_RETRY: Duration = Duration::from_secs(30);

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

/// What the provider holds per watched machine.
struct Watched {
    watch: VmWatch,
    seen: Option<Fingerprints>,
    /// A search has answered for this VM since the machine began watching it.
    searched: bool,
}

impl Watched {
    /// The machine has seen nothing of its VM and waits for a search to hand it over (its first pass after a
    /// restart): searched at the next poll whatever its cadence, and reported even when the VM is not found.
    fn first_sight(&self) -> bool {
        self.seen.is_none() && !self.searched
    }
}

/// What one poll compares a searched VM against: each watch of it (normally one).
#[derive(Clone, Copy)]
struct Due {
    cadence: Cadence,
    seen: Option<Fingerprints>,
    first_sight: bool,
}

impl Mail for ProviderMsg {
    const KIND: &'static str = kind::PROVIDER;
}

pub struct ProviderArgs {
    pub provider: OVirtProvider,
    pub secret: Option<BTreeMap<String, ByteString>>,
    pub settings: RuntimeSettings,
    pub status_writer: ActorRef<StatusWriterMsg>,
    pub metrics: Metrics,
    pub inventory: InventorySink,
}

pub struct ProviderActor;

pub struct ProviderState {
    key: ObjectKey,
    provider: OVirtProvider,
    secret: Option<BTreeMap<String, ByteString>>,
    settings: RuntimeSettings,
    status_writer: ActorRef<StatusWriterMsg>,
    applied: Option<ConnectionSettings>,
    /// The management clusters the provider's VM markers name, as last resolved.
    management_clusters: Option<ManagementClusters>,
    client: Option<Client>,
    connection: Connection,
    conditions: Vec<Condition>,
    /// The InsecureTransport Event was recorded since the provider last connected over https.
    insecure_transport_warned: bool,
    /// Retry delay of a failed check: 5 s doubling to 5 min, jittered.
    retry: capov_core::policy::backoff::Backoff,
    subscribers: HashMap<ObjectKey, ActorRef<MachineMsg>>,
    watched: HashMap<ObjectKey, Watched>,
    /// Polls so far; steady watches are searched on every STEADY_POLL_EVERY-th.
    polls: u64,
    poll_timer: Option<tokio::task::JoinHandle<()>>,
    /// A poll task is running; ticks meanwhile are skipped.
    poll_in_flight: bool,
    /// Hosts, clusters and storage domains, polled every INVENTORY_EVERY polls (issue #27).
    inventory: InventoryPoll,
    /// The tenants whose engine queue depth was last reported above zero.
    queued_tenants: HashSet<capov_ovirt::Tenant>,
    /// Number of the latest check task; outcomes of older ones are dropped.
    check_generation: u64,
    check_in_flight: bool,
    /// The next scheduled check (a retry or the periodic re-check); replaced, never doubled.
    next_check: Option<tokio::task::JoinHandle<()>>,
    last_trouble_check: Option<Instant>,
    /// The spec or Secret changed: machines hear of the next check's outcome even when the connection is the same
    /// (e.g. spec.allowedNamespaces changed).
    notify_after_check: bool,
    metrics: Metrics,
    mail: ActorMetrics,
    _alive: Alive,
}

impl Actor for ProviderActor {
    type Msg = ProviderMsg;
    type State = ProviderState;
    type Arguments = ProviderArgs;

    async fn pre_start(
        &self,
        me: ActorRef<ProviderMsg>,
        args: ProviderArgs,
    ) -> Result<ProviderState, ActorProcessingErr> {
        let name = args.provider.metadata.name.clone().unwrap_or_default();
        let metrics = args.metrics;
        let poll_timer = Some(mailbox::cast_every(
            &metrics,
            args.settings.poll_interval,
            me.clone(),
            || ProviderMsg::Poll,
        ));
        mailbox::cast(&metrics, &me, ProviderMsg::Check)?;
        let mail = ActorMetrics::of::<ProviderMsg>(&metrics);
        Ok(ProviderState {
            key: ObjectKey::provider(&name),
            provider: args.provider,
            secret: args.secret,
            settings: args.settings,
            status_writer: args.status_writer,
            applied: None,
            management_clusters: None,
            client: None,
            connection: Connection::Pending,
            conditions: Vec::new(),
            insecure_transport_warned: false,
            retry: capov_core::policy::backoff::Backoff::steps(),
            subscribers: HashMap::new(),
            watched: HashMap::new(),
            polls: 0,
            poll_timer,
            poll_in_flight: false,
            inventory: InventoryPoll::new(args.inventory),
            queued_tenants: HashSet::new(),
            check_generation: 0,
            check_in_flight: false,
            next_check: None,
            last_trouble_check: None,
            notify_after_check: false,
            metrics,
            _alive: mail.alive(),
            mail,
        })
    }

    async fn post_stop(&self, _me: ActorRef<ProviderMsg>, state: &mut ProviderState) -> Result<(), ActorProcessingErr> {
        for timer in [state.poll_timer.take(), state.next_check.take()].into_iter().flatten() {
            timer.abort();
        }
        state.inventory.forget(&state.key.name);
        if let Some(client) = state.client.take() {
            client.logout().await;
        }
        Ok(())
    }

    async fn handle(
        &self,
        me: ActorRef<ProviderMsg>,
        message: ProviderMsg,
        state: &mut ProviderState,
    ) -> Result<(), ActorProcessingErr> {
        let _handling = state.mail.handling();
        match message {
            ProviderMsg::Spec(provider) => {
                if provider.spec != state.provider.spec || lineage(&provider) != lineage(&state.provider) {
                    state.provider = *provider;
                    state.notify_after_check = true;
                    check(&me, state).await;
                } else {
                    state.provider = *provider;
                }
            }
            ProviderMsg::Secret(secret) => {
                if secret != state.secret {
                    state.secret = secret;
                    state.notify_after_check = true;
                    check(&me, state).await;
                }
            }
            ProviderMsg::Check => check(&me, state).await,
            ProviderMsg::Checked { generation, outcome } => {
                if generation == state.check_generation {
                    state.check_in_flight = false;
                    checked(&me, state, outcome);
                }
            }
            ProviderMsg::Trouble => {
                let recent = state
                    .last_trouble_check
                    .is_some_and(|at| at.elapsed() < TROUBLE_DEBOUNCE);
                if matches!(state.connection, Connection::Ready { .. }) && !state.check_in_flight && !recent {
                    state.last_trouble_check = Some(Instant::now());
                    check(&me, state).await;
                }
            }
            ProviderMsg::Subscribe { machine, actor } => {
                state.subscribers.insert(machine, actor);
            }
            ProviderMsg::Unsubscribe(machine) => {
                state.subscribers.remove(&machine);
                state.watched.remove(&machine);
            }
            ProviderMsg::GetConnection(reply) => {
                let _ = reply.send(state.connection.clone());
            }
            ProviderMsg::WatchVm { machine, watch, seen } => {
                let searched = state
                    .watched
                    .get(&machine)
                    .is_some_and(|w| w.searched && w.watch.vm_id == watch.vm_id);
                state.watched.insert(machine, Watched { watch, seen, searched });
            }
            ProviderMsg::UnwatchVm(machine) => {
                state.watched.remove(&machine);
            }
            ProviderMsg::Poll => {
                report_queue_depths(state);
                poll(&me, state);
            }
            ProviderMsg::Polled { searched, changed } => {
                state.poll_in_flight = false;
                if let Some(changed) = changed {
                    report_polled(state, &searched, &changed);
                }
            }
            ProviderMsg::Inventoried(inventory) => state.inventory.received(&state.key.name, inventory),
        }
        Ok(())
    }
}

/// Re-resolves the settings, rebuilds the client when the endpoint changed, and starts a check task (login as
/// needed, then `GET /api`); its outcome arrives as `Checked`.
async fn check(me: &ActorRef<ProviderMsg>, state: &mut ProviderState) {
    if let Some(timer) = state.next_check.take() {
        timer.abort();
    }
    state.check_generation = state.check_generation.wrapping_add(1);
    let generation = state.check_generation;
    let task = match prepare(me, state) {
        Ok(task) => task,
        Err(problem) => {
            checked(me, state, Err(problem));
            return;
        }
    };
    state.check_in_flight = true;
    let (me, metrics) = (me.clone(), state.metrics.clone());
    tokio::spawn(async move {
        let outcome = task.await;
        let _ = mailbox::cast(&metrics, &me, ProviderMsg::Checked { generation, outcome });
    });
}

/// Applies a check's outcome: the connection, the provider's status, the machines told, the next check scheduled.
fn checked(me: &ActorRef<ProviderMsg>, state: &mut ProviderState, outcome: Result<String, ConnectionProblem>) {
    let label = if outcome.is_ok() {
        result::SUCCESS
    } else {
        result::ERROR
    };
    state
        .metrics
        .reconciles_total
        .with_label_values(&[kind::PROVIDER, label])
        .inc();
    let previous = std::mem::replace(&mut state.connection, Connection::Pending);
    let previous_ok = matches!(previous, Connection::Ready { .. });
    let next_check_in;
    state.connection = match outcome {
        Ok(engine_version) => {
            state.retry.reset();
            next_check_in = RECHECK_INTERVAL;
            let client = state.client.clone();
            let defaults = ProviderDefaults {
                diskclone: state.provider.spec.diskclone,
                storagedomainname: state.provider.spec.storagedomainname.clone(),
                vmtags: state.provider.spec.vmtags,
            };
            let engine = state
                .applied
                .as_ref()
                .map(|applied| capov_core::trust::identity::EngineIdentity {
                    url: applied.url.clone(),
                    user: applied.credentials.username.clone(),
                });
            match (client, engine, state.management_clusters.clone()) {
                (Some(client), Some(engine), Some(management_clusters)) => Connection::Ready {
                    client,
                    engine_version,
                    defaults,
                    engine,
                    management_clusters,
                },
                _ => Connection::Pending,
            }
        }
        Err(problem) => {
            let since = match &previous {
                Connection::Failed { problem: old, since } if old.reason == problem.reason => *since,
                _ => Instant::now(),
            };
            tracing::warn!(provider = %state.key, reason = problem.reason, message = %problem.message, "cannot connect to oVirt");
            let delay = state.retry.next_delay();
            // The end of an outage must show soon: transient failures are retried at least once a minute.
            next_check_in = if problem.reason == reasons::ENGINE_UNREACHABLE {
                delay.min(capov_core::policy::backoff::jittered_retry(UNREACHABLE_MAX_RETRY))
            } else {
                delay
            };
            Connection::Failed { problem, since }
        }
    };
    state.next_check = Some(mailbox::cast_after(&state.metrics, next_check_in, me.clone(), || {
        ProviderMsg::Check
    }));
    let changed = !same_connection(&previous, &state.connection) || std::mem::take(&mut state.notify_after_check);
    report(state);
    if changed && (previous_ok || !matches!(state.connection, Connection::Pending)) {
        for subscriber in state.subscribers.values() {
            let _ = mailbox::cast(&state.metrics, subscriber, MachineMsg::ConnectionChanged);
        }
    }
}

/// Whether machines need to hear of a check: a periodic re-check that finds the same working client (or the same
/// failure) changes nothing for them.
fn same_connection(a: &Connection, b: &Connection) -> bool {
    match (a, b) {
        (
            Connection::Ready {
                client: x,
                engine: e,
                management_clusters: m,
                ..
            },
            Connection::Ready {
                client: y,
                engine: f,
                management_clusters: n,
                ..
            },
        ) => x.same_as(y) && e == f && m == n,
        (Connection::Failed { problem: x, .. }, Connection::Failed { problem: y, .. }) => x == y,
        _ => false,
    }
}

/// The synchronous part of a check: settings resolved, the client kept, re-credentialed or rebuilt; returns the
/// I/O part (credential change, login, `GET /api`) as a future that owns what it needs.
fn prepare(
    me: &ActorRef<ProviderMsg>,
    state: &mut ProviderState,
) -> Result<impl std::future::Future<Output = Result<String, ConnectionProblem>> + Send + 'static, ConnectionProblem> {
    let management_clusters =
        management_clusters::from_annotation(lineage(&state.provider), &state.settings.management_cluster_id)
            .map_err(|message| ConnectionProblem::new(reasons::INVALID_MANAGEMENT_CLUSTER_ID, message))?;
    state.management_clusters = Some(management_clusters);
    let wanted = connection::resolve(
        &state.provider.spec,
        state.secret.as_ref(),
        &state.settings.credentials_namespace,
    )?;
    let same_endpoint = state
        .applied
        .as_ref()
        .is_some_and(|applied| applied.url == wanted.url && applied.tls == wanted.tls);
    let mut new_credentials = None;
    match (&state.client, same_endpoint) {
        (Some(_), true) => {
            if state.applied.as_ref().map(|a| &a.credentials) != Some(&wanted.credentials) {
                new_credentials = Some(wanted.credentials.clone());
            }
        }
        _ => {
            if let Some(old) = state.client.take() {
                tokio::spawn(async move { old.logout().await });
            }
            let mut config = connection::client_config(&wanted, state.settings.ovirt_qps, state.settings.ovirt_burst);
            if let Some(gate) = &state.settings.engine_write_gate {
                config = config.with_write_gate(gate.0.clone());
            }
            if let Some(instance) = &state.settings.instance {
                config = config.with_instance(instance.clone());
            }
            config.request_timeout = state.settings.engine_request_timeout;
            let observer = engine_request_observer(&state.metrics, &state.key.name, me);
            let client = Client::with_observer(config, observer)
                .map_err(|err| ConnectionProblem::new(err.reason(), err.to_string()))?;
            state.client = Some(client);
        }
    }
    state.applied = Some(wanted);
    let client = state
        .client
        .clone()
        .ok_or_else(|| ConnectionProblem::new(reasons::ENGINE_UNREACHABLE, "no client"))?;
    Ok(async move {
        if let Some(credentials) = new_credentials {
            // Revokes the old token and logs in with the new credentials on the next call.
            client.set_credentials(credentials).await;
        }
        let api = client
            .api()
            .await
            .map_err(|err| ConnectionProblem::new(err.reason(), err.to_string()))?;
        Ok(api
            .product_info
            .and_then(|info| info.version)
            .and_then(|v| v.full_version)
            .unwrap_or_default())
    })
}

/// The provider's management-cluster annotation ([`capov_core::trust::management_clusters`]).
fn lineage(provider: &OVirtProvider) -> Option<&str> {
    provider
        .metadata
        .annotations
        .as_ref()
        .and_then(|annotations| annotations.get(MANAGEMENT_CLUSTER_ANNOTATION))
        .map(String::as_str)
}

fn report(state: &mut ProviderState) {
    let generation = state.provider.metadata.generation;
    let plain_http = matches!(&state.connection, Connection::Ready { client, .. } if client.plain_http());
    let (connected, ready, version) = match &state.connection {
        Connection::Ready { engine_version, .. } => {
            let insecure_tls = state.provider.spec.tls.as_ref().is_some_and(|tls| tls.insecure);
            let message = if plain_http {
                INSECURE_TRANSPORT_MESSAGE
            } else if insecure_tls {
                "connected; TLS verification is off (spec.tls.insecure)"
            } else {
                "connected"
            };
            let can_connect = connected(types::CAN_CONNECT_TO_OVIRT, plain_http).with_message(message);
            let ready = connected(types::READY, plain_http).with_message(message);
            (can_connect, ready, Some(engine_version.clone()))
        }
        Connection::Failed { problem, .. } => {
            let severity = if problem.reason == reasons::ENGINE_UNREACHABLE {
                Severity::Warning
            } else {
                Severity::Error
            };
            let connected =
                ConditionUpdate::false_(types::CAN_CONNECT_TO_OVIRT, problem.reason, severity, &problem.message);
            let ready = ConditionUpdate::false_(types::READY, problem.reason, severity, &problem.message);
            (connected, ready, None)
        }
        Connection::Pending => return,
    };
    if version.is_some() {
        warn_insecure_transport(state, plain_http);
    }
    let now = crate::runtime::now();
    let not_paused = ConditionUpdate::false_(types::PAUSED, reasons::NOT_PAUSED, Severity::Info, "");
    for update in [&connected, &ready, &not_paused] {
        set_condition(&mut state.conditions, update, now, generation);
    }
    let mut status = json!({
        "ready": version.is_some(),
        "conditions": state.conditions,
    });
    if let Some(version) = version.filter(|v| !v.is_empty()) {
        status["engineVersion"] = json!(version);
    }
    let update = StatusWriterMsg::Update {
        key: state.key.clone(),
        status,
    };
    let _ = mailbox::cast(&state.metrics, &state.status_writer, update);
}

/// Records one Warning Event (and log line) when the provider connects over plain http, again only after it has
/// connected over https in between: the condition says it on every read, the Event is the notice.
fn warn_insecure_transport(state: &mut ProviderState, plain_http: bool) {
    if !plain_http {
        state.insecure_transport_warned = false;
        return;
    }
    if state.insecure_transport_warned {
        return;
    }
    state.insecure_transport_warned = true;
    let engine = capov_ovirt::redact_url(&state.provider.spec.engine);
    tracing::warn!(provider = %state.key, %engine, "{INSECURE_TRANSPORT_MESSAGE}");
    let event = StatusWriterMsg::Event {
        reference: state.provider.object_ref(&()),
        warning: true,
        reason: reasons::INSECURE_TRANSPORT.to_string(),
        note: format!("{engine}: {INSECURE_TRANSPORT_MESSAGE}"),
    };
    let _ = mailbox::cast(&state.metrics, &state.status_writer, event);
}

/// One search for every VM due this poll (those in a transition each time, those of Ready machines every
/// STEADY_POLL_EVERY-th), run as a task. It reads what a machine's own read would (`follow` of NICs, reported
/// devices and, for VMs in a transition, whole disks), so a VM that changed is handed to its machine as a snapshot and
/// its pass decides without reading the VM again ([`report_polled`]). A Ready machine thus costs its share of one
/// search a minute, and a machine waiting for a permit in a large batch its share of one search per poll, instead of
/// a read of its own per change. A tick while the previous search still runs is skipped.
fn poll(me: &ActorRef<ProviderMsg>, state: &mut ProviderState) {
    let Connection::Ready { client, .. } = &state.connection else {
        return;
    };
    if state.poll_in_flight {
        return;
    }
    state.polls = state.polls.wrapping_add(1);
    if !state.subscribers.is_empty() {
        let (me, metrics) = (me.clone(), state.metrics.clone());
        state.inventory.poll_if_due(state.polls, client, move |inventory| {
            let _ = mailbox::cast(&metrics, &me, ProviderMsg::Inventoried(inventory));
        });
    }
    if state.inventory.awaiting_first() {
        return;
    }
    // Polls count from 1, so steady rounds fall on 1, 13, …: after a restart the first search (at the second poll
    // while the first inventory is read) hands every machine its VM (they all watch with nothing seen), and the next
    // steady round comes a whole round later. A host that changed state shows in the snapshots
    // of its VMs: search them all now, not at the steady turn.
    let steady_due = state.polls % capov_core::policy::backoff::STEADY_POLL_EVERY == 1
        || std::mem::take(&mut state.inventory.search_all);
    // What each due watch last reported, by VM: the task keeps only the VMs that differ from it, so that a search
    // of thousands of VMs never holds more than one batch of answers at once.
    let mut seen_by_vm: HashMap<String, Vec<Due>> = HashMap::new();
    let mut searched: Vec<(ObjectKey, String)> = Vec::new();
    for (machine, watched) in &state.watched {
        if steady_due || watched.watch.cadence == Cadence::EveryPoll || watched.first_sight() {
            searched.push((machine.clone(), watched.watch.vm_id.clone()));
            seen_by_vm.entry(watched.watch.vm_id.clone()).or_default().push(Due {
                cadence: watched.watch.cadence,
                seen: watched.seen,
                first_sight: watched.first_sight(),
            });
        }
    }
    if searched.is_empty() {
        return;
    }
    // Disks matter to VMs in a transition (before the first start, at deletion); Ready VMs are searched without. A VM
    // watched both ways (two machines naming one VM) is searched with disks, which serves both.
    let (mut moving, mut steady): (Vec<String>, Vec<String>) = (Vec::new(), Vec::new());
    for (vm_id, watches) in &seen_by_vm {
        if watches.iter().any(|due| due.cadence == Cadence::EveryPoll) {
            moving.push(vm_id.clone());
        } else {
            steady.push(vm_id.clone());
        }
    }
    state.poll_in_flight = true;
    let client = client.with_correlation_id("capov-status-poll");
    let inventory = state.inventory.current();
    let (me, metrics, provider) = (me.clone(), state.metrics.clone(), state.key.clone());
    tokio::spawn(async move {
        let mut changed = HashMap::new();
        let mut failed = false;
        'lists: for (ids, disks) in [(moving, true), (steady, false)] {
            for batch in ids.chunks(SEARCH_BATCH) {
                let batch: Vec<&str> = batch.iter().map(String::as_str).collect();
                let mut found = match client.vms_facts(&batch, disks).await {
                    Ok(found) => found,
                    Err(err) => {
                        tracing::debug!(%provider, error = %err, "status poll failed");
                        failed = true;
                        break 'lists;
                    }
                };
                for vm_id in batch {
                    let snapshot = found
                        .remove(vm_id)
                        .and_then(VmSnapshot::from_facts)
                        .map(|s| s.with_hosts(inventory.as_deref()));
                    let watches = seen_by_vm.get(vm_id).map(Vec::as_slice).unwrap_or_default();
                    if differs_from_any(snapshot.as_ref(), watches) {
                        changed.insert(vm_id.to_string(), snapshot.map(Arc::new));
                    }
                }
            }
        }
        let changed = (!failed).then_some(changed);
        let _ = mailbox::cast(&metrics, &me, ProviderMsg::Polled { searched, changed });
    });
}

/// Each tenant's requests waiting for this provider's rate limit, sampled once per poll interval; a tenant whose
/// queue emptied since the last sample is reported at zero.
fn report_queue_depths(state: &mut ProviderState) {
    let Some(client) = &state.client else {
        return;
    };
    let depths = client.queue_depths();
    for tenant in state
        .queued_tenants
        .iter()
        .filter(|tenant| !depths.contains_key(*tenant))
    {
        state.metrics.queues.engine_depth(&state.key.name, tenant.name(), 0);
    }
    for (tenant, depth) in &depths {
        state
            .metrics
            .queues
            .engine_depth(&state.key.name, tenant.name(), *depth);
    }
    state.queued_tenants = depths.into_keys().collect();
}

/// How many VMs one search asks for (the client halves a batch whose answer is too large).
const SEARCH_BATCH: usize = 50;

/// Whether a watch would report `snapshot` (None: not found): it differs from what the watch last reported.
fn differs(snapshot: Option<&VmSnapshot>, cadence: Cadence, seen: Option<&Fingerprints>) -> bool {
    // Searches of VMs in a transition inline their disks, those of Ready VMs do not.
    let with_disks = cadence == Cadence::EveryPoll;
    let pick = |f: &Fingerprints| if with_disks { f.with_disks } else { f.without_disks };
    snapshot.map(|s| s.fingerprint(with_disks)) != seen.map(pick)
}

/// Whether the poll hands `snapshot` over: some watch of it has not seen it yet.
fn differs_from_any(snapshot: Option<&VmSnapshot>, watches: &[Due]) -> bool {
    watches
        .iter()
        .any(|due| due.first_sight || differs(snapshot, due.cadence, due.seen.as_ref()))
}

/// Hands each searched VM that differs from what its machine saw to the machine, and keeps watching it: a machine
/// waiting for a reconcile permit (in a large batch, for minutes) gets every later change too, so that its pass can
/// decide from what it holds instead of reading the VM. Watches that changed while the search ran (another VM, or
/// removed) are left alone; one whose `seen` changed meanwhile is compared again.
fn report_polled(
    state: &mut ProviderState,
    searched: &[(ObjectKey, String)],
    changed: &HashMap<String, Option<Arc<VmSnapshot>>>,
) {
    for (machine, vm_id) in searched {
        let Some(watched) = state.watched.get_mut(machine) else {
            continue;
        };
        if watched.watch.vm_id != *vm_id {
            continue;
        }
        let first_sight = watched.first_sight();
        watched.searched = true;
        let Some(snapshot) = changed.get(vm_id) else {
            continue;
        };
        if !first_sight && !differs(snapshot.as_deref(), watched.watch.cadence, watched.seen.as_ref()) {
            continue;
        }
        watched.seen = snapshot.as_ref().map(|s| s.fingerprints());
        if let Some(actor) = state.subscribers.get(machine) {
            let observed = MachineMsg::VmObserved {
                vm_id: vm_id.clone(),
                snapshot: snapshot.clone(),
            };
            let _ = mailbox::cast(&state.metrics, actor, observed);
        }
    }
}

/// Feeds the engine request metrics of this provider from the client's per-request reports.
/// A request that failed in transport, with a 5xx or with a 401 tells the provider actor, which then checks the
/// connection (debounced), so that its conditions and its machines' follow an outage or a changed password.
fn engine_request_observer(
    metrics: &Metrics,
    provider: &str,
    me: &ActorRef<ProviderMsg>,
) -> Arc<dyn capov_ovirt::RequestObserver> {
    let metrics = metrics.clone();
    let provider = provider.to_string();
    let me = me.clone();
    Arc::new(move |event: &RequestEvent<'_>| {
        let code = match event.outcome {
            Outcome::Status(code) => code.to_string(),
            Outcome::Failed(_) => "error".to_string(),
        };
        let trouble = match event.outcome {
            Outcome::Failed(_) => true,
            Outcome::Status(code) => code == 401 || code >= 500,
        };
        if trouble {
            let _ = mailbox::cast(&metrics, &me, ProviderMsg::Trouble);
        }
        metrics
            .engine_requests_total
            .with_label_values(&[provider.as_str(), event.method, event.resource, code.as_str()])
            .inc();
        metrics
            .engine_request_duration_seconds
            .with_label_values(&[provider.as_str(), event.method, event.resource])
            .observe(event.latency.as_secs_f64());
        metrics
            .queues
            .engine_waited(provider.as_str(), event.tenant, event.rate_limit_wait);
        if !event.rate_limit_wait.is_zero() {
            metrics
                .engine_rate_limit_wait_seconds
                .with_label_values(&[provider.as_str()])
                .observe(event.rate_limit_wait.as_secs_f64());
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn snapshot(status: &str, with_disk: bool) -> VmSnapshot {
        VmSnapshot {
            id: "vm-1".into(),
            name: "worker".into(),
            description: "marker".into(),
            status: status.into(),
            os_type: None,
            started: false,
            disks: with_disk.then(|| {
                vec![capov_core::machine_steps::VmDisk {
                    attachment_id: "a".into(),
                    disk_id: "d".into(),
                    alias: "x".into(),
                    bootable: true,
                    provisioned_size: 1,
                    status: "ok".into(),
                }]
            }),
            nics: None,
            reported_devices: None,
            cluster_id: None,
            host: None,
        }
    }

    #[test]
    fn a_watch_reports_what_differs_from_what_it_last_reported() {
        let down = snapshot("down", true);
        let seen = Some(down.fingerprints());
        assert!(!differs(Some(&down), Cadence::EveryPoll, seen.as_ref()));
        assert!(differs(Some(&snapshot("up", true)), Cadence::EveryPoll, seen.as_ref()));
        assert!(differs(None, Cadence::EveryPoll, seen.as_ref()), "a VM that is gone");
        assert!(!differs(None, Cadence::EveryPoll, None), "still not there");
        assert!(differs(Some(&down), Cadence::EveryPoll, None), "first seen");
    }

    #[test]
    fn a_steady_search_without_disks_matches_what_was_seen_with_them() {
        let seen = Some(snapshot("up", true).fingerprints());
        assert!(!differs(Some(&snapshot("up", false)), Cadence::Steady, seen.as_ref()));
        assert!(differs(Some(&snapshot("up", false)), Cadence::EveryPoll, seen.as_ref()));
        let due = |cadence, first_sight| Due {
            cadence,
            seen,
            first_sight,
        };
        let watches = [due(Cadence::Steady, false), due(Cadence::EveryPoll, false)];
        assert!(!differs_from_any(Some(&snapshot("up", true)), &watches));
        assert!(differs_from_any(Some(&snapshot("down", true)), &watches));
    }

    #[test]
    fn a_first_sight_is_handed_over_even_when_the_vm_is_not_found() {
        let first = Due {
            cadence: Cadence::Steady,
            seen: None,
            first_sight: true,
        };
        assert!(differs_from_any(None, &[first]), "not found is an answer too");
        assert!(differs_from_any(Some(&snapshot("up", false)), &[first]));
        let unseen_after_a_search = Due {
            first_sight: false,
            ..first
        };
        assert!(!differs_from_any(None, &[unseen_after_a_search]), "still not there");
        let watched = |seen, searched| Watched {
            watch: VmWatch {
                vm_id: "vm-1".into(),
                cadence: Cadence::Steady,
            },
            seen,
            searched,
        };
        assert!(watched(None, false).first_sight());
        assert!(!watched(None, true).first_sight());
        assert!(!watched(Some(snapshot("up", false).fingerprints()), false).first_sight());
    }
}
