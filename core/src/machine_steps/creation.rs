//! SPEC §2 step 3, `MachineCreated`: bootstrap data ready, then the VM that is this object's, found or created, with
//! its disks copied; when it first reaches `down`, its system disks are recorded before the first start.

use super::action::{Action, BookkeepingAction, CreateVmPlan, CreatedVmRecord, Requeue, VmAction};
use capov_crds::Severity;
use capov_ovirt_model::model::VmStatus;

use super::creation_targets::create_or_look_up;
use super::decision::Decision;
use super::observed::{Bootstrap, Observed, ObservedVm};
use super::passed::Passed;
use super::recorded_engine::engine_changed;
use crate::conditions::{ConditionUpdate, reasons, types};
use crate::network::guest_network::GuestNetwork;
use crate::placement::choose_placement;
use crate::placement::failure_domains::FailureDomainChoice;
use crate::trust::identity::{NotOwned, Ownership, format_provider_id, parse_provider_id};
use crate::trust::tenancy::placement_refusal;
use crate::vm::bootstrap_payload::BootstrapFormat;

/// Ok = the format of the Machine's bootstrap data; Err = the decision that waits for usable data.
pub(super) fn bootstrap_format(o: &Observed, passed: &mut Passed) -> Result<BootstrapFormat, Box<Decision>> {
    match &o.bootstrap {
        Bootstrap::NotReady => Err(Box::new(passed.take().wait(
            Requeue::OnChange,
            ConditionUpdate::false_(
                types::MACHINE_CREATED,
                reasons::WAITING_FOR_BOOTSTRAP_DATA,
                Severity::Info,
                "waiting for the Machine's bootstrap data (spec.bootstrap.dataSecretName)",
            ),
        ))),
        Bootstrap::Unsupported(format) => Err(Box::new(passed.take().wait(
            Requeue::OnChange,
            ConditionUpdate::false_(
                types::MACHINE_CREATED,
                reasons::UNSUPPORTED_BOOTSTRAP_FORMAT,
                Severity::Error,
                format!("bootstrap data format {format:?} is not supported; use cloud-config or ignition"),
            ),
        ))),
        Bootstrap::Ready(format) => Ok(*format),
    }
}

/// Step 3's lookup rules: by providerID only when it is set (404 → VMNotFound, never recreated); else by name,
/// adopting a VM whose marker names this very object and refusing any other. However it was found, a VM is used
/// only once its marker proves it is this object's (a tenant can write any providerID): Ok = ours and recorded.
pub(super) fn find_own_vm<'o>(
    o: &'o Observed,
    format: BootstrapFormat,
    network: &GuestNetwork,
    passed: &mut Passed,
) -> Result<&'o ObservedVm, Box<Decision>> {
    let decision = match (&o.provider_id, &o.vm) {
        (Some(provider_id), vm) => return by_provider_id(o, provider_id, vm.as_ref(), passed),
        // The VM CAPOV created was recorded on another engine (or user) than the provider reaches now (spec.provider
        // was changed while its disks were copied): neither looked up there nor created a second time.
        (None, _) if o.created_vm.as_deref().and_then(|id| engine_changed(o, id)).is_some() => {
            let message = o
                .created_vm
                .as_deref()
                .and_then(|id| engine_changed(o, id))
                .unwrap_or_default();
            passed
                .take()
                .wait(Requeue::OnChange, created_or_on(o, reasons::ENGINE_CHANGED, message))
        }
        (None, None) => to_create(o, format, network, passed),
        (None, Some(vm)) => by_name(o, vm, passed),
    };
    Err(Box::new(decision))
}

/// The VM of spec.providerID: Ok = it is this object's and recorded.
fn by_provider_id<'o>(
    o: &'o Observed,
    provider_id: &str,
    vm: Option<&'o ObservedVm>,
    passed: &mut Passed,
) -> Result<&'o ObservedVm, Box<Decision>> {
    let decision = match vm {
        _ if parse_provider_id(provider_id).is_none() => passed.take().wait(
            Requeue::OnChange,
            ConditionUpdate::false_(
                types::MACHINE_CREATED,
                reasons::INVALID_PROVIDER_ID,
                Severity::Error,
                super::deletion::invalid_provider_id_message(provider_id),
            ),
        ),
        _ if engine_changed(o, provider_id).is_some() => {
            let message = engine_changed(o, provider_id).unwrap_or_default();
            passed
                .take()
                .wait(Requeue::OnChange, created_or_on(o, reasons::ENGINE_CHANGED, message))
        }
        None => {
            let message = format!("the VM {provider_id} no longer exists in oVirt; it is not recreated");
            passed
                .take()
                .wait(Requeue::OnChange, created_or_on(o, reasons::VM_NOT_FOUND, message))
        }
        Some(vm) => match vm.ownership {
            Ownership::Owned if o.recorded_engine.is_none() => match &o.current_engine {
                Some(engine) => passed.take().stop(
                    Action::Bookkeeping(BookkeepingAction::RecordEngine(engine.annotation())),
                    None,
                ),
                None => return Ok(vm),
            },
            Ownership::Owned => return Ok(vm),
            // With a providerID set, the VM was found by its id: a legacy or moved marker proves it is this
            // object's, and is rewritten with this UID before anything else (the owner-uid annotation then follows).
            Ownership::Legacy | Ownership::Moved => passed.take().stop(
                Action::Vm(VmAction::UpgradeMarker {
                    vm_id: vm.id.clone(),
                    description: o.owner.marker(),
                }),
                None,
            ),
            Ownership::NotOwned(why) => passed.take().wait(
                Requeue::OnChange,
                created_or_on(o, reasons::VM_NOT_OWNED, not_owned_message(provider_id, why)),
            ),
        },
    };
    Err(Box::new(decision))
}

