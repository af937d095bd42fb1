//! The security rules of ownership and tenancy, tried as a hostile tenant would on a real kube-apiserver with the
//! engine simulator: CAPOV changes a VM only when its marker proves the VM is this very OVirtMachine's, forgets a
//! VM only when the engine it lives on says it is gone, and serves a namespace only where the provider allows it.
//! Each test prints one closing line of what it tried and what it found.

mod support;

use std::time::Duration;

use capov_crds::{ConditionStatus, OVirtMachine, OVirtProvider, Severity};
use capov_harness::objects;
use capov_ovirt_sim::{Inventory, VmSeed, VmSnapshot};
use capov_testkit::eventually;
use k8s_openapi::api::core::v1::{Event, Namespace};
use kube::api::{Api, ListParams, Patch, PatchParams};
use serde_json::json;
use support::{World, condition};

const MINUTE: Duration = Duration::from_secs(60);
const MANAGEMENT_CLUSTER: &str = capov_crds::labels::MANAGEMENT_CLUSTER_ANNOTATION;
const OWNER_UID: &str = capov_crds::labels::OWNER_UID_ANNOTATION;
const RELEASE_VM: &str = capov_crds::labels::RELEASE_VM_ANNOTATION;
const RECONCILE_REQUESTED: &str = capov_crds::labels::RECONCILE_REQUESTED_ANNOTATION;

fn base_spec() -> serde_json::Value {
    json!({"ovirtcluster": "Default", "template": "ubuntu-22.04"})
}

/// The management cluster id CAPOV uses by default: the kube-system namespace's UID.
async fn management_cluster_id(world: &World) -> String {
    Api::<Namespace>::all(world.client.clone())
        .get("kube-system")
        .await
        .expect("kube-system")
        .metadata
        .uid
        .expect("uid")
}

fn seed_vm(world: &World, name: &str, status: &str, description: &str) -> VmSnapshot {
    world
        .sim
        .control()
        .seed(&Inventory {
            vms: vec![VmSeed {
                name: name.into(),
                template: Some("ubuntu-22.04".into()),
                status: status.into(),
                description: description.into(),
                ..VmSeed::default()
            }],
            ..Inventory::default()
        })
        .expect("seed vm");
    world.sim.control().vm_by_name(name).expect("seeded vm")
}

async fn warning_events(world: &World, object: &str, reason: &str) -> Vec<String> {
    let events = Api::<Event>::namespaced(world.client.clone(), &world.namespace)
        .list(&ListParams::default().fields(&format!("involvedObject.name={object}")))
        .await
        .expect("events");
    events
        .items
        .into_iter()
        .filter(|e| e.reason.as_deref() == Some(reason) && e.type_.as_deref() == Some("Warning"))
        .filter_map(|e| e.message)
        .collect()
}

