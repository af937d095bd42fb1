//! SPEC §2 step 5, `MachineNetworkSet`, only while the VM was never started: its NICs are made to match spec.nics
//! ([`crate::network::nics::assess_nics`] compares them; they are read only when a decision would start the VM).

use super::action::{Action, PrepareAction, Requeue};
use capov_crds::Severity;

use super::decision::Decision;
use super::fact::Fact;
use super::observed::Observed;
use super::passed::Passed;
use crate::conditions::{ConditionUpdate, reasons, types};
use crate::network::nics::NicAssessment;
use crate::placement::failure_domains::vnic_profile_fix;

/// Ok = the NICs match spec.nics; Err = the decision that syncs them or reports why they cannot be.
pub(super) fn check(o: &Observed, passed: &mut Passed) -> Result<(), Box<Decision>> {
    let Fact::Read(nics) = &o.nics else {
        // Not read: they are read before the first start ([`super::ActionClass::reads_first`]), and this step is
        // decided again with them.
        passed.pass(types::MACHINE_NETWORK_SET, reasons::NETWORK_SET);
        return Ok(());
    };
    match nics {
        NicAssessment::InSync => {
            passed.pass(types::MACHINE_NETWORK_SET, reasons::NETWORK_SET);
            Ok(())
        }
        NicAssessment::Changes(changes) => Err(Box::new(
            passed
                .take()
                .stop(Action::Prepare(PrepareAction::SyncNics(changes.clone())), None),
        )),
        failed => {
            let (reason, mut message) = failed.failure().unwrap_or((reasons::UNSPECIFIED, String::new()));
            if let NicAssessment::ProfileNotFound { profile } = failed
                && let Some(fix) = vnic_profile_fix(&o.failure_domain, &o.settings.provider, profile)
            {
                message = format!("{message}: fix {fix}");
            }
            Err(Box::new(passed.take().wait(
                Requeue::Backoff,
                ConditionUpdate::false_(types::MACHINE_NETWORK_SET, reason, Severity::Error, message),
            )))
        }
    }
}
