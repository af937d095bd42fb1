//! Carrying out the one action `machine_steps::decide` chose, through the oVirt client and the Kubernetes API. Each
//! action has its function in the file of what it touches; this dispatcher names, for each action that calls the
//! engine, the condition its failure is reported on.

mod bookkeeping;
mod create;
mod disks;
mod nics;
mod node;
mod vm;
mod volumes;

use super::observe::Engine;
use super::outcome::{Executed, on_engine};
use super::state::MachineState;
use crate::conditions::types;
use crate::machine_steps::{Action, Observed, Requeue};
use crate::runtime::capi;

pub async fn execute(
    state: &mut MachineState,
    observed: &Observed,
    engine: Option<&Engine>,
    cluster: Option<&capi::Cluster>,
    action: Action,
) -> Executed {
    let vm_id = observed.vm.as_ref().map(|vm| vm.id.clone()).unwrap_or_default();
    let client = engine.map(|e| &e.client);
    match action {
        Action::WritePausedOnly => Executed::Requeue(Requeue::OnChange),
        Action::Wait(requeue) | Action::Done(requeue) => Executed::Requeue(requeue),
        Action::AddFinalizer => bookkeeping::add_finalizer(state).await,
        Action::SetFailure { reason, message } => bookkeeping::set_failure(state, reason, message),
        Action::ClearFailure => bookkeeping::clear_failure(state),
        Action::CreateVm(plan) => {
            on_engine(client, types::MACHINE_CREATED, |client| {
                vm::create(state, client, &plan)
            })
            .await
        }
        Action::WriteProviderId(provider_id) => bookkeeping::write_provider_id(state, observed, &provider_id).await,
        Action::RecordCreatedVm(vm_id) => bookkeeping::record_created_vm(state, &vm_id).await,
        Action::RecordEngine(engine) => bookkeeping::record_engine(state, &engine).await,
        Action::UpgradeMarker { vm_id, description } => {
            on_engine(client, types::MACHINE_CREATED, |client| {
                bookkeeping::upgrade_marker(state, observed, client, &vm_id, &description)
            })
            .await
        }
        Action::RecordSystemDisks(ids) => bookkeeping::record_system_disks(state, &ids).await,
        Action::ResizeDisk {
            attachment_id,
            size_bytes,
            ..
        } => {
            on_engine(client, types::MACHINE_DISK_RESIZED, |client| {
                disks::resize(client, &vm_id, &attachment_id, size_bytes)
            })
            .await
        }
        Action::RenameDiskAlias { disk_id, new_alias } => {
            on_engine(client, types::MACHINE_DISK_RESIZED, |client| {
                disks::rename_alias(client, &disk_id, &new_alias)
            })
            .await
        }
        Action::SyncNics(changes) => {
            on_engine(client, types::MACHINE_NETWORK_SET, |client| {
                nics::sync(client, &vm_id, changes)
            })
            .await
        }
        Action::StartVm { use_ignition } => {
            on_engine(client, types::MACHINE_ON, |client| {
                vm::start(client, &vm_id, use_ignition)
            })
            .await
        }
        // The pass reads the workload cluster (the Node; while deleting, also its VolumeAttachments) and decides again
        // before executing (see `pass::observe_and_decide`); nothing to do here.
        Action::ReadNode | Action::ReadNodeRelease => Executed::Requeue(Requeue::Backoff),
        Action::SetNodeProviderId { node_name, provider_id } => {
            node::set_provider_id(state, cluster, &node_name, &provider_id).await
        }
        Action::DetachDisks { vm_id, disks } => {
            on_engine(client, types::MACHINE_DELETED, |client| {
                volumes::detach(state, client, &vm_id, &disks)
            })
            .await
        }
        Action::StopVmForce { vm_id } => {
            on_engine(client, types::MACHINE_DELETED, |client| vm::stop_force(client, &vm_id)).await
        }
        Action::DeleteVm { vm_id } => {
            on_engine(client, types::MACHINE_DELETED, |client| vm::delete(client, &vm_id)).await
        }
        Action::RemoveFinalizer { left_alone } => bookkeeping::remove_finalizer(state, left_alone).await,
    }
}
