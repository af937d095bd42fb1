//! SPEC §2 steps 1–7 for a machine that is not being deleted. Every step that is passed reports its condition
//! True, so the Ready summary sees all of them; the step that stops reports why.

use capov_crds::Severity;
use capov_ovirt::model::VmStatus;

use super::decision::{Action, CreateVmPlan, Decision, Requeue};
use super::observed::{Bootstrap, FailureState, NodeObservation, Observed, ObservedVm, ProviderConnection};
use super::recorded_engine::engine_changed;
use crate::addresses::machine_addresses;
use crate::bootstrap_payload::BootstrapFormat;
use crate::conditions::{ConditionUpdate, FAILURE_ENGINE_CONNECTION_CRITICAL, connected, reasons, types};
use crate::disk_alias::{DiskAliasFact, alias_changes};
use crate::identity::{Ownership, format_provider_id, parse_provider_id};
use crate::nics::NicAssessment;
use crate::placement::choose_placement;

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

const GIB: u64 = 1 << 30;

/// Conditions of the steps passed so far, in order; each early return adds the stopping step's condition.
struct Passed(Vec<ConditionUpdate>);

impl Passed {
    /// Records a step as done.
    fn pass(&mut self, type_: &'static str, reason: &'static str) {
        self.0.push(ConditionUpdate::true_(type_, reason));
    }

    /// Moves the conditions out, for building the stopping decision from behind a `&mut`.
    fn take(&mut self) -> Passed {
        Passed(std::mem::take(&mut self.0))
    }

    fn stop(self, action: Action, current: Option<ConditionUpdate>) -> Decision {
        let mut conditions = self.0;
        conditions.extend(current);
        Decision::new(action, conditions)
    }

    fn wait(self, requeue: Requeue, current: ConditionUpdate) -> Decision {
        self.stop(Action::Wait(requeue), Some(current))
    }
}

pub(super) fn decide(o: &Observed) -> Decision {
    // Step 1: preconditions, no condition.
    if !o.owner_machine_found || !o.cluster_found || !o.cluster_infrastructure_provisioned {
        return Decision::new(Action::Wait(Requeue::OnChange), vec![]);
    }
    if !o.has_finalizer {
        return Decision::new(Action::AddFinalizer, vec![]);
    }
    // SPEC §2.4: a failed machine runs no creation steps until the failure is cleared or the spec changes.
    match o.failure {
        FailureState::Set {
            spec_changed_since: true,
        } => return Decision::new(Action::ClearFailure, vec![]),
        FailureState::Set {
            spec_changed_since: false,
        } => {
            return Decision::new(Action::Wait(Requeue::OnChange), vec![]);
        }
        FailureState::Clear => {}
    }

    // Step 2: CanConnectToOVirt.
    if let ProviderConnection::Failed {
        failure,
        message,
        persisted_for,
    } = &o.connection
    {
        let critical = !o.provisioned && failure.critical_after().is_some_and(|after| *persisted_for >= after);
        let severity = if critical { Severity::Error } else { failure.severity() };
        let condition = ConditionUpdate::false_(types::CAN_CONNECT_TO_OVIRT, failure.reason(), severity, message);
        let action = if critical {
            Action::SetFailure {
                reason: FAILURE_ENGINE_CONNECTION_CRITICAL,
                message: format!("{}: {message}", failure.reason()),
            }
        } else {
            Action::Wait(Requeue::Backoff)
        };
        return Decision::new(action, vec![condition]);
    }
    let mut passed = Passed(vec![]);
    passed.0.push(connected(
        types::CAN_CONNECT_TO_OVIRT,
        o.connection.insecure_transport(),
    ));

    // Step 3: MachineCreated.
    let format = match &o.bootstrap {
        Bootstrap::NotReady => {
            return passed.wait(
                Requeue::OnChange,
                ConditionUpdate::false_(
                    types::MACHINE_CREATED,
                    reasons::WAITING_FOR_BOOTSTRAP_DATA,
                    Severity::Info,
                    "waiting for the Machine's bootstrap data (spec.bootstrap.dataSecretName)",
                ),
            );
        }
        Bootstrap::Unsupported(format) => {
            return passed.wait(
                Requeue::OnChange,
                ConditionUpdate::false_(
                    types::MACHINE_CREATED,
                    reasons::UNSUPPORTED_BOOTSTRAP_FORMAT,
                    Severity::Error,
                    format!("bootstrap data format {format:?} is not supported; use cloud-config or ignition"),
                ),
            );
        }
        Bootstrap::Ready(format) => *format,
    };
    let vm = match find_own_vm(o, format, &mut passed) {
        Ok(vm) => vm,
        Err(decision) => return *decision,
    };
    let mut decision = after_creation(o, vm, format, passed);
    decision.status.vm_status = Some(vm.status.clone());
    decision
}

