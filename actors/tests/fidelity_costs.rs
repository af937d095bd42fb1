//! CAPOV is right under the engine's costs and noise (issue #14 item 6, docs/simulator-fidelity.md): VM states in
//! which the engine refuses stop and remove, the SSO error shape, guests without an agent or with noisy interfaces.

mod support;

use std::time::Duration;

use capov_testkit::eventually;
use kube::api::Api;
use serde_json::json;
use support::{World, condition, metric_sum};

fn deleted_reason(machine: &capov_crds::OVirtMachine) -> Option<(String, String)> {
    condition(machine, "MachineDeleted").map(|c| (c.reason.to_string(), c.message.clone()))
}

/// The host lost the VM (`unknown`), then it is being suspended (`saving_state`): the engine refuses stop and
/// remove, so CAPOV sends neither, backs off with a Warning the user can act on, and deletes the VM once it is up.
#[tokio::test]
async fn deletion_waits_with_backoff_while_the_engine_refuses_stop_and_remove() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let mut world = World::new("blocked-delete").await;
    world.start_operator().await;
    world
        .create_machine(
            "worker-0",
            json!({"ovirtcluster": "Default", "template": "ubuntu-22.04"}),
        )
        .await;
    let vm_id = world.vm_id("worker-0").await;
    world
        .wait_reason(Duration::from_secs(60), "worker-0", "MachineOn", "VMPoweringUp")
        .await;
    let control = world.sim.control();
    control.set_vm_status(&vm_id, "unknown").unwrap();

    let machines = Api::<capov_crds::OVirtMachine>::namespaced(world.client.clone(), &world.namespace);
    machines
        .delete("worker-0", &Default::default())
        .await
        .expect("delete machine");
    let machine = world
        .wait_reason(
            Duration::from_secs(60),
            "worker-0",
            "MachineDeleted",
            "VMStateBlocksDeletion",
        )
        .await;
    let (_, message) = deleted_reason(&machine).unwrap();
    assert!(message.contains("unknown") && message.contains("host"), "{message}");
    let severity = condition(&machine, "MachineDeleted").and_then(|c| c.severity);
    assert_eq!(severity, Some(capov_crds::Severity::Warning));

    // Retried, with backoff: at least two backed-off passes, and no stop or remove sent meanwhile.
    let backed_off = |world: &World| {
        metric_sum(
            &world.metrics,
            "capov_reconciles_total",
            &[("kind", "machine"), ("result", "error")],
        )
    };
    let before = backed_off(&world);
    eventually(Duration::from_secs(60), "a second backed-off pass", || async {
        (backed_off(&world) >= before + 1.0).then_some(())
    })
    .await;
    assert_eq!(
        control.counter("POST /vms/{id}/stop"),
        0,
        "no stop sent to an unknown VM"
    );
    assert_eq!(
        control.counter("DELETE /vms/{id}"),
        0,
        "no remove sent to an unknown VM"
    );
    let passes = backed_off(&world) - before;
    assert!(passes <= 3.0, "backoff, not a hot loop: {passes} passes");

    control.set_vm_status(&vm_id, "saving_state").unwrap();
    eventually(Duration::from_secs(60), "the message names saving_state", || async {
        let machine = world.machine("worker-0").await;
        deleted_reason(&machine)
            .filter(|(reason, message)| reason == "VMStateBlocksDeletion" && message.contains("saving_state"))
    })
    .await;
    assert_eq!(control.counter("POST /vms/{id}/stop"), 0);

    // The state clears: the VM is stopped and removed, the machine released.
    control.set_vm_status(&vm_id, "up").unwrap();
    eventually(Duration::from_secs(60), "worker-0: deleted", || async {
        machines
            .get_opt("worker-0")
            .await
            .expect("get machine")
            .is_none()
            .then_some(())
    })
    .await;
    assert!(control.vm(&vm_id).is_none(), "the VM outlived its machine");
    assert_eq!(control.counter("POST /vms/{id}/stop"), 1);
    world.stop_operator().await;
}

fn internal_ips(machine: &capov_crds::OVirtMachine) -> Vec<String> {
    machine
        .status
        .as_ref()
        .map(|s| {
            s.addresses
                .iter()
                .filter(|a| a.type_ == "InternalIP")
                .map(|a| a.address.clone())
                .collect()
        })
        .unwrap_or_default()
}

