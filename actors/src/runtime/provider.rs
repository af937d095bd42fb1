//! One actor per OVirtProvider: owns the engine connection (client, token, TLS, rate limiter), reports the
//! provider's status, tells the machines using it when the connection changes, and answers the VM status of every
//! machine waiting on the engine with one search request per poll interval.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Instant;

use capov_crds::{Condition, OVirtProvider, Severity};
use capov_ovirt::{Client, Outcome, RequestEvent};
use k8s_openapi::ByteString;
use kube::Resource;
use ractor::{Actor, ActorProcessingErr, ActorRef, RpcReplyPort};
use serde_json::json;

use crate::conditions::{ConditionUpdate, INSECURE_TRANSPORT_MESSAGE, connected, reasons, set_condition, types};

use super::connection::{self, ConnectionProblem, ConnectionSettings};
use super::keys::ObjectKey;
use super::mailbox::{self, ActorMetrics, Alive, Mail};
use super::messages::{Connection, MachineMsg, ProviderDefaults};
use super::settings::RuntimeSettings;
use super::status_writer::StatusWriterMsg;
use crate::metrics::{Metrics, kind, result};

pub enum ProviderMsg {
    Spec(Box<OVirtProvider>),
    Secret(Option<BTreeMap<String, ByteString>>),
    Check,
    Subscribe {
        machine: ObjectKey,
        actor: ActorRef<MachineMsg>,
    },
    Unsubscribe(ObjectKey),
    GetConnection(RpcReplyPort<Connection>),
    /// Report `vm_id` to `machine` once its status differs from `seen` (None: never seen), then stop watching it.
    WatchVm {
        machine: ObjectKey,
        watch: VmWatch,
        seen: Option<String>,
    },
    UnwatchVm(ObjectKey),
    Poll,
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
    /// A running VM whose machine is Ready: every [`crate::backoff::STEADY_POLL_EVERY`] polls.
    Steady,
}

/// What the provider holds per watched machine.
struct Watched {
    watch: VmWatch,
    seen: Option<String>,
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
}

pub struct ProviderActor;

pub struct ProviderState {
    key: ObjectKey,
    provider: OVirtProvider,
    secret: Option<BTreeMap<String, ByteString>>,
    settings: RuntimeSettings,
    status_writer: ActorRef<StatusWriterMsg>,
    applied: Option<ConnectionSettings>,
    client: Option<Client>,
    connection: Connection,
    conditions: Vec<Condition>,
    /// The InsecureTransport Event was recorded since the provider last connected over https.
    insecure_transport_warned: bool,
    /// Retry delay of a failed check: 5 s doubling to 5 min, jittered.
    retry: crate::backoff::Backoff,
    subscribers: HashMap<ObjectKey, ActorRef<MachineMsg>>,
    watched: HashMap<ObjectKey, Watched>,
    /// Polls so far; steady watches are searched on every STEADY_POLL_EVERY-th.
    polls: u64,
    poll_timer: Option<tokio::task::JoinHandle<()>>,
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
            client: None,
            connection: Connection::Pending,
            conditions: Vec::new(),
            insecure_transport_warned: false,
            retry: crate::backoff::Backoff::steps(),
            subscribers: HashMap::new(),
            watched: HashMap::new(),
            polls: 0,
            poll_timer,
            metrics,
            _alive: mail.alive(),
            mail,
        })
    }

    async fn post_stop(&self, _me: ActorRef<ProviderMsg>, state: &mut ProviderState) -> Result<(), ActorProcessingErr> {
        if let Some(timer) = state.poll_timer.take() {
            timer.abort();
        }
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
                if provider.spec != state.provider.spec {
                    state.provider = *provider;
                    check(&me, state).await;
                } else {
                    state.provider = *provider;
                }
            }
            ProviderMsg::Secret(secret) => {
                if secret != state.secret {
                    state.secret = secret;
                    check(&me, state).await;
                }
            }
            ProviderMsg::Check => check(&me, state).await,
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
                state.watched.insert(machine, Watched { watch, seen });
            }
            ProviderMsg::UnwatchVm(machine) => {
                state.watched.remove(&machine);
            }
            ProviderMsg::Poll => poll(state).await,
        }
        Ok(())
    }
}

/// Re-resolves the settings, rebuilds or re-authenticates the client as needed, checks the engine, reports the
/// result and tells every subscribed machine.
async fn check(me: &ActorRef<ProviderMsg>, state: &mut ProviderState) {
    let started = Instant::now();
    let outcome = connect(state).await;
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
    state
        .metrics
        .reconcile_duration_seconds
        .with_label_values(&[kind::PROVIDER])
        .observe(started.elapsed().as_secs_f64());
    let previous_ok = matches!(state.connection, Connection::Ready { .. });
    state.connection = match outcome {
        Ok(engine_version) => {
            state.retry.reset();
            let client = state.client.clone();
            let defaults = ProviderDefaults {
                diskclone: state.provider.spec.diskclone,
                storagedomainname: state.provider.spec.storagedomainname.clone(),
            };
            let engine = state.applied.as_ref().map(|applied| crate::identity::EngineIdentity {
                url: applied.url.clone(),
                user: applied.credentials.username.clone(),
            });
            match (client, engine) {
                (Some(client), Some(engine)) => Connection::Ready {
                    client,
                    engine_version,
                    defaults,
                    engine,
                },
                _ => Connection::Pending,
            }
        }
        Err(problem) => {
            let since = match &state.connection {
                Connection::Failed { problem: old, since } if old.reason == problem.reason => *since,
                _ => Instant::now(),
            };
            tracing::warn!(provider = %state.key, reason = problem.reason, message = %problem.message, "cannot connect to oVirt");
            let delay = state.retry.next_delay();
            mailbox::cast_after(&state.metrics, delay, me.clone(), || ProviderMsg::Check);
            Connection::Failed { problem, since }
        }
    };
    report(state);
    if previous_ok || !matches!(state.connection, Connection::Pending) {
        for subscriber in state.subscribers.values() {
            let _ = mailbox::cast(&state.metrics, subscriber, MachineMsg::ConnectionChanged);
        }
    }
}