/// Step 3's lookup rules: by providerID only when it is set (404 → VMNotFound, never recreated); else by name,
/// adopting a VM whose marker names this very object and refusing any other. However it was found, a VM is used
/// only once its marker proves it is this object's (a tenant can write any providerID): Ok = ours and recorded.
fn find_own_vm<'o>(
    o: &'o Observed,
    format: BootstrapFormat,
    passed: &mut Passed,
) -> Result<&'o ObservedVm, Box<Decision>> {
    let created_or_on = |reason, message: String| {
        let type_ = if o.provisioned {
            types::MACHINE_ON
        } else {
            types::MACHINE_CREATED
        };
        ConditionUpdate::false_(type_, reason, Severity::Error, message)
    };
    let decision = match (&o.provider_id, &o.vm) {
        (Some(provider_id), _) if parse_provider_id(provider_id).is_none() => passed.take().wait(
            Requeue::OnChange,
            ConditionUpdate::false_(
                types::MACHINE_CREATED,
                reasons::INVALID_PROVIDER_ID,
                Severity::Error,
                format!("spec.providerID {provider_id:?} is not of the form ovirt://<vm-id>"),
            ),
        ),
        (Some(provider_id), _) if engine_changed(o, provider_id).is_some() => {
            let message = engine_changed(o, provider_id).unwrap_or_default();
            passed
                .take()
                .wait(Requeue::OnChange, created_or_on(reasons::ENGINE_CHANGED, message))
        }
        (Some(provider_id), None) => {
            let message = format!("the VM {provider_id} no longer exists in oVirt; it is not recreated");
            passed
                .take()
                .wait(Requeue::OnChange, created_or_on(reasons::VM_NOT_FOUND, message))
        }
        (Some(provider_id), Some(vm)) => match vm.ownership {
            Ownership::Owned if o.recorded_engine.is_none() => match &o.current_engine {
                Some(engine) => passed.take().stop(Action::RecordEngine(engine.annotation()), None),
                None => return Ok(vm),
            },
            Ownership::Owned => return Ok(vm),
            Ownership::Legacy => passed.take().stop(
                Action::UpgradeMarker {
                    vm_id: vm.id.clone(),
                    description: o.owner.marker(),
                },
                None,
            ),
            Ownership::NotOwned(why) => passed.take().wait(
                Requeue::OnChange,
                created_or_on(
                    reasons::VM_NOT_OWNED,
                    format!(
                        "the VM {provider_id} is not this OVirtMachine's: {}; CAPOV never changes it. Delete this \
                         OVirtMachine (the VM is left alone) and let CAPI create a new one",
                        why.explain()
                    ),
                ),
            ),
        },
        (None, None) => passed
            .take()
            .stop(Action::CreateVm(Box::new(create_plan(o, format))), None),
        // Created by this object, disks still being copied: the create may still fail and the engine then deletes
        // the VM; spec.providerID (write-once) waits until the copy is done.
        (None, Some(vm)) if vm.ownership == Ownership::Owned && vm.status == "image_locked" => {
            passed.take().wait(Requeue::PollVm, image_locked())
        }
        (None, Some(vm)) if vm.ownership == Ownership::Owned => passed
            .take()
            .stop(Action::WriteProviderId(format_provider_id(&vm.id)), None),
        (None, Some(vm)) => passed.take().wait(
            Requeue::Backoff,
            ConditionUpdate::false_(
                types::MACHINE_CREATED,
                reasons::VM_NAME_CONFLICT,
                Severity::Error,
                format!(
                    "a VM named {:?} exists in oVirt but was not created for this OVirtMachine: {}; it is left \
                     untouched: rename or remove it in oVirt",
                    o.vm_name(),
                    match vm.ownership {
                        Ownership::NotOwned(why) => why.explain(),
                        _ =>
                            "it carries a marker of an earlier CAPOV version, which cannot tell this \
                              OVirtMachine from a deleted one of the same name",
                    }
                ),
            ),
        ),
    };
    Err(Box::new(decision))
}

