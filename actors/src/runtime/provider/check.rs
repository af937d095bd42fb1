//! Checking a provider's connection (settings resolved, the client kept or rebuilt, login, `GET /api`) and reporting
//! the provider's status and its machines' connection.

use std::time::Instant;

use capov_crds::labels::MANAGEMENT_CLUSTER_ANNOTATION;
use capov_crds::{OVirtProvider, Severity};
use capov_ovirt::Client;
use kube::Resource;
use ractor::ActorRef;
use serde_json::json;

use capov_core::conditions::{ConditionUpdate, INSECURE_TRANSPORT_MESSAGE, connected, reasons, set_condition, types};
use capov_core::trust::management_clusters::{self};

use crate::metrics::{kind, result};
use crate::runtime::machine_mail::tell;
use crate::runtime::mailbox::{self};
use crate::runtime::messages::{Connection, MachineMsg, ProviderDefaults, ProviderMsg};
use crate::runtime::provider::connection::ConnectionProblem;
use crate::runtime::status::events::NoteKind;
use crate::runtime::status::writer::StatusWriterMsg;

use super::connection;
use super::poll::engine_request_observer;
use super::state::*;

/// Re-resolves the settings, rebuilds the client when the endpoint changed, and starts a check task (login as
/// needed, then `GET /api`); its outcome arrives as `Checked`.
pub(super) async fn check(me: &ActorRef<ProviderMsg>, state: &mut ProviderState) {
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
pub(super) fn checked(
    me: &ActorRef<ProviderMsg>,
    state: &mut ProviderState,
    outcome: Result<String, ConnectionProblem>,
) {
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
                engine_version: engine_version.clone(),
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
    let failing = match &state.connection {
        Connection::Failed { problem, .. } => Some((problem.reason.to_string(), problem.message.clone())),
        _ => None,
    };
    state.inventory.connection_checked(&state.key.name, failing);
    report(state);
    if changed && (previous_ok || !matches!(state.connection, Connection::Pending)) {
        for (machine, subscriber) in &state.subscribers {
            let subscriber = subscriber.as_ref();
            tell(
                &state.metrics,
                &state.supervisor,
                machine,
                subscriber,
                MachineMsg::ConnectionChanged,
            );
        }
    }
}

/// Whether machines need to hear of a check: a periodic re-check that finds the same working client (or the same
/// failure) changes nothing for them.
pub(super) fn same_connection(a: &Connection, b: &Connection) -> bool {
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
pub(super) fn prepare(
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
pub(super) fn lineage(provider: &OVirtProvider) -> Option<&str> {
    provider
        .metadata
        .annotations
        .as_ref()
        .and_then(|annotations| annotations.get(MANAGEMENT_CLUSTER_ANNOTATION))
        .map(String::as_str)
}

pub(super) fn report(state: &mut ProviderState) {
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
    let now = crate::runtime::clock::now();
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
        pace: crate::runtime::status::writer::Pace::Now,
    };
    let _ = mailbox::cast(&state.metrics, &state.status_writer, update);
}

/// Records one Warning Event (and log line) when the provider connects over plain http, again only after it has
/// connected over https in between: the condition says it on every read, the Event is the notice.
pub(super) fn warn_insecure_transport(state: &mut ProviderState, plain_http: bool) {
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
        kind: NoteKind::Warning,
        reason: reasons::INSECURE_TRANSPORT.to_string(),
        note: format!("{engine}: {INSECURE_TRANSPORT_MESSAGE}"),
    };
    let _ = mailbox::cast(&state.metrics, &state.status_writer, event);
}
