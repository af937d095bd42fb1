//! The provider actor's engine connection, as a machine sees it: subscribing to the provider, the provider's access
//! list, and the connection or why there is none.

use std::time::{Duration, Instant};

use capov_ovirt::Client;
use ractor::ActorRef;

use super::observation::ObserveError;
use crate::identity::EngineIdentity;
use crate::machine_steps::{ConnectionFailure, ProviderConnection, ProviderDefaults};
use crate::runtime::machine::state::MachineState;
use crate::runtime::mailbox;
use crate::runtime::messages::{Connection, MachineMsg};
use crate::runtime::provider::ProviderMsg;

pub type Connected = Result<(Client, ProviderDefaults, EngineIdentity), ProviderConnection>;

/// The provider actor's connection; subscribes this machine to the provider's messages on first use.
pub async fn connection(me: &ActorRef<MachineMsg>, state: &mut MachineState) -> Result<Connected, ObserveError> {
    let provider_name = state.object.spec.settings.provider.clone();
    let Some(provider) = state.shared.provider(&provider_name) else {
        let since = *state.missing_since.get_or_insert_with(Instant::now);
        return Ok(Err(ProviderConnection::Failed {
            failure: ConnectionFailure::ProviderNotFound,
            message: format!("OVirtProvider {provider_name:?} not found: create it or fix spec.provider"),
            persisted_for: since.elapsed(),
        }));
    };
    let subscribed = state
        .subscribed_to
        .as_ref()
        .is_some_and(|(name, actor)| name == &provider_name && actor.get_id() == provider.get_id());
    if !subscribed {
        if let Some((_, old)) = state.subscribed_to.take() {
            let _ = mailbox::cast(&state.shared.metrics, &old, ProviderMsg::Unsubscribe(state.key.clone()));
        }
        let subscribe = ProviderMsg::Subscribe {
            machine: state.key.clone(),
            actor: me.clone(),
        };
        let _ = mailbox::cast(&state.shared.metrics, &provider, subscribe);
        state.watched_vm = None;
        state.vm_snapshot = None;
        state.subscribed_to = Some((provider_name.clone(), provider.clone()));
    }
    // Checked after subscribing (which costs the engine nothing), so that a provider whose access list changes
    // wakes this machine; before asking for the connection, so that a refused machine causes no engine request.
    let namespace = state.key.namespace.clone().unwrap_or_default();
    if !state.shared.namespace_allowed(&provider_name, &namespace) {
        return Ok(Err(ProviderConnection::Failed {
            failure: ConnectionFailure::NamespaceNotAllowed,
            message: crate::tenancy::not_allowed_message(&provider_name, &namespace),
            persisted_for: Duration::ZERO,
        }));
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
            ..
        }) => {
            state.missing_since = None;
            Ok(Ok((
                client.with_correlation_id(&format!("capov-{}", state.key)),
                defaults,
                engine,
            )))
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