fn create_plan(o: &Observed, bootstrap_format: BootstrapFormat) -> CreateVmPlan {
    let s = &o.settings;
    CreateVmPlan {
        name: o.vm_name(),
        description: o.owner.marker(),
        ovirt_cluster: s.ovirtcluster.clone(),
        template: s.template.clone(),
        vm_type: s.vmtype,
        cpu: s.cpu.clone(),
        memory: s.memory.clone(),
        placement: choose_placement(
            s.diskclone,
            s.storagedomainname.as_deref(),
            o.provider_defaults.diskclone,
            o.provider_defaults.storagedomainname.as_deref(),
            &o.gates,
        ),
        bootstrap_format,
    }
}

/// The VM exists: wait for its disks, prepare it (steps 4–5) while it was never started, start it, then steps 6–7.
fn after_creation(o: &Observed, vm: &ObservedVm, format: BootstrapFormat, mut passed: Passed) -> Decision {
    let started = vm.ever_started || STARTED_STATES.contains(&vm.status.as_str());
    if vm.status == VmStatus::IMAGE_ILLEGAL {
        // The VM exists (it is not "absent"), but oVirt marks its disk images illegal and shows it without a status;
        // CAPOV neither starts nor replaces it.
        let type_ = if started {
            types::MACHINE_ON
        } else {
            types::MACHINE_CREATED
        };
        return passed.wait(
            Requeue::Backoff,
            ConditionUpdate::false_(
                type_,
                reasons::VM_IMAGE_ILLEGAL,
                Severity::Error,
                format!(
                    "oVirt shows the VM {} without a status: its disk images are illegal (e.g. a failed disk copy); \
                     CAPOV does not start or replace it. Repair its disks in oVirt, or delete this OVirtMachine \
                     (the VM is removed with it)",
                    vm.id
                ),
            ),
        );
    }
    if !started && vm.status == "image_locked" {
        return passed.wait(Requeue::PollVm, image_locked());
    }
    passed.pass(types::MACHINE_CREATED, reasons::VM_CREATED);
    if !started {
        if vm.status == "down" {
            return before_first_start(o, vm, format, passed);
        }
        return passed.wait(Requeue::Backoff, not_responding(&vm.status));
    }
    passed.pass(types::MACHINE_DISK_RESIZED, reasons::DISKS_READY);
    passed.pass(types::MACHINE_NETWORK_SET, reasons::NETWORK_SET);
    started_vm(o, vm, passed)
}

/// Steps 3 (tail), 4, 5 and the start of 6, for a VM that is down and was never started.
fn before_first_start(o: &Observed, vm: &ObservedVm, format: BootstrapFormat, mut passed: Passed) -> Decision {
    if o.system_disks.is_none() {
        let ids = vm.disks.iter().map(|d| d.disk_id.clone()).collect();
        return passed.stop(Action::RecordSystemDisks(ids), None);
    }
    if let Err(decision) = disk_step(o, vm, &mut passed) {
        return *decision;
    }
    match &o.nics {
        NicAssessment::InSync => {
            passed.pass(types::MACHINE_NETWORK_SET, reasons::NETWORK_SET);
        }
        NicAssessment::Changes(changes) => return passed.stop(Action::SyncNics(changes.clone()), None),
        failed => {
            let (reason, message) = failed.failure().unwrap_or((reasons::UNSPECIFIED, String::new()));
            return passed.wait(
                Requeue::Backoff,
                ConditionUpdate::false_(types::MACHINE_NETWORK_SET, reason, Severity::Error, message),
            );
        }
    }
    // The engine starts a VM whose OS type does not take the format all the same, and the guest gets nothing.
    if let Err(refusal) = crate::bootstrap_payload::check_vm_fits(format, &o.vm_name(), vm.os_type.as_deref()) {
        return passed.wait(
            Requeue::Backoff,
            ConditionUpdate::false_(types::MACHINE_ON, refusal.reason, Severity::Error, refusal.message),
        );
    }
    passed.stop(
        Action::StartVm {
            use_ignition: format == BootstrapFormat::Ignition,
        },
        Some(powering_up()),
    )
}

