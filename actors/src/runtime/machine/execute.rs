//! Carrying out the one action `machine_steps::decide` chose, through the oVirt client and the Kubernetes API.

use capov_crds::labels::{ENGINE_ANNOTATION, MACHINE_FINALIZER, OWNER_UID_ANNOTATION, SYSTEM_DISKS_ANNOTATION};
use capov_crds::{OVirtMachine, Severity};
use capov_ovirt::StartOptions;
use capov_ovirt::model::{Nic, Ref};
use kube::Resource;
use kube::api::{Api, Patch, PatchParams};
use serde_json::json;

use super::observe::{Engine, bootstrap_secret};
use super::state::MachineState;
use super::{create, workload};
use crate::conditions::{FAILURE_ENGINE_CONNECTION_CRITICAL, reasons, types};
use crate::identity::format_provider_id;
use crate::machine_steps::{Action, Observed, Requeue};
use crate::nics::NicChange;
use crate::runtime::finalizers;
use crate::runtime::mailbox;
use crate::runtime::slim;
use crate::runtime::status_writer::StatusWriterMsg;

/// A failed action, as the condition to report (or only a retry, e.g. for the engine's 409 "locked").
#[derive(Debug)]
pub struct Failure {
    pub reason: &'static str,
    pub severity: Severity,
    pub message: String,
}

impl Failure {
    pub fn error(reason: &'static str, message: impl Into<String>) -> Self {
        Failure {
            reason,
            severity: Severity::Error,
            message: message.into(),
        }
    }

    /// Retry with backoff, reason unchanged.
    pub fn retry() -> Self {
        Failure {
            reason: "",
            severity: Severity::Info,
            message: String::new(),
        }
    }

    /// An engine error: 409 "locked"/"related operation in progress" only retries; transient errors are Warnings;
    /// the rest carry the engine's fault detail as an Error.
    pub fn engine(err: &capov_ovirt::Error) -> Self {
        // Writes stopped by the leader election: this replica is about to stop; nothing for the user to act on.
        if err.is_locked() || matches!(err, capov_ovirt::Error::WritesStopped(_)) {
            return Failure::retry();
        }
        let severity = if err.is_transient() {
            Severity::Warning
        } else {
            Severity::Error
        };
        let message = err.detail().map(str::to_string).unwrap_or_else(|| err.to_string());
        let reason = match err {
            // Nothing was sent: the message names the value and the character.
            capov_ovirt::Error::UnsearchableValue { .. } => {
                return Failure::error(reasons::UNSEARCHABLE_NAME, err.to_string());
            }
            // The engine user lacks a role: the message names the refused request (docs/engine-permissions.md).
            capov_ovirt::Error::PermissionDenied { .. } => reasons::PERMISSION_DENIED,
            _ => reasons::ENGINE_ERROR,
        };
        Failure {
            reason,
            severity,
            message,
        }
    }

    pub fn is_retry_only(&self) -> bool {
        self.reason.is_empty()
    }
}

