//! Step 6, MachineOn: the first start, the states of a started VM, and its addresses
//! ([`crate::machine_steps::power`]).

use crate::machine_steps::{
    Action, Bootstrap, BootstrapFormat, Fact, NodeObservation, Observed, ObservedVm, Requeue, VmAction, decide,
};
use capov_crds::Severity;

use super::fixtures::{running, state_of, vm, with_vm};
use crate::conditions::{State, reasons, types};
use crate::network::addresses::ReportedDevice;

#[test]
fn prepared_vm_is_started_with_cloud_init() {
    let d = decide(&with_vm("down", false));
    assert_eq!(d.action, Action::Vm(VmAction::Start { use_ignition: false }));
    assert_eq!(
        state_of(&d, types::MACHINE_NETWORK_SET),
        Some((State::True, reasons::NETWORK_SET))
    );
    assert_eq!(
        state_of(&d, types::MACHINE_ON),
        Some((State::False(Severity::Info), reasons::VM_POWERING_UP))
    );
}

#[test]
fn ignition_bootstrap_starts_with_use_ignition() {
    let o = Observed {
        bootstrap: Bootstrap::Ready(BootstrapFormat::Ignition),
        vm: Some(ObservedVm {
            os_type: Some("rhcos_x64".into()),
            ..vm("down", false)
        }),
        ..with_vm("down", false)
    };
    assert_eq!(decide(&o).action, Action::Vm(VmAction::Start { use_ignition: true }));
}

#[test]
fn a_vm_whose_os_type_does_not_take_the_bootstrap_format_is_not_started() {
    for (format, os_type) in [
        (BootstrapFormat::CloudConfig, "rhcos_x64"),
        (BootstrapFormat::Ignition, "other_linux"),
        (BootstrapFormat::Ignition, "other"),
    ] {
        let o = Observed {
            bootstrap: Bootstrap::Ready(format),
            vm: Some(ObservedVm {
                os_type: Some(os_type.into()),
                ..vm("down", false)
            }),
            ..with_vm("down", false)
        };
        let d = decide(&o);
        assert_eq!(d.action, Action::Wait(Requeue::Backoff), "{format:?} on {os_type}");
        let on = d.condition(types::MACHINE_ON).unwrap();
        assert_eq!(on.reason, reasons::BOOTSTRAP_FORMAT_MISMATCH);
        assert_eq!(on.state, State::False(Severity::Error));
        assert!(
            on.message.contains(os_type) && on.message.contains("not started"),
            "{}",
            on.message
        );
    }
}

#[test]
fn powering_up_is_info_with_message_powering_up_and_polls() {
    for status in ["wait_for_launch", "powering_up"] {
        let d = decide(&with_vm(status, false));
        assert_eq!(d.action, Action::Wait(Requeue::PollVm), "{status}");
        let on = d.condition(types::MACHINE_ON).unwrap();
        assert_eq!(
            (on.state, on.reason, on.message.as_str()),
            (State::False(Severity::Info), "VMPoweringUp", "powering up")
        );
    }
}

#[test]
fn never_started_vm_in_an_odd_state_does_not_claim_disks_and_nics_done() {
    let d = decide(&with_vm("unassigned", false));
    assert_eq!(d.action, Action::Wait(Requeue::Backoff));
    assert_eq!(d.condition(types::MACHINE_DISK_RESIZED), None);
    assert_eq!(
        state_of(&d, types::MACHINE_ON),
        Some((State::False(Severity::Warning), reasons::VM_NOT_RESPONDING))
    );
}

#[test]
fn up_vm_sets_machine_on_provisioned_and_addresses() {
    let o = Observed {
        provisioned: false,
        ..running()
    };
    let d = decide(&o);
    assert_eq!(state_of(&d, types::MACHINE_ON), Some((State::True, reasons::VM_UP)));
    assert!(d.status.mark_provisioned);
    let addresses: Vec<(&str, &str)> = d
        .status
        .addresses
        .as_ref()
        .unwrap()
        .iter()
        .map(|a| (a.type_.as_str(), a.address.as_str()))
        .collect();
    assert_eq!(
        addresses,
        vec![("InternalIP", "10.0.1.11"), ("InternalDNS", "worker-abc123")]
    );
    assert_eq!(d.status.vm_status.as_deref(), Some("up"));
}

#[test]
fn migrating_counts_as_up() {
    let d = decide(&Observed {
        vm: Some(vm("migrating", true)),
        ..running()
    });
    assert_eq!(state_of(&d, types::MACHINE_ON), Some((State::True, reasons::VM_UP)));
}

