//! Gathering what `machine_steps::decide` looks at: the stores (CAPI Machine and Cluster), the bootstrap Secret,
//! the provider actor's connection (`provider`) and the engine (the VM, its disks, NICs, reported devices: `vm`).
//! What costs a request and matters only at some steps is left [`Fact::NotRead`] until a decision asks for it:
//! `read` then reads it (the NICs and vNIC profiles: `nics`; the affinity groups: `groups`; the creation lookups:
//! `engine_lookups`; the workload cluster's Node and its release: `super::workload`, `super::node_release`).

pub mod engine_lookups;
mod groups;
mod host_devices;
mod nics;
mod observation;
mod provider;
mod vm;

use std::sync::Arc;

use capov_crds::labels::{
    CLUSTER_NAME_LABEL, CREATED_VM_ANNOTATION, DELETE_FOR_MOVE_ANNOTATION, ENGINE_ANNOTATION, MACHINE_FINALIZER,
    OWNER_UID_ANNOTATION, PAUSED_ANNOTATION, RELEASE_VM_ANNOTATION, SYSTEM_DISKS_ANNOTATION, VM_NAME_ANNOTATION,
};
use k8s_openapi::api::core::v1::Secret;
use kube::ResourceExt;
use kube::api::Api;
use kube::runtime::reflector::ObjectRef;
use ractor::ActorRef;

pub use self::groups::read_groups;
pub use self::nics::read_nics;
pub use self::observation::{Engine, Observation, ObserveError};
use self::provider::connection;
use self::vm::find_vm;
use super::share::machine_share;

mod placement;
use super::state::MachineState;
use crate::runtime::messages::MachineMsg;
use crate::runtime::{capi, ipam};
use capov_core::conditions::types;
use capov_core::machine_steps::{
    Bootstrap, Fact, FailureState, Observed, ProviderConnection, ProviderDefaults, decided_before_the_engine,
    provider_settled, releasable_without_engine,
};
use capov_core::trust::identity::OwnerIdentity;

