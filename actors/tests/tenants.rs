//! What a hostile or careless tenant can write, and what CAPOV answers (issue 23), on a real kube-apiserver with the
//! engine simulator: each case gives a clear condition, touches nothing that is not the machine's own, and costs
//! the engine and the operator only what it must.

mod support;

use std::time::{Duration, Instant};

use capov_actors::metrics::Metrics;
use capov_actors::runtime::{self, RuntimeSettings};
use capov_crds::OVirtMachine;
use capov_crds::labels::MACHINE_FINALIZER;
use capov_harness::{ControlPlane, Engine, Options};
use capov_ovirt_sim::Simulator;
use capov_testkit::eventually;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use kube::core::CustomResourceExt;
use serde_json::{Value, json};

const MINUTE: Duration = Duration::from_secs(60);

/// Engine requests about VMs (`GET /vms`, `GET /vms/{id}`, …), by the simulator's per-endpoint counters.
fn vm_requests(sim: &capov_ovirt_sim::SimulatorHandle) -> u64 {
    sim.control()
        .counters()
        .iter()
        .filter(|(endpoint, _)| endpoint.contains(" /vms"))
        .map(|(_, count)| count)
        .sum()
}

/// The OVirtMachine CRD as `crdgen` writes it, or without the providerID rule (as CRDs before issue 23 were).
fn machine_crd(with_provider_id_rule: bool) -> Value {
    let mut crd = serde_json::to_value(OVirtMachine::crd()).expect("CRD");
    if !with_provider_id_rule {
        let provider_id = &mut crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]
            ["providerID"];
        let rules = provider_id
            .as_object_mut()
            .and_then(|field| field.remove("x-kubernetes-validations"));
        assert!(rules.is_some(), "the CRD has a providerID rule to take away");
    }
    crd
}

async fn apply_crd(client: &kube::Client, crd: &Value) {
    let api: Api<CustomResourceDefinition> = Api::all(client.clone());
    let name = crd["metadata"]["name"].as_str().expect("CRD name");
    api.patch(name, &PatchParams::apply("tenants-test").force(), &Patch::Apply(crd))
        .await
        .expect("apply the CRD");
}