async fn connect(state: &mut ProviderState) -> Result<String, ConnectionProblem> {
    let wanted = connection::resolve(
        &state.provider.spec,
        state.secret.as_ref(),
        &state.settings.credentials_namespace,
    )?;
    let same_endpoint = state
        .applied
        .as_ref()
        .is_some_and(|applied| applied.url == wanted.url && applied.tls == wanted.tls);
    match (&state.client, same_endpoint) {
        (Some(client), true) => {
            if state.applied.as_ref().map(|a| &a.credentials) != Some(&wanted.credentials) {
                // Revokes the old token and logs in with the new credentials on the next call.
                client.set_credentials(wanted.credentials.clone()).await;
            }
        }
        _ => {
            if let Some(old) = state.client.take() {
                old.logout().await;
            }
            let config = connection::client_config(&wanted, state.settings.ovirt_qps, state.settings.ovirt_burst);
            let observer = engine_request_observer(&state.metrics, &state.key.name);
            let client = Client::with_observer(config, observer)
                .map_err(|err| ConnectionProblem::new(err.reason(), err.to_string()))?;
            state.client = Some(client);
        }
    }
    state.applied = Some(wanted);
    let client = state
        .client
        .as_ref()
        .ok_or_else(|| ConnectionProblem::new("EngineUnreachable", "no client"))?;
    let api = client
        .api()
        .await
        .map_err(|err| ConnectionProblem::new(err.reason(), err.to_string()))?;
    Ok(api
        .product_info
        .and_then(|info| info.version)
        .and_then(|v| v.full_version)
        .unwrap_or_default())
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

/// One search for the status of every VM due this poll (those in a transition each time, those of Ready machines
/// every STEADY_POLL_EVERY-th); a VM whose status changed is reported to its machine and no longer watched. Machines
/// whose VM changed but whose pass has not run yet (waiting for a permit or the rate limiter, as in a large batch)
/// thus cost no more polling, and a Ready machine costs its share of one search a minute instead of its own reads.
async fn poll(state: &mut ProviderState) {
    let Connection::Ready { client, .. } = &state.connection else {
        return;
    };
    state.polls = state.polls.wrapping_add(1);
    let steady_due = state.polls.is_multiple_of(crate::backoff::STEADY_POLL_EVERY);
    let due = |w: &Watched| steady_due || w.watch.cadence == Cadence::EveryPoll;
    let mut ids: Vec<&str> = state
        .watched
        .values()
        .filter(|w| due(w))
        .map(|w| w.watch.vm_id.as_str())
        .collect();
    if ids.is_empty() {
        return;
    }
    ids.sort_unstable();
    ids.dedup();
    let mut statuses = HashMap::new();
    for chunk in ids.chunks(50) {
        match client.with_correlation_id("capov-status-poll").vm_statuses(chunk).await {
            Ok(found) => statuses.extend(found),
            Err(err) => {
                tracing::debug!(provider = %state.key, error = %err, "status poll failed");
                return;
            }
        }
    }
    let subscribers = &state.subscribers;
    let metrics = &state.metrics;
    state.watched.retain(|machine, watched| {
        if !due(watched) {
            return true;
        }
        let status = statuses
            .get(watched.watch.vm_id.as_str())
            .map(|s| s.as_str().to_string());
        if status == watched.seen {
            return true;
        }
        if let Some(actor) = subscribers.get(machine) {
            let observed = MachineMsg::VmObserved {
                vm_id: watched.watch.vm_id.clone(),
                status,
            };
            let _ = mailbox::cast(metrics, actor, observed);
        }
        false
    });
}

/// Feeds the engine request metrics of this provider from the client's per-request reports.
fn engine_request_observer(metrics: &Metrics, provider: &str) -> Arc<dyn capov_ovirt::RequestObserver> {
    let metrics = metrics.clone();
    let provider = provider.to_string();
    Arc::new(move |event: &RequestEvent<'_>| {
        let code = match event.outcome {
            Outcome::Status(code) => code.to_string(),
            Outcome::Failed(_) => "error".to_string(),
        };
        metrics
            .engine_requests_total
            .with_label_values(&[provider.as_str(), event.method, event.resource, code.as_str()])
            .inc();
        metrics
            .engine_request_duration_seconds
            .with_label_values(&[provider.as_str(), event.method, event.resource])
            .observe(event.latency.as_secs_f64());
        if !event.rate_limit_wait.is_zero() {
            metrics
                .engine_rate_limit_wait_seconds
                .with_label_values(&[provider.as_str()])
                .observe(event.rate_limit_wait.as_secs_f64());
        }
    })
}
