//! spec.hostdevices: the host chosen before the create (the engine pins the VM to it), and the devices added to
//! the VM before its first start.

use super::fixtures::{found_for_creation, ready_to_create, reason_and_message, state_of, with_vm};
use crate::conditions::{State, reasons, types};
use crate::machine_steps::{
    Action, EngineLookup, Fact, LookupFailure, PrepareAction, ReadRequest, Requeue, VmAction, decide,
};
use crate::placement::host_devices::{DeviceHost, DeviceHostFact, HostDeviceFact};
use capov_crds::Severity;

const GPU: &str = "pci_0000_3b_00_0";

fn gpu_host(name: &str, held_by: Option<&str>) -> DeviceHostFact {
    DeviceHostFact {
        host_id: format!("id-{name}"),
        host_name: name.into(),
        devices: vec![HostDeviceFact {
            name: GPU.into(),
            held_by: held_by.map(String::from),
        }],
    }
}

#[test]
fn the_create_is_pinned_to_the_host_with_the_devices_free_after_reading_the_clusters_hosts() {
    let mut o = ready_to_create();
    o.settings.hostdevices = vec![GPU.into()];
    o.creation = found_for_creation();
    o.creation.device_hosts = Fact::NotRead;
    assert_eq!(
        decide(&o).action,
        Action::Read(ReadRequest::Lookup(EngineLookup::DeviceHosts {
            cluster_id: "cluster-default".into(),
            names: vec![GPU.into()],
        }))
    );
    o.creation.device_hosts = Fact::Read(Ok(vec![gpu_host("host-a", Some("VM other")), gpu_host("host-b", None)]));
    let Action::Vm(VmAction::Create(plan)) = decide(&o).action else {
        panic!("expected the create");
    };
    assert_eq!(
        plan.targets.device_host,
        Some(DeviceHost {
            host_id: "id-host-b".into(),
            host_name: "host-b".into(),
            devices: vec![GPU.into()],
        })
    );
    // Without host devices, no host is read or pinned.
    let mut plain = ready_to_create();
    plain.creation = found_for_creation();
    let Action::Vm(VmAction::Create(plan)) = decide(&plain).action else {
        panic!("expected the create");
    };
    assert_eq!(plan.targets.device_host, None);
}

#[test]
fn no_free_device_is_no_create_with_a_condition_that_says_wait_or_fix() {
    let mut o = ready_to_create();
    o.settings.hostdevices = vec![GPU.into()];
    o.creation = found_for_creation();
    o.creation.device_hosts = Fact::Read(Ok(vec![gpu_host("host-a", Some("VM gpu-1"))]));
    let d = decide(&o);
    assert_eq!(d.action, Action::Wait(Requeue::Backoff));
    assert_eq!(
        state_of(&d, types::MACHINE_CREATED),
        Some((State::False(Severity::Warning), reasons::NO_FREE_HOST_DEVICE))
    );
    o.creation.device_hosts = Fact::Read(Ok(vec![]));
    let d = decide(&o);
    assert_eq!(
        state_of(&d, types::MACHINE_CREATED),
        Some((State::False(Severity::Error), reasons::NO_FREE_HOST_DEVICE))
    );
    // The engine not answering the read is reported as the creation's failure.
    o.creation.device_hosts = Fact::Read(Err(LookupFailure {
        reason: reasons::ENGINE_ERROR,
        severity: Severity::Warning,
        message: "boom".into(),
    }));
    let (reason, message) = reason_and_message(&decide(&o), types::MACHINE_CREATED);
    assert_eq!((reason, message.as_str()), (reasons::CREATE_FAILED, "boom"));
}

#[test]
fn the_devices_are_added_before_the_first_start_and_only_those_missing() {
    let mut o = with_vm("down", false);
    o.settings.hostdevices = vec![GPU.into(), "pci_0000_af_00_0".into()];
    assert_eq!(
        decide(&o).action,
        Action::Read(ReadRequest::Lookup(EngineLookup::VmHostDevices {
            vm_id: super::fixtures::VM_ID.into()
        }))
    );
    o.vm_host_devices = Fact::Read(Ok(vec![GPU.into()]));
    let d = decide(&o);
    assert_eq!(
        d.action,
        Action::Prepare(PrepareAction::AttachHostDevices {
            vm_id: super::fixtures::VM_ID.into(),
            names: vec!["pci_0000_af_00_0".into()],
        })
    );
    assert_eq!(
        state_of(&d, types::MACHINE_PLACEMENT_SET),
        Some((State::False(Severity::Info), reasons::ATTACHING_HOST_DEVICES))
    );
    o.vm_host_devices = Fact::Read(Ok(vec!["pci_0000_af_00_0".into(), GPU.into()]));
    assert!(
        matches!(decide(&o).action, Action::Read(_) | Action::Vm(VmAction::Start { .. })),
        "the devices are there: on to the start"
    );
}