/// Issue 23, item 2: `providerID: ovirt://..` was read as `GET /vms/..`, which the URL library turned into a listing
/// of every VM, once per pass, and the deletion of such a machine did not finish. Now the apiserver refuses the
/// value; a machine that got one under an older CRD (installed here on a control plane of its own, since the test
/// changes a CRD) is released at its deletion without a single engine request about VMs.
#[tokio::test]
async fn a_provider_id_without_a_vm_id_is_refused_and_an_old_one_is_released_without_an_engine_call() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let plane = ControlPlane::start(Options {
        crds: true,
        capi_crds: true,
        ..Options::default()
    })
    .await
    .expect("control plane");
    let client = plane.client().await.expect("client");
    let namespace = plane
        .create_namespace(&client, "old-provider-id")
        .await
        .expect("namespace");
    let engine = Engine::start(&client, &namespace, Simulator::builder())
        .await
        .expect("engine");
    let machines: Api<OVirtMachine> = Api::namespaced(client.clone(), &namespace);
    let machine = |name: &str, provider_id: &str| -> OVirtMachine {
        serde_json::from_value(json!({
            "apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1", "kind": "OVirtMachine",
            "metadata": {"name": name, "finalizers": [MACHINE_FINALIZER]},
            "spec": {"provider": engine.provider, "ovirtcluster": "Default", "template": "ubuntu-22.04",
                     "providerID": provider_id}
        }))
        .expect("machine")
    };

    // The current CRD refuses it, with a message that says what to write.
    let refused = machines
        .create(&PostParams::default(), &machine("dots", "ovirt://.."))
        .await
        .expect_err("ovirt://.. is refused");
    assert!(
        refused.to_string().contains("spec.providerID must be ovirt://<VM id>"),
        "{refused}"
    );

    // An older CRD took it. The apiserver applies a CRD change asynchronously: retried until it is in effect.
    apply_crd(&client, &machine_crd(false)).await;
    for (name, provider_id) in [("dots", "ovirt://.."), ("dot", "ovirt://.")] {
        eventually(MINUTE, format!("{name} accepted by the older CRD"), || async {
            machines
                .create(&PostParams::default(), &machine(name, provider_id))
                .await
                .map(|_| ())
                .map_err(|err| err.to_string())
        })
        .await;
    }
    apply_crd(&client, &machine_crd(true)).await;
    eventually(MINUTE, "the current CRD in effect again", || async {
        let dry_run = PostParams {
            dry_run: true,
            ..PostParams::default()
        };
        machines
            .create(&dry_run, &machine("probe", "ovirt://.."))
            .await
            .is_err()
            .then_some(())
    })
    .await;

    let mut config = kube::Config::from_custom_kubeconfig(
        kube::config::Kubeconfig::read_from(plane.kubeconfig_path()).expect("kubeconfig"),
        &Default::default(),
    )
    .await
    .expect("kube config");
    config.default_namespace = namespace.clone();
    let settings = RuntimeSettings {
        credentials_namespace: namespace.clone(),
        watch_namespace: Some(namespace.clone()),
        poll_interval: Duration::from_millis(200),
        ..RuntimeSettings::default()
    };
    let clients = runtime::KubeClients::new(config).expect("operator clients");
    let operator = runtime::start(clients, settings, Metrics::new())
        .await
        .expect("runtime");
    // The provider connects first: a released machine then shows it was not for want of a connection.
    eventually(MINUTE, "the provider connected", || async {
        let providers: Api<capov_crds::OVirtProvider> = Api::all(client.clone());
        let provider = providers.get(&engine.provider).await.ok()?;
        provider.status?.ready.then_some(())
    })
    .await;

    let deleting = Instant::now();
    for name in ["dots", "dot"] {
        machines.delete(name, &DeleteParams::default()).await.expect("delete");
    }
    eventually(Duration::from_secs(20), "both machines released", || async {
        let left = machines.list(&Default::default()).await.expect("list");
        left.items
            .is_empty()
            .then_some(())
            .ok_or(format!("{} left", left.items.len()))
    })
    .await;
    let released_in = deleting.elapsed();
    let vm_requests = vm_requests(&engine.sim);
    let machine_requests = engine
        .sim
        .control()
        .correlation_ids()
        .iter()
        .filter(|id| id.contains(&format!("/{namespace}/")))
        .count();
    assert_eq!(
        vm_requests,
        0,
        "engine requests about VMs: {:?}",
        engine.sim.control().counters()
    );
    assert_eq!(machine_requests, 0, "engine requests made for the machines");
    operator
        .stop_and_wait(None, Some(Duration::from_secs(10)))
        .await
        .expect("stop");
    println!(
        "providerID without a VM id: ovirt://.. refused by the CRD; two machines created \
         under an older CRD were released {released_in:?} after their deletion with {vm_requests} engine requests \
         about VMs and {machine_requests} requests tagged for the machines"
    );
}

