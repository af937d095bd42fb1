//! CAPOV is right under an engine as strict as the real one (docs/simulator-fidelity.md): VM name limits, search
//! values the engine refuses, creates that vanish after they were accepted, VMs without a status, and a non-admin
//! engine user.

mod support;

use std::time::Duration;

use capov_testkit::eventually;
use kube::ResourceExt;
use serde_json::json;
use support::{World, condition};

/// A CAPI machine name longer than the engine's 64 characters: the VM gets the documented shortened name, the
/// marker keeps the whole object, and the Node (named after the shortened host name) is matched through the VM id.
#[tokio::test]
async fn a_machine_name_over_64_characters_gets_a_shortened_vm_name_and_its_node_is_still_matched() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let mut world = World::new("longname").await;
    world.start_operator().await;
    let name = "a-production-cluster-with-a-long-descriptive-name-md-0-7d9f8b6c5x-x2kq9";
    assert!(name.len() > 64);
    world
        .create_machine(name, json!({"ovirtcluster": "Default", "template": "ubuntu-22.04"}))
        .await;
    let vm_id = world.vm_id(name).await;
    let vm = world.sim.control().vm(&vm_id).expect("the VM exists");
    let expected = capov_core::naming::vm_name::for_object(name);
    assert_eq!(vm.name, expected);
    assert!(vm.name.len() <= 64);
    assert!(
        vm.description
            .starts_with(&format!("capov:{}/{name} uid:", world.namespace)),
        "the marker names the whole OVirtMachine: {}",
        vm.description
    );
    // The kubelet names its Node after the host name, which is the VM name.
    world.register_node(&expected, &vm_id).await;
    eventually(Duration::from_secs(60), "the Node's providerID", || async {
        world
            .node_provider_id(&expected)
            .await
            .filter(|id| *id == format!("ovirt://{vm_id}"))
    })
    .await;
    eventually(Duration::from_secs(60), "Ready", || async {
        let machine = world.machine(name).await;
        condition(&machine, "Ready")
            .is_some_and(|c| c.status == capov_crds::ConditionStatus::True)
            .then_some(())
    })
    .await;
    world.delete_machine_and_wait(name).await;
    assert!(world.sim.control().vm(&vm_id).is_none(), "the VM outlived its machine");
    assert_eq!(world.sim.control().rejected_bodies(), Default::default());
    world.stop_operator().await;
}

/// A cluster name holding a character the engine's search refuses is reported, and never sent.
#[tokio::test]
async fn a_name_the_engine_search_refuses_is_reported_and_never_sent() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let mut world = World::new("unsearchable").await;
    world.start_operator().await;
    world
        .create_machine(
            "worker-0",
            json!({"ovirtcluster": "Default' or name='x", "template": "ubuntu-22.04"}),
        )
        .await;
    let machine = world
        .wait_reason(
            Duration::from_secs(60),
            "worker-0",
            "MachineCreated",
            "UnsearchableName",
        )
        .await;
    let message = condition(&machine, "MachineCreated")
        .map(|c| c.message.clone())
        .unwrap_or_default();
    assert!(message.contains("'"), "names the character: {message}");
    // The provider's inventory poll reads the clusters too, with one read of the hosts each time: only it reads
    // `/hosts`, so the machine's own cluster searches are what is left.
    let control = world.sim.control();
    assert_eq!(
        control.counter("GET /clusters") - control.counter("GET /hosts"),
        0,
        "no cluster search was sent"
    );
    assert_eq!(world.sim.control().vm_count(), 0);
    world.stop_operator().await;
}

/// The engine accepts the create (202) and deletes the VM when its disk copy fails: the machine never reports
/// VMNotFound for it and gets a VM created again, recorded in spec.providerID once its disks are there.
#[tokio::test]
async fn a_create_that_vanishes_after_it_was_accepted_is_created_again() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let mut world = World::new("vanishing").await;
    world.sim.control().fail_next_copies(1, 0);
    world.start_operator().await;
    world
        .create_machine(
            "worker-0",
            json!({"ovirtcluster": "Default", "template": "ubuntu-22.04"}),
        )
        .await;
    let vm_id = world.vm_id("worker-0").await;
    let control = world.sim.control();
    assert_eq!(
        control.counter("POST /vms"),
        2,
        "one create vanished, one more was sent"
    );
    assert_eq!(control.vm_count(), 1);
    let vm = control.vm(&vm_id).expect("the recorded VM exists");
    assert!(
        vm.status != "image_locked",
        "recorded only after its disks were copied: {}",
        vm.status
    );
    world
        .wait_reason(Duration::from_secs(60), "worker-0", "MachineOn", "VMPoweringUp")
        .await;
    let machine = world.machine("worker-0").await;
    assert_ne!(
        condition(&machine, "MachineCreated").map(|c| c.reason.to_string()),
        Some("VMNotFound".into())
    );
    world.stop_operator().await;
}