/// No providerID and no VM of the name: create one, unless the failure domain or the tenant's placement forbids it.
fn to_create(o: &Observed, format: BootstrapFormat, network: &GuestNetwork, passed: &mut Passed) -> Decision {
    match &o.failure_domain {
        FailureDomainChoice::Unknown { name, known } => passed.take().wait(
            Requeue::OnChange,
            ConditionUpdate::false_(
                types::MACHINE_CREATED,
                reasons::FAILURE_DOMAIN_NOT_FOUND,
                Severity::Error,
                format!(
                    "the Machine's spec.failureDomain {name:?} is not among the OVirtCluster's \
                     spec.failureDomains ({known:?}): add it there, or place the Machine in one of those"
                ),
            ),
        ),
        choice => match placement_refusal(
            o.tenant_placement.as_ref(),
            &o.settings.provider,
            choice,
            &o.settings.ovirtcluster,
        ) {
            Some(refusal) => passed.take().wait(
                Requeue::OnChange,
                ConditionUpdate::false_(
                    types::MACHINE_CREATED,
                    reasons::PLACEMENT_NOT_ALLOWED,
                    Severity::Error,
                    format!("{refusal}; no VM is created"),
                ),
            ),
            None => create_or_look_up(o, create_plan(o, format, network.clone()), passed),
        },
    }
}

/// No providerID, a VM of the machine's name: recorded and adopted when it is this object's, refused otherwise.
fn by_name(o: &Observed, vm: &ObservedVm, passed: &mut Passed) -> Decision {
    match vm {
        // Created by this object, disks still being copied: the create may still fail and the engine then deletes
        // the VM; spec.providerID (write-once) waits until the copy is done. The VM is recorded meanwhile, so that a
        // deletion while the machine's access is revoked does not release it with its VM still there.
        // The record also freezes what the VM's identity depends on: the name it was created under and the engine,
        // so that later edits of the spec or labels neither hide it nor make a second one.
        _ if vm.ownership == Ownership::Owned
            && vm.status == "image_locked"
            && (o.created_vm.as_deref() != Some(vm.id.as_str())
                || o.recorded_vm_name.is_none()
                || (o.recorded_engine.is_none() && o.current_engine.is_some())) =>
        {
            passed.take().stop(
                Action::Bookkeeping(BookkeepingAction::RecordCreatedVm(Box::new(CreatedVmRecord {
                    vm_id: vm.id.clone(),
                    vm_name: o.vm_name(),
                    engine: o.current_engine.as_ref().map(|engine| engine.annotation()),
                }))),
                None,
            )
        }
        _ if vm.ownership == Ownership::Owned && vm.status == "image_locked" => {
            passed.take().wait(Requeue::PollVm, image_locked())
        }
        _ if vm.ownership == Ownership::Owned => passed.take().stop(
            Action::Bookkeeping(BookkeepingAction::WriteProviderId {
                provider_id: format_provider_id(&vm.id),
                system_disks: system_disks_with_provider_id(o, vm),
            }),
            None,
        ),
        _ => passed.take().wait(
            Requeue::Backoff,
            ConditionUpdate::false_(
                types::MACHINE_CREATED,
                reasons::VM_NAME_CONFLICT,
                Severity::Error,
                format!(
                    "a VM named {:?} exists in oVirt but was not created for this OVirtMachine: {}; it is left \
                     untouched: rename or remove it in oVirt, or give the machines other VM names with \
                     spec.vmnametemplate (e.g. {{namespace}}-{{name}} when machines of several namespaces share \
                     the engine)",
                    o.vm_name(),
                    vm.ownership.unproven_by_name()
                ),
            ),
        ),
    }
}

/// The condition a lookup failure is reported on: MachineOn once the machine was provisioned, else MachineCreated.
fn created_or_on(o: &Observed, reason: &'static str, message: String) -> ConditionUpdate {
    let type_ = if o.provisioned {
        types::MACHINE_ON
    } else {
        types::MACHINE_CREATED
    };
    ConditionUpdate::false_(type_, reason, Severity::Error, message)
}