/// Issue 23, item 3: a VM name taken by a VM the engine user cannot see made the engine refuse every create with
/// "name in use", retried with nothing on the machine; and of several VMs sharing a name (one per data center), the
/// first was taken even when another carried this machine's marker. Here CAPOV's engine user has no administrative
/// role (it sees only VMs it has a role on).
#[tokio::test]
async fn name_clashes_are_reported_and_the_vm_marked_for_the_machine_is_preferred() {
    use capov_ovirt_sim::{ClusterSeed, DataCenterSeed, Inventory, VmSeed};
    use k8s_openapi::api::core::v1::Namespace;
    use support::{NON_ADMIN_USER, World, condition};

    let mut world = World::new_non_admin("name-clash").await;
    let spec = json!({"ovirtcluster": "Default", "template": "ubuntu-22.04"});
    world.create_machine("clash", spec.clone()).await;
    world.create_machine("twin", spec).await;
    let management_cluster = Api::<Namespace>::all(world.client.clone())
        .get("kube-system")
        .await
        .expect("kube-system")
        .metadata
        .uid
        .expect("uid");
    let twin_uid = world.machine("twin").await.metadata.uid.expect("uid");
    let marker = format!("capov:{}/twin uid:{twin_uid} mc:{management_cluster}", world.namespace);
    let (foreign_twin, own_twin) = (
        "00000000-0000-4000-8000-0000000000a1",
        "ffffffff-0000-4000-8000-0000000000a2",
    );
    let vm = |id: Option<&str>, name: &str, cluster: &str, description: &str, created_by: Option<&str>| VmSeed {
        id: id.map(String::from),
        name: name.into(),
        cluster: Some(cluster.into()),
        description: description.into(),
        created_by: created_by.map(String::from),
        ..VmSeed::default()
    };
    world
        .sim
        .control()
        .seed(&Inventory {
            data_centers: vec![DataCenterSeed {
                id: None,
                name: "Remote".into(),
            }],
            clusters: vec![ClusterSeed {
                id: None,
                name: "Remote".into(),
                data_center: "Remote".into(),
            }],
            vms: vec![
                // Another team's VM in CAPOV's data center, on which CAPOV's user has no role.
                vm(None, "clash", "Default", "production database", None),
                // Two VMs named like machine twin, one per data center; the second carries twin's marker.
                vm(Some(foreign_twin), "twin", "Remote", "", Some(NON_ADMIN_USER)),
                vm(Some(own_twin), "twin", "Default", &marker, Some(NON_ADMIN_USER)),
            ],
            ..Inventory::default()
        })
        .expect("seed");
    let untouched = world.sim.control().vms();
    world.start_operator().await;

    let machine = world
        .wait_reason(MINUTE, "clash", "MachineCreated", "VMNameConflict")
        .await;
    let created = condition(&machine, "MachineCreated").expect("MachineCreated");
    assert!(
        created.message.contains("cannot see") && created.message.contains("Rename or remove it in oVirt"),
        "{}",
        created.message
    );
    assert_eq!(
        condition(&machine, "Ready").map(|c| c.reason.as_ref()),
        Some("VMNameConflict")
    );
    eventually(MINUTE, "twin adopting the VM with its marker", || async {
        let provider_id = world.machine("twin").await.spec.provider_id;
        (provider_id == Some(format!("ovirt://{own_twin}")))
            .then_some(())
            .ok_or(format!("{provider_id:?}"))
    })
    .await;
    let control = world.sim.control();
    for before in untouched.iter().filter(|vm| vm.id != own_twin) {
        assert_eq!(control.vm(&before.id).as_ref(), Some(before), "{} changed", before.name);
    }
    assert_eq!(
        control.vms().iter().filter(|vm| vm.name == "clash").count(),
        1,
        "no second VM named clash"
    );
    world.stop_operator().await;
    println!(
        "name clashes: a name taken by a VM the engine user cannot see gave MachineCreated (and Ready) \
         VMNameConflict from the engine's answer; of two VMs named twin in two data centers, the one carrying the \
         machine's marker was recorded, not the first; no foreign VM changed"
    );
}

/// Provider status-poll searches the simulator saw (the correlation id of the provider's batched poll).
fn poll_searches(sim: &capov_ovirt_sim::SimulatorHandle) -> usize {
    let ids = sim.control().correlation_ids();
    assert!(
        ids.len() < 1000,
        "the simulator forgot correlation ids: counts would be wrong"
    );
    ids.iter().filter(|id| id.as_str() == "capov-status-poll").count()
}

/// What the supervisor gets when the actor of provider `name` failed and its restart delay passed (the failure
/// itself cannot be caused from outside), and once it has handled it: its messages are handled in order, so the
/// answer to the readiness question that follows comes after.
async fn restart_provider(world: &support::World, name: &str) {
    let supervisor = world.operator.as_ref().expect("operator running");
    let restart = runtime::SupervisorMsg::RestartProvider(name.to_string());
    runtime::mailbox::cast(&world.metrics, supervisor, restart).expect("cast");
    runtime::is_synced(supervisor, &world.metrics).await;
}

