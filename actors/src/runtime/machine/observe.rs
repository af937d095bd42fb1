//! Gathering what `machine_steps::decide` looks at: the stores (CAPI Machine and Cluster), the bootstrap Secret,
//! the provider actor's connection, the engine (the VM, its disks, NICs, reported devices, vNIC profiles) and the
//! workload cluster's Node. Only what the current step can need is read from the engine.

use std::sync::Arc;
use std::time::{Duration, Instant};

use capov_crds::labels::{
    CLUSTER_NAME_LABEL, ENGINE_ANNOTATION, MACHINE_FINALIZER, OWNER_UID_ANNOTATION, PAUSED_ANNOTATION,
    SYSTEM_DISKS_ANNOTATION,
};
use capov_ovirt::Client;
use k8s_openapi::api::core::v1::Secret;
use kube::ResourceExt;
use kube::api::Api;
use kube::runtime::reflector::ObjectRef;
use ractor::ActorRef;

use super::state::MachineState;
use crate::addresses::{ReportedDevice, VmNic};
use crate::conditions::{reasons, types};
use crate::identity::{EngineIdentity, OwnerIdentity, Ownership, ownership, parse_provider_id};
use crate::machine_steps::{
    Bootstrap, ConnectionFailure, FailureState, FoundBy, NodeObservation, Observed, ObservedVm, ProviderConnection,
    ProviderDefaults, VmDisk,
};
use crate::nics::{CurrentNic, NicAssessment, VnicProfileFact, assess_nics};
use crate::runtime::capi;
use crate::runtime::lookups::key;
use crate::runtime::mailbox;
use crate::runtime::messages::{Connection, MachineMsg};
use crate::runtime::provider::ProviderMsg;
use crate::vm_snapshot::VmSnapshot;

/// The engine connection found while observing, for the executor.
pub struct Engine {
    pub client: Client,
}

/// What one observation found: the facts for `decide`, and what the executor needs to act on them.
pub struct Observation {
    pub observed: Observed,
    pub engine: Option<Engine>,
    pub cluster: Option<Arc<capi::Cluster>>,
}

/// Why observing stopped early: the actor should look again after a backoff.
pub struct ObserveError {
    pub message: String,
    /// A wait that is part of every start (the provider's first connection): not worth a warning. With thousands of
    /// machines each start would otherwise log hundreds of them.
    pub expected: bool,
}

impl ObserveError {
    pub fn new(message: impl Into<String>) -> ObserveError {
        ObserveError {
            message: message.into(),
            expected: false,
        }
    }
}

