//! Carrying out the one action `machine_steps::decide` chose, through the oVirt client and the Kubernetes API. Each
//! action has its function in the file of what it touches; this dispatcher names, for each action that calls the
//! engine, the condition its failure is reported on.

mod affinity;
mod bookkeeping;
mod create;
mod disks;
mod ip_claims;
mod nics;
mod node;
mod tags;
mod vm;
mod volumes;

use super::observe::Engine;
use super::outcome::{Executed, on_engine};
use super::state::MachineState;
use crate::runtime::capi;
use capov_core::conditions::types;
use capov_core::machine_steps::{Action, Observed, Requeue};

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
        Action::WriteProviderId(provider_id) => bookkeeping::write_provider_id(state, observed, &provider_id).await,
        Action::RecordCreatedVm(record) => bookkeeping::record_created_vm(state, &record).await,
        Action::RecordEngine(engine) => bookkeeping::record_engine(state, &engine).await,
        Action::RecordSystemDisks(ids) => bookkeeping::record_system_disks(state, &ids).await,
        Action::CreateIpClaims(claims) => ip_claims::create(state, &claims).await,
        Action::ReleaseIpClaims(names) => ip_claims::release(state, &names).await,
        // The pass reads the workload cluster (the Node; while deleting, also its VolumeAttachments) and decides again
        // before executing (see `pass::observe_and_decide`); nothing to do here.
        Action::ReadNode | Action::ReadNodeRelease => Executed::Requeue(Requeue::Backoff),
        Action::SetNodeProviderId { node_name, provider_id } => {
            node::set_provider_id(state, cluster, &node_name, &provider_id).await
        }
        Action::SetNodeLabels { node_name, labels } => node::set_labels(state, cluster, &node_name, &labels).await,
        Action::RemoveFinalizer { left_alone } => bookkeeping::remove_finalizer(state, left_alone).await,
        action @ (Action::JoinAffinityGroup(_) | Action::LeaveAffinityGroup(_)) => {
            affinity::execute(state, observed, client, action).await
        }
        action @ (Action::TagVm(_)
        | Action::AddDataDisk(_)
        | Action::ResizeDisk { .. }
        | Action::RenameDiskAlias { .. }
        | Action::SyncNics(_)) => prepare(client, &vm_id, action).await,
        action => on_the_vm(state, observed, client, &vm_id, action).await,
    }
}

/// The VM's creation, power and removal.
async fn on_the_vm(
    state: &mut MachineState,
    observed: &Observed,
    client: Option<&capov_ovirt::Client>,
    vm_id: &str,
    action: Action,
) -> Executed {
    match action {
        Action::CreateVm(plan) => {
            on_engine(client, types::MACHINE_CREATED, |client| {
                vm::create(state, client, &plan, observed.current_engine.as_ref())
            })
            .await
        }
        Action::UpgradeMarker { vm_id, description } => {
            on_engine(client, types::MACHINE_CREATED, |client| {
                bookkeeping::upgrade_marker(state, observed, client, &vm_id, &description)
            })
            .await
        }
        Action::StartVm { use_ignition } => {
            let hard = observed.settings.antiaffinity == Some(capov_crds::AntiAffinity::Hard);
            on_engine(client, types::MACHINE_ON, |c| vm::start(c, vm_id, use_ignition, hard)).await
        }
        Action::ShutdownVm { vm_id, deadline_in } => {
            on_engine(client, types::MACHINE_DELETED, |client| {
                vm::shutdown(client, &vm_id, deadline_in)
            })
            .await
        }
        Action::DetachDisks { vm_id, disks } => {
            let vm_name = observed.vm_name();
            on_engine(client, types::MACHINE_DELETED, |client| {
                volumes::detach(state, client, &vm_id, &vm_name, &disks)
            })
            .await
        }
        Action::StopVmForce { vm_id } => {
            on_engine(client, types::MACHINE_DELETED, |client| vm::stop_force(client, &vm_id)).await
        }
        Action::DeleteVm { vm_id } => {
            on_engine(client, types::MACHINE_DELETED, |client| vm::delete(client, &vm_id)).await
        }
        other => not_for(other, "the VM's creation, power or removal"),
    }
}

/// The changes to a VM that was never started, before its first start: tags, data disks, the bootable disk's size,
/// disk aliases and NICs.
async fn prepare(client: Option<&capov_ovirt::Client>, vm_id: &str, action: Action) -> Executed {
    match action {
        Action::TagVm(names) => {
            on_engine(client, types::MACHINE_CREATED, |client| {
                tags::tag_vm(client, vm_id, &names)
            })
            .await
        }
        Action::AddDataDisk(plan) => {
            on_engine(client, types::MACHINE_DISK_RESIZED, |client| {
                disks::add_data_disk(client, vm_id, &plan)
            })
            .await
        }
        Action::ResizeDisk {
            attachment_id,
            size_bytes,
            ..
        } => {
            on_engine(client, types::MACHINE_DISK_RESIZED, |client| {
                disks::resize(client, vm_id, &attachment_id, size_bytes)
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
                nics::sync(client, vm_id, changes)
            })
            .await
        }
        other => not_for(other, "a preparation of the VM"),
    }
}

/// A dispatching mistake: logged, nothing done, the pass backs off.
fn not_for(action: Action, what: &str) -> Executed {
    tracing::error!(action = ?action, "not {what}; nothing done");
    Executed::Requeue(Requeue::Backoff)
}