pub async fn observe(me: &ActorRef<MachineMsg>, state: &mut MachineState) -> Result<Observation, ObserveError> {
    let machine = owner_machine(state);
    let cluster = owner_cluster(state, machine.as_deref());
    let mut observed = from_objects(state, machine.as_deref(), cluster.as_deref());
    note_placement(state, &observed);
    // A machine whose provider is still to be set from its failure domain (or named nowhere) asks no provider; a
    // deletion looks for the VM through spec.provider as before.
    let unsettled = !observed.deletion_requested && !provider_settled(&observed);
    let without_engine = releasable_without_engine(&observed) || decided_before_the_engine(&observed);
    if observed.paused || without_engine || unsettled {
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
        Ok(connected) => {
            observed.provider_defaults = connected.defaults;
            observed.current_engine = Some(connected.engine);
            observed.connection = ProviderConnection::Ready {
                insecure_transport: connected.client.plain_http(),
            };
            observed.owner.management_cluster = connected.management_clusters.marker;
            observed.owner.accepted_management_clusters = connected.management_clusters.accepted;
            // The machine's turn at the engine's rate limit: its cluster's, or the urgent one.
            let lane = machine_share(state, machine.as_deref(), false).lane();
            Engine {
                client: connected.client.with_lane(lane),
            }
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
    // The NICs, the affinity groups and the workload cluster's Node are not read here: a decision that needs one
    // asks for it (`Action::Read`) and the pass reads it (`read`) and decides again.
    Ok(Observation {
        observed,
        engine: Some(engine),
        cluster,
    })
}

/// What the OVirtMachine, the CAPI objects in the stores and this actor's own status show, before anything is read:
/// no bootstrap data, a ready connection, no VM and no Node until the pass looks.
fn from_objects(state: &MachineState, machine: Option<&capi::Machine>, cluster: Option<&capi::Cluster>) -> Observed {
    let object = &state.object;
    let annotations = object.annotations();
    let (failure_domain, group_owner, groups_wanted) = placement::of_machine(state, machine, cluster);
    Observed {
        namespace: state.key.namespace_str().to_string(),
        name: state.key.name.to_string(),
        owner: owner_identity(state),
        paused: annotations.contains_key(PAUSED_ANNOTATION) || cluster.is_some_and(capi::cluster_paused),
        deletion_requested: object.metadata.deletion_timestamp.is_some(),
        deletion_requested_for: deletion_requested_for(object),
        cluster_name: cluster_name(state, machine),
        deleted_for_move: annotations.contains_key(DELETE_FOR_MOVE_ANNOTATION),
        has_finalizer: object.finalizers().iter().any(|f| f == MACHINE_FINALIZER),
        owner_machine_found: machine.is_some(),
        cluster_found: cluster.is_some(),
        cluster_infrastructure_provisioned: cluster.is_some_and(capi::cluster_infrastructure_provisioned),
        bootstrap: Bootstrap::NotReady,
        connection: ProviderConnection::Ready {
            insecure_transport: false,
        },
        provider_id: object.spec.provider_id.clone(),
        created_vm: annotations.get(CREATED_VM_ANNOTATION).cloned(),
        recorded_vm_name: recorded_vm_name(object),
        release_vm_requested: annotations
            .get(RELEASE_VM_ANNOTATION)
            .is_some_and(|value| value.eq_ignore_ascii_case("true")),
        failure: failure_state(state),
        provisioned: state.status.ready,
        vm: None,
        recorded_engine: annotations.get(ENGINE_ANNOTATION).cloned(),
        current_engine: None,
        system_disks: annotations.get(SYSTEM_DISKS_ANNOTATION).map(|v| {
            v.split(',')
                .map(str::trim)
                .filter(|id| !id.is_empty())
                .map(String::from)
                .collect()
        }),
        // The failure domain's names on its engine replace the template's (issue 39).
        settings: failure_domain.apply_overrides(object.spec.settings.clone()),
        provider_defaults: ProviderDefaults::default(),
        gates: state.shared.settings.gates,
        nics: Fact::NotRead,
        node: Fact::NotRead,
        node_release: Fact::NotRead,
        detached_disks: state.detached_disks.clone(),
        control_plane_host: cluster.and_then(capi::cluster_control_plane_host),
        ip_claims: ip_claims(state),
        ip_claims_known: state.shared.ip_claims_known(),
        failure_domain,
        tenant_placement: state.shared.tenant_placement(&object.spec.settings.provider),
        groups_wanted,
        group_owner,
        groups: Fact::NotRead,
        placement_skipped: placement::skipped(&state.status),
        creation: Default::default(),
        data_disk_target: Fact::NotRead,
        vm_host_devices: Fact::NotRead,
        vm_numa_nodes: Fact::NotRead,
    }
}

/// The VM name CAPOV recorded with the VM it created or adopted; only while the object records that VM (the
/// created-VM annotation or spec.providerID), so that the annotation alone never names a VM.
fn recorded_vm_name(object: &capov_crds::OVirtMachine) -> Option<String> {
    let annotations = object.annotations();
    let records_a_vm = object.spec.provider_id.is_some() || annotations.contains_key(CREATED_VM_ANNOTATION);
    annotations
        .get(VM_NAME_ANNOTATION)
        .filter(|_| records_a_vm)
        .and_then(|value| capov_core::naming::vm_name::recorded(value))
}

/// The machine's IPAddressClaims as the stores show them. Reading them walks every claim in the store, so only a
/// machine that wants static addresses or is being deleted (its claims are released then) looks.
fn ip_claims(state: &MachineState) -> Vec<capov_core::network::ip_claims::ClaimFact> {
    let object = &state.object;
    let wanted = capov_core::network::ip_claims::wanted_claims(&state.key.name, &object.spec.settings.nics);
    if wanted.is_empty() && object.metadata.deletion_timestamp.is_none() {
        return Vec::new();
    }
    ipam::claim_facts(
        &state.shared.ip_claims,
        &state.shared.ip_addresses,
        state.key.namespace_str(),
        object.metadata.uid.as_deref().unwrap_or_default(),
        &wanted,
        ipam::age_now,
    )
}

/// How long ago the deletion was requested, only when a graceful shutdown needs it: the observation stays equal
/// from pass to pass otherwise, which the check for actions without effect relies on.
fn deletion_requested_for(object: &capov_crds::OVirtMachine) -> Option<std::time::Duration> {
    object.spec.settings.gracefulshutdowntimeoutseconds.filter(|s| *s > 0)?;
    let at = object.metadata.deletion_timestamp.as_ref()?;
    let elapsed = crate::runtime::clock::now().duration_since(at.0);
    Some(std::time::Duration::try_from(elapsed).unwrap_or_default())
}

/// Tells the runtime which oVirt cluster the machine uses, for its OVirtCluster's capacity.
fn note_placement(state: &MachineState, observed: &Observed) {
    if observed.group_owner.cluster.is_empty() {
        return;
    }
    let placement = crate::runtime::provider::placements::MachinePlacement {
        namespace: observed.namespace.clone(),
        cluster: observed.group_owner.cluster.clone(),
        provider: observed.settings.provider.clone(),
        ovirt_cluster: observed
            .failure_domain
            .ovirt_cluster(&observed.settings.ovirtcluster)
            .to_string(),
        devices: crate::runtime::provider::placements::DeviceWants {
            host_devices: observed.settings.hostdevices.clone(),
            vgpus: observed.settings.vgpu.is_some(),
        },
    };
    state.shared.placements.note_machine(&state.key, placement);
}

/// Whose VM this machine may change: this object's UID, the UID the owner-UID annotation recorded when that differs,
/// and, until the provider's connection names the management clusters its markers name, this cluster's own id.
fn owner_identity(state: &MachineState) -> OwnerIdentity {
    let object = &state.object;
    let uid = object.metadata.uid.clone().unwrap_or_default();
    OwnerIdentity {
        namespace: state.key.namespace_str().to_string(),
        name: state.key.name.to_string(),
        previous_uid: object
            .annotations()
            .get(OWNER_UID_ANNOTATION)
            .filter(|previous| **previous != uid)
            .cloned(),
        uid,
        management_cluster: state.shared.settings.management_cluster_id.clone(),
        accepted_management_clusters: Vec::new(),
    }
}

/// Whether failureReason is set, and if so whether the spec changed since CAPOV set it.
fn failure_state(state: &MachineState) -> FailureState {
    if state.status.failure_reason.is_none() {
        return FailureState::Clear;
    }
    let recorded_at = state
        .status
        .conditions
        .iter()
        .find(|c| c.type_ == types::CAN_CONNECT_TO_OVIRT)
        .and_then(|c| c.observed_generation);
    FailureState::Set {
        spec_changed_since: state.object.metadata.generation > recorded_at,
    }
}

pub(super) fn owner_machine(state: &MachineState) -> Option<Arc<capi::Machine>> {
    let owner = state
        .object
        .owner_references()
        .iter()
        .find(|owner| owner.kind == "Machine" && owner.api_version.starts_with("cluster.x-k8s.io/"))?;
    let namespace = state.key.namespace_str();
    let reference = ObjectRef::new(&owner.name).within(namespace);
    state.shared.capi_machines.get(&reference)
}

/// The CAPI cluster's name: the OVirtMachine's cluster-name label, else the Machine's spec.clusterName.
fn cluster_name(state: &MachineState, machine: Option<&capi::Machine>) -> Option<String> {
    state
        .object
        .labels()
        .get(CLUSTER_NAME_LABEL)
        .cloned()
        .or_else(|| machine.and_then(capi::machine_cluster_name))
}

fn owner_cluster(state: &MachineState, machine: Option<&capi::Machine>) -> Option<Arc<capi::Cluster>> {
    let name = cluster_name(state, machine)?;
    let namespace = state.key.namespace_str();
    let reference = ObjectRef::new(&name).within(namespace);
    state.shared.capi_clusters.get(&reference)
}

/// Whether the bootstrap data is there, and its format. Bootstrap providers write a data Secret once and never change
/// it (new data comes under a new name), so once a pass saw the data of a Secret, later passes take the format from
/// memory instead of a GET each: every pass of every machine read it, about half of the management-cluster requests
/// of a batch, each one a chance to fail when the apiserver struggles. The create step reads the data itself.
/// An unsupported format is read again each time: the tenant may fix it in place.
async fn bootstrap(state: &mut MachineState, machine: &capi::Machine) -> Result<Bootstrap, ObserveError> {
    let Some(secret_name) = capi::machine_bootstrap_secret(machine) else {
        return Ok(Bootstrap::NotReady);
    };
    if let Some((seen_name, format)) = &state.bootstrap_seen
        && *seen_name == secret_name
    {
        return Ok(Bootstrap::Ready(*format));
    }
    let bootstrap = match bootstrap_secret(state, machine).await? {
        None => Bootstrap::NotReady,
        Some((data, format)) => {
            let bootstrap = Bootstrap::from_format_key(format.as_deref());
            if matches!(bootstrap, Bootstrap::Ready(_)) {
                state.bootstrap_data = Some(Box::new((secret_name.clone(), data)));
            }
            bootstrap
        }
    };
    if let Bootstrap::Ready(format) = bootstrap {
        state.bootstrap_seen = Some((secret_name, format));
    }
    Ok(bootstrap)
}

/// The bootstrap data and its `format` key; None while the bootstrap provider has not written them.
pub async fn bootstrap_secret(
    state: &MachineState,
    machine: &capi::Machine,
) -> Result<Option<(String, Option<String>)>, ObserveError> {
    let Some(secret_name) = capi::machine_bootstrap_secret(machine) else {
        return Ok(None);
    };
    let namespace = state.key.namespace_str();
    let secrets: Api<Secret> = Api::namespaced(state.shared.client.clone(), namespace);
    let secret = state
        .permit
        .awaiting(secrets.get_opt(&secret_name))
        .await
        .map_err(|err| {
            let failed = format!("bootstrap Secret: {err}");
            match crate::runtime::kube::clients::is_transient(&err) {
                true => ObserveError::apiserver(failed),
                false => ObserveError::new(failed),
            }
        })?;
    let Some(data) = secret.and_then(|s| s.data) else {
        return Ok(None);
    };
    let Some(value) = data.get("value") else {
        return Ok(None);
    };
    let format = data.get("format").map(|f| String::from_utf8_lossy(&f.0).into_owned());
    Ok(Some((String::from_utf8_lossy(&value.0).into_owned(), format)))
}