/// A tenant points spec.providerID at a VM that is not its own, once running and once down: CAPOV reports
/// VMNotOwned, never starts, resizes, renames, re-NICs, stops or deletes it, and the OVirtMachine deletes cleanly.
#[tokio::test]
async fn a_hostile_provider_id_never_changes_the_vm_it_names() {
    let mut world = World::new("hostile-id").await;
    let running = seed_vm(&world, "prod-db", "up", "production database");
    let stopped = seed_vm(&world, "prod-cache", "down", "");
    world.start_operator().await;
    for (name, victim) in [("grab-running", &running), ("grab-stopped", &stopped)] {
        let mut spec = base_spec();
        spec["providerID"] = json!(format!("ovirt://{}", victim.id));
        spec["osdisksizegb"] = json!(500);
        spec["nics"] = json!([{"vnicprofile": "ovirtmgmt"}, {"vnicprofile": "ovirtmgmt"}]);
        spec["cpu"] = json!({"sockets": 4});
        world.create_machine(name, spec).await;
    }
    for (name, victim) in [("grab-running", &running), ("grab-stopped", &stopped)] {
        let machine = world.wait_reason(MINUTE, name, "MachineCreated", "VMNotOwned").await;
        let created = condition(&machine, "MachineCreated").expect("MachineCreated");
        assert_eq!(created.status, ConditionStatus::False);
        assert_eq!(created.severity, Some(Severity::Error));
        assert!(created.message.contains("no CAPOV marker"), "{}", created.message);
        let ready = condition(&machine, "Ready").expect("Ready");
        assert_eq!(ready.status, ConditionStatus::False, "{name}");
        // Ready carries the reason that blocks it (it said Unspecified before issue 23).
        assert_eq!(ready.reason, "VMNotOwned", "{name}");
        assert_eq!(
            world.sim.control().vm(&victim.id).as_ref(),
            Some(victim),
            "{name}: VM changed"
        );
        let events = eventually(MINUTE, "VMNotOwned Event", || async {
            let events = warning_events(&world, name, "VMNotOwned").await;
            (!events.is_empty()).then_some(events)
        })
        .await;
        assert!(events[0].contains("never changes it"), "{events:?}");
    }
    for (name, victim) in [("grab-running", &running), ("grab-stopped", &stopped)] {
        world.delete_machine_and_wait(name).await;
        assert_eq!(
            world.sim.control().vm(&victim.id).as_ref(),
            Some(victim),
            "{name}: the deletion touched the VM"
        );
        eventually(MINUTE, "the deletion's VMLeftAlone Event", || async {
            let events = warning_events(&world, name, "VMLeftAlone").await;
            events.iter().any(|e| e.contains("left untouched")).then_some(())
        })
        .await;
    }
    assert_eq!(world.sim.control().vm_count(), 2, "no VM created or deleted");
    println!(
        "hostile providerID: pointed two OVirtMachines at a running and a stopped foreign VM (with resize, NICs, CPU \
         asked); both reported VMNotOwned, deleted cleanly, and the VMs' status, disks, aliases and NICs are unchanged"
    );
    world.stop_operator().await;
}

/// VMs of the same name whose markers name another management cluster, or an earlier (deleted) OVirtMachine of the
/// same name, are neither adopted, changed nor deleted; no second VM is created beside them.
#[tokio::test]
async fn vms_marked_by_another_management_cluster_or_an_earlier_object_are_never_touched() {
    let mut world = World::new("markers").await;
    let mc = management_cluster_id(&world).await;
    let ns = world.namespace.clone();
    let elsewhere = seed_vm(
        &world,
        "elsewhere",
        "up",
        &format!("capov:{ns}/elsewhere uid:0a0a0a0a-0000-4000-8000-000000000001 mc:another-management-cluster"),
    );
    let reborn = seed_vm(
        &world,
        "reborn",
        "down",
        &format!("capov:{ns}/reborn uid:0b0b0b0b-0000-4000-8000-000000000002 mc:{mc}"),
    );
    world.start_operator().await;
    world.create_machine("elsewhere", base_spec()).await;
    world.create_machine("reborn", base_spec()).await;
    for (name, explanation) in [
        ("elsewhere", "another management cluster"),
        ("reborn", "earlier OVirtMachine of the same name"),
    ] {
        let machine = world
            .wait_reason(MINUTE, name, "MachineCreated", "VMNameConflict")
            .await;
        let message = &condition(&machine, "MachineCreated").expect("condition").message;
        assert!(message.contains(explanation), "{name}: {message}");
        assert_eq!(machine.spec.provider_id, None, "{name}: adopted");
    }
    for (name, victim) in [("elsewhere", &elsewhere), ("reborn", &reborn)] {
        world.delete_machine_and_wait(name).await;
        assert_eq!(world.sim.control().vm(&victim.id).as_ref(), Some(victim), "{name}");
    }
    assert_eq!(world.sim.control().vm_count(), 2);
    println!(
        "markers: a VM marked by another management cluster and one left by a deleted same-named OVirtMachine were \
         reported VMNameConflict, never adopted, changed or deleted, and no second VM was created"
    );
    world.stop_operator().await;
}