/// A failed copy that leaves the VM ImageIllegal: the engine shows it without `<status>`; CAPOV reports it (not
/// VMNotFound, no second VM) and still removes it with its machine.
#[tokio::test]
async fn a_vm_without_status_is_reported_as_image_illegal_and_never_replaced() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let mut world = World::new("illegal").await;
    world.sim.control().fail_next_copies(0, 1);
    world.start_operator().await;
    world
        .create_machine(
            "worker-0",
            json!({"ovirtcluster": "Default", "template": "ubuntu-22.04"}),
        )
        .await;
    let machine = world
        .wait_reason(Duration::from_secs(60), "worker-0", "MachineCreated", "VMImageIllegal")
        .await;
    let message = condition(&machine, "MachineCreated")
        .map(|c| c.message.clone())
        .unwrap_or_default();
    let vm_id = world.vm_id("worker-0").await;
    assert!(message.contains(&vm_id), "{message}");
    let control = world.sim.control();
    assert_eq!(control.counter("POST /vms"), 1, "no second VM");
    assert_eq!(control.vm_count(), 1);
    assert_eq!(
        control.counter("POST /vms/{id}/start"),
        0,
        "an illegal VM is not started"
    );
    world.delete_machine_and_wait("worker-0").await;
    assert_eq!(world.sim.control().vm_count(), 0);
    world.stop_operator().await;
}

/// CAPOV as an engine user without an administrative role: a whole machine lifecycle works (no admin-only query is
/// needed), and a refused request is reported as PermissionDenied naming what was refused.
#[tokio::test]
async fn a_non_admin_engine_user_runs_the_lifecycle_and_refusals_are_permission_denied() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let mut world = World::new_non_admin("nonadmin").await;
    world.start_operator().await;
    world
        .apply_provider(provider_spec(&world, json!({"vmtags": true})))
        .await;
    provider_applied(&world).await;
    world
        .create_machine(
            "worker-0",
            json!({"ovirtcluster": "Default", "template": "ubuntu-22.04", "storagedomainname": "data1",
                   "osdisksizegb": 30, "nics": [{"vnicprofile": "ovirtmgmt"}]}),
        )
        .await;
    // Tags need tag management on the system, which this user lacks: refused, and said so, until the provider no
    // longer asks for them.
    let machine = world
        .wait_reason(
            Duration::from_secs(60),
            "worker-0",
            "MachineCreated",
            "PermissionDenied",
        )
        .await;
    let message = condition(&machine, "MachineCreated")
        .map(|c| c.message.clone())
        .unwrap_or_default();
    assert!(message.contains("/tags"), "{message}");
    world
        .apply_provider(provider_spec(&world, json!({"vmtags": false})))
        .await;
    let vm_id = world.vm_id("worker-0").await;
    world.register_node("worker-0", &vm_id).await;
    eventually(Duration::from_secs(90), "Ready", || async {
        let machine = world.machine("worker-0").await;
        condition(&machine, "Ready")
            .is_some_and(|c| c.status == capov_crds::ConditionStatus::True)
            .then_some(())
    })
    .await;
    let machine = world.machine("worker-0").await;
    assert_eq!(
        machine
            .annotations()
            .get(capov_crds::labels::ENGINE_ANNOTATION)
            .map(|a| a.starts_with(support::NON_ADMIN_USER)),
        Some(true),
        "the VM was made by the non-admin user"
    );
    world.delete_machine_and_wait("worker-0").await;
    assert_eq!(world.sim.control().vm_count(), 0);
    assert_eq!(world.sim.control().rejected_bodies(), Default::default());

    // Without a role that allows creating VMs: PermissionDenied, naming the refused request.
    world
        .sim
        .control()
        .set_user_may_create_vms(support::NON_ADMIN_USER, false);
    world
        .create_machine(
            "worker-1",
            json!({"ovirtcluster": "Default", "template": "ubuntu-22.04"}),
        )
        .await;
    let machine = world
        .wait_reason(
            Duration::from_secs(60),
            "worker-1",
            "MachineCreated",
            "PermissionDenied",
        )
        .await;
    let message = condition(&machine, "MachineCreated")
        .map(|c| c.message.clone())
        .unwrap_or_default();
    assert!(
        message.contains("not authorized") && message.contains("/vms"),
        "{message}"
    );
    world.stop_operator().await;
}

/// The provider spec of `world`'s engine with `extra` fields.
fn provider_spec(world: &World, extra: serde_json::Value) -> serde_json::Value {
    use base64::Engine as _;
    let ca = base64::engine::general_purpose::STANDARD.encode(world.sim.ca_pem().expect("ca"));
    let mut spec =
        json!({"engine": world.sim.api_url(), "credentialsSecretName": "engine-credentials", "tls": {"certs": ca}});
    for (key, value) in extra.as_object().cloned().unwrap_or_default() {
        spec[key] = value;
    }
    spec
}

/// Waits until the provider's actor has taken in its current spec.
async fn provider_applied(world: &World) {
    eventually(
        Duration::from_secs(60),
        "the provider's spec to reach its actor",
        || async {
            let providers: kube::Api<capov_crds::OVirtProvider> = kube::Api::all(world.client.clone());
            let provider = providers.get(&world.provider).await.ok()?;
            (provider.metadata.generation == provider.status?.conditions.first()?.observed_generation).then_some(())
        },
    )
    .await;
}