/// Issue 23, items 9, 4 and 7. A machine whose access is revoked after CAPOV created its VM, while the VM's disks are
/// still copied (so spec.providerID is not written yet), was released at its deletion, leaving the VM behind, and the
/// provider kept reading that VM. And a machine the provider refuses held the provider's finalizer: any namespace
/// could keep a provider from being deleted. And the restart of a provider actor that failed replayed the object as
/// it was at the failure, undoing a narrowing or a deletion made meanwhile.
#[tokio::test]
async fn revoked_access_keeps_created_vms_refused_machines_hold_no_provider_and_restarts_undo_nothing() {
    use capov_crds::OVirtProvider;
    use capov_crds::labels::CREATED_VM_ANNOTATION;
    use capov_ovirt_sim::Transition;
    use kube::ResourceExt;
    use support::{World, condition};

    let mut world = World::new("revoked").await;
    let providers: Api<OVirtProvider> = Api::all(world.client.clone());
    let provider = world.provider.clone();
    let allow = |allowed: Value| {
        let providers = providers.clone();
        let name = provider.clone();
        async move {
            let patch = json!({"spec": {"allowedNamespaces": allowed}});
            providers
                .patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
                .await
                .expect("allowedNamespaces");
        }
    };
    // The VM's disks stay "being copied" until released: its spec.providerID waits for them.
    world.sim.control().hold(Transition::VmImagesReady);
    world.start_operator().await;
    world
        .create_machine("early", json!({"ovirtcluster": "Default", "template": "ubuntu-22.04"}))
        .await;
    let vm_id = eventually(MINUTE, "the created VM recorded on the machine", || async {
        world
            .machine("early")
            .await
            .annotations()
            .get(CREATED_VM_ANNOTATION)
            .cloned()
    })
    .await;
    assert_eq!(
        world.sim.control().vm(&vm_id).map(|vm| vm.status),
        Some("image_locked".to_string())
    );
    assert_eq!(world.machine("early").await.spec.provider_id, None);
    // The provider's poll watches the VM meanwhile.
    let watched_from = poll_searches(&world.sim);
    eventually(MINUTE, "the provider polling the VM", || async {
        (poll_searches(&world.sim) >= watched_from + 3).then_some(())
    })
    .await;

    allow(json!({})).await;
    world
        .wait_reason(MINUTE, "early", "CanConnectToOVirt", "NamespaceNotAllowed")
        .await;
    // Item 7: the restart timer of a provider actor that failed, arriving after the narrowing, does not bring the
    // old access list back (it re-reads the object; here an actor runs, so it does nothing).
    restart_provider(&world, &provider).await;
    world
        .wait_reason(MINUTE, "early", "CanConnectToOVirt", "NamespaceNotAllowed")
        .await;
    let machines: Api<OVirtMachine> = Api::namespaced(world.client.clone(), &world.namespace);
    machines
        .delete("early", &DeleteParams::default())
        .await
        .expect("delete");
    let held = eventually(MINUTE, "the deletion held for the VM", || async {
        let machine = world.machine("early").await;
        let message = condition(&machine, "CanConnectToOVirt").map(|c| c.message.clone());
        let held = machine.metadata.deletion_timestamp.is_some()
            && message
                .as_deref()
                .is_some_and(|m| m.contains(&vm_id) && m.contains("keeps its finalizer"));
        if held { Ok(message) } else { Err(format!("{message:?}")) }
    })
    .await;
    // The provider stops reading the VM: no poll search over ten poll intervals (it searched every interval before).
    let unwatched_at = poll_searches(&world.sim);
    let window = world.settings().poll_interval * 10;
    tokio::time::sleep(window).await;
    assert_eq!(
        poll_searches(&world.sim),
        unwatched_at,
        "poll searches for a refused namespace's VM"
    );
    assert!(world.sim.control().vm(&vm_id).is_some(), "the VM is still there");
    assert!(
        world
            .machine("early")
            .await
            .finalizers()
            .iter()
            .any(|f| f == MACHINE_FINALIZER)
    );

    // Access back: the VM is deleted with its machine.
    allow(Value::Null).await;
    world.sim.control().release(Transition::VmImagesReady);
    eventually(MINUTE, "the machine released and its VM deleted", || async {
        let gone = machines.get_opt("early").await.expect("get").is_none();
        (gone && world.sim.control().vm(&vm_id).is_none()).then_some(())
    })
    .await;

    // A refused machine (no VM) does not keep the provider from being deleted.
    allow(json!({})).await;
    world
        .create_machine(
            "refused",
            json!({"ovirtcluster": "Default", "template": "ubuntu-22.04"}),
        )
        .await;
    world
        .wait_reason(MINUTE, "refused", "CanConnectToOVirt", "NamespaceNotAllowed")
        .await;
    providers
        .delete(&provider, &DeleteParams::default())
        .await
        .expect("delete the provider");
    eventually(MINUTE, "the provider deleted", || async {
        providers.get_opt(&provider).await.expect("get").is_none().then_some(())
    })
    .await;
    assert!(machines.get_opt("refused").await.expect("get").is_some());
    // Item 7: the restart timer of a provider actor that failed, arriving after the deletion, starts no actor for
    // the deleted provider (it was started from the object cached at the failure).
    let live_providers = || support::metric_sum(&world.metrics, "capov_actors_live", &[("kind", "provider")]);
    eventually(MINUTE, "the provider's actor stopped", || async {
        (live_providers() == 0.0).then_some(())
    })
    .await;
    restart_provider(&world, &provider).await;
    assert_eq!(
        live_providers(),
        0.0,
        "a provider actor restarted for a deleted provider"
    );
    world.stop_operator().await;
    println!(
        "revoked access: the machine whose VM was being created kept its finalizer ({:?}) and the provider stopped \
         polling the VM (0 searches over {window:?}); with access back both were deleted. A refused machine did \
         not keep its provider from being deleted; a provider restart after the narrowing and after the deletion \
         undid neither",
        held.unwrap_or_default()
    );
}