/// A VM created by an earlier CAPOV (marker without UID) keeps working: recorded in spec.providerID, its marker is
/// rewritten with this object's UID and management cluster; found only by name, it is not adopted.
#[tokio::test]
async fn a_legacy_marker_is_upgraded_on_the_recorded_vm_only() {
    let mut world = World::new("legacy").await;
    let mc = management_cluster_id(&world).await;
    let ns = world.namespace.clone();
    let recorded = seed_vm(&world, "old-worker", "down", &format!("capov:{ns}/old-worker"));
    let unrecorded = seed_vm(&world, "old-orphan", "down", &format!("capov:{ns}/old-orphan"));
    world.start_operator().await;
    let mut spec = base_spec();
    spec["providerID"] = json!(format!("ovirt://{}", recorded.id));
    world.create_machine("old-worker", spec).await;
    world.create_machine("old-orphan", base_spec()).await;

    let uid = eventually(MINUTE, "the marker rewritten", || async {
        let machine = world.machine("old-worker").await;
        let uid = machine.metadata.uid.clone()?;
        let vm = world.sim.control().vm(&recorded.id)?;
        (vm.description == format!("capov:{ns}/old-worker uid:{uid} mc:{mc}")).then_some(uid)
    })
    .await;
    // The upgraded VM goes on through the lifecycle: it is started.
    eventually(MINUTE, "old-worker started", || async {
        let vm = world.sim.control().vm(&recorded.id)?;
        (vm.status != "down").then_some(())
    })
    .await;
    let machine = world.machine("old-worker").await;
    assert_eq!(
        machine
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get("capov.infrastructure.cluster.x-k8s.io/owner-uid")),
        Some(&uid)
    );
    world
        .wait_reason(MINUTE, "old-orphan", "MachineCreated", "VMNameConflict")
        .await;
    assert_eq!(world.sim.control().vm(&unrecorded.id).as_ref(), Some(&unrecorded));
    println!(
        "legacy marker: the VM recorded in spec.providerID got the marker with UID {uid} and was started; the \
         unrecorded one was refused as VMNameConflict and left unchanged"
    );
    world.stop_operator().await;
}

