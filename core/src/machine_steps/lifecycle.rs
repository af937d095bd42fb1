//! SPEC §2 steps 1–7 for a machine that is not being deleted, in order, one module per step. Every step that is
//! passed reports its condition True, so the Ready summary sees all of them; the step that stops reports why.
//! A step either passes (Ok, adding its condition to [`Passed`]) or stops the pass with its decision (Err).

use super::decision::Decision;
use super::observed::{Observed, ObservedVm};
use super::passed::Passed;
use super::{
    connection, creation, data_disks, disks, host_devices, network, node, numa_nodes, placement, power, preconditions,
    static_addresses, tags,
};
use crate::conditions::{reasons, types};
use crate::network::guest_network::GuestNetwork;
use crate::vm::bootstrap_payload::BootstrapFormat;

pub(super) fn decide(o: &Observed) -> Decision {
    let (vm, format, network, passed) = match up_to_own_vm(o) {
        Ok(found) => found,
        Err(stop) => return *stop,
    };
    let mut decision = with_own_vm(o, vm, format, &network, passed).unwrap_or_else(|stop| *stop);
    decision.status.vm_status = Some(vm.status.clone());
    decision
}

/// Steps 1, 2 and the lookup of step 3 (static addresses first: they go into the VM's initialization): Ok = the
/// VM that is this object's and recorded, and the guest's network.
fn up_to_own_vm(o: &Observed) -> Result<(&ObservedVm, BootstrapFormat, GuestNetwork, Passed), Box<Decision>> {
    preconditions::check(o)?;
    connection::provider(o)?;
    let mut passed = connection::check(o)?;
    let format = creation::bootstrap_format(o, &mut passed)?;
    let network = static_addresses::check(o, &mut passed)?;
    let vm = creation::find_own_vm(o, format, &network, &mut passed)?;
    Ok((vm, format, network, passed))
}

/// The VM exists: wait for its disks, prepare it (steps 4–5) while it was never started, start it, then steps 6–7.
fn with_own_vm(
    o: &Observed,
    vm: &ObservedVm,
    format: BootstrapFormat,
    network: &GuestNetwork,
    mut passed: Passed,
) -> Result<Decision, Box<Decision>> {
    let started = power::started(vm);
    creation::vm_created(vm, started, &mut passed)?;
    if !started {
        return before_first_start(o, vm, format, passed);
    }
    passed.pass(types::MACHINE_DISK_RESIZED, reasons::DISKS_READY);
    passed.pass(types::MACHINE_NETWORK_SET, reasons::NETWORK_SET);
    placement::report_started(o, &mut passed);
    let addresses = power::running(o, vm, network, &mut passed)?;
    let mut decision = node::decide(o, vm, passed, power::has_internal_ip(&addresses));
    decision.status.mark_provisioned = true;
    decision.status.addresses = Some(addresses);
    Ok(decision)
}

/// Steps 3 (tail), 4, 5 and the start of 6, for a VM that was never started (prepared only while it is down).
fn before_first_start(
    o: &Observed,
    vm: &ObservedVm,
    format: BootstrapFormat,
    mut passed: Passed,
) -> Result<Decision, Box<Decision>> {
    power::down_before_first_start(vm, &mut passed)?;
    tags::check(o, vm, &mut passed)?;
    // Data disks first: the system disks recorded next include them (deletion, SPEC §2.1).
    let data_disks = data_disks::check(o, vm, &mut passed)?;
    creation::record_system_disks(o, vm, &mut passed)?;
    disks::check(o, vm, &mut passed)?;
    network::check(o, &mut passed)?;
    host_devices::check(o, vm, &mut passed)?;
    numa_nodes::check(o, vm, &mut passed)?;
    placement::check(o, vm, &mut passed)?;
    let mut decision = power::first_start(o, vm, format, passed);
    decision.status.data_disks = Some(data_disks);
    Ok(decision)
}