pub async fn observe(me: &ActorRef<MachineMsg>, state: &mut MachineState) -> Result<Observation, ObserveError> {
    let object = state.object.clone();
    let namespace = state.key.namespace.clone().unwrap_or_default();
    let machine = owner_machine(state);
    let cluster = owner_cluster(state, machine.as_deref());
    let paused =
        object.annotations().contains_key(PAUSED_ANNOTATION) || cluster.as_deref().is_some_and(capi::cluster_paused);
    let failure = match &state.status.failure_reason {
        None => FailureState::Clear,
        Some(_) => {
            let recorded_at = state
                .status
                .conditions
                .iter()
                .find(|c| c.type_ == types::CAN_CONNECT_TO_OVIRT)
                .and_then(|c| c.observed_generation);
            FailureState::Set {
                spec_changed_since: object.metadata.generation > recorded_at,
            }
        }
    };
    let uid = object.metadata.uid.clone().unwrap_or_default();
    let owner = OwnerIdentity {
        namespace: namespace.clone(),
        name: state.key.name.clone(),
        previous_uid: object
            .annotations()
            .get(OWNER_UID_ANNOTATION)
            .filter(|previous| **previous != uid)
            .cloned(),
        uid,
        management_cluster: state.shared.settings.management_cluster_id.clone(),
    };
    let mut observed = Observed {
        namespace: namespace.clone(),
        name: state.key.name.clone(),
        owner,
        paused,
        deletion_requested: object.metadata.deletion_timestamp.is_some(),
        has_finalizer: object.finalizers().iter().any(|f| f == MACHINE_FINALIZER),
        owner_machine_found: machine.is_some(),
        cluster_found: cluster.is_some(),
        cluster_infrastructure_provisioned: cluster.as_deref().is_some_and(capi::cluster_infrastructure_provisioned),
        bootstrap: Bootstrap::NotReady,
        connection: ProviderConnection::Ready {
            insecure_transport: false,
        },
        provider_id: object.spec.provider_id.clone(),
        failure,
        provisioned: state.status.ready,
        vm: None,
        recorded_engine: object.annotations().get(ENGINE_ANNOTATION).cloned(),
        current_engine: None,
        system_disks: object.annotations().get(SYSTEM_DISKS_ANNOTATION).map(|v| {
            v.split(',')
                .map(str::trim)
                .filter(|id| !id.is_empty())
                .map(String::from)
                .collect()
        }),
        settings: object.spec.settings.clone(),
        provider_defaults: ProviderDefaults::default(),
        gates: state.shared.settings.gates,
        nics: NicAssessment::InSync,
        node: NodeObservation::NotFound,
        control_plane_host: cluster.as_deref().and_then(capi::cluster_control_plane_host),
    };
    if observed.paused {
        return Ok(Observation {
            observed,
            engine: None,
            cluster,
        });
    }
    if let Some(machine) = &machine {
        observed.bootstrap = bootstrap(state, machine).await?;
    }
    let engine = match connection(me, state).await? {
        Ok((client, defaults, engine)) => {
            observed.provider_defaults = defaults;
            observed.current_engine = Some(engine);
            observed.connection = ProviderConnection::Ready {
                insecure_transport: client.plain_http(),
            };
            Engine { client }
        }
        Err(failed) => {
            observed.connection = failed;
            return Ok(Observation {
                observed,
                engine: None,
                cluster,
            });
        }
    };
    // On another engine (or as another user) than the VM was recorded with, a lookup proves nothing: the decision
    // reports EngineChanged without one.
    let engine_changed = matches!(
        (&observed.recorded_engine, &observed.current_engine, &observed.provider_id),
        (Some(recorded), Some(current), Some(_)) if !current.matches_annotation(recorded)
    );
    if !engine_changed {
        observed.vm = find_vm(state, &engine.client, &observed).await?;
    }
    // The NICs are not read here (see `nics_before_start`), nor the workload cluster's Node: a decision that
    // reaches step 7 asks for it (Action::ReadNode) and the pass reads it without its reconcile permit.
    if observed
        .vm
        .as_ref()
        .is_some_and(|vm| matches!(vm.status.as_str(), "up" | "migrating"))
        && !observed.deletion_requested
        && cluster.is_some()
    {
        observed.node = NodeObservation::NotRead;
    }
    Ok(Observation {
        observed,
        engine: Some(engine),
        cluster,
    })
}

pub(super) fn owner_machine(state: &MachineState) -> Option<Arc<capi::Machine>> {
    let owner = state
        .object
        .owner_references()
        .iter()
        .find(|owner| owner.kind == "Machine" && owner.api_version.starts_with("cluster.x-k8s.io/"))?;
    let namespace = state.key.namespace.clone().unwrap_or_default();
    let reference = ObjectRef::new(&owner.name).within(&namespace);
    state.shared.capi_machines.get(&reference)
}

fn owner_cluster(state: &MachineState, machine: Option<&capi::Machine>) -> Option<Arc<capi::Cluster>> {
    let name = state
        .object
        .labels()
        .get(CLUSTER_NAME_LABEL)
        .cloned()
        .or_else(|| machine.and_then(capi::machine_cluster_name))?;
    let namespace = state.key.namespace.clone().unwrap_or_default();
    let reference = ObjectRef::new(&name).within(&namespace);
    state.shared.capi_clusters.get(&reference)
}

async fn bootstrap(state: &MachineState, machine: &capi::Machine) -> Result<Bootstrap, ObserveError> {
    Ok(match bootstrap_secret(state, machine).await? {
        None => Bootstrap::NotReady,
        Some((_, format)) => Bootstrap::from_format_key(format.as_deref()),
    })
}

