//! The provider actor: its state and its messages.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::time::Instant;

use capov_crds::OVirtProvider;
use k8s_openapi::ByteString;
use ractor::{Actor, ActorProcessingErr, ActorRef};

use crate::metrics::{Metrics, kind};
use crate::runtime::keys::ObjectKey;
use crate::runtime::mailbox::{self, ActorMetrics, Mail};
use crate::runtime::messages::{Connection, ProviderMsg, SupervisorMsg};
use crate::runtime::provider::inventory::{InventoryPoll, InventorySink};
use crate::runtime::settings::RuntimeSettings;
use crate::runtime::shared::Shared;
use crate::runtime::status::writer::StatusWriterMsg;

use super::check::{check, checked, lineage};
use super::poll::{poll, report_polled, report_queue_depths};
use super::state::*;

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
    /// Where mail for a machine whose actor has stopped goes (`machine_mail::tell`).
    pub supervisor: ActorRef<SupervisorMsg>,
}

impl ProviderArgs {
    /// The arguments of the actor of `provider`, with what every actor shares; its inventory polls report to the
    /// supervisor.
    pub fn new(
        provider: OVirtProvider,
        secret: Option<BTreeMap<String, ByteString>>,
        shared: &Shared,
        supervisor: &ActorRef<SupervisorMsg>,
    ) -> ProviderArgs {
        ProviderArgs {
            provider,
            secret,
            settings: shared.settings.clone(),
            status_writer: shared.status_writer.clone(),
            metrics: shared.metrics.clone(),
            inventory: InventorySink::new(&shared.placements, &shared.metrics, supervisor),
            supervisor: supervisor.clone(),
        }
    }
}

pub struct ProviderActor;

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
            supervisor: args.supervisor,
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
                state.subscribers.insert(machine, Some(actor));
            }
            ProviderMsg::Rests(machine) => {
                if let Some(actor) = state.subscribers.get_mut(&machine) {
                    *actor = None;
                }
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
