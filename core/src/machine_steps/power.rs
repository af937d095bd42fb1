//! SPEC §2 step 6, `MachineOn`: a prepared VM is started with the guest initialization its bootstrap format needs;
//! once up (or migrating), it is provisioned and its addresses are reported and kept current.

use super::action::{Action, Requeue, VmAction};
use capov_crds::{MachineAddress, Severity};

use super::decision::Decision;
use super::observed::{Observed, ObservedVm};
use super::passed::Passed;
use crate::conditions::{ConditionUpdate, reasons, types};
use crate::network::addresses::machine_addresses;
use crate::network::guest_network::{GuestNetwork, with_static_addresses};
use crate::vm::bootstrap_payload::BootstrapFormat;

/// VM states that only a started VM can be in.
const STARTED_STATES: &[&str] = &[
    "wait_for_launch",
    "powering_up",
    "up",
    "migrating",
    "reboot_in_progress",
    "powering_down",
    "paused",
    "suspended",
    "saving_state",
    "restoring_state",
    "not_responding",
];

/// Whether the VM has been started: steps 4 and 5 are then passed for good and never touch it again.
pub(super) fn started(vm: &ObservedVm) -> bool {
    vm.ever_started || STARTED_STATES.contains(&vm.status.as_str())
}

/// A VM that was never started is prepared and started only while it is `down`; in any other state it waits,
/// without claiming steps 4 and 5.
pub(super) fn down_before_first_start(vm: &ObservedVm, passed: &mut Passed) -> Result<(), Box<Decision>> {
    if vm.status == "down" {
        return Ok(());
    }
    Err(Box::new(
        passed.take().wait(Requeue::Backoff, not_responding(&vm.status)),
    ))
}

/// The first start of a prepared VM, unless its OS type would not take the bootstrap format.
pub(super) fn first_start(o: &Observed, vm: &ObservedVm, format: BootstrapFormat, passed: Passed) -> Decision {
    // The engine starts a VM whose OS type does not take the format all the same, and the guest gets nothing.
    if let Err(refusal) = crate::vm::bootstrap_payload::check_vm_fits(format, &o.vm_name(), vm.os_type.as_deref()) {
        return passed.wait(
            Requeue::Backoff,
            ConditionUpdate::false_(types::MACHINE_ON, refusal.reason, Severity::Error, refusal.message),
        );
    }
    passed.stop(
        Action::Vm(VmAction::Start {
            use_ignition: format == BootstrapFormat::Ignition,
        }),
        Some(powering_up()),
    )
}

/// A VM that has been started: Ok = it is up, MachineOn is passed, and these are its addresses (with MachineOn's
/// message saying why there is no InternalIP among them, if there is none). Err = the decision that waits for it.
pub(super) fn running(
    o: &Observed,
    vm: &ObservedVm,
    network: &GuestNetwork,
    passed: &mut Passed,
) -> Result<Vec<MachineAddress>, Box<Decision>> {
    let info = |reason, message: String| ConditionUpdate::false_(types::MACHINE_ON, reason, Severity::Info, message);
    let mut wait = |requeue, condition| Err(Box::new(passed.take().wait(requeue, condition)));
    match vm.status.as_str() {
        "up" | "migrating" => {}
        "wait_for_launch" | "powering_up" => return wait(Requeue::PollVm, powering_up()),
        "down" => {
            return wait(
                Requeue::Backoff,
                ConditionUpdate::false_(
                    types::MACHINE_ON,
                    reasons::VM_DOWN,
                    Severity::Warning,
                    "the VM is down in oVirt; it is not restarted automatically",
                ),
            );
        }
        "image_locked" => {
            return wait(
                Requeue::PollVm,
                info(reasons::VM_LOCKED, "the VM is locked in oVirt".into()),
            );
        }
        "powering_down" | "reboot_in_progress" | "saving_state" | "restoring_state" => {
            let message = format!("the VM is {} in oVirt", vm.status);
            return wait(Requeue::PollVm, info(reasons::VM_TRANSITIONING, message));
        }
        other => return wait(Requeue::Backoff, not_responding(other)),
    }
    passed.pass(types::MACHINE_ON, reasons::VM_UP);
    // Static addresses are the VM's whether or not its guest agent reports them yet.
    let reported = machine_addresses(
        &o.vm_name(),
        &vm.nics,
        &vm.reported_devices,
        o.control_plane_host.as_deref(),
    );
    let addresses = with_static_addresses(reported, network);
    if !has_internal_ip(&addresses)
        && let Some(on) = passed.0.iter_mut().rev().find(|c| c.type_ == types::MACHINE_ON)
    {
        // Still True (the VM is up, SPEC step 6), with what keeps the addresses empty and how to fix it.
        on.message = no_address_message(vm.reported_devices.len());
    }
    Ok(addresses)
}

pub(super) fn has_internal_ip(addresses: &[MachineAddress]) -> bool {
    addresses
        .iter()
        .any(|a| a.type_ == crate::network::addresses::INTERNAL_IP)
}

/// Why an up VM has no InternalIP. Without a guest agent the engine learns nothing about the guest's interfaces;
/// with one, only global-scope IPs on devices whose MAC is one of the VM's NICs count (crate::network::addresses).
fn no_address_message(reported_devices: usize) -> String {
    let why = if reported_devices == 0 {
        "oVirt reports no network devices for it: the guest agent (qemu-guest-agent) is not running in the guest, \
         or has not reported yet"
            .to_string()
    } else {
        format!(
            "none of the {reported_devices} network devices its guest agent reports has a usable address (only \
             global-scope IPs on a device whose MAC is one of the VM's NICs count, not the control-plane endpoint)"
        )
    };
    format!(
        "the VM is up, but {why}; status.addresses holds only the VM name until an address is reported (checked \
         again with backoff, at least every 5 minutes)"
    )
}

fn powering_up() -> ConditionUpdate {
    ConditionUpdate::false_(
        types::MACHINE_ON,
        reasons::VM_POWERING_UP,
        Severity::Info,
        "powering up",
    )
}

fn not_responding(status: &str) -> ConditionUpdate {
    ConditionUpdate::false_(
        types::MACHINE_ON,
        reasons::VM_NOT_RESPONDING,
        Severity::Warning,
        format!("the VM is {status} in oVirt"),
    )
}