/// After `clusterctl move`: the provider brought the id of the management cluster its VMs were marked by (its
/// annotation), and each OVirtMachine the UID it had there (its owner-uid annotation). The VM spec.providerID names
/// is adopted and its marker rewritten with the new UID, without any VM created; the same annotations forged on an
/// object without providerID, or on a VM of a cluster the provider does not name, get nothing.
#[tokio::test]
async fn a_moved_machine_keeps_its_vm_and_forged_annotations_get_nothing() {
    let mut world = World::new("moved").await;
    let ns = world.namespace.clone();
    let providers: Api<OVirtProvider> = Api::all(world.client.clone());
    let moved_here = json!({"metadata": {"annotations": {MANAGEMENT_CLUSTER: "source-cluster"}}});
    providers
        .patch(&world.provider, &PatchParams::default(), &Patch::Merge(&moved_here))
        .await
        .expect("annotate the provider");
    let old_uid = |n: u8| format!("0c0c0c0c-0000-4000-8000-0000000000{n:02}");
    let moved = seed_vm(
        &world,
        "moved-worker",
        "up",
        &format!("capov:{ns}/moved-worker uid:{} mc:source-cluster", old_uid(1)),
    );
    let orphan = seed_vm(
        &world,
        "reborn",
        "down",
        &format!("capov:{ns}/reborn uid:{} mc:source-cluster", old_uid(2)),
    );
    let third = seed_vm(
        &world,
        "third",
        "up",
        &format!("capov:{ns}/third uid:{} mc:third-cluster", old_uid(3)),
    );
    let machines: Api<OVirtMachine> = Api::namespaced(world.client.clone(), &ns);
    for (name, vm, n) in [
        ("moved-worker", Some(&moved), 1),
        ("reborn", None, 2),
        ("third", Some(&third), 3),
    ] {
        let mut spec = base_spec();
        if let Some(vm) = vm {
            spec["providerID"] = json!(format!("ovirt://{}", vm.id));
        }
        world.create_machine(name, spec).await;
        let carried = json!({"metadata": {"annotations": {OWNER_UID: old_uid(n)}}});
        machines
            .patch(name, &PatchParams::default(), &Patch::Merge(&carried))
            .await
            .expect("owner-uid");
    }
    world.start_operator().await;

    let new_uid = eventually(MINUTE, "the moved VM's marker rewritten", || async {
        let uid = world.machine("moved-worker").await.metadata.uid?;
        let vm = world.sim.control().vm(&moved.id)?;
        (vm.description == format!("capov:{ns}/moved-worker uid:{uid} mc:source-cluster")).then_some(uid)
    })
    .await;
    eventually(MINUTE, "the owner-uid annotation follows", || async {
        let machine = world.machine("moved-worker").await;
        let recorded = machine.metadata.annotations.as_ref()?.get(OWNER_UID)?.clone();
        (recorded == new_uid).then_some(())
    })
    .await;
    let reborn = world
        .wait_reason(MINUTE, "reborn", "MachineCreated", "VMNameConflict")
        .await;
    let message = &condition(&reborn, "MachineCreated").expect("condition").message;
    assert!(message.contains("owner-uid"), "{message}");
    let foreign = world.wait_reason(MINUTE, "third", "MachineCreated", "VMNotOwned").await;
    let message = &condition(&foreign, "MachineCreated").expect("condition").message;
    assert!(message.contains("another management cluster"), "{message}");
    assert_eq!(world.sim.control().vm(&orphan.id).as_ref(), Some(&orphan));
    assert_eq!(world.sim.control().vm(&third.id).as_ref(), Some(&third));
    assert_eq!(world.sim.control().counter("POST /vms"), 0, "a VM was created");

    world.delete_machine_and_wait("moved-worker").await;
    assert!(
        world.sim.control().vm(&moved.id).is_none(),
        "the moved VM was left behind"
    );
    world.delete_machine_and_wait("reborn").await;
    assert_eq!(world.sim.control().vm(&orphan.id).as_ref(), Some(&orphan), "reborn");
    // "third" is this very machine's VM under a cluster the provider does not name: its deletion waits (issue 35)
    // until it is told to leave the VM (or the VM is adopted).
    Api::<OVirtMachine>::namespaced(world.client.clone(), &ns)
        .delete("third", &Default::default())
        .await
        .expect("delete third");
    world
        .wait_reason(MINUTE, "third", "MachineDeleted", "VMOfAnotherManagementCluster")
        .await;
    let release = json!({"metadata": {"annotations": {RELEASE_VM: "true"}}});
    machines
        .patch("third", &PatchParams::default(), &Patch::Merge(&release))
        .await
        .expect("release-vm");
    eventually(MINUTE, "third: released", || async {
        machines.get_opt("third").await.expect("get").is_none().then_some(())
    })
    .await;
    assert_eq!(world.sim.control().vm(&third.id).as_ref(), Some(&third), "third");
    println!(
        "moved: the provider's id and the owner-uid annotation adopted the VM spec.providerID names (marker rewritten \
         to UID {new_uid}, deleted with its machine, no VM created); forged on a name-only object: VMNameConflict; \
         on a third cluster's VM: VMNotOwned; both VMs unchanged"
    );

    // An annotation a platform admin got wrong stops the provider with a reason that says so; without one, CAPOV
    // writes this cluster's id.
    let wrong = json!({"metadata": {"annotations": {MANAGEMENT_CLUSTER: "two words"}}});
    providers
        .patch(&world.provider, &PatchParams::default(), &Patch::Merge(&wrong))
        .await
        .expect("annotate the provider");
    eventually(MINUTE, "the provider refuses the annotation", || async {
        let provider = providers.get(&world.provider).await.ok()?;
        let ready = provider.status?.conditions.into_iter().find(|c| c.type_ == "Ready")?;
        (ready.reason == "InvalidManagementClusterID" && ready.message.contains(MANAGEMENT_CLUSTER)).then_some(())
    })
    .await;
    let removed = json!({"metadata": {"annotations": {MANAGEMENT_CLUSTER: null}}});
    providers
        .patch(&world.provider, &PatchParams::default(), &Patch::Merge(&removed))
        .await
        .expect("remove the annotation");
    let own = management_cluster_id(&world).await;
    eventually(MINUTE, "this cluster's id written", || async {
        let provider = providers.get(&world.provider).await.ok()?;
        (provider.metadata.annotations?.get(MANAGEMENT_CLUSTER)? == &own).then_some(())
    })
    .await;
    world.stop_operator().await;
}

