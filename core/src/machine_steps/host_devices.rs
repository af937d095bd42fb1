//! spec.hostdevices before the first start (MachinePlacementSet): the VM, created pinned to the host that has the
//! devices ([`crate::placement::host_devices`]), gets each device the engine does not show on it yet. The engine
//! refuses the add while the VM's disks are being made, so this waits for a down VM like the other preparations.

use capov_crds::Severity;

use super::action::{Action, PrepareAction, Requeue};
use super::decision::Decision;
use super::engine_lookups::{EngineLookup, Lookup};
use super::fact::Fact;
use super::observed::{Observed, ObservedVm, ReadRequest};
use super::passed::Passed;
use crate::conditions::{ConditionUpdate, types};

/// Ok = every device of spec.hostdevices is on the VM (or none is asked for); Err = the read or the add it needs,
/// or why the engine did not say.
pub(super) fn check(o: &Observed, vm: &ObservedVm, passed: &mut Passed) -> Result<(), Box<Decision>> {
    let wanted = crate::placement::host_devices::distinct(&o.settings.hostdevices);
    if wanted.is_empty() {
        return Ok(());
    }
    let lookup = EngineLookup::VmHostDevices { vm_id: vm.id.clone() };
    let attached = read_before_start(&o.vm_host_devices, lookup, "host devices", passed)?;
    let missing: Vec<String> = wanted.iter().filter(|name| !attached.contains(name)).cloned().collect();
    if missing.is_empty() {
        return Ok(());
    }
    let message = format!("adding host devices {} to the VM", missing.join(", "));
    let attach = PrepareAction::AttachHostDevices {
        vm_id: vm.id.clone(),
        names: missing,
    };
    Err(Box::new(passed.take().stop(
        Action::Prepare(attach),
        Some(ConditionUpdate::false_(
            types::MACHINE_PLACEMENT_SET,
            crate::conditions::reasons::ATTACHING_HOST_DEVICES,
            Severity::Info,
            message,
        )),
    )))
}

/// A fact about the VM a preparation needs (its host devices, its NUMA nodes): the fact once read; else the read
/// that fills it, or, when the engine did not answer, MachinePlacementSet saying so and a backoff.
pub(super) fn read_before_start<'o, T>(
    fact: &'o Fact<Lookup<T>>,
    lookup: EngineLookup,
    what: &str,
    passed: &mut Passed,
) -> Result<&'o T, Box<Decision>> {
    match fact {
        Fact::NotRead => Err(Box::new(
            passed.take().stop(Action::Read(ReadRequest::Lookup(lookup)), None),
        )),
        Fact::Read(Err(failure)) => Err(Box::new(passed.take().wait(
            Requeue::Backoff,
            ConditionUpdate::false_(
                types::MACHINE_PLACEMENT_SET,
                failure.reason,
                failure.severity,
                format!("cannot read the VM's {what}: {}", failure.message),
            ),
        ))),
        Fact::Read(Ok(found)) => Ok(found),
    }
}