pub enum Executed {
    /// Done; observe and decide again at once.
    Continue,
    /// Look again later.
    Requeue(Requeue),
    /// Report `failure` on condition `type_` and back off.
    Failed { type_: &'static str, failure: Failure },
}

pub async fn execute(
    state: &mut MachineState,
    observed: &Observed,
    engine: Option<&Engine>,
    cluster: Option<&crate::runtime::capi::Cluster>,
    action: Action,
) -> Executed {
    let vm_id = observed.vm.as_ref().map(|vm| vm.id.clone()).unwrap_or_default();
    let client = engine.map(|e| &e.client);
    match action {
        Action::WritePausedOnly => Executed::Requeue(Requeue::OnChange),
        Action::Wait(requeue) | Action::Done(requeue) => Executed::Requeue(requeue),
        Action::AddFinalizer => match finalizers::ensure(&machines(state), &*state.object, MACHINE_FINALIZER).await {
            Ok(written) => {
                // The next observation must see the finalizer: deciding again on the old object would add it
                // again with a stale resourceVersion, fail, and back off for 5 s.
                if let Some(updated) = written {
                    state.object = slim::own(updated);
                }
                Executed::Continue
            }
            Err(err) => kube_failure(state, "adding the finalizer", err),
        },
        Action::SetFailure { reason, message } => {
            debug_assert_eq!(reason, FAILURE_ENGINE_CONNECTION_CRITICAL);
            state.status.failure_reason = Some(reason.to_string());
            state.status.failure_message = Some(format!(
                "{message}. Fix the OVirtProvider, then clear status.failureReason (kubectl patch with --subresource=status)"
            ));
            Executed::Requeue(Requeue::OnChange)
        }
        Action::ClearFailure => {
            state.status.failure_reason = None;
            state.status.failure_message = None;
            Executed::Continue
        }
        Action::CreateVm(plan) => {
            let Some(client) = client else {
                return Executed::Requeue(Requeue::Backoff);
            };
            let machine = super::observe::owner_machine(state);
            let data = match machine {
                Some(machine) => bootstrap_secret(state, &machine)
                    .await
                    .ok()
                    .flatten()
                    .map(|(data, _)| data),
                None => None,
            };
            let Some(data) = data else {
                return Executed::Requeue(Requeue::Backoff);
            };
            match create::create_vm(state, client, &plan, data).await {
                // spec.providerID is write-once (CAPI copies it to the Machine), and an accepted create can still
                // vanish: the engine deletes the VM when its disk copy fails. So it is recorded only once the VM
                // has left image_locked; until then the passes find the VM by name and marker, and a VM that
                // vanished is simply created again.
                Ok(id) => {
                    tracing::info!(object = %state.key, vm = %id, "the engine accepted the VM; waiting for its disks");
                    state.created_vm = Some(id);
                    Executed::Requeue(Requeue::PollVm)
                }
                Err(failure) => Executed::Failed {
                    type_: types::MACHINE_CREATED,
                    failure: create_failure(failure),
                },
            }
        }
        Action::WriteProviderId(provider_id) => {
            let id = provider_id.trim_start_matches("ovirt://").to_string();
            match write_provider_id(state, observed, &id).await {
                Ok(()) if state.created_vm.take().is_some_and(|created| created == id) => {
                    tracing::info!(object = %state.key, vm = %id, "recorded the VM this run created, its disks copied");
                    Executed::Continue
                }
                Ok(()) => {
                    // Only after a crash between creating the VM and recording it; worth seeing in the log.
                    tracing::info!(object = %state.key, vm = %id, "adopted the VM carrying this machine's marker");
                    Executed::Continue
                }
                Err(executed) => executed,
            }
        }
        Action::RecordEngine(engine) => {
            let patch = json!({"metadata": {"annotations": {ENGINE_ANNOTATION: engine}}});
            patch_machine(state, &patch, "recording the VM's engine").await
        }
        Action::UpgradeMarker { vm_id, description } => {
            let Some(client) = client else {
                return Executed::Requeue(Requeue::Backoff);
            };
            if let Err(err) = client.update_vm_description(&vm_id, &description).await {
                return Executed::Failed {
                    type_: types::MACHINE_CREATED,
                    failure: Failure::engine(&err),
                };
            }
            tracing::info!(object = %state.key, vm = %vm_id, "rewrote the VM's legacy ownership marker with this machine's UID");
            let event = StatusWriterMsg::Event {
                reference: state.object.object_ref(&()),
                warning: false,
                reason: reasons::VM_MARKER_UPGRADED.into(),
                note: "the VM's ownership marker now names this OVirtMachine's UID and management cluster".into(),
            };
            let _ = mailbox::cast(&state.shared.metrics, &state.shared.status_writer, event);
            let mut annotations = serde_json::Map::new();
            annotations.insert(OWNER_UID_ANNOTATION.into(), json!(observed.owner.uid));
            if let Some(engine) = &observed.current_engine {
                annotations.insert(ENGINE_ANNOTATION.into(), json!(engine.annotation()));
            }
            let patch = json!({"metadata": {"annotations": annotations}});
            patch_machine(state, &patch, "recording the VM's owner").await
        }
        Action::RecordSystemDisks(ids) => {
            let patch = json!({"metadata": {"annotations": {SYSTEM_DISKS_ANNOTATION: ids.join(",")}}});
            patch_machine(state, &patch, "recording the system disks").await
        }
        Action::ResizeDisk {
            attachment_id,
            size_bytes,
            ..
        } => {
            let Some(client) = client else {
                return Executed::Requeue(Requeue::Backoff);
            };
            match client.resize_disk_attachment(&vm_id, &attachment_id, size_bytes).await {
                // The poll shows the new size and the disk's lock ending (its search inlines the disks of VMs in a
                // transition); a resize that changed nothing is read again by the watch's guard timer.
                Ok(_) => Executed::Requeue(Requeue::PollVm),
                Err(err) => Executed::Failed {
                    type_: types::MACHINE_DISK_RESIZED,
                    failure: Failure::engine(&err),
                },
            }
        }
        Action::RenameDiskAlias { disk_id, new_alias } => {
            let Some(client) = client else {
                return Executed::Requeue(Requeue::Backoff);
            };
            match client.update_disk_alias(&disk_id, &new_alias).await {
                Ok(_) => Executed::Continue,
                Err(err) => Executed::Failed {
                    type_: types::MACHINE_DISK_RESIZED,
                    failure: Failure::engine(&err),
                },
            }
        }
        Action::SyncNics(changes) => {
            let Some(client) = client else {
                return Executed::Requeue(Requeue::Backoff);
            };
            for change in changes {
                let result = match change {
                    NicChange::Update {
                        nic_id,
                        vnic_profile_id,
                    } => {
                        let nic = Nic {
                            vnic_profile: Some(Ref::id(vnic_profile_id)),
                            ..Nic::default()
                        };
                        client.update_nic(&vm_id, &nic_id, &nic).await.map(|_| ())
                    }
                    NicChange::Add { name, vnic_profile_id } => {
                        let nic = Nic {
                            name: Some(name),
                            vnic_profile: Some(Ref::id(vnic_profile_id)),
                            ..Nic::default()
                        };
                        client.add_nic(&vm_id, &nic).await.map(|_| ())
                    }
                    NicChange::Remove { nic_id } => client.remove_nic(&vm_id, &nic_id).await,
                };
                if let Err(err) = result {
                    return Executed::Failed {
                        type_: types::MACHINE_NETWORK_SET,
                        failure: Failure::engine(&err),
                    };
                }
            }
            Executed::Continue
        }
        Action::StartVm { use_ignition } => {
            let Some(client) = client else {
                return Executed::Requeue(Requeue::Backoff);
            };
            let options = StartOptions {
                use_cloud_init: !use_ignition,
                use_ignition,
            };
            match client.start_vm(&vm_id, options).await {
                Ok(()) => Executed::Requeue(Requeue::PollVm),
                Err(err) if err.is_vm_running() => Executed::Requeue(Requeue::PollVm),
                Err(err) => Executed::Failed {
                    type_: types::MACHINE_ON,
                    failure: Failure::engine(&err),
                },
            }
        }
        // The pass reads the Node and decides again before executing (see `run_pass`); nothing to do here.
        Action::ReadNode => Executed::Requeue(Requeue::Backoff),
        Action::SetNodeProviderId { node_name, provider_id } => {
            let Some(cluster) = cluster else {
                return Executed::Requeue(Requeue::Backoff);
            };
            match workload::set_node_provider_id(state, cluster, &node_name, &provider_id).await {
                Ok(()) => Executed::Continue,
                Err(message) => Executed::Failed {
                    type_: types::K8S_PROVIDER_ID_SETUP,
                    failure: Failure {
                        reason: reasons::WORKLOAD_CLUSTER_UNREACHABLE,
                        severity: Severity::Warning,
                        message,
                    },
                },
            }
        }
        Action::StopVmForce { vm_id } => {
            let Some(client) = client else {
                return Executed::Requeue(Requeue::Backoff);
            };
            match client.stop_vm(&vm_id, true).await {
                Ok(()) => Executed::Requeue(Requeue::PollVm),
                Err(err) if err.is_vm_not_running() || err.is_not_found() => Executed::Continue,
                Err(err) => Executed::Failed {
                    type_: types::MACHINE_DELETED,
                    failure: Failure::engine(&err),
                },
            }
        }
        Action::DeleteVm { vm_id } => {
            let Some(client) = client else {
                return Executed::Requeue(Requeue::Backoff);
            };
            match client.remove_vm(&vm_id).await {
                Ok(()) => Executed::Requeue(Requeue::PollVm),
                Err(err) if err.is_not_found() => Executed::Continue,
                Err(err) => Executed::Failed {
                    type_: types::MACHINE_DELETED,
                    failure: Failure::engine(&err),
                },
            }
        }
        Action::RemoveFinalizer { left_alone } => {
            if let Some(note) = left_alone {
                tracing::warn!(object = %state.key, "{note}");
                let event = StatusWriterMsg::Event {
                    reference: state.object.object_ref(&()),
                    warning: true,
                    reason: reasons::VM_LEFT_ALONE.into(),
                    note,
                };
                let _ = mailbox::cast(&state.shared.metrics, &state.shared.status_writer, event);
            }
            match finalizers::remove(&machines(state), &*state.object, MACHINE_FINALIZER).await {
                Ok(written) => {
                    if let Some(updated) = written {
                        state.object = slim::own(updated);
                    }
                    Executed::Requeue(Requeue::OnChange)
                }
                Err(err) => kube_failure(state, "removing the finalizer", err),
            }
        }
    }
}

fn machines(state: &MachineState) -> Api<OVirtMachine> {
    Api::namespaced(
        state.shared.client.clone(),
        &state.key.namespace.clone().unwrap_or_default(),
    )
}

/// Create failures keep their own reasons; bare engine errors on create are CreateFailed.
fn create_failure(failure: Failure) -> Failure {
    if failure.reason == reasons::ENGINE_ERROR {
        Failure {
            reason: reasons::CREATE_FAILED,
            ..failure
        }
    } else {
        failure
    }
}

async fn patch_machine(state: &mut MachineState, patch: &serde_json::Value, what: &str) -> Executed {
    match machines(state)
        .patch(&state.key.name, &PatchParams::default(), &Patch::Merge(patch))
        .await
    {
        Ok(updated) => {
            state.object = slim::own(updated);
            Executed::Continue
        }
        Err(err) => kube_failure(state, what, err),
    }
}

/// Writes `spec.providerID` at once after the engine answered; until it is written nothing else happens to the VM.
/// The same patch records the engine the VM lives on and the UID its marker names.
async fn write_provider_id(state: &mut MachineState, observed: &Observed, vm_id: &str) -> Result<(), Executed> {
    if vm_id.is_empty() {
        // Never lock `ovirt://` in: spec.providerID is write-once.
        return Err(Executed::Failed {
            type_: types::MACHINE_CREATED,
            failure: Failure::error(
                reasons::CREATE_FAILED,
                "the engine accepted the VM but its answer carried no VM id; the VM will be found by name and marker",
            ),
        });
    }
    let mut annotations = serde_json::Map::new();
    annotations.insert(OWNER_UID_ANNOTATION.into(), json!(observed.owner.uid));
    if let Some(engine) = &observed.current_engine {
        annotations.insert(ENGINE_ANNOTATION.into(), json!(engine.annotation()));
    }
    let patch = json!({
        "metadata": {"annotations": annotations},
        "spec": {"providerID": format_provider_id(vm_id)},
    });
    match machines(state)
        .patch(&state.key.name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
    {
        Ok(updated) => {
            state.object = slim::own(updated);
            Ok(())
        }
        // The next pass finds the VM by name and marker and writes the providerID then.
        Err(err) => Err(kube_failure(state, "writing spec.providerID", err)),
    }
}

fn kube_failure(state: &MachineState, what: &str, err: kube::Error) -> Executed {
    tracing::warn!(object = %state.key, error = %err, "{what} failed; retrying");
    Executed::Requeue(Requeue::Backoff)
}
