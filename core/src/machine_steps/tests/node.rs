//! Step 7, K8sProviderIDSetup, and reading the Node only when this step needs it ([`crate::machine_steps::node`]).

use crate::machine_steps::{
    Action, Fact, NodeObservation, Observed, ReadRequest, Requeue, VmHost, WorkloadAction, decide,
};
use capov_crds::Severity;

use super::fixtures::{VM_ID, node_labels, running, state_of, with_vm};
use crate::conditions::{State, reasons, types};

#[test]
fn node_not_registered_yet_waits_for_node() {
    let d = decide(&Observed {
        node: Fact::Read(NodeObservation::NotFound),
        ..running()
    });
    assert_eq!(d.action, Action::Wait(Requeue::AwaitNode));
    assert_eq!(
        state_of(&d, types::K8S_PROVIDER_ID_SETUP),
        Some((State::False(Severity::Info), reasons::WAITING_FOR_NODE))
    );
    assert!(
        d.status.mark_provisioned,
        "the VM is up even though the Node is not there yet"
    );
}

#[test]
fn unreachable_workload_cluster_is_a_warning() {
    let d = decide(&Observed {
        node: Fact::Read(NodeObservation::Unreachable {
            message: "timeout".into(),
        }),
        ..running()
    });
    assert_eq!(
        state_of(&d, types::K8S_PROVIDER_ID_SETUP),
        Some((State::False(Severity::Warning), reasons::WORKLOAD_CLUSTER_UNREACHABLE))
    );
}

#[test]
fn rejected_workload_kubeconfig_is_an_error_retried_with_backoff() {
    let message = "the workload kubeconfig in Secret default/workload-kubeconfig (key value) was rejected and nothing \
                   was sent to its server: users[0] \"admin\": field \"tokenFile\" is not allowed: put the token \
                   itself in \"token\"";
    let d = decide(&Observed {
        node: Fact::Read(NodeObservation::Rejected {
            message: message.into(),
        }),
        ..running()
    });
    // Secrets are not watched: only a timed retry sees the fixed kubeconfig.
    assert_eq!(d.action, Action::Wait(Requeue::Backoff));
    let setup = d.condition(types::K8S_PROVIDER_ID_SETUP).expect("K8sProviderIDSetup");
    assert_eq!(
        (setup.state, setup.reason),
        (State::False(Severity::Error), reasons::WORKLOAD_KUBECONFIG_REJECTED)
    );
    assert_eq!(setup.message, message, "the message names the field and the fix");
    assert_eq!(state_of(&d, types::MACHINE_ON), Some((State::True, reasons::VM_UP)));
    assert!(d.status.mark_provisioned, "the VM is up whatever the kubeconfig says");
}

#[test]
fn node_without_provider_id_gets_ours() {
    let node = NodeObservation::Found {
        name: "worker-abc123".into(),
        provider_id: None,
        labels: node_labels(),
    };
    assert_eq!(
        decide(&Observed {
            node: Fact::Read(node),
            ..running()
        })
        .action,
        Action::Workload(WorkloadAction::SetNodeProviderId {
            node_name: "worker-abc123".into(),
            provider_id: format!("ovirt://{VM_ID}"),
            labels: Default::default(),
        })
    );
}

#[test]
fn the_provider_id_and_the_topology_labels_the_node_lacks_go_in_one_write() {
    let node = NodeObservation::Found {
        name: "worker-abc123".into(),
        provider_id: None,
        labels: Default::default(),
    };
    let mut o = Observed {
        node: Fact::Read(node),
        ..running()
    };
    o.vm.as_mut().expect("vm").host = Some(VmHost {
        id: "h1".into(),
        name: Some("host-1".into()),
        status: Some("up".into()),
        inventoried: true,
    });
    let Action::Workload(WorkloadAction::SetNodeProviderId {
        provider_id, labels, ..
    }) = decide(&o).action
    else {
        panic!("expected SetNodeProviderId, got {:?}", decide(&o).action);
    };
    assert_eq!(provider_id, format!("ovirt://{VM_ID}"));
    assert_eq!(
        labels,
        [
            (
                crate::placement::node_topology::OVIRT_CLUSTER_LABEL.to_string(),
                "Default".to_string()
            ),
            (
                crate::placement::node_topology::OVIRT_HOST_LABEL.to_string(),
                "host-1".to_string()
            ),
        ]
        .into()
    );
    // Once both are on the Node, nothing more is written.
    o.node = Fact::Read(NodeObservation::Found {
        name: "worker-abc123".into(),
        provider_id: Some(provider_id),
        labels,
    });
    assert_eq!(decide(&o).action, Action::Done(Requeue::Steady));
}

#[test]
fn node_with_another_provider_id_is_a_mismatch_error() {
    let node = NodeObservation::Found {
        name: "worker-abc123".into(),
        provider_id: Some("ovirt://other".into()),
        labels: node_labels(),
    };
    let d = decide(&Observed {
        node: Fact::Read(node),
        ..running()
    });
    assert_eq!(
        state_of(&d, types::K8S_PROVIDER_ID_SETUP),
        Some((State::False(Severity::Error), reasons::PROVIDER_ID_MISMATCH))
    );
}

#[test]
fn done_without_ip_keeps_looking_with_backoff() {
    let mut o = running();
    if let Some(vm) = o.vm.as_mut() {
        vm.reported_devices.clear();
    }
    assert_eq!(decide(&o).action, Action::Done(Requeue::Backoff));
}

#[test]
fn reaching_step_7_without_the_node_asks_for_it() {
    let d = decide(&Observed {
        node: Fact::NotRead,
        ..running()
    });
    assert_eq!(d.action, Action::Read(ReadRequest::Node));
    assert!(!d.action.needs_permit(), "workload I/O never holds a reconcile permit");
    // Steps 1–6 are passed all the same: the decision taken after the read only adds step 7.
    assert_eq!(state_of(&d, types::MACHINE_ON), Some((State::True, reasons::VM_UP)));
}

#[test]
fn an_unread_node_is_not_asked_for_before_step_7() {
    // A VM still powering up stops at step 6: no workload call in that pass.
    let d = decide(&Observed {
        node: Fact::NotRead,
        ..with_vm("powering_up", true)
    });
    assert_ne!(d.action, Action::Read(ReadRequest::Node));
}
