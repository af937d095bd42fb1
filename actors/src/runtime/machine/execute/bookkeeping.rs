//! What the actions record on the OVirtMachine itself: its finalizer, failureReason, spec.providerID, the created-VM,
//! engine, owner and system-disk annotations, and (through the engine) the upgrade of a VM's legacy ownership marker.

use capov_crds::OVirtMachine;
use capov_crds::labels::{
    CREATED_VM_ANNOTATION, ENGINE_ANNOTATION, MACHINE_FINALIZER, OWNER_UID_ANNOTATION, SYSTEM_DISKS_ANNOTATION,
    VM_NAME_ANNOTATION,
};
use capov_ovirt::Client;
use kube::Resource;
use kube::api::{Api, Patch, PatchParams};
use serde_json::json;

use crate::runtime::kube::clients::is_transient;
use crate::runtime::kube::slim;
use crate::runtime::machine::outcome::{Executed, Failure};
use crate::runtime::machine::state::MachineState;
use crate::runtime::status::events::NoteKind;
use crate::runtime::status::writer::StatusWriterMsg;
use crate::runtime::{finalizers, mailbox};
use capov_core::conditions::{FAILURE_ENGINE_CONNECTION_CRITICAL, reasons, types};
use capov_core::machine_steps::{CreatedVmRecord, Observed, Requeue};
use capov_core::trust::identity::format_provider_id;

pub async fn add_finalizer(state: &mut MachineState) -> Executed {
    let machines = machines(state);
    let ensure = finalizers::ensure(&machines, &*state.object, MACHINE_FINALIZER);
    match state.permit.awaiting(ensure).await {
        Ok(written) => {
            // The next observation must see the finalizer (as written, or as read when an earlier write whose answer
            // was lost had added it): deciding again on the old object would add it again and back off.
            if let Some(updated) = written {
                state.object = slim::own(updated);
            }
            Executed::Continue
        }
        Err(err) => kube_failure(state, "adding the finalizer", err),
    }
}

/// Releases the OVirtMachine, after a Warning Event when a VM that is not this machine's was left alone.
pub async fn remove_finalizer(state: &mut MachineState, left_alone: Option<String>) -> Executed {
    if let Some(note) = left_alone {
        tracing::warn!(object = %state.key, "{note}");
        let event = StatusWriterMsg::Event {
            reference: state.object.object_ref(&()),
            kind: NoteKind::Warning,
            reason: reasons::VM_LEFT_ALONE.into(),
            note,
        };
        let _ = mailbox::cast(&state.shared.metrics, &state.shared.status_writer, event);
    }
    let machines = machines(state);
    let remove = finalizers::remove(&machines, &*state.object, MACHINE_FINALIZER);
    match state.permit.awaiting(remove).await {
        Ok(written) => {
            if let Some(updated) = written {
                state.object = slim::own(updated);
            }
            Executed::Requeue(Requeue::OnChange)
        }
        Err(err) => kube_failure(state, "removing the finalizer", err),
    }
}

pub fn set_failure(state: &mut MachineState, reason: &'static str, message: String) -> Executed {
    debug_assert_eq!(reason, FAILURE_ENGINE_CONNECTION_CRITICAL);
    state.status.failure_reason = Some(reason.to_string());
    let message =
        capov_core::trust::bounded_text::cut(&message, capov_core::trust::bounded_text::MAX_MESSAGE_BYTES / 2);
    state.status.failure_message = Some(format!(
        "{message}. Fix the OVirtProvider, then clear status.failureReason (kubectl patch with --subresource=status)"
    ));
    Executed::Requeue(Requeue::OnChange)
}

pub fn clear_failure(state: &mut MachineState) -> Executed {
    state.status.failure_reason = None;
    state.status.failure_message = None;
    Executed::Continue
}

/// Sets spec.provider to the failure domain's provider before any VM is created (issue 39): the pass goes on with the
/// object as written, so the machine subscribes to that provider and creates its VM on that engine.
pub async fn set_provider(state: &mut MachineState, provider: &str) -> Executed {
    let patch = json!({"spec": {"provider": provider}});
    let executed = patch_machine(state, &patch, "setting spec.provider from the failure domain").await;
    if matches!(executed, Executed::Continue) {
        tracing::info!(object = %state.key, provider, "spec.provider set from the machine's failure domain");
    }
    executed
}

