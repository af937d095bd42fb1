//! Disks on the engine simulator: the non-system-disk block on deletion, alias renaming under every combination of
//! the feature gates, and the clone / storage-domain precedence (machine → provider → gate).

mod support;

use std::time::Duration;

use capov_core::policy::feature_gates::FeatureGates;
use capov_crds::{ConditionStatus, OVirtMachine, Severity};
use capov_testkit::eventually;
use kube::api::{Api, DeleteParams};
use serde_json::{Value, json};
use support::{World, condition};

const MINUTE: Duration = Duration::from_secs(60);

/// Waits until the machine's disks are prepared (renaming happens before the first start).
async fn disks_ready(world: &World, name: &str) -> String {
    let id = world.vm_id(name).await;
    eventually(MINUTE, &format!("{name}: MachineDiskResized"), || async {
        let machine = world.machine(name).await;
        condition(&machine, "MachineDiskResized")
            .is_some_and(|c| c.status == ConditionStatus::True)
            .then_some(())
    })
    .await;
    id
}

fn spec(extra: Value) -> Value {
    let mut spec = json!({"ovirtcluster": "Default", "template": "ubuntu-22.04"});
    for (key, value) in extra.as_object().cloned().unwrap_or_default() {
        spec[key] = value;
    }
    spec
}

#[tokio::test]
async fn a_non_system_disk_blocks_deletion_until_it_is_detached() {
    let mut world = World::new("csi-disk").await;
    world.start_operator().await;
    world.create_machine("worker", spec(json!({}))).await;
    let vm_id = world.vm_id("worker").await;
    eventually(MINUTE, "the VM to be up", || async {
        world.machine("worker").await.status.filter(|s| s.ready).map(|_| ())
    })
    .await;
    let csi_disk = world
        .sim
        .control()
        .attach_disk(&vm_id, "pvc-0001", 1 << 30)
        .expect("attach a CSI disk");

    let machines: Api<OVirtMachine> = Api::namespaced(world.client.clone(), &world.namespace);
    machines
        .delete("worker", &DeleteParams::default())
        .await
        .expect("delete");
    let machine = world
        .wait_reason(MINUTE, "worker", "MachineDeleted", "VMHasNonSystemDisk")
        .await;
    let deleted = condition(&machine, "MachineDeleted").expect("condition");
    assert_eq!(deleted.status, ConditionStatus::False);
    assert_eq!(deleted.message, "VM has non system disk, cannot delete");
    assert!(
        world.sim.control().vm(&vm_id).is_some(),
        "the VM must stay while the CSI disk is attached"
    );

    // Detached in oVirt: the next retry (every minute) deletes the VM and releases the machine.
    world.sim.control().detach_disk(&vm_id, &csi_disk).expect("detach");
    eventually(Duration::from_secs(150), "the machine to be gone", || async {
        machines.get_opt("worker").await.ok()?.is_none().then_some(())
    })
    .await;
    assert!(world.sim.control().vm(&vm_id).is_none());
    world.stop_operator().await;
}

#[tokio::test]
async fn disk_aliases_follow_every_combination_of_the_gates() {
    let mut world = World::new("aliases").await;
    let cases = [
        ("keep-only", true, false, "ubuntu-22.04_Disk1"),
        ("keep-add", true, true, "ubuntu-22.04_keep-add_Disk1"),
        ("add-only", false, true, "add-only_Disk1"),
        ("neither", false, false, "ubuntu-22.04_Disk1"),
    ];
    for (name, keep, add, expected) in cases {
        let gates = FeatureGates {
            disk_keep_template_name: keep,
            disk_add_vm_name: add,
            ..FeatureGates::default()
        };
        world.start_operator_with_gates(gates).await;
        world.create_machine(name, spec(json!({}))).await;
        let vm_id = disks_ready(&world, name).await;
        let vm = world.sim.control().vm(&vm_id).expect("vm");
        let aliases: Vec<&str> = vm.disks.iter().map(|d| d.alias.as_str()).collect();
        assert_eq!(aliases, [expected], "{name}: keep={keep} add={add}");
        world.stop_operator().await;
    }
}

#[tokio::test]
async fn clone_and_storage_domain_follow_machine_then_provider_then_gate() {
    let mut world = World::new("placement").await;
    let control = world.sim.control().clone();
    let data1 = control.id_of("storagedomain", "data1").expect("data1");
    let data2 = control.id_of("storagedomain", "data2").expect("data2");
    let template = control.id_of("template", "ubuntu-22.04").expect("template");
    let placement = |vm_id: &str| {
        let vm = control.vm(vm_id).expect("vm");
        let cloned = vm.template_id != template;
        let domains: Vec<String> = vm.disks.iter().flat_map(|d| d.storage_domain_ids.clone()).collect();
        (cloned, domains)
    };
    let (api_url, ca) = (world.sim.api_url(), base64_ca(&world));
    let provider_spec = |extra: Value| {
        let mut spec = json!({"engine": api_url, "credentialsSecretName": "engine-credentials", "tls": {"certs": ca}});
        for (key, value) in extra.as_object().cloned().unwrap_or_default() {
            spec[key] = value;
        }
        spec
    };

    world.start_operator().await;
    // Nothing set anywhere: thin copy-on-write disks where the template's are.
    world.create_machine("defaults", spec(json!({}))).await;
    assert_eq!(
        placement(&disks_ready(&world, "defaults").await),
        (false, vec![data1.clone()])
    );
    // The machine's own choice.
    world
        .create_machine(
            "machine-level",
            spec(json!({"diskclone": true, "storagedomainname": "data2"})),
        )
        .await;
    assert_eq!(
        placement(&disks_ready(&world, "machine-level").await),
        (true, vec![data2.clone()])
    );

    // The provider's defaults, when the machine leaves both empty.
    world
        .apply_provider(provider_spec(json!({"diskclone": true, "storagedomainname": "data2"})))
        .await;
    eventually(MINUTE, "the provider's defaults to reach the actor", || async {
        let providers: Api<capov_crds::OVirtProvider> = Api::all(world.client.clone());
        let provider = providers.get(&world.provider).await.ok()?;
        (provider.metadata.generation == provider.status?.conditions.first()?.observed_generation).then_some(())
    })
    .await;
    world.create_machine("provider-level", spec(json!({}))).await;
    assert_eq!(
        placement(&disks_ready(&world, "provider-level").await),
        (true, vec![data2.clone()])
    );
    // The machine's false beats the provider's true: a thin copy cannot go to data2.
    world
        .create_machine("machine-says-no", spec(json!({"diskclone": false})))
        .await;
    let machine = world
        .wait_reason(
            MINUTE,
            "machine-says-no",
            "MachineCreated",
            "StorageDomainRequiresClone",
        )
        .await;
    assert_eq!(
        condition(&machine, "MachineCreated").and_then(|c| c.severity),
        Some(Severity::Error)
    );
    world.stop_operator().await;

    // The gate, when neither the machine nor the provider says.
    world.apply_provider(provider_spec(json!({}))).await;
    let gates = FeatureGates {
        disk_clone: true,
        ..FeatureGates::default()
    };
    world.start_operator_with_gates(gates).await;
    world
        .create_machine("gate-level", spec(json!({"storagedomainname": "data2"})))
        .await;
    assert_eq!(
        placement(&disks_ready(&world, "gate-level").await),
        (true, vec![data2.clone()])
    );
    world.stop_operator().await;
}

fn base64_ca(world: &World) -> String {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD.encode(world.sim.ca_pem().expect("ca"))
}
