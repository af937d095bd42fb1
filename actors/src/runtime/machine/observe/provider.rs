//! The provider actor's engine connection, as a machine sees it: subscribing to the provider, the provider's access
//! list, and the connection (with the management clusters its VMs' markers name) or why there is none.

use std::time::{Duration, Instant};

use capov_ovirt::Client;
use ractor::ActorRef;

use super::observation::ObserveError;
use crate::runtime::machine::state::MachineState;
use crate::runtime::mailbox;
use crate::runtime::messages::{Connection, MachineMsg, ProviderMsg};
use capov_core::machine_steps::{ConnectionFailure, ProviderConnection, ProviderDefaults};
use capov_core::trust::identity::EngineIdentity;
use capov_core::trust::management_clusters::ManagementClusters;

/// A working connection, as a machine's pass uses it.
pub struct Connected {
    pub client: Client,
    pub defaults: ProviderDefaults,
    pub engine: EngineIdentity,
    pub management_clusters: ManagementClusters,
}

/// The provider actor's connection; subscribes this machine to the provider's messages on first use.
pub async fn connection(
    me: &ActorRef<MachineMsg>,
    state: &mut MachineState,
) -> Result<Result<Connected, ProviderConnection>, ObserveError> {
    let provider_name = state.object.spec.settings.provider.clone();
    let Some(provider) = state.shared.provider(&provider_name) else {
        // Right after the operator starts, a provider that exists may not have its actor yet: its start wakes this
        // machine (`MachineMsg::ConnectionChanged`).
        if !state
            .shared
            .providers_started
            .load(std::sync::atomic::Ordering::Relaxed)
        {
            return Err(ObserveError::expected("the OVirtProviders are not started yet"));
        }
        let since = *state.missing_since.get_or_insert_with(Instant::now);
        return Ok(Err(ProviderConnection::Failed {
            failure: ConnectionFailure::ProviderNotFound,
            message: format!("OVirtProvider {provider_name:?} not found: create it or fix spec.provider"),
            persisted_for: since.elapsed(),
        }));
    };
    subscribe(me, state, &provider_name, &provider);
    // Checked after subscribing (which costs the engine nothing), so that a provider whose access list changes
    // wakes this machine; before asking for the connection, so that a refused machine causes no engine request.
    if let Some(refused) = refused(state, &provider, &provider_name) {
        return Ok(Err(refused));
    }
    let asked = mailbox::call(
        &state.shared.metrics,
        &provider,
        ProviderMsg::GetConnection,
        Duration::from_secs(30),
    );
    match asked.await {
        Ok(Connection::Ready {
            client,
            defaults,
            engine,
            management_clusters,
            ..
        }) => {
            state.missing_since = None;
            Ok(Ok(Connected {
                client: client.with_correlation_id(&format!("capov-{}", state.key)),
                defaults,
                engine,
                management_clusters,
            }))
        }
        Ok(Connection::Pending) => Err(ObserveError::expected("the provider is still connecting")),
        Ok(Connection::Failed { problem, since }) => {
            let failure =
                ConnectionFailure::from_reason(problem.reason).unwrap_or(ConnectionFailure::EngineUnreachable);
            let persisted_for = match failure {
                ConnectionFailure::CredentialsNotFound => state.missing_since.get_or_insert(since).elapsed(),
                _ => since.elapsed(),
            };
            Ok(Err(ProviderConnection::Failed {
                failure,
                message: problem.message,
                persisted_for,
            }))
        }
        Err(err) => Err(ObserveError::new(format!("the provider actor did not answer: {err}"))),
    }
}

/// Subscribes this machine to `provider` (the actor now serving `name`), leaving the one it followed before.
fn subscribe(me: &ActorRef<MachineMsg>, state: &mut MachineState, name: &str, provider: &ActorRef<ProviderMsg>) {
    let subscribed = state
        .subscribed_to
        .as_ref()
        .is_some_and(|(known, actor)| known == name && actor.get_id() == provider.get_id());
    if subscribed {
        return;
    }
    if let Some((_, old)) = state.subscribed_to.take() {
        let _ = mailbox::cast(&state.shared.metrics, &old, ProviderMsg::Unsubscribe(state.key.clone()));
    }
    let subscribe = ProviderMsg::Subscribe {
        machine: state.key.clone(),
        actor: me.clone(),
    };
    let _ = mailbox::cast(&state.shared.metrics, provider, subscribe);
    state.watched_vm = None;
    state.vm_snapshot = None;
    state.subscribed_to = Some((name.to_string(), provider.clone()));
}

/// NamespaceNotAllowed when `provider` does not serve this machine's namespace; the provider's poll then stops
/// reading the machine's VM, since it no longer serves the namespace.
fn refused(
    state: &mut MachineState,
    provider: &ActorRef<ProviderMsg>,
    provider_name: &str,
) -> Option<ProviderConnection> {
    let namespace = state.key.namespace_str();
    if state.shared.namespace_allowed(provider_name, namespace) {
        return None;
    }
    if state.watched_vm.take().is_some() {
        let _ = mailbox::cast(
            &state.shared.metrics,
            provider,
            ProviderMsg::UnwatchVm(state.key.clone()),
        );
    }
    state.vm_snapshot = None;
    Some(ProviderConnection::Failed {
        failure: ConnectionFailure::NamespaceNotAllowed,
        message: capov_core::trust::tenancy::not_allowed_message(provider_name, namespace),
        persisted_for: Duration::ZERO,
    })
}
