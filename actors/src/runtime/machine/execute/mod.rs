//! Carrying out the one action `machine_steps::decide` chose, through the oVirt client and the Kubernetes API. Each
//! family of actions has one executor here, an exhaustive match with no fallback: a new action does not compile
//! until its family's executor says what to do. Each action has its function in the file of what it touches; the
//! executors name, for each action that calls the engine, the condition its failure is reported on.

mod affinity;
mod bookkeeping;
mod create;
mod disks;
mod host_devices;
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
use capov_core::machine_steps::{
    Action, BookkeepingAction, Observed, PrepareAction, Requeue, VmAction, WorkloadAction,
};

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
        Action::Vm(action) => on_the_vm(state, observed, client, &vm_id, action).await,
        Action::Prepare(action) => prepare(client, &vm_id, action).await,
        Action::Bookkeeping(action) => bookkeeping(state, observed, action).await,
        Action::Groups(action) => affinity::execute(state, observed, client, action).await,
        Action::Workload(action) => on_the_node(state, cluster, action).await,
        // The pass reads what was asked for and decides again before executing (`pass::observe_and_decide`): a read
        // request never reaches here.
        Action::Read(_) => Executed::Requeue(Requeue::Backoff),
    }
}

/// Writes to the OVirtMachine and its IPAddressClaims.
async fn bookkeeping(state: &mut MachineState, observed: &Observed, action: BookkeepingAction) -> Executed {
    match action {
        BookkeepingAction::AddFinalizer => bookkeeping::add_finalizer(state).await,
        BookkeepingAction::SetFailure { reason, message } => bookkeeping::set_failure(state, reason, message),
        BookkeepingAction::ClearFailure => bookkeeping::clear_failure(state),
        BookkeepingAction::SetProvider(provider) => bookkeeping::set_provider(state, &provider).await,
        BookkeepingAction::WriteProviderId {
            provider_id,
            system_disks,
        } => bookkeeping::write_provider_id(state, observed, &provider_id, system_disks.as_deref()).await,
        BookkeepingAction::RecordCreatedVm(record) => bookkeeping::record_created_vm(state, &record).await,
        BookkeepingAction::RecordEngine(engine) => bookkeeping::record_engine(state, &engine).await,
        BookkeepingAction::RecordSystemDisks(ids) => bookkeeping::record_system_disks(state, &ids).await,
        BookkeepingAction::CreateIpClaims(claims) => ip_claims::create(state, &claims).await,
        BookkeepingAction::ReleaseIpClaims(names) => ip_claims::release(state, &names).await,
        BookkeepingAction::RemoveFinalizer { left_alone } => bookkeeping::remove_finalizer(state, left_alone).await,
    }
}

/// Writes to the VM's Node in the workload cluster.
async fn on_the_node(state: &mut MachineState, cluster: Option<&capi::Cluster>, action: WorkloadAction) -> Executed {
    match action {
        WorkloadAction::SetNodeProviderId {
            node_name,
            provider_id,
            labels,
        } => node::set_provider_id(state, cluster, &node_name, &provider_id, &labels).await,
        WorkloadAction::SetNodeLabels { node_name, labels } => {
            node::set_labels(state, cluster, &node_name, &labels).await
        }
    }
}

/// The VM's creation, power and removal.
async fn on_the_vm(
    state: &mut MachineState,
    observed: &Observed,
    client: Option<&capov_ovirt::Client>,
    vm_id: &str,
    action: VmAction,
) -> Executed {
    match action {
        VmAction::Create(plan) => {
            on_engine(client, types::MACHINE_CREATED, |client| {
                vm::create(state, client, &plan, observed.current_engine.as_ref())
            })
            .await
        }
        VmAction::UpgradeMarker { vm_id, description } => {
            on_engine(client, types::MACHINE_CREATED, |client| {
                bookkeeping::upgrade_marker(state, observed, client, &vm_id, &description)
            })
            .await
        }
        VmAction::Start { use_ignition } => {
            let hard = observed.settings.antiaffinity == Some(capov_crds::AntiAffinity::Hard);
            on_engine(client, types::MACHINE_ON, |c| vm::start(c, vm_id, use_ignition, hard)).await
        }
        VmAction::Shutdown { vm_id, deadline_in } => {
            on_engine(client, types::MACHINE_DELETED, |client| {
                vm::shutdown(client, &vm_id, deadline_in)
            })
            .await
        }
        VmAction::DetachDisks { vm_id, disks } => {
            let vm_name = observed.vm_name();
            on_engine(client, types::MACHINE_DELETED, |client| {
                volumes::detach(state, client, &vm_id, &vm_name, &disks)
            })
            .await
        }
        VmAction::StopForce { vm_id } => {
            on_engine(client, types::MACHINE_DELETED, |client| vm::stop_force(client, &vm_id)).await
        }
        VmAction::Delete { vm_id } => {
            on_engine(client, types::MACHINE_DELETED, |client| vm::delete(client, &vm_id)).await
        }
    }
}

/// The changes to a VM that was never started, before its first start: tags, data disks, the bootable disk's size,
/// disk aliases, NICs, host devices and virtual NUMA nodes.
async fn prepare(client: Option<&capov_ovirt::Client>, vm_id: &str, action: PrepareAction) -> Executed {
    match action {
        PrepareAction::Tag(names) => {
            on_engine(client, types::MACHINE_CREATED, |client| {
                tags::tag_vm(client, vm_id, &names)
            })
            .await
        }
        PrepareAction::AddDataDisk(plan) => {
            on_engine(client, types::MACHINE_DISK_RESIZED, |client| {
                disks::add_data_disk(client, vm_id, &plan)
            })
            .await
        }
        PrepareAction::ResizeDisk {
            attachment_id,
            size_bytes,
            ..
        } => {
            on_engine(client, types::MACHINE_DISK_RESIZED, |client| {
                disks::resize(client, vm_id, &attachment_id, size_bytes)
            })
            .await
        }
        PrepareAction::RenameDiskAlias { disk_id, new_alias } => {
            on_engine(client, types::MACHINE_DISK_RESIZED, |client| {
                disks::rename_alias(client, &disk_id, &new_alias)
            })
            .await
        }
        PrepareAction::SyncNics(changes) => {
            on_engine(client, types::MACHINE_NETWORK_SET, |client| {
                nics::sync(client, vm_id, changes)
            })
            .await
        }
        PrepareAction::AttachHostDevices { vm_id, names } => {
            on_engine(client, types::MACHINE_PLACEMENT_SET, |client| {
                host_devices::attach(client, &vm_id, &names)
            })
            .await
        }
        PrepareAction::AddNumaNodes { vm_id, nodes } => {
            on_engine(client, types::MACHINE_PLACEMENT_SET, |client| {
                host_devices::add_numa_nodes(client, &vm_id, &nodes)
            })
            .await
        }
    }
}