/// spec.allowedNamespaces: a namespace not allowed gets NamespaceNotAllowed and causes no engine request; widening
/// the list (here by a label selector) lets the same machine proceed without a restart.
#[tokio::test]
async fn a_provider_serves_only_the_namespaces_it_allows() {
    let mut world = World::new("tenancy").await;
    let (ca, url) = (base64_ca(&world), world.sim.api_url());
    let spec = |allowed: serde_json::Value| {
        json!({"engine": url, "credentialsSecretName": "engine-credentials", "tls": {"certs": ca},
               "allowedNamespaces": allowed})
    };
    world
        .apply_provider(spec(json!({"names": ["some-other-tenant"]})))
        .await;
    world.start_operator().await;
    world.create_machine("tenant-a", base_spec()).await;
    let machine = world
        .wait_reason(MINUTE, "tenant-a", "CanConnectToOVirt", "NamespaceNotAllowed")
        .await;
    let connect = condition(&machine, "CanConnectToOVirt").expect("condition");
    assert_eq!(connect.severity, Some(Severity::Error));
    assert!(connect.message.contains("allowedNamespaces"), "{}", connect.message);
    // The machine actor's requests carry its key as correlation id, reduced by the client to `[A-Za-z0-9_-]`.
    let correlation = format!("capov-machine{}tenant-a", world.namespace);
    let requests_for_it = |world: &World| {
        world
            .sim
            .control()
            .correlation_ids()
            .into_iter()
            .filter(|id| *id == correlation)
            .count()
    };
    assert_eq!(requests_for_it(&world), 0, "a refused machine reached the engine");
    assert_eq!(world.sim.control().vm_count(), 0);

    // Widen the list by a label selector and label the namespace: no restart.
    let namespaces = Api::<Namespace>::all(world.client.clone());
    let label = json!({"metadata": {"labels": {"capov-test/tenant": "a"}}});
    namespaces
        .patch(&world.namespace, &PatchParams::default(), &Patch::Merge(&label))
        .await
        .expect("label namespace");
    world
        .apply_provider(spec(json!({"selector": {"matchLabels": {"capov-test/tenant": "a"}}})))
        .await;
    world.vm_id("tenant-a").await;
    let machine = world
        .wait_reason(MINUTE, "tenant-a", "CanConnectToOVirt", "Connected")
        .await;
    assert_eq!(
        condition(&machine, "CanConnectToOVirt").map(|c| c.status),
        Some(ConditionStatus::True)
    );
    let served = requests_for_it(&world);
    assert!(served > 0, "the allowed machine's requests carry its correlation id");
    println!(
        "allowedNamespaces: refused with NamespaceNotAllowed and 0 engine requests while the list named another \
         namespace; after a selector matching this namespace's label, the same machine got its VM ({served} requests)"
    );
    world.stop_operator().await;
}

