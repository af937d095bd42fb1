//! CAPOV is right under the engine's costs and noise (issue #14 item 6, docs/simulator-fidelity.md): VM states in
//! which the engine refuses stop and remove, the SSO error shape, guests without an agent or with noisy interfaces.

mod support;

use std::time::Duration;

use kube::api::Api;
use serde_json::json;
use support::{World, condition, eventually, metric_sum};

fn deleted_reason(machine: &capov_crds::OVirtMachine) -> Option<(String, String)> {
    condition(machine, "MachineDeleted").map(|c| (c.reason.clone(), c.message.clone()))
}

/// The host lost the VM (`unknown`), then it is being suspended (`saving_state`): the engine refuses stop and
/// remove, so CAPOV sends neither, backs off with a Warning the user can act on, and deletes the VM once it is up.
#[tokio::test]
async fn deletion_waits_with_backoff_while_the_engine_refuses_stop_and_remove() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let mut world = World::new("blocked-delete").await;
    world.start_operator().await;
    world
        .create_machine("worker-0", json!({"ovirtcluster": "Default", "template": "rhcos-4.14"}))
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
    let severity = condition(&machine, "MachineDeleted").and_then(|c| c.severity.clone());
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