/// VMNotOwned: what the marker says and what to do. A VM of another management cluster may be this machine's own
/// after a `clusterctl move` onto a cluster whose OVirtProvider of that name already existed (clusterctl keeps the
/// existing one): deleting the machine would then leave the VM behind, so the fix comes first.
fn not_owned_message(provider_id: &str, why: NotOwned) -> String {
    let what_to_do = match why {
        NotOwned::OtherManagementCluster => {
            "If this machine came here with clusterctl move, a platform admin adds the id of the management cluster \
             it came from to the OVirtProvider's annotation capov.infrastructure.cluster.x-k8s.io/management-cluster \
             (README, \"clusterctl move\"); else delete this OVirtMachine (the VM is left alone) and let CAPI create \
             a new one"
        }
        _ => "Delete this OVirtMachine (the VM is left alone) and let CAPI create a new one",
    };
    format!(
        "the VM {provider_id} is not this OVirtMachine's: {}; CAPOV never changes it. {what_to_do}",
        why.explain()
    )
}

fn create_plan(o: &Observed, bootstrap_format: BootstrapFormat, network: GuestNetwork) -> CreateVmPlan {
    let s = &o.settings;
    CreateVmPlan {
        name: o.vm_name(),
        description: o.owner.marker(),
        ovirt_cluster: o.failure_domain.ovirt_cluster(&s.ovirtcluster).to_string(),
        ovirt_cluster_domain: o.failure_domain.ovirt_cluster_domain().map(String::from),
        template: s.template.clone(),
        template_fix: crate::placement::failure_domains::template_fix(&o.failure_domain, &s.provider),
        storage_domain_fix: crate::placement::failure_domains::storage_domain_fix(&o.failure_domain, &s.provider),
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
        network,
        high_availability: s.highavailability.clone(),
        cpu_tuning: s.cputuning.clone(),
        hugepages_kib: s.hugepageskib,
        vgpu: s.vgpu.clone(),
        template_version: s.templateversion.clone(),
        instance_type: s.instancetype.clone(),
        host_devices: crate::placement::host_devices::distinct(&s.hostdevices),
        numa: s.numa.clone(),
        targets: Default::default(),
    }
}

/// The VM is this object's: step 3 is passed once oVirt has created its disks. `started`: the VM has been started
/// ([`super::power::started`]), so what is wrong with it now is reported on MachineOn.
pub(super) fn vm_created(vm: &ObservedVm, started: bool, passed: &mut Passed) -> Result<(), Box<Decision>> {
    if vm.status == VmStatus::IMAGE_ILLEGAL {
        // The VM exists (it is not "absent"), but oVirt marks its disk images illegal and shows it without a status;
        // CAPOV neither starts nor replaces it.
        let type_ = if started {
            types::MACHINE_ON
        } else {
            types::MACHINE_CREATED
        };
        return Err(Box::new(passed.take().wait(
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
        )));
    }
    if !started && vm.status == "image_locked" {
        return Err(Box::new(passed.take().wait(Requeue::PollVm, image_locked())));
    }
    passed.pass(types::MACHINE_CREATED, reasons::VM_CREATED);
    Ok(())
}

/// The tail of step 3 for a VM that is down and was never started: its disks are the ones it got from the template
/// and its data disks, recorded in the system-disks annotation before it first starts (deletion, SPEC §2.1, counts
/// on them). Nothing else can be attached to a VM that never ran, so a recorded list that lacks one of its disks
/// (data disks added after an earlier CAPOV recorded the list) is recorded again.
pub(super) fn record_system_disks(o: &Observed, vm: &ObservedVm, passed: &mut Passed) -> Result<(), Box<Decision>> {
    let complete = o
        .system_disks
        .as_ref()
        .is_some_and(|recorded| vm.disks.iter().all(|d| recorded.contains(&d.disk_id)));
    if !complete {
        let ids = vm.disks.iter().map(|d| d.disk_id.clone()).collect();
        return Err(Box::new(
            passed
                .take()
                .stop(Action::Bookkeeping(BookkeepingAction::RecordSystemDisks(ids)), None),
        ));
    }
    Ok(())
}

/// The system disks to record in the same write as spec.providerID, saving the machine a write of its own: a VM that
/// never started, of a machine without data disks, has every disk the record is to hold (data disks are created
/// after spec.providerID, and the record must include them). None: [`record_system_disks`] records them later.
fn system_disks_with_provider_id(o: &Observed, vm: &ObservedVm) -> Option<Vec<String>> {
    let complete = o.settings.datadisks.is_empty() && !super::power::started(vm) && !vm.disks.is_empty();
    (complete && o.system_disks.is_none()).then(|| vm.disks.iter().map(|d| d.disk_id.clone()).collect())
}

fn image_locked() -> ConditionUpdate {
    ConditionUpdate::false_(
        types::MACHINE_CREATED,
        reasons::VM_IMAGE_LOCKED,
        Severity::Info,
        "waiting for oVirt to create the VM's disks",
    )
}
