//! SPEC §2 step 3's tail (`MachineCreated`), before the first start: the VM carries the tags that show engine
//! administrators what it belongs to ([`crate::naming::vm_tags`]), when the OVirtProvider's spec.vmtags is true.

use super::action::{Action, PrepareAction};
use super::decision::Decision;
use super::observed::{Observed, ObservedVm};
use super::passed::Passed;
use crate::naming::vm_tags::{missing_tags, wanted_tags};

/// Ok = tagging is off, or the VM carries every tag (or its tags were not read); Err = the decision that assigns
/// the missing ones.
pub(super) fn check(o: &Observed, vm: &ObservedVm, passed: &mut Passed) -> Result<(), Box<Decision>> {
    if o.provider_defaults.vmtags != Some(true) {
        return Ok(());
    }
    let Some(assigned) = &vm.tags else {
        return Ok(());
    };
    let missing = missing_tags(&wanted_tags(&o.namespace, o.cluster_name.as_deref()), assigned);
    if missing.is_empty() {
        return Ok(());
    }
    Err(Box::new(
        passed.take().stop(Action::Prepare(PrepareAction::Tag(missing)), None),
    ))
}
