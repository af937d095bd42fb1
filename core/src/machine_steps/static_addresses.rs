//! Static addresses (issue 25), part of step 3 `MachineCreated`: a machine whose NICs take addresses from IPAM pools
//! creates its IPAddressClaims and waits for their addresses before its VM is created, since the addresses go into
//! the VM's initialization ([`crate::network::guest_network`]). The claims' rules are [`crate::network::ip_claims`]'s.

use super::action::{Action, BookkeepingAction, Requeue};
use capov_crds::Severity;

use super::decision::Decision;
use super::observed::Observed;
use super::passed::Passed;
use crate::conditions::{ConditionUpdate, reasons, types};
use crate::network::guest_network::{self, GuestNetwork};
use crate::network::ip_claims::{self, ClaimsAssessment};

/// Ok = what the guest is told about its network (nothing without pools and DNS settings); Err = the decision that
/// creates or releases claims, or waits for their addresses.
pub(super) fn check(o: &Observed, passed: &mut Passed) -> Result<GuestNetwork, Box<Decision>> {
    let wanted = ip_claims::wanted_claims(&o.name, &o.settings.nics);
    let waiting =
        |severity, reason, message: String| ConditionUpdate::false_(types::MACHINE_CREATED, reason, severity, message);
    let decision = match ip_claims::assess(o.settings.nics.len(), &wanted, &o.ip_claims) {
        ClaimsAssessment::Ready(addresses) => return Ok(guest_network::from_spec(&o.settings, &addresses)),
        ClaimsAssessment::Create(missing) => {
            let names: Vec<&str> = missing.iter().map(|claim| claim.name.as_str()).collect();
            let message = format!("creating IPAddressClaim {}", names.join(", "));
            passed.take().stop(
                Action::Bookkeeping(BookkeepingAction::CreateIpClaims(missing)),
                Some(waiting(Severity::Info, reasons::WAITING_FOR_IP_ADDRESS, message)),
            )
        }
        ClaimsAssessment::Release(names) => {
            let message = format!("releasing IPAddressClaim {} (no longer wanted)", names.join(", "));
            passed.take().stop(
                Action::Bookkeeping(BookkeepingAction::ReleaseIpClaims(names)),
                Some(waiting(Severity::Info, reasons::WAITING_FOR_IP_ADDRESS, message)),
            )
        }
        ClaimsAssessment::Waiting { message, overdue } => {
            // The watches wake the machine when an address comes; one more look after the grace turns the
            // condition into a Warning even if nothing happens.
            let (severity, requeue) = if overdue {
                (Severity::Warning, Requeue::OnChange)
            } else {
                (Severity::Info, Requeue::After(ip_claims::ADDRESS_GRACE))
            };
            passed
                .take()
                .wait(requeue, waiting(severity, reasons::WAITING_FOR_IP_ADDRESS, message))
        }
        ClaimsAssessment::Refused { reason, message } => passed
            .take()
            .wait(Requeue::OnChange, waiting(Severity::Error, reason, message)),
    };
    Err(Box::new(decision))
}

/// During deletion: the claims still to release before the finalizer goes (the VM is gone or left alone by then).
pub(super) fn release_before_finalizer(o: &Observed, decision: Decision) -> Decision {
    if !matches!(
        decision.action,
        Action::Bookkeeping(BookkeepingAction::RemoveFinalizer { .. })
    ) {
        return decision;
    }
    if !o.ip_claims_known {
        // Right after a restart the claims store may still be empty: a finalizer removed now would leave the
        // machine's claims, and their addresses, taken for ever. The store's first list wakes every machine.
        let mut conditions = decision.conditions;
        conditions.push(ConditionUpdate::false_(
            types::MACHINE_DELETED,
            reasons::WAITING_FOR_IP_CLAIMS,
            Severity::Info,
            "waiting for the IPAddressClaims to be listed, so that none of this machine's is left behind",
        ));
        return Decision::new(Action::Wait(Requeue::Backoff), conditions);
    }
    let names = ip_claims::to_release(&o.ip_claims);
    if names.is_empty() {
        return decision;
    }
    let message = format!("releasing IPAddressClaim {}", names.join(", "));
    let mut conditions = decision.conditions;
    conditions.push(ConditionUpdate::false_(
        types::MACHINE_DELETED,
        reasons::RELEASING_IP_ADDRESSES,
        Severity::Info,
        message,
    ));
    Decision::new(
        Action::Bookkeeping(BookkeepingAction::ReleaseIpClaims(names)),
        conditions,
    )
}