/// The bootstrap data and its `format` key; None while the bootstrap provider has not written them.
pub async fn bootstrap_secret(
    state: &MachineState,
    machine: &capi::Machine,
) -> Result<Option<(String, Option<String>)>, ObserveError> {
    let Some(secret_name) = capi::machine_bootstrap_secret(machine) else {
        return Ok(None);
    };
    let namespace = state.key.namespace.clone().unwrap_or_default();
    let secrets: Api<Secret> = Api::namespaced(state.shared.client.clone(), &namespace);
    let secret = secrets
        .get_opt(&secret_name)
        .await
        .map_err(|err| ObserveError::new(format!("bootstrap Secret: {err}")))?;
    let Some(data) = secret.and_then(|s| s.data) else {
        return Ok(None);
    };
    let Some(value) = data.get("value") else {
        return Ok(None);
    };
    let format = data.get("format").map(|f| String::from_utf8_lossy(&f.0).into_owned());
    Ok(Some((String::from_utf8_lossy(&value.0).into_owned(), format)))
}

type Connected = Result<(Client, ProviderDefaults, EngineIdentity), ProviderConnection>;

/// The provider actor's connection; subscribes this machine to the provider's messages on first use.
async fn connection(me: &ActorRef<MachineMsg>, state: &mut MachineState) -> Result<Connected, ObserveError> {
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
        Ok(Connection::Pending) => Err(ObserveError {
            message: "the provider is still connecting".into(),
            expected: true,
        }),
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

/// The VM: by the providerID's id when set, else by exact name. During deletion a VM whose id is not found is
/// also looked for by name, so that "gone" is confirmed both ways before the finalizer goes. What the provider's poll
/// delivered (or an earlier read saw) while the VM stayed watched is used instead of a read: the poll reports every
/// change of it.
async fn find_vm(
    state: &mut MachineState,
    client: &Client,
    observed: &Observed,
) -> Result<Option<ObservedVm>, ObserveError> {
    let engine_error = |err: capov_ovirt::Error| ObserveError::new(format!("reading the VM: {err}"));
    // Watched, the VM's changes are delivered; unwatched, what was seen counts only while it is as fresh as a watched
    // one would be.
    let fresh = state
        .vm_snapshot_at
        .is_some_and(|at| at.elapsed() <= state.shared.settings.poll_interval * 2);
    let held = state
        .vm_snapshot
        .clone()
        .filter(|_| state.watched_vm.is_some() || fresh);
    let by_name = || async {
        let vm_name = observed.vm_name();
        // The VM this actor created, as the poll showed it, is the one the name search would find.
        if let Some(snapshot) = held
            .as_ref()
            .filter(|s| state.created_vm.as_deref() == Some(s.id.as_str()) && s.name == vm_name)
        {
            return Ok(Some((snapshot.clone(), FoundBy::Name)));
        }
        let found = client.find_vm_facts_by_name(&vm_name).await.map_err(engine_error)?;
        Ok::<_, ObserveError>(
            found
                .and_then(VmSnapshot::from_facts)
                .map(|s| (Arc::new(s), FoundBy::Name)),
        )
    };
    let found = match observed.provider_id.as_deref() {
        Some(provider_id) => match parse_provider_id(provider_id) {
            None => return Ok(None),
            Some(id) => match held.as_ref().filter(|s| s.id == id) {
                Some(snapshot) => Some((snapshot.clone(), FoundBy::ProviderId)),
                // NICs, reported devices and (until the machine is provisioned, or when deleting) the disks
                // inlined: one engine request per pass.
                None => match client.vm_facts(id, needs_disks(state, observed)).await {
                    Ok(facts) => VmSnapshot::from_facts(facts).map(|s| (Arc::new(s), FoundBy::ProviderId)),
                    Err(err) if err.is_not_found() && observed.deletion_requested => by_name().await?,
                    Err(err) if err.is_not_found() => None,
                    Err(err) => return Err(engine_error(err)),
                },
            },
        },
        None => by_name().await?,
    };
    // Whether this observation is what was held (and since when), for the pass's check before an engine write; a
    // fresh read is held from now on.
    let from_held = matches!((&found, &held), (Some((snapshot, _)), Some(held)) if Arc::ptr_eq(snapshot, held));
    state.observed_snapshot_at = if from_held { state.vm_snapshot_at } else { None };
    if !from_held {
        state.vm_snapshot_at = Some(Instant::now());
    }
    state.last_seen_fingerprint = found.as_ref().map(|(snapshot, _)| snapshot.fingerprints());
    state.vm_snapshot = found.as_ref().map(|(snapshot, _)| snapshot.clone());
    let Some((vm, found_by)) = found else {
        return Ok(None);
    };
    let ownership = ownership(&vm.description, &observed.owner);
    let ours = match ownership {
        Ownership::Owned => true,
        Ownership::Legacy => found_by == FoundBy::ProviderId,
        Ownership::NotOwned(_) => false,
    };
    let mut found = ObservedVm {
        ever_started: started_by_status(state.status.ready, &state.status.conditions) || vm.started,
        os_type: vm.os_type.clone(),
        id: vm.id.clone(),
        status: vm.status.clone(),
        ownership,
        found_by,
        disks: Vec::new(),
        nics: Vec::new(),
        reported_devices: Vec::new(),
    };
    let status = vm.status.as_str();
    if !ours || status == "image_locked" {
        return Ok(Some(found));
    }
    // Disks matter before the first start (steps 3–4) and at deletion (non-system disks); the passes of a started
    // VM (e.g. keeping its addresses current) spare the request, and so does a VM found by name outside deletion:
    // its pass only records it in spec.providerID.
    let before_first_start = found_by == FoundBy::ProviderId && !found.ever_started && status == "down";
    if observed.deletion_requested || before_first_start {
        found.disks = match &vm.disks {
            Some(disks) => disks.clone(),
            // Found by name, or an engine that did not inline whole disks.
            None => match client.disk_attachments_with_disks(&vm.id).await {
                Ok(attachments) => attachments
                    .into_iter()
                    .filter_map(|a| {
                        let disk = a.disk?;
                        Some(VmDisk {
                            attachment_id: a.id.unwrap_or_default(),
                            disk_id: disk.id?,
                            alias: disk.alias.unwrap_or_default(),
                            bootable: a.bootable == Some(true),
                            provisioned_size: disk.provisioned_size.unwrap_or(0),
                            status: disk
                                .status
                                .map(|s| s.as_str().to_string())
                                .unwrap_or_else(|| "ok".into()),
                        })
                    })
                    .collect(),
                Err(err) if err.is_not_found() => return Ok(None),
                Err(err) => return Err(engine_error(err)),
            },
        };
    }
    if matches!(status, "up" | "migrating") {
        found.nics = match &vm.nics {
            Some(nics) => nics
                .iter()
                .filter_map(|n| {
                    Some(VmNic {
                        name: n.name.clone(),
                        mac: n.mac.clone()?,
                    })
                })
                .collect(),
            None => client
                .nics(&vm.id)
                .await
                .map_err(engine_error)?
                .into_iter()
                .filter_map(|n| {
                    Some(VmNic {
                        name: n.name.unwrap_or_default(),
                        mac: n.mac?.address?,
                    })
                })
                .collect(),
        };
        found.reported_devices = match &vm.reported_devices {
            Some(devices) => devices.clone(),
            None => client
                .reported_devices(&vm.id)
                .await
                .map_err(engine_error)?
                .into_iter()
                .map(|d| ReportedDevice {
                    mac: d.mac.and_then(|m| m.address),
                    ips: d
                        .ips
                        .map(|ips| ips.items.into_iter().filter_map(|ip| ip.address).collect())
                        .unwrap_or_default(),
                })
                .collect(),
        };
    }
    Ok(Some(found))
}

/// Whether this pass may look at the VM's disks: steps 3–4 before the machine is provisioned, and deletion.
fn needs_disks(state: &MachineState, observed: &Observed) -> bool {
    observed.deletion_requested || !state.status.ready
}

/// CAPOV starts a VM once: it was started if the machine was ever up, the engine reports a start time (checked by
/// the caller), or CAPOV wrote MachineOn after the engine accepted the start. MachineOn `EngineError` is a start
/// the engine refused (e.g. a 503): the VM never ran and is started again.
pub(crate) fn started_by_status(ready: bool, conditions: &[capov_crds::Condition]) -> bool {
    ready
        || conditions
            .iter()
            .any(|c| c.type_ == types::MACHINE_ON && c.reason != reasons::ENGINE_ERROR)
}

/// Step 5 compares the NICs only right before the first start, and looking them up costs up to four engine requests,
/// so a pass looks at them only when the decision taken without them (`observed.nics` left InSync) is to start the VM:
/// exactly when step 5 is reached. None = not needed (no VM, or spec.nics empty: the template's NICs are kept).
pub async fn nics_before_start(
    state: &MachineState,
    engine: Option<&Engine>,
    observed: &Observed,
) -> Option<Result<NicAssessment, ObserveError>> {
    let (engine, vm) = (engine?, observed.vm.as_ref()?);
    if observed.settings.nics.is_empty() {
        return None;
    }
    Some(nic_assessment(state, &engine.client, observed, &vm.id).await)
}

/// The VM's NICs against spec.nics, with the vNIC profiles of the networks of the oVirt cluster's data center
/// (`/vnicprofiles` has no search, so all are read and matched by network). Only the VM's own NICs are read afresh;
/// cluster, networks and profiles come from the lookups.
async fn nic_assessment(
    state: &MachineState,
    client: &Client,
    observed: &Observed,
    vm_id: &str,
) -> Result<NicAssessment, ObserveError> {
    let engine_error = |err: capov_ovirt::Error| ObserveError::new(format!("reading NICs and vNIC profiles: {err}"));
    let (lookups, provider) = (&state.shared.lookups, observed.settings.provider.as_str());
    let cluster_name = &observed.settings.ovirtcluster;
    let cluster = lookups
        .get(key(provider, &format!("cluster/{cluster_name}")), || {
            client.find_cluster_by_name(cluster_name)
        })
        .await
        .map_err(engine_error)?;
    let data_center = cluster
        .and_then(|c| c.data_center)
        .and_then(|dc| dc.id)
        .unwrap_or_default();
    let networks: Vec<_> = lookups
        .get(key(provider, "networks"), || client.networks())
        .await
        .map_err(engine_error)?
        .into_iter()
        .filter(|n| n.data_center.as_ref().and_then(|dc| dc.id.as_deref()) == Some(data_center.as_str()))
        .collect();
    let profiles: Vec<VnicProfileFact> = lookups
        .get(key(provider, "vnicprofiles"), || client.vnic_profiles())
        .await
        .map_err(engine_error)?
        .into_iter()
        .filter_map(|p| {
            let network_id = p.network.as_ref()?.id.clone()?;
            let network = networks.iter().find(|n| n.id.as_deref() == Some(network_id.as_str()))?;
            Some(VnicProfileFact {
                id: p.id?,
                name: p.name?,
                network_name: network.name.clone().unwrap_or_default(),
            })
        })
        .collect();
    // What this pass observed inlined the NICs (`follow=nics`) unless an engine did not.
    let held = state
        .vm_snapshot
        .as_ref()
        .filter(|s| s.id == vm_id)
        .and_then(|s| s.nics.as_ref());
    let current: Vec<CurrentNic> = match held {
        Some(nics) => nics
            .iter()
            .map(|n| CurrentNic {
                id: n.id.clone(),
                name: n.name.clone(),
                vnic_profile_id: n.vnic_profile_id.clone(),
            })
            .collect(),
        None => client
            .nics(vm_id)
            .await
            .map_err(engine_error)?
            .into_iter()
            .map(|n| CurrentNic {
                id: n.id.unwrap_or_default(),
                name: n.name.unwrap_or_default(),
                vnic_profile_id: n.vnic_profile.and_then(|p| p.id),
            })
            .collect(),
    };
    Ok(assess_nics(&observed.settings.nics, &current, &profiles))
}

#[cfg(test)]
mod tests {
    use super::*;
    use capov_crds::Condition;

    fn machine_on(reason: &str) -> Condition {
        serde_json::from_value(serde_json::json!({
            "type": "MachineOn", "status": "False", "reason": reason, "lastTransitionTime": "2026-12-03T00:00:00Z"
        }))
        .expect("condition")
    }

    #[test]
    fn a_refused_start_is_not_a_started_vm() {
        assert!(!started_by_status(false, &[]));
        assert!(!started_by_status(false, &[machine_on(reasons::ENGINE_ERROR)]));
        assert!(started_by_status(false, &[machine_on(reasons::VM_POWERING_UP)]));
        assert!(started_by_status(false, &[machine_on(reasons::VM_DOWN)]));
        assert!(started_by_status(true, &[]));
    }
}
