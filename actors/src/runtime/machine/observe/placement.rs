//! Where a machine belongs (issue #25): its failure domain (the Machine's spec.failureDomain among its OVirtCluster's
//! spec.failureDomains, read from the store) and the affinity groups its VM belongs in (from the labels CAPI puts on
//! the Machine, spec.antiaffinity and the failure domain). Nothing is read from the engine here.

use std::collections::BTreeMap;

use capov_crds::labels::CLUSTER_NAME_LABEL;
use kube::ResourceExt;
use kube::runtime::reflector::ObjectRef;

use crate::runtime::capi;
use crate::runtime::machine::state::MachineState;
use capov_core::placement::affinity_groups::{GroupOwner, WantedGroup, purpose_of, wanted_groups};
use capov_core::placement::failure_domains::{FailureDomainChoice, resolve};

pub fn of_machine(
    state: &MachineState,
    machine: Option<&capi::Machine>,
    cluster: Option<&capi::Cluster>,
) -> (FailureDomainChoice, GroupOwner, Vec<WantedGroup>) {
    let namespace = state.key.namespace_str().to_string();
    let cluster_name = state
        .object
        .labels()
        .get(CLUSTER_NAME_LABEL)
        .cloned()
        .or_else(|| machine.and_then(capi::machine_cluster_name))
        .unwrap_or_default();
    // The Cluster's infrastructureRef; without one, the OVirtCluster named like the Cluster.
    let domains = cluster
        .and_then(capi::cluster_infrastructure_name)
        .or_else(|| cluster.map(|c| c.name_any()))
        .and_then(|name| {
            state
                .shared
                .ovirt_clusters
                .get(&ObjectRef::new(&name).within(&namespace))
        });
    let spec_domains = domains
        .as_ref()
        .map(|c| c.spec.failure_domains.as_slice())
        .unwrap_or_default();
    let failure_domain = resolve(machine.and_then(capi::machine_failure_domain).as_deref(), spec_domains);
    let owner = GroupOwner {
        namespace,
        cluster: cluster_name,
        management_cluster: state.shared.settings.management_cluster_id.clone(),
    };
    // The OVirtMachine carries the labels of its group as CAPI copies them; the Machine certainly does.
    let mut labels: BTreeMap<String, String> = machine.and_then(|m| m.metadata.labels.clone()).unwrap_or_default();
    labels.extend(state.object.labels().clone());
    let settings = &state.object.spec.settings;
    let wanted = if owner.cluster.is_empty() {
        Vec::new()
    } else {
        wanted_groups(
            &owner,
            purpose_of(&labels).as_deref(),
            settings.antiaffinity.unwrap_or_default(),
            &failure_domain,
            failure_domain.ovirt_cluster(&settings.ovirtcluster),
        )
    };
    (failure_domain, owner, wanted)
}

/// The message of the machine's MachinePlacementSet when it says a soft anti-affinity group was skipped.
pub fn skipped(status: &capov_crds::OVirtMachineStatus) -> Option<String> {
    status
        .conditions
        .iter()
        .find(|c| c.type_ == capov_core::conditions::types::MACHINE_PLACEMENT_SET)
        .filter(|c| c.reason == capov_core::conditions::reasons::ANTI_AFFINITY_SKIPPED)
        .map(|c| c.message.clone())
}
