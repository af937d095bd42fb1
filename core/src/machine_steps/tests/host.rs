//! Issue #27: where the VM runs ([`crate::machine_steps::host`]): status.host, HostReady, and no engine write while
//! its host is non-responsive.

use crate::machine_steps::{Action, Observed, Requeue, VmAction, VmHost, WorkloadAction, decide};
use capov_crds::Severity;

use super::fixtures::{deleting, running, state_of, with_vm};
use crate::conditions::{State, reasons, types};

fn on_host(mut o: Observed, status: &str, host_status: &str) -> Observed {
    let vm = o.vm.as_mut().expect("vm");
    vm.status = status.into();
    vm.host = Some(VmHost {
        id: "h1".into(),
        name: Some("host-1".into()),
        status: Some(host_status.into()),
        inventoried: true,
    });
    o
}

#[test]
fn a_running_vm_reports_its_host_and_follows_a_migration() {
    let d = decide(&on_host(running(), "up", "up"));
    assert_eq!(d.status.host, Some(Some("host-1".into())));
    let host = d.condition(types::HOST_READY).expect("HostReady");
    assert_eq!((host.state, host.reason), (State::True, reasons::HOST_UP));
    assert!(host.message.contains("\"host-1\""));

    let d = decide(&on_host(running(), "migrating", "preparing_for_maintenance"));
    let host = d.condition(types::HOST_READY).expect("HostReady");
    assert_eq!(
        (host.state, host.reason),
        (State::False(Severity::Warning), reasons::HOST_PREPARING_FOR_MAINTENANCE)
    );
    assert!(host.message.contains("migrating away"), "{}", host.message);
    assert_eq!(
        state_of(&d, types::MACHINE_ON),
        Some((State::True, reasons::VM_UP)),
        "a migrating VM is up"
    );
    assert_eq!(
        state_of(&decide(&on_host(running(), "up", "maintenance")), types::HOST_READY),
        Some((State::False(Severity::Warning), reasons::HOST_IN_MAINTENANCE))
    );
}

#[test]
fn no_engine_write_while_the_host_is_non_responsive() {
    let d = decide(&deleting(on_host(running(), "up", "non_responsive")));
    assert_eq!(d.action, Action::Wait(Requeue::Backoff), "no stop");
    let host = d.condition(types::HOST_READY).expect("HostReady");
    assert_eq!(
        (host.state, host.reason),
        (State::False(Severity::Error), reasons::HOST_NON_RESPONSIVE)
    );
    assert!(host.message.contains("power the VM off"), "{}", host.message);
    assert_eq!(
        state_of(&d, types::MACHINE_DELETED),
        Some((State::False(Severity::Error), reasons::HOST_NON_RESPONSIVE))
    );
    // The VM's own state says unknown: MachineOn tells it, HostReady why.
    let d = decide(&on_host(running(), "unknown", "non_responsive"));
    assert_eq!(
        state_of(&d, types::MACHINE_ON),
        Some((State::False(Severity::Warning), reasons::VM_NOT_RESPONDING))
    );
    assert_eq!(
        state_of(&d, types::HOST_READY),
        Some((State::False(Severity::Error), reasons::HOST_NON_RESPONSIVE))
    );
    // Deleting a VM the engine shows unknown: deletion waits either way, and says it is the host.
    let d = decide(&deleting(on_host(running(), "unknown", "non_responsive")));
    assert_eq!(d.action, Action::Wait(Requeue::Backoff));
    assert_eq!(
        state_of(&d, types::MACHINE_DELETED),
        Some((State::False(Severity::Error), reasons::HOST_NON_RESPONSIVE))
    );
}

#[test]
fn once_fenced_the_vm_is_down_off_its_host_and_deleted() {
    let mut fenced = deleting(running());
    fenced.vm.as_mut().expect("vm").status = "down".into();
    let d = decide(&fenced);
    assert!(matches!(d.action, Action::Vm(VmAction::Delete { .. })));
    assert_eq!(d.status.host, Some(None));
    assert_eq!(
        state_of(&d, types::HOST_READY),
        Some((State::Unknown, reasons::VM_DOWN))
    );
}

#[test]
fn a_vm_never_started_has_no_host_condition() {
    let d = decide(&with_vm("down", false));
    assert!(d.condition(types::HOST_READY).is_none());
    assert_eq!(d.status.host, Some(None));
}

#[test]
fn the_node_gets_the_host_and_zone_labels_and_follows_the_host() {
    let mut o = on_host(running(), "up", "up");
    o.failure_domain = crate::placement::failure_domains::FailureDomainChoice::Found(
        crate::placement::failure_domains::FailureDomainPlacement {
            name: "zone-a".into(),
            ovirtcluster: None,
            hostlabel: None,
            ..Default::default()
        },
    );
    match decide(&o).action {
        Action::Workload(WorkloadAction::SetNodeLabels { labels, .. }) => {
            assert_eq!(labels[crate::placement::node_topology::OVIRT_HOST_LABEL], "host-1");
            assert_eq!(labels[crate::placement::node_topology::ZONE_LABEL], "zone-a");
        }
        other => panic!("expected SetNodeLabels, got {other:?}"),
    }
}

#[test]
fn a_vm_seen_before_the_first_host_inventory_leaves_the_host_as_the_status_has_it() {
    let mut o = running();
    o.vm.as_mut().expect("vm").host = Some(VmHost {
        id: "h1".into(),
        name: None,
        status: None,
        inventoried: false,
    });
    let d = decide(&o);
    assert!(
        d.condition(types::HOST_READY).is_none(),
        "no HostReady Unknown for want of a poll"
    );
    assert_eq!(d.status.host, None, "status.host left as it is");
    // Once the inventory was read, a host it does not show is unknown to CAPOV.
    o.vm.as_mut().expect("vm").host.as_mut().expect("host").inventoried = true;
    let d = decide(&o);
    assert_eq!(
        state_of(&d, types::HOST_READY),
        Some((State::Unknown, reasons::HOST_UNKNOWN))
    );
    assert_eq!(d.status.host, Some(Some("h1".into())));
}