/// Step 4: grow the bootable disk, never shrink it, then rename aliases per the gates. Ok = step done.
fn disk_step(o: &Observed, vm: &ObservedVm, passed: &mut Passed) -> Result<(), Box<Decision>> {
    let false_ = |reason, severity, message: String| {
        ConditionUpdate::false_(types::MACHINE_DISK_RESIZED, reason, severity, message)
    };
    if let Some(gb) = o.settings.osdisksizegb {
        let Some(target) = u64::try_from(gb)
            .ok()
            .filter(|gb| *gb >= 1)
            .and_then(|gb| gb.checked_mul(GIB))
        else {
            let message = format!("spec.osdisksizegb {gb} is not a valid size in GiB");
            return Err(Box::new(passed.take().wait(
                Requeue::OnChange,
                false_(reasons::INVALID_DISK_SIZE, Severity::Error, message),
            )));
        };
        let Some(boot) = vm.disks.iter().find(|d| d.bootable) else {
            let message = "the VM has no bootable disk to resize".to_string();
            return Err(Box::new(passed.take().wait(
                Requeue::OnChange,
                false_(reasons::NO_BOOTABLE_DISK, Severity::Error, message),
            )));
        };
        if boot.status != "ok" {
            let message = format!("waiting for the bootable disk (status {})", boot.status);
            return Err(Box::new(passed.take().wait(
                Requeue::PollVm,
                false_(reasons::WAITING_FOR_DISK_RESIZE, Severity::Info, message),
            )));
        }
        if target < boot.provisioned_size {
            let message = format!(
                "spec.osdisksizegb is {gb} GiB but the bootable disk already has {} bytes ({:.1} GiB); disks are \
                 never shrunk: set osdisksizegb to at least the template disk's size",
                boot.provisioned_size,
                boot.provisioned_size as f64 / GIB as f64
            );
            return Err(Box::new(passed.take().wait(
                Requeue::OnChange,
                false_(reasons::DISK_SHRINK_NOT_ALLOWED, Severity::Error, message),
            )));
        }
        if target > boot.provisioned_size {
            let message = format!("growing the bootable disk to {gb} GiB");
            return Err(Box::new(passed.take().stop(
                Action::ResizeDisk {
                    attachment_id: boot.attachment_id.clone(),
                    disk_id: boot.disk_id.clone(),
                    size_bytes: target,
                },
                Some(false_(reasons::WAITING_FOR_DISK_RESIZE, Severity::Info, message)),
            )));
        }
    }
    let disks: Vec<DiskAliasFact> = vm
        .disks
        .iter()
        .map(|d| DiskAliasFact {
            disk_id: d.disk_id.clone(),
            alias: d.alias.clone(),
            bootable: d.bootable,
        })
        .collect();
    if let Some(change) = alias_changes(&o.vm_name(), &disks, &o.gates).into_iter().next() {
        return Err(Box::new(passed.take().stop(
            Action::RenameDiskAlias {
                disk_id: change.disk_id,
                new_alias: change.new_alias,
            },
            None,
        )));
    }
    passed.pass(types::MACHINE_DISK_RESIZED, reasons::DISKS_READY);
    Ok(())
}

