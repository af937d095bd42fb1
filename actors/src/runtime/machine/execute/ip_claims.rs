//! The IPAddressClaims of a machine's static addresses (issue 25): created owned by the OVirtMachine, released when
//! no longer wanted or when the machine goes (`crate::runtime::ip_claim_writes` writes them).

use capov_crds::labels::{CLUSTER_NAME_LABEL, WATCH_FILTER_LABEL};
use kube::{Resource, ResourceExt};

use crate::runtime::ip_claim_writes::{self, ClaimOwner};
use crate::runtime::machine::outcome::{Executed, Failure};
use crate::runtime::machine::state::MachineState;
use capov_core::conditions::{reasons, types};
use capov_core::machine_steps::Requeue;
use capov_core::network::ip_claims::WantedClaim;

/// Creates the claims. The watch of claims wakes the machine when they show up.
pub async fn create(state: &MachineState, claims: &[WantedClaim]) -> Executed {
    let machine = &state.object;
    let Some(owner) = machine.controller_owner_ref(&()) else {
        return failed(types::MACHINE_CREATED, "the OVirtMachine has no name or UID yet".into());
    };
    let owner = ClaimOwner {
        namespace: state.key.namespace_str().to_string(),
        owner,
        cluster: machine.labels().get(CLUSTER_NAME_LABEL).cloned(),
        watch_filter: machine.labels().get(WATCH_FILTER_LABEL).cloned(),
    };
    for claim in claims {
        let request = ip_claim_writes::create(&state.shared.client, &owner, claim);
        if let Err(message) = state.permit.awaiting(request).await {
            return failed(types::MACHINE_CREATED, message);
        }
    }
    Executed::Requeue(Requeue::OnChange)
}

/// Lets the claims go (deleted, CAPOV's finalizer removed).
pub async fn release(state: &MachineState, names: &[String]) -> Executed {
    let type_ = if state.object.metadata.deletion_timestamp.is_some() {
        types::MACHINE_DELETED
    } else {
        types::MACHINE_CREATED
    };
    let namespace = state.key.namespace_str();
    for name in names {
        let request = ip_claim_writes::release(&state.shared.client, namespace, name);
        if let Err(message) = state.permit.awaiting(request).await {
            return failed(type_, message);
        }
    }
    Executed::Continue
}

fn failed(type_: &'static str, message: String) -> Executed {
    Executed::Failed {
        type_,
        failure: Failure {
            reason: reasons::IP_ADDRESS_CLAIM_FAILED,
            severity: capov_crds::Severity::Warning,
            message,
        },
    }
}