fn with_numa(mut o: crate::machine_steps::Observed) -> crate::machine_steps::Observed {
    o.settings.numa = Some(capov_crds::Numa {
        nodes: 2,
        tunemode: Some(capov_crds::NumaTuneMode::Strict),
    });
    o.settings.cpu = Some(capov_crds::CpuTopology {
        sockets: Some(2),
        cores: Some(2),
        threads: Some(1),
    });
    o.settings.memory = Some(capov_crds::Memory {
        sizemb: Some(4096),
        guaranteedmb: None,
    });
    o
}

#[test]
fn numa_nodes_pin_the_vm_to_the_clusters_hosts_or_wait_for_one() {
    let mut o = with_numa(ready_to_create());
    o.creation = found_for_creation();
    o.creation.device_hosts = Fact::NotRead;
    assert_eq!(
        decide(&o).action,
        Action::Read(ReadRequest::Lookup(EngineLookup::DeviceHosts {
            cluster_id: "cluster-default".into(),
            names: vec![],
        }))
    );
    let bare = |name: &str| DeviceHostFact {
        host_id: format!("id-{name}"),
        host_name: name.into(),
        devices: vec![],
    };
    o.creation.device_hosts = Fact::Read(Ok(vec![bare("host-a"), bare("host-b")]));
    let Action::Vm(VmAction::Create(plan)) = decide(&o).action else {
        panic!("expected the create");
    };
    assert_eq!(
        plan.targets.numa_hosts,
        vec!["id-host-a".to_string(), "id-host-b".to_string()]
    );
    assert_eq!(plan.targets.device_host, None);
    o.creation.device_hosts = Fact::Read(Ok(vec![]));
    let d = decide(&o);
    assert_eq!(
        state_of(&d, types::MACHINE_CREATED),
        Some((State::False(Severity::Warning), reasons::NO_HOST_TO_PIN))
    );
    // With host devices, the VM is pinned to the devices' host alone.
    o.settings.hostdevices = vec![GPU.into()];
    o.creation.device_hosts = Fact::Read(Ok(vec![gpu_host("host-b", None)]));
    let Action::Vm(VmAction::Create(plan)) = decide(&o).action else {
        panic!("expected the create");
    };
    assert_eq!(plan.targets.numa_hosts, Vec::<String>::new());
    assert_eq!(plan.targets.device_host.map(|h| h.host_name), Some("host-b".into()));
}

#[test]
fn the_missing_numa_nodes_are_added_before_the_first_start() {
    let mut o = with_numa(with_vm("down", false));
    assert_eq!(
        decide(&o).action,
        Action::Read(ReadRequest::Lookup(EngineLookup::VmNumaNodes {
            vm_id: super::fixtures::VM_ID.into()
        }))
    );
    o.vm_numa_nodes = Fact::Read(Ok(vec![0]));
    let d = decide(&o);
    let Action::Prepare(PrepareAction::AddNumaNodes { nodes, .. }) = &d.action else {
        panic!("expected the NUMA nodes, got {:?}", d.action);
    };
    assert_eq!(
        nodes,
        &vec![crate::vm::numa_layout::NumaNodePlan {
            index: 1,
            vcpus: vec![2, 3],
            memory_mib: 2048,
            tune_mode: Some(capov_crds::NumaTuneMode::Strict),
        }]
    );
    assert_eq!(
        state_of(&d, types::MACHINE_PLACEMENT_SET),
        Some((State::False(Severity::Info), reasons::ADDING_NUMA_NODES))
    );
    o.vm_numa_nodes = Fact::Read(Ok(vec![1, 0]));
    assert!(
        matches!(decide(&o).action, Action::Read(_) | Action::Vm(VmAction::Start { .. })),
        "the nodes are there: on to the start"
    );
}