#[test]
fn control_plane_vip_is_not_an_address() {
    let mut o = running();
    if let Some(vm) = o.vm.as_mut() {
        vm.reported_devices[0].ips.push("10.0.1.100".into());
    }
    let d = decide(&o);
    assert!(!d.status.addresses.unwrap().iter().any(|a| a.address == "10.0.1.100"));
}

/// No guest agent: the VM is up (MachineOn stays True, SPEC step 6) and the message says why there is no address
/// and what fixes it; the machine keeps looking with backoff instead of polling hard.
#[test]
fn up_without_reported_devices_says_the_guest_agent_is_missing() {
    let mut o = running();
    if let Some(vm) = o.vm.as_mut() {
        vm.reported_devices.clear();
    }
    let d = decide(&o);
    assert_eq!(d.action, Action::Done(Requeue::Backoff));
    let on = d.condition(types::MACHINE_ON).unwrap();
    assert_eq!((on.state, on.reason), (State::True, reasons::VM_UP));
    assert!(on.message.contains("qemu-guest-agent"), "{}", on.message);
    let addresses = d.status.addresses.unwrap();
    assert_eq!(addresses.len(), 1, "only the VM name: {addresses:?}");

    // Devices, but nothing usable on them: the message names the rule instead.
    if let Some(vm) = o.vm.as_mut() {
        vm.reported_devices = vec![ReportedDevice {
            mac: Some("0a:58:0a:f4:00:01".into()),
            ips: vec!["10.244.0.1".into()],
        }];
    }
    let d = decide(&o);
    let on = d.condition(types::MACHINE_ON).unwrap();
    assert!(on.message.contains("MAC is one of the VM's NICs"), "{}", on.message);

    // Before the Node joined, WaitingForNode points at it too.
    o.node = Fact::Read(NodeObservation::NotFound);
    let d = decide(&o);
    let setup = d.condition(types::K8S_PROVIDER_ID_SETUP).unwrap();
    assert_eq!(setup.reason, reasons::WAITING_FOR_NODE);
    assert!(setup.message.contains("no IP address"), "{}", setup.message);
    assert_eq!(d.action, Action::Wait(Requeue::AwaitNode));
}

#[test]
fn up_with_an_address_has_no_message_on_machine_on() {
    let d = decide(&running());
    assert_eq!(d.condition(types::MACHINE_ON).unwrap().message, "");
}

#[test]
fn later_down_is_vm_down_warning_and_not_restarted() {
    let d = decide(&Observed {
        vm: Some(vm("down", true)),
        ..running()
    });
    assert_eq!(d.action, Action::Wait(Requeue::Backoff));
    assert_eq!(
        state_of(&d, types::MACHINE_ON),
        Some((State::False(Severity::Warning), reasons::VM_DOWN))
    );
    assert!(
        !d.status.mark_provisioned,
        "provisioned is never touched again, not reset"
    );
}

#[test]
fn paused_not_responding_unknown_are_vm_not_responding_warning() {
    for status in ["paused", "not_responding", "unknown"] {
        let d = decide(&Observed {
            vm: Some(vm(status, true)),
            ..running()
        });
        assert_eq!(
            state_of(&d, types::MACHINE_ON),
            Some((State::False(Severity::Warning), reasons::VM_NOT_RESPONDING)),
            "{status}"
        );
    }
}

#[test]
fn transitional_states_after_start_poll_with_info() {
    for status in ["powering_down", "reboot_in_progress", "saving_state", "restoring_state"] {
        let d = decide(&Observed {
            vm: Some(vm(status, true)),
            ..running()
        });
        assert_eq!(d.action, Action::Wait(Requeue::PollVm), "{status}");
        assert_eq!(
            state_of(&d, types::MACHINE_ON),
            Some((State::False(Severity::Info), reasons::VM_TRANSITIONING)),
            "{status}"
        );
    }
}

#[test]
fn image_locked_after_start_is_vm_locked() {
    let d = decide(&Observed {
        vm: Some(vm("image_locked", true)),
        ..running()
    });
    assert_eq!(
        state_of(&d, types::MACHINE_ON),
        Some((State::False(Severity::Info), reasons::VM_LOCKED))
    );
    assert_eq!(
        state_of(&d, types::MACHINE_CREATED),
        Some((State::True, reasons::VM_CREATED))
    );
}
