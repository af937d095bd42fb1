//! The VM itself: creating, starting, stopping and deleting it.

use std::time::Duration;

use capov_ovirt::{Client, StartOptions};

use super::bookkeeping;
use super::create::create_vm;
use crate::runtime::capi;
use crate::runtime::machine::observe::{bootstrap_secret, owner_machine};
use crate::runtime::machine::outcome::{Executed, Failure};
use crate::runtime::machine::state::MachineState;
use capov_core::conditions::reasons;
use capov_core::machine_steps::{CreateVmPlan, CreatedVmRecord, Requeue};
use capov_core::trust::identity::EngineIdentity;

/// Creates the VM with the Machine's bootstrap data; backs off while that cannot be read.
pub async fn create(
    state: &mut MachineState,
    client: &Client,
    plan: &CreateVmPlan,
    engine: Option<&EngineIdentity>,
) -> Result<Executed, Failure> {
    let read_this_pass = state.bootstrap_data.take();
    let data = match owner_machine(state) {
        Some(machine) => match read_this_pass {
            Some(read) if capi::machine_bootstrap_secret(&machine).as_deref() == Some(read.0.as_str()) => Some(read.1),
            _ => match bootstrap_secret(state, &machine).await {
                Ok(found) => found.map(|(data, _)| data),
                Err(failed) if failed.apiserver => return Ok(Executed::RetryApiserver),
                Err(_) => None,
            },
        },
        None => None,
    };
    let Some(data) = data else {
        return Ok(Executed::Requeue(Requeue::Backoff));
    };
    let id = create_vm(state, client, plan, data).await.map_err(create_failure)?;
    // spec.providerID is write-once (CAPI copies it to the Machine), and an accepted create can still vanish: the
    // engine deletes the VM when its disk copy fails. So it is recorded only once the VM has left image_locked; until
    // then the passes find the VM by name and marker, and a VM that vanished is simply created again.
    tracing::info!(object = %state.key, vm = %id, "the engine accepted the VM; waiting for its disks");
    state.created_vm = Some(id.clone());
    // Recorded on the object at once, with the name it got and its engine: from here on the VM is found by its id,
    // whatever the tenant edits meanwhile (a changed name template or cluster label once made a second VM). Should
    // the write fail, the actor still holds the id, and the next pass records it (MachineCreated's RecordCreatedVm).
    let record = CreatedVmRecord {
        vm_id: id,
        vm_name: plan.name.clone(),
        engine: engine.map(EngineIdentity::annotation),
    };
    match bookkeeping::record_created_vm(state, &record).await {
        Executed::Continue => Ok(Executed::Requeue(Requeue::PollVm)),
        retry => Ok(retry),
    }
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

/// Starts the VM with its bootstrap data as Ignition or cloud-init; a VM already running counts as started. No host
/// to run it on is NoSchedulableHost, with the engine's reasons and what to do (`hard_anti_affinity`: the machine's
/// spec.antiaffinity is hard).
pub async fn start(
    client: &Client,
    vm_id: &str,
    use_ignition: bool,
    hard_anti_affinity: bool,
) -> Result<Executed, Failure> {
    let options = StartOptions {
        use_cloud_init: !use_ignition,
        use_ignition,
    };
    match client.start_vm(vm_id, options).await {
        Ok(()) => Ok(Executed::Requeue(Requeue::PollVm)),
        Err(err) if err.is_vm_running() => Ok(Executed::Requeue(Requeue::PollVm)),
        Err(err) if err.is_no_host_to_run() => Err(Failure {
            reason: reasons::NO_SCHEDULABLE_HOST,
            severity: capov_crds::Severity::Warning,
            message: capov_core::placement::engine_refusals::no_host_message(
                err.detail().unwrap_or_default(),
                hard_anti_affinity,
            ),
        }),
        Err(err) => Err(err.into()),
    }
}

/// Asks the guest to shut down before the VM's deletion; the pass after the deadline powers it off if it still
/// runs. A VM not running, or gone, needs no shutdown.
pub async fn shutdown(client: &Client, vm_id: &str, deadline_in: Duration) -> capov_ovirt::Result<Executed> {
    match client.shutdown_vm(vm_id, false).await {
        Ok(()) => Ok(Executed::Requeue(Requeue::PollVmWithin(deadline_in))),
        Err(err) if err.is_vm_not_running() || err.is_not_found() => Ok(Executed::Continue),
        Err(err) => Err(err),
    }
}

/// Powers the VM off before its deletion; a VM not running, or gone, needs no stop.
pub async fn stop_force(client: &Client, vm_id: &str) -> capov_ovirt::Result<Executed> {
    match client.stop_vm(vm_id, true).await {
        Ok(()) => Ok(Executed::Requeue(Requeue::PollVm)),
        Err(err) if err.is_vm_not_running() || err.is_not_found() => Ok(Executed::Continue),
        Err(err) => Err(err),
    }
}

/// Deletes the VM; a VM already gone needs no delete.
pub async fn delete(client: &Client, vm_id: &str) -> capov_ovirt::Result<Executed> {
    match client.remove_vm(vm_id).await {
        Ok(()) => Ok(Executed::Requeue(Requeue::PollVm)),
        Err(err) if err.is_not_found() => Ok(Executed::Continue),
        Err(err) => Err(err),
    }
}