/// spec.provider is immutable once the VM exists; a provider repointed at another engine does not orphan the VM
/// on deletion: the machine says what to do, and deletion finishes once the provider points back.
#[tokio::test]
async fn a_repointed_provider_blocks_deletion_instead_of_orphaning_the_vm() {
    let mut world = World::new("repoint").await;
    let other = capov_ovirt_sim::Simulator::builder()
        .start()
        .await
        .expect("second simulator");
    let both_cas = format!("{}{}", world.sim.ca_pem().expect("ca"), other.ca_pem().expect("ca"));
    let ca = base64::Engine::encode(&base64::engine::general_purpose::STANDARD, both_cas);
    let spec = |url: &str| json!({"engine": url, "credentialsSecretName": "engine-credentials", "tls": {"certs": ca}});
    world.apply_provider(spec(&world.sim.api_url())).await;
    world.start_operator().await;
    let vm_id = world.bring_to_ready("worker").await;

    let machines = Api::<OVirtMachine>::namespaced(world.client.clone(), &world.namespace);
    let repoint = json!({"spec": {"provider": "another-provider"}});
    let refused = machines
        .patch("worker", &PatchParams::default(), &Patch::Merge(&repoint))
        .await
        .expect_err("spec.provider changed after providerID");
    assert!(refused.to_string().contains("spec.provider cannot change"), "{refused}");

    world.apply_provider(spec(&other.api_url())).await;
    let providers = Api::<OVirtProvider>::all(world.client.clone());
    eventually(MINUTE, "provider connected to the other engine", || async {
        let provider = providers.get(&world.provider).await.ok()?;
        let status = provider.status?;
        (status.ready && provider.spec.engine == other.api_url()).then_some(())
    })
    .await;
    machines.delete("worker", &Default::default()).await.expect("delete");
    let machine = world
        .wait_reason(MINUTE, "worker", "MachineDeleted", "EngineChanged")
        .await;
    let message = &condition(&machine, "MachineDeleted").expect("condition").message;
    assert!(message.contains("Point the OVirtProvider back"), "{message}");
    assert!(world.sim.control().vm(&vm_id).is_some(), "the VM was forgotten");

    world.apply_provider(spec(&world.sim.api_url())).await;
    eventually(MINUTE, "VM deleted on its engine", || async {
        world.sim.control().vm(&vm_id).is_none().then_some(())
    })
    .await;
    eventually(MINUTE, "OVirtMachine gone", || async {
        machines.get_opt("worker").await.ok()?.is_none().then_some(())
    })
    .await;
    assert_eq!(other.control().vm_count(), 0);
    println!(
        "repoint: spec.provider change refused at admission; deletion with the provider on another engine held with \
         EngineChanged and the VM kept; pointed back, the VM was deleted on its own engine"
    );
    world.stop_operator().await;
}

/// A started VM whose system disks were never recorded keeps a non-system disk from being deleted with it.
#[tokio::test]
async fn without_recorded_system_disks_an_attached_data_disk_blocks_deletion() {
    let mut world = World::new("no-annotation").await;
    world.start_operator().await;
    let vm_id = world.bring_to_ready("worker").await;
    let machines = Api::<OVirtMachine>::namespaced(world.client.clone(), &world.namespace);
    let forget = json!({"metadata": {"annotations": {"capov.infrastructure.cluster.x-k8s.io/system-disks": null}}});
    machines
        .patch("worker", &PatchParams::default(), &Patch::Merge(&forget))
        .await
        .expect("drop the annotation");
    let disk = world
        .sim
        .control()
        .attach_disk(&vm_id, "pvc-data", 5 << 30)
        .expect("attach");
    machines.delete("worker", &Default::default()).await.expect("delete");
    let machine = world
        .wait_reason(MINUTE, "worker", "MachineDeleted", "VMHasNonSystemDisk")
        .await;
    let message = &condition(&machine, "MachineDeleted").expect("condition").message;
    assert!(
        message.starts_with("VM has non system disk, cannot delete"),
        "{message}"
    );
    let vm = world.sim.control().vm(&vm_id).expect("VM kept");
    assert!(vm.disks.iter().any(|d| d.id == disk), "the data disk is still attached");
    assert_eq!(vm.status, "up", "the VM was not stopped");
    println!("no annotation: a started VM with data disk {disk} attached was neither stopped nor deleted ({message})");

    // Cleanup: once the disk is detached, deletion proceeds at the next pass (touch the object for it).
    world.sim.control().detach_disk(&vm_id, &disk).expect("detach");
    let touch = json!({"metadata": {"annotations": {RECONCILE_REQUESTED: "1"}}});
    machines
        .patch("worker", &PatchParams::default(), &Patch::Merge(&touch))
        .await
        .expect("touch");
    eventually(MINUTE, "VM deleted", || async {
        world.sim.control().vm(&vm_id).is_none().then_some(())
    })
    .await;
    world.stop_operator().await;
}

