//! Whether the VM of spec.providerID lives on the engine the provider now reaches. Both the creation step (SPEC §2
//! step 3) and deletion (§2.1) stop when it does not, since "not found" there would not mean "gone".

use capov_crds::labels::ENGINE_ANNOTATION;

use super::observed::Observed;

/// A message when the VM of spec.providerID was recorded on another engine (or with another engine user) than the
/// provider's connection now reaches: there, "not found" would not mean "gone".
pub(super) fn engine_changed(o: &Observed, provider_id: &str) -> Option<String> {
    let (recorded, current) = (o.recorded_engine.as_deref()?, o.current_engine.as_ref()?);
    if current.matches_annotation(recorded) {
        return None;
    }
    Some(format!(
        "the VM {provider_id} was created as {recorded}, but OVirtProvider {:?} now connects as {}; CAPOV neither \
         changes nor forgets a VM it may not see. Point the OVirtProvider back to that engine and user; if it is the \
         same engine under a new address or a user that sees the VM, set the annotation {ENGINE_ANNOTATION} of this \
         OVirtMachine to {:?}",
        o.settings.provider,
        current.annotation(),
        current.annotation(),
    ))
}