/// Writes `spec.providerID` at once after the engine answered; until it is written nothing else happens to the VM.
/// The same patch records the engine the VM lives on, the UID its marker names and, when given, its system disks.
pub async fn write_provider_id(
    state: &mut MachineState,
    observed: &Observed,
    provider_id: &str,
    system_disks: Option<&[String]>,
) -> Executed {
    let vm_id = provider_id.trim_start_matches("ovirt://");
    if vm_id.is_empty() {
        // Never lock `ovirt://` in: spec.providerID is write-once.
        return Executed::Failed {
            type_: types::MACHINE_CREATED,
            failure: Failure::error(
                reasons::CREATE_FAILED,
                "the engine accepted the VM but its answer carried no VM id; the VM will be found by name and marker",
            ),
        };
    }
    // From now on spec.providerID records the VM: the created-VM annotation goes with the same patch.
    let mut annotations = owner_annotations(observed);
    annotations.insert(CREATED_VM_ANNOTATION.into(), serde_json::Value::Null);
    // The name the VM was found (or created) under: from now on it is looked for by that name, whatever the spec's
    // name template and the cluster-name label render later.
    annotations.insert(VM_NAME_ANNOTATION.into(), json!(observed.vm_name()));
    if let Some(disk_ids) = system_disks {
        annotations.insert(SYSTEM_DISKS_ANNOTATION.into(), json!(disk_ids.join(",")));
    }
    let patch = json!({
        "metadata": {"annotations": annotations},
        "spec": {"providerID": format_provider_id(vm_id)},
    });
    match patch_machine(state, &patch, "writing spec.providerID").await {
        Executed::Continue => {}
        // The next pass finds the VM by name and marker and writes the providerID then.
        backoff => return backoff,
    }
    if state.created_vm.take().is_some_and(|created| created == vm_id) {
        tracing::info!(object = %state.key, vm = %vm_id, "recorded the VM this run created, its disks copied");
    } else {
        // Only after a crash between creating the VM and recording it; worth seeing in the log.
        tracing::info!(object = %state.key, vm = %vm_id, "adopted the VM carrying this machine's marker");
    }
    Executed::Continue
}

/// Records the VM CAPOV created (its id, the name it got and the engine it lives on) while its disks are copied.
pub async fn record_created_vm(state: &mut MachineState, record: &CreatedVmRecord) -> Executed {
    let mut annotations = serde_json::Map::new();
    annotations.insert(CREATED_VM_ANNOTATION.into(), json!(record.vm_id));
    annotations.insert(VM_NAME_ANNOTATION.into(), json!(record.vm_name));
    if let Some(engine) = &record.engine {
        annotations.insert(ENGINE_ANNOTATION.into(), json!(engine));
    }
    let patch = json!({"metadata": {"annotations": annotations}});
    patch_machine(state, &patch, "recording the created VM").await
}

pub async fn record_engine(state: &mut MachineState, engine: &str) -> Executed {
    let patch = json!({"metadata": {"annotations": {ENGINE_ANNOTATION: engine}}});
    patch_machine(state, &patch, "recording the VM's engine").await
}

/// Rewrites the VM's legacy marker with this machine's UID, then records that UID (and the engine) on the machine.
pub async fn upgrade_marker(
    state: &mut MachineState,
    observed: &Observed,
    client: &Client,
    vm_id: &str,
    description: &str,
) -> capov_ovirt::Result<Executed> {
    client.update_vm_description(vm_id, description).await?;
    tracing::info!(object = %state.key, vm = %vm_id, "rewrote the VM's legacy ownership marker with this machine's UID");
    let event = StatusWriterMsg::Event {
        reference: state.object.object_ref(&()),
        kind: NoteKind::Record,
        reason: reasons::VM_MARKER_UPGRADED.into(),
        note: "the VM's ownership marker now names this OVirtMachine's UID and management cluster".into(),
    };
    let _ = mailbox::cast(&state.shared.metrics, &state.shared.status_writer, event);
    let patch = json!({"metadata": {"annotations": owner_annotations(observed)}});
    Ok(patch_machine(state, &patch, "recording the VM's owner").await)
}

pub async fn record_system_disks(state: &mut MachineState, disk_ids: &[String]) -> Executed {
    let patch = json!({"metadata": {"annotations": {SYSTEM_DISKS_ANNOTATION: disk_ids.join(",")}}});
    patch_machine(state, &patch, "recording the system disks").await
}

/// The UID the VM's marker names and, with a working connection, the engine the VM lives on.
fn owner_annotations(observed: &Observed) -> serde_json::Map<String, serde_json::Value> {
    let mut annotations = serde_json::Map::new();
    annotations.insert(OWNER_UID_ANNOTATION.into(), json!(observed.owner.uid));
    if let Some(engine) = &observed.current_engine {
        annotations.insert(ENGINE_ANNOTATION.into(), json!(engine.annotation()));
    }
    annotations
}

fn machines(state: &MachineState) -> Api<OVirtMachine> {
    Api::namespaced(state.shared.client.clone(), state.key.namespace_str())
}

/// Merge-patches the OVirtMachine; what follows goes on from the object as written.
async fn patch_machine(state: &mut MachineState, patch: &serde_json::Value, what: &str) -> Executed {
    let machines = machines(state);
    let (params, patch) = (PatchParams::default(), Patch::Merge(patch));
    let request = machines.patch(&state.key.name, &params, &patch);
    match state.permit.awaiting(request).await {
        Ok(updated) => {
            state.object = slim::own(updated);
            Executed::Continue
        }
        Err(err) => kube_failure(state, what, err),
    }
}

/// A write the apiserver did not take: retried soon when it was cut, timed out or overloaded, with the full backoff
/// when it was refused (RBAC, an admission webhook), which repeats until someone fixes it.
fn kube_failure(state: &MachineState, what: &str, err: kube::Error) -> Executed {
    tracing::warn!(object = %state.key, error = %err, "{what} failed; retrying");
    match is_transient(&err) {
        true => Executed::RetryApiserver,
        false => Executed::Requeue(Requeue::Backoff),
    }
}