fn base64_ca(world: &World) -> String {
    base64::Engine::encode(
        &base64::engine::general_purpose::STANDARD,
        world.sim.ca_pem().expect("https simulator"),
    )
}

/// Issue 35: after `clusterctl move` onto a management cluster whose OVirtProvider already existed (clusterctl keeps
/// the target's, without the source's management-cluster id), the machine's VM carries its marker from the source
/// cluster. Deleting the machine used to release it and leave the VM running in oVirt. Now the deletion waits with
/// a condition that names the source cluster and both ways on: the admin adopts the VM (it is then deleted with the
/// machine), or the user lets the machine go with the release-vm annotation (the VM stays, on purpose).
#[tokio::test]
async fn a_moved_machines_vm_marked_by_another_management_cluster_is_never_left_behind_unnoticed() {
    let mut world = World::new("moved-existing").await;
    let ns = world.namespace.clone();
    let old_uid = |n: u8| format!("0d0d0d0d-0000-4000-8000-0000000000{n:02}");
    let adopted = seed_vm(
        &world,
        "moved-a",
        "up",
        &format!("capov:{ns}/moved-a uid:{} mc:source-cluster", old_uid(1)),
    );
    let released = seed_vm(
        &world,
        "moved-b",
        "up",
        &format!("capov:{ns}/moved-b uid:{} mc:source-cluster", old_uid(2)),
    );
    let machines: Api<OVirtMachine> = Api::namespaced(world.client.clone(), &ns);
    for (name, vm, n) in [("moved-a", &adopted, 1), ("moved-b", &released, 2)] {
        let mut spec = base_spec();
        spec["providerID"] = json!(format!("ovirt://{}", vm.id));
        world.create_machine(name, spec).await;
        let carried = json!({"metadata": {"annotations": {OWNER_UID: old_uid(n)}}});
        machines
            .patch(name, &PatchParams::default(), &Patch::Merge(&carried))
            .await
            .expect("owner-uid");
    }
    world.start_operator().await;
    for name in ["moved-a", "moved-b"] {
        world.wait_reason(MINUTE, name, "MachineCreated", "VMNotOwned").await;
        machines.delete(name, &Default::default()).await.expect("delete");
    }
    let own = management_cluster_id(&world).await;
    for name in ["moved-a", "moved-b"] {
        let held = world
            .wait_reason(MINUTE, name, "MachineDeleted", "VMOfAnotherManagementCluster")
            .await;
        let message = &condition(&held, "MachineDeleted").expect("condition").message;
        for says in [
            "\"source-cluster\"".to_string(),
            format!("{MANAGEMENT_CLUSTER}={own},source-cluster --overwrite"),
            format!("{RELEASE_VM}=true"),
        ] {
            assert!(message.contains(&says), "{name}: {says} not in {message}");
        }
    }
    assert!(world.sim.control().vm(&adopted.id).is_some() && world.sim.control().vm(&released.id).is_some());

    // The user lets moved-b go: the object is released and its VM stays, untouched.
    let release = json!({"metadata": {"annotations": {RELEASE_VM: "true"}}});
    machines
        .patch("moved-b", &PatchParams::default(), &Patch::Merge(&release))
        .await
        .expect("release-vm");
    eventually(MINUTE, "moved-b released", || async {
        machines.get_opt("moved-b").await.expect("get").is_none().then_some(())
    })
    .await;
    assert_eq!(world.sim.control().vm(&released.id).as_ref(), Some(&released));

    // The admin adopts the source cluster's VMs, as the condition says: moved-a's VM goes with it.
    let providers: Api<OVirtProvider> = Api::all(world.client.clone());
    let adopt = json!({"metadata": {"annotations": {MANAGEMENT_CLUSTER: format!("{own},source-cluster")}}});
    providers
        .patch(&world.provider, &PatchParams::default(), &Patch::Merge(&adopt))
        .await
        .expect("annotate the provider");
    eventually(MINUTE, "moved-a deleted with its VM", || async {
        let gone = machines.get_opt("moved-a").await.expect("get").is_none();
        (gone && world.sim.control().vm(&adopted.id).is_none()).then_some(())
    })
    .await;
    world.stop_operator().await;
    println!(
        "moved onto an existing provider: both deletions waited with VMOfAnotherManagementCluster naming \
         source-cluster; release-vm let moved-b go with its VM kept; adopting source-cluster on the provider \
         deleted moved-a's VM with it"
    );
}