/// A Kubernetes node's guest reports Docker, flannel and Calico devices, link-local IPv6 and VIPs besides its own
/// address (engine 4.4, the simulator's default): CAPOV writes the node's own address, then a VIP on its NIC, and
/// never the control-plane endpoint (10.0.1.100 in the test cluster) or a bridge's address.
#[tokio::test]
async fn a_noisy_guest_gets_only_its_own_nic_addresses() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let mut world = World::new("noisy-guest").await;
    world.start_operator().await;
    world
        .create_machine("cp-0", json!({"ovirtcluster": "Default", "template": "ubuntu-22.04"}))
        .await;
    let vm_id = world.vm_id("cp-0").await;
    let control = world.sim.control();
    control.add_guest_address(&vm_id, "10.0.1.100").unwrap();
    control.add_guest_address(&vm_id, "10.0.1.200").unwrap();
    let ips = eventually(Duration::from_secs(60), "cp-0: InternalIP", || async {
        let ips = internal_ips(&world.machine("cp-0").await);
        (!ips.is_empty()).then_some(ips)
    })
    .await;
    assert_eq!(ips.len(), 2, "{ips:?}");
    assert!(
        ips[0].starts_with("10.") && !ips[0].starts_with("10.244."),
        "own address first: {ips:?}"
    );
    assert_eq!(ips[1], "10.0.1.200", "{ips:?}");
    world.stop_operator().await;
}

/// A template without a guest agent: the VM comes up and the engine never reports an address. The machine says so
/// on MachineOn (still True: the VM is up) and keeps looking with backoff, sending only a few requests meanwhile.
#[tokio::test]
async fn without_a_guest_agent_the_machine_says_why_it_has_no_address_and_backs_off() {
    use capov_ovirt_sim::{Inventory, TemplateDiskSeed, TemplateNicSeed, TemplateSeed};
    let _ = rustls::crypto::ring::default_provider().install_default();
    let mut world = World::new("no-agent").await;
    world
        .sim
        .control()
        .seed(&Inventory {
            templates: vec![TemplateSeed {
                name: "no-agent".into(),
                cluster: Some("Default".into()),
                os_type: "other_linux".into(),
                guest_agent: false,
                disks: vec![TemplateDiskSeed {
                    alias: "no-agent_Disk1".into(),
                    storage_domains: vec!["data1".into()],
                    ..Default::default()
                }],
                nics: vec![TemplateNicSeed {
                    name: "nic1".into(),
                    vnic_profile: Some("ovirtmgmt".into()),
                }],
                ..Default::default()
            }],
            ..Inventory::default()
        })
        .unwrap();
    world.start_operator().await;
    world
        .create_machine("worker-0", json!({"ovirtcluster": "Default", "template": "no-agent"}))
        .await;
    let machine = eventually(Duration::from_secs(60), "MachineOn True with a message", || async {
        let machine = world.machine("worker-0").await;
        condition(&machine, "MachineOn")
            .is_some_and(|c| c.status == capov_crds::ConditionStatus::True && c.message.contains("qemu-guest-agent"))
            .then_some(machine)
    })
    .await;
    assert_eq!(condition(&machine, "MachineOn").unwrap().reason, "VMUp");
    assert!(internal_ips(&machine).is_empty());
    let waiting = condition(&machine, "K8sProviderIDSetup")
        .map(|c| c.message.clone())
        .unwrap_or_default();
    assert!(waiting.contains("no IP address"), "{waiting}");

    let control = world.sim.control();
    // Waiting for the Node is a requeue (retried 5 s, 10 s, then every 20 s), not an error.
    let backed_off = |world: &World| {
        metric_sum(
            &world.metrics,
            "capov_reconciles_total",
            &[("kind", "machine"), ("result", "requeue")],
        )
    };
    // The provider's inventory poll (issue 27: hosts, clusters, storage domains, one request each, every 6 polls of
    // 200 ms here) is the provider's, not the machine's: only the inventory reads /hosts, so it is counted by them.
    let machine_requests =
        |control: &capov_ovirt_sim::Control| control.counter("total") - 3 * control.counter("GET /hosts");
    let (passes, requests) = (backed_off(&world), machine_requests(control));
    eventually(
        Duration::from_secs(60),
        "two more passes waiting for the Node",
        || async { (backed_off(&world) >= passes + 2.0).then_some(()) },
    )
    .await;
    let sent = machine_requests(control) - requests;
    assert!(sent <= 40, "two passes, not a loop: {sent} engine requests");
    world.stop_operator().await;
}
