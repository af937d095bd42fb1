//! SPEC §2 step 7, `K8sProviderIDSetup`: the VM's Node in the workload cluster carries the VM's providerID, and the
//! topology labels of where the VM runs ([`crate::placement::node_topology`], issue #27). The Node is read only when a pass
//! reaches this step (`Action::Read(ReadRequest::Node)`).

use super::action::{Action, Requeue, WorkloadAction};
use super::fact::Fact;
use super::observed::{NodeObservation, Observed, ObservedVm, ReadRequest};
use capov_crds::Severity;

use super::decision::Decision;
use super::passed::Passed;
use crate::conditions::{ConditionUpdate, reasons, types};
use crate::placement::node_topology;
use crate::trust::identity::format_provider_id;

/// Step 7: K8sProviderIDSetup. `has_ip`: the VM has an InternalIP; without one, waiting for the Node says so and a
/// machine that is done keeps looking for an address with backoff.
pub(super) fn decide(o: &Observed, vm: &ObservedVm, passed: Passed, has_ip: bool) -> Decision {
    let expected = format_provider_id(&vm.id);
    let setup = |reason, severity, message: String| {
        ConditionUpdate::false_(types::K8S_PROVIDER_ID_SETUP, reason, severity, message)
    };
    let Fact::Read(node) = &o.node else {
        return passed.stop(Action::Read(ReadRequest::Node), None);
    };
    match node {
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
            Requeue::AwaitNode,
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
        NodeObservation::Found {
            name,
            provider_id,
            labels,
        } => {
            let ovirt_cluster = o.failure_domain.ovirt_cluster(&o.settings.ovirtcluster);
            let host = vm.host.as_ref().and_then(|h| h.name.as_deref());
            let changes = node_topology::changes(labels, ovirt_cluster, host, o.failure_domain.name());
            found(name, provider_id.as_deref(), expected, changes, passed, has_ip)
        }
    }
}

/// The VM's Node is there: it gets the providerID with the topology labels it lacks, in one write; a Node with
/// this VM's providerID gets the labels that changed since (a migration to another host); another providerID is
/// an error.
fn found(
    name: &str,
    provider_id: Option<&str>,
    expected: String,
    changes: std::collections::BTreeMap<String, String>,
    passed: Passed,
    has_ip: bool,
) -> Decision {
    match provider_id.map(str::trim) {
        None | Some("") => passed.stop(
            Action::Workload(WorkloadAction::SetNodeProviderId {
                node_name: name.to_string(),
                provider_id: expected,
                labels: changes,
            }),
            None,
        ),
        Some(actual) if actual == expected => {
            let requeue = if has_ip { Requeue::Steady } else { Requeue::Backoff };
            let mut passed = passed;
            passed.pass(types::K8S_PROVIDER_ID_SETUP, reasons::PROVIDER_ID_SET);
            if !changes.is_empty() {
                let labels = Action::Workload(WorkloadAction::SetNodeLabels {
                    node_name: name.to_string(),
                    labels: changes,
                });
                return passed.stop(labels, None);
            }
            passed.stop(Action::Done(requeue), None)
        }
        Some(actual) => passed.wait(
            Requeue::OnChange,
            ConditionUpdate::false_(
                types::K8S_PROVIDER_ID_SETUP,
                reasons::PROVIDER_ID_MISMATCH,
                Severity::Error,
                format!("Node {name:?} has spec.providerID {actual:?}, expected {expected:?}"),
            ),
        ),
    }
}