/// Issue 35: the VM's identity is frozen from the moment CAPOV records the VM it created. While a machine's disks
/// are copied, a tenant changes spec.vmnametemplate on one machine and the cluster-name label (`{cluster}` in its
/// template) on another. Each used to get a second VM, and deleting both machines left the first VMs in oVirt.
#[tokio::test]
async fn edits_while_the_disks_are_copied_make_no_second_vm_and_deletion_finds_the_first() {
    let mut world = World::new("identity").await;
    let ns = world.namespace.clone();
    objects::create_provisioned_cluster(&world.client, &ns, "workload-b", world.labels())
        .await
        .expect("second cluster");
    world.sim.control().hold(capov_ovirt_sim::Transition::VmImagesReady);
    world.start_operator().await;
    let mut template_spec = base_spec();
    template_spec["provider"] = json!(world.provider);
    template_spec["vmnametemplate"] = json!("a-{name}");
    let mut label_spec = base_spec();
    label_spec["provider"] = json!(world.provider);
    label_spec["vmnametemplate"] = json!("{cluster}-{name}");
    world.create_machine("by-template", template_spec).await;
    world.create_machine("by-label", label_spec).await;
    for name in ["by-template", "by-label"] {
        world.wait_reason(MINUTE, name, "MachineCreated", "VMImageLocked").await;
    }
    let first: Vec<String> = ["a-by-template", "workload-by-label"]
        .iter()
        .map(|vm| world.sim.control().vm_by_name(vm).expect("first VM").id)
        .collect();

    // The edits. The label's is made together with a spec change (memory), so that the pass after it shows in the
    // conditions' observedGeneration; nothing in the spec change touches the VM's identity.
    let machines: Api<OVirtMachine> = Api::namespaced(world.client.clone(), &ns);
    let edits = [
        ("by-template", json!({"spec": {"vmnametemplate": "edited-{name}"}})),
        (
            "by-label",
            json!({"metadata": {"labels": {"cluster.x-k8s.io/cluster-name": "workload-b"}},
                   "spec": {"memory": {"sizemb": 2048}}}),
        ),
    ];
    for (name, edit) in &edits {
        let edited = machines
            .patch(name, &PatchParams::default(), &Patch::Merge(edit))
            .await
            .expect("edit");
        let generation = edited.metadata.generation;
        eventually(MINUTE, format!("{name}: a pass after the edit"), || async {
            let machine = machines.get(name).await.ok()?;
            let seen = condition(&machine, "MachineCreated")?.observed_generation;
            (seen == generation).then_some(())
        })
        .await;
    }
    let vms_now = world.sim.control().vm_count();
    assert_eq!(vms_now, 2, "a second VM was created after an edit");

    world.sim.control().release(capov_ovirt_sim::Transition::VmImagesReady);
    for (name, vm) in ["by-template", "by-label"].iter().zip(&first) {
        assert_eq!(
            &world.vm_id(name).await,
            vm,
            "{name}: spec.providerID names the first VM"
        );
    }
    for name in ["by-template", "by-label"] {
        world.delete_machine_and_wait(name).await;
    }
    let left: Vec<String> = world.sim.control().vms().into_iter().map(|vm| vm.name).collect();
    assert!(left.is_empty(), "VMs left behind: {left:?}");
    world.stop_operator().await;
    println!(
        "edits while the disks were copied (vmnametemplate a-{{name}} -> edited-{{name}}, cluster-name label \
         workload -> workload-b): 2 VMs in all, each machine's providerID names its first VM, none left after both \
         deletions"
    );
}
