//! SPEC §2 step 2, `CanConnectToOVirt`: the provider actor holds a working connection. A failure that persists sets
//! failureReason on a machine not yet provisioned (§2.4, [`super::observed::ConnectionFailure::critical_after`]).

use super::action::{Action, BookkeepingAction, Requeue};
use capov_crds::Severity;

use super::decision::Decision;
use super::observed::{Observed, ProviderConnection};
use super::passed::Passed;
use crate::conditions::{ConditionUpdate, FAILURE_ENGINE_CONNECTION_CRITICAL, connected, reasons, types};
use crate::placement::failure_domains::{ProviderChoice, provider_choice};

/// Before step 2, which OVirtProvider the machine uses (issue 39): spec.provider, or first the failure domain's
/// written into spec.provider, or none (NoProvider, until the spec or the domain names one).
pub(super) fn provider(o: &Observed) -> Result<(), Box<Decision>> {
    match provider_choice(&o.settings.provider, &o.failure_domain, o.vm_recorded()) {
        ProviderChoice::Spec => Ok(()),
        ProviderChoice::Pin(provider) => Err(Box::new(Decision::new(
            Action::Bookkeeping(BookkeepingAction::SetProvider(provider)),
            vec![],
        ))),
        // Looked at again with backoff: an OVirtCluster's change (a domain given a provider) wakes no machine.
        ProviderChoice::Missing(message) => Err(Box::new(Decision::new(
            Action::Wait(Requeue::Backoff),
            vec![ConditionUpdate::false_(
                types::CAN_CONNECT_TO_OVIRT,
                reasons::NO_PROVIDER,
                Severity::Error,
                message,
            )],
        ))),
    }
}

/// Whether the machine's provider is spec.provider as it stands: only then does the actor ask it for the
/// connection.
pub fn provider_settled(o: &Observed) -> bool {
    provider_choice(&o.settings.provider, &o.failure_domain, o.vm_recorded()) == ProviderChoice::Spec
}

/// Ok = connected: the passed steps start with CanConnectToOVirt True. Err = the decision that waits or fails.
pub(super) fn check(o: &Observed) -> Result<Passed, Box<Decision>> {
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
            Action::Bookkeeping(BookkeepingAction::SetFailure {
                reason: FAILURE_ENGINE_CONNECTION_CRITICAL,
                message: format!("{}: {message}", failure.reason()),
            })
        } else {
            Action::Wait(Requeue::Backoff)
        };
        return Err(Box::new(Decision::new(action, vec![condition])));
    }
    Ok(Passed(vec![connected(
        types::CAN_CONNECT_TO_OVIRT,
        o.connection.insecure_transport(),
    )]))
}