fn image_locked() -> ConditionUpdate {
    ConditionUpdate::false_(
        types::MACHINE_CREATED,
        reasons::VM_IMAGE_LOCKED,
        Severity::Info,
        "waiting for oVirt to create the VM's disks",
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

/// Steps 6 and 7 for a VM that has been started.
fn started_vm(o: &Observed, vm: &ObservedVm, mut passed: Passed) -> Decision {
    let info = |reason, message: String| ConditionUpdate::false_(types::MACHINE_ON, reason, Severity::Info, message);
    match vm.status.as_str() {
        "up" | "migrating" => {}
        "wait_for_launch" | "powering_up" => return passed.wait(Requeue::PollVm, powering_up()),
        "down" => {
            return passed.wait(
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
            return passed.wait(
                Requeue::PollVm,
                info(reasons::VM_LOCKED, "the VM is locked in oVirt".into()),
            );
        }
        "powering_down" | "reboot_in_progress" | "saving_state" | "restoring_state" => {
            let message = format!("the VM is {} in oVirt", vm.status);
            return passed.wait(Requeue::PollVm, info(reasons::VM_TRANSITIONING, message));
        }
        other => return passed.wait(Requeue::Backoff, not_responding(other)),
    }
    passed.pass(types::MACHINE_ON, reasons::VM_UP);
    let addresses = machine_addresses(
        &o.vm_name(),
        &vm.nics,
        &vm.reported_devices,
        o.control_plane_host.as_deref(),
    );
    let has_ip = addresses.iter().any(|a| a.type_ == crate::addresses::INTERNAL_IP);
    let mut passed = passed;
    if !has_ip && let Some(on) = passed.0.iter_mut().rev().find(|c| c.type_ == types::MACHINE_ON) {
        // Still True (the VM is up, SPEC step 6), with what keeps the addresses empty and how to fix it.
        on.message = no_address_message(vm.reported_devices.len());
    }
    let mut decision = node_step(o, vm, passed, has_ip);
    decision.status.mark_provisioned = true;
    decision.status.addresses = Some(addresses);
    decision
}

/// Why an up VM has no InternalIP. Without a guest agent the engine learns nothing about the guest's interfaces;
/// with one, only global-scope IPs on devices whose MAC is one of the VM's NICs count (crate::addresses).
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

/// Step 7: K8sProviderIDSetup.
fn node_step(o: &Observed, vm: &ObservedVm, passed: Passed, has_ip: bool) -> Decision {
    let expected = format_provider_id(&vm.id);
    let setup = |reason, severity, message: String| {
        ConditionUpdate::false_(types::K8S_PROVIDER_ID_SETUP, reason, severity, message)
    };
    match &o.node {
        NodeObservation::NotRead => passed.stop(Action::ReadNode, None),
        NodeObservation::Unreachable { message } => passed.wait(
            Requeue::Backoff,
            setup(
                reasons::WORKLOAD_CLUSTER_UNREACHABLE,
                Severity::Warning,
                message.clone(),
            ),
        ),
        // Secrets in tenant namespaces are not watched: a fixed kubeconfig is seen at the next retry.
        NodeObservation::Rejected { message } => passed.wait(
            Requeue::Backoff,
            setup(reasons::WORKLOAD_KUBECONFIG_REJECTED, Severity::Error, message.clone()),
        ),
        NodeObservation::NotFound => passed.wait(
            Requeue::Backoff,
            setup(
                reasons::WAITING_FOR_NODE,
                Severity::Info,
                if has_ip {
                    format!("waiting for the Node of VM {:?}", o.vm_name())
                } else {
                    format!(
                        "waiting for the Node of VM {:?} (oVirt reports no IP address of the VM: see MachineOn)",
                        o.vm_name()
                    )
                },
            ),
        ),
        NodeObservation::Found { name, provider_id } => match provider_id.as_deref().map(str::trim) {
            None | Some("") => passed.stop(
                Action::SetNodeProviderId {
                    node_name: name.clone(),
                    provider_id: expected,
                },
                None,
            ),
            Some(actual) if actual == expected => {
                let requeue = if has_ip { Requeue::Steady } else { Requeue::Backoff };
                let mut passed = passed;
                passed.pass(types::K8S_PROVIDER_ID_SETUP, reasons::PROVIDER_ID_SET);
                passed.stop(Action::Done(requeue), None)
            }
            Some(actual) => passed.wait(
                Requeue::OnChange,
                setup(
                    reasons::PROVIDER_ID_MISMATCH,
                    Severity::Error,
                    format!("Node {name:?} has spec.providerID {actual:?}, expected {expected:?}"),
                ),
            ),
        },
    }
}
