//! Issue #35 §4, on a real kube-apiserver with the engine simulator: what one tenant writes never reaches another
//! tenant's engine objects or the engine beyond what the platform administrator allows.
//!
//! * Engine-wide names: tenants whose namespace and cluster names join to the same text (namespace `<ns>-b` with
//!   cluster `c`, namespace `<ns>` with cluster `b-c`) get affinity groups and tags of their own; a group CAPOV
//!   created under the older name keeps being used.
//! * Placement: the OVirtProvider's `spec.tenantPlacement` says which host labels and oVirt clusters machines may ask
//!   for; a machine asking for another gets a condition that says what to fix, and no VM.
//! * Capacity: an OVirtCluster shows the figures of a provider only while the provider allows its namespace, and
//!   only for the oVirt clusters the provider lets tenants use.

mod support;

use std::time::Duration;

use capov_actors::runtime::RuntimeSettings;
use capov_crds::{ConditionStatus, OVirtCluster, OVirtMachine, OVirtProvider, Severity};
use capov_harness::objects;
use capov_ovirt_sim::{AffinityGroupSeed, AffinityLabelSeed, ClusterSeed, GIB, HostSeed, Inventory};
use capov_testkit::eventually;
use k8s_openapi::api::core::v1::Namespace;
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::{Value, json};
use support::{World, condition};

const MINUTE: Duration = Duration::from_secs(60);
const MANAGEMENT_CLUSTER: &str = "mgmt-boundaries";

/// Merges `spec` into the world's OVirtProvider.
async fn patch_provider(world: &World, spec: Value) {
    Api::<OVirtProvider>::all(world.client.clone())
        .patch(
            &world.provider,
            &PatchParams::default(),
            &Patch::Merge(&json!({ "spec": spec })),
        )
        .await
        .expect("patch the provider");
}

/// Merges `spec` into OVirtCluster `name` of `namespace`.
async fn patch_ovirt_cluster(world: &World, namespace: &str, name: &str, spec: Value) {
    Api::<OVirtCluster>::namespaced(world.client.clone(), namespace)
        .patch(name, &PatchParams::default(), &Patch::Merge(&json!({ "spec": spec })))
        .await
        .expect("patch the OVirtCluster");
}

async fn machine_in(world: &World, namespace: &str, name: &str) -> OVirtMachine {
    Api::<OVirtMachine>::namespaced(world.client.clone(), namespace)
        .get(name)
        .await
        .expect("get machine")
}

/// The id of the VM of machine `name` in `namespace` once it is up.
async fn vm_up(world: &World, namespace: &str, name: &str) -> String {
    let control = world.sim.control().clone();
    eventually(MINUTE, format!("{namespace}/{name}: VM up"), || async {
        let machine = machine_in(world, namespace, name).await;
        let conditions: Vec<String> = machine
            .status
            .iter()
            .flat_map(|s| &s.conditions)
            .filter(|c| c.status != ConditionStatus::True)
            .map(|c| format!("{} {}: {}", c.type_, c.reason, c.message))
            .collect();
        let vm_id = machine
            .spec
            .provider_id
            .as_deref()
            .and_then(|p| p.strip_prefix("ovirt://"))
            .map(String::from);
        match vm_id.as_deref().and_then(|id| control.vm(id)) {
            Some(vm) if vm.status == "up" => Ok(vm.id),
            vm => Err(format!("VM {:?}, {conditions:?}", vm.map(|v| v.status))),
        }
    })
    .await
}

/// A control-plane machine of `cluster` in `namespace` with hard anti-affinity, as KubeadmControlPlane creates it.
async fn control_plane_machine(world: &World, namespace: &str, cluster: &str, name: &str) {
    let labels = json!({
        "cluster.x-k8s.io/watch-filter": world.namespace,
        "cluster.x-k8s.io/cluster-name": cluster,
        "cluster.x-k8s.io/control-plane": "",
    });
    let spec = json!({"provider": world.provider, "ovirtcluster": "Default", "template": "ubuntu-22.04",
                      "antiaffinity": "hard"});
    objects::create_machine(&world.client, namespace, cluster, name, labels, spec)
        .await
        .expect("control-plane machine");
}

/// The runtime watching every namespace (objects still filtered by the world's watch-filter label), so that two
/// tenants of one engine are served by one operator.
fn every_namespace(world: &World) -> RuntimeSettings {
    RuntimeSettings {
        watch_namespace: None,
        management_cluster_id: MANAGEMENT_CLUSTER.into(),
        ..world.settings()
    }
}

/// Issue #35 §4, engine-wide names. Namespace `<ns>-b` with cluster `c` came first; namespace `<ns>` with cluster
/// `b-c` asked for a hard anti-affinity control plane. Both were given the affinity group
/// `capov-<ns>-b-c-control-plane-Default`, so the second VM never started (`AffinityGroupConflict`), and both VMs got
/// the tag `capov-cluster-<ns>-b-c`. Now each tenant has its group and its tag, and the second VM starts.
#[tokio::test]
async fn look_alike_tenants_get_affinity_groups_and_tags_of_their_own() {
    let mut world = World::new("alike").await;
    patch_provider(&world, json!({"vmtags": true})).await;
    let first = format!("{}-b", world.namespace);
    let second = world.namespace.clone();
    Api::<Namespace>::all(world.client.clone())
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": first}})).expect("namespace"),
        )
        .await
        .expect("create the first tenant's namespace");
    let kubeconfig = world.workload.kubeconfig_yaml().expect("kubeconfig");
    for (namespace, cluster) in [(&first, "c"), (&second, "b-c")] {
        let labels = objects::cluster_labels(&world.namespace, cluster);
        objects::create_workload_cluster(&world.client, namespace, cluster, labels, &kubeconfig)
            .await
            .expect("cluster");
    }
    world.start_operator_with(every_namespace(&world)).await;

    // Machine (and so VM) names of their own: VM names are a matter of spec.vmnametemplate, not of this test.
    control_plane_machine(&world, &first, "c", "c-cp-0").await;
    let first_vm = vm_up(&world, &first, "c-cp-0").await;
    control_plane_machine(&world, &second, "b-c", "b-c-cp-0").await;
    let second_vm = vm_up(&world, &second, "b-c-cp-0").await;

    let control = world.sim.control().clone();
    let groups = control.affinity_groups();
    let group_of = |vm_id: &str| {
        let holding: Vec<_> = groups
            .iter()
            .filter(|g| g.vm_ids.iter().any(|id| id == vm_id))
            .collect();
        assert_eq!(holding.len(), 1, "{vm_id} in {holding:?}");
        holding[0].clone()
    };
    let (first_group, second_group) = (group_of(&first_vm), group_of(&second_vm));
    assert_ne!(first_group.name, second_group.name);
    assert_eq!(first_group.vm_ids, std::slice::from_ref(&first_vm));
    assert_eq!(second_group.vm_ids, std::slice::from_ref(&second_vm));
    assert_eq!(
        first_group.description,
        format!("capov-group:{first}/c/control-plane mc:{MANAGEMENT_CLUSTER}")
    );
    assert_eq!(
        second_group.description,
        format!("capov-group:{second}/b-c/control-plane mc:{MANAGEMENT_CLUSTER}")
    );
    assert!(first_group.vms_rule.enforcing && second_group.vms_rule.enforcing);

    let tags_of = |vm_id: &str| {
        let mut tags = control.vm(vm_id).expect("vm").tags;
        tags.sort();
        tags
    };
    let (first_tags, second_tags) = (tags_of(&first_vm), tags_of(&second_vm));
    assert_eq!(first_tags.len(), 3, "{first_tags:?}");
    assert_eq!(second_tags.len(), 3, "{second_tags:?}");
    let shared: Vec<&String> = first_tags.iter().filter(|t| second_tags.contains(t)).collect();
    assert_eq!(shared, ["capov"], "the tenants share only CAPOV's own tag");
    world.stop_operator().await;
    println!(
        "look-alike tenants: groups {:?} and {:?}; tags {first_tags:?} and {second_tags:?}",
        first_group.name, second_group.name
    );
}

/// Issue #35 §4, existing installations: an affinity group CAPOV created under the older name (with CAPOV's marker
/// for this machine group) keeps being used — new machines of the group join it rather than a group of the new
/// name, which would split the control plane's anti-affinity — and the last VM to leave removes it. (The older name
/// is also what the older rule gives this cluster, so this holds on main too: it guards the migration.)
#[tokio::test]
async fn a_group_created_under_the_older_name_keeps_its_machine_group_and_goes_with_its_last_vm() {
    let mut world = World::new("legacy-group").await;
    let older = format!("capov-{}-{}-control-plane-Default", world.namespace, world.cluster);
    let marker = format!(
        "capov-group:{}/{}/control-plane mc:{MANAGEMENT_CLUSTER}",
        world.namespace, world.cluster
    );
    let control = world.sim.control().clone();
    control
        .seed(&Inventory {
            affinity_groups: vec![AffinityGroupSeed {
                name: older.clone(),
                cluster: "Default".into(),
                description: marker.clone(),
                enforcing: true,
                ..AffinityGroupSeed::default()
            }],
            ..Inventory::default()
        })
        .expect("the group an older CAPOV created");
    world
        .start_operator_with(RuntimeSettings {
            management_cluster_id: MANAGEMENT_CLUSTER.into(),
            ..world.settings()
        })
        .await;
    let namespace = world.namespace.clone();
    control_plane_machine(&world, &namespace, &world.cluster, "cp-0").await;
    control_plane_machine(&world, &namespace, &world.cluster, "cp-1").await;
    let vms = [
        vm_up(&world, &namespace, "cp-0").await,
        vm_up(&world, &namespace, "cp-1").await,
    ];
    let groups = control.affinity_groups();
    assert_eq!(groups.len(), 1, "one group for the control plane: {groups:?}");
    assert_eq!(groups[0].name, older);
    let mut members = groups[0].vm_ids.clone();
    members.sort();
    let mut expected = vms.to_vec();
    expected.sort();
    assert_eq!(members, expected);
    assert_ne!(
        control.vm_host(&vms[0]),
        control.vm_host(&vms[1]),
        "kept apart by the group"
    );

    world.delete_machine_and_wait("cp-0").await;
    world.delete_machine_and_wait("cp-1").await;
    assert!(
        control.affinity_groups().is_empty(),
        "the last VM took the group along: {:?}",
        control.affinity_groups()
    );
    world.stop_operator().await;
}

/// Racks a and b are hosts of cluster Default carrying affinity labels; Edge is a cluster of its own.
fn racks() -> Inventory {
    let host = |name: &str, cluster: &str, label: Option<&str>| HostSeed {
        name: name.into(),
        cluster: cluster.into(),
        labels: label.map(String::from).into_iter().collect(),
        ..HostSeed::default()
    };
    Inventory {
        clusters: vec![ClusterSeed {
            name: "Edge".into(),
            data_center: "Default".into(),
            ..Default::default()
        }],
        affinity_labels: ["rack-a", "rack-b"]
            .map(|name| AffinityLabelSeed {
                name: name.into(),
                ..Default::default()
            })
            .to_vec(),
        hosts: vec![
            host("a-1", "Default", Some("rack-a")),
            host("b-1", "Default", Some("rack-b")),
            host("edge-1", "Edge", None),
        ],
        ..Inventory::default()
    }
}

/// Waits until machine `name` reports MachineCreated False with `reason`; returns the condition's message.
async fn refused(world: &World, name: &str, reason: &str) -> String {
    let machine = world.wait_reason(MINUTE, name, "MachineCreated", reason).await;
    let created = condition(&machine, "MachineCreated").expect("MachineCreated");
    assert_eq!(created.status, ConditionStatus::False);
    assert_eq!(created.severity, Some(Severity::Error));
    created.message.clone()
}

/// Issue #35 §4, host labels: a tenant-written `failureDomains[].hostlabel` (or oVirt cluster) pinned VMs to any
/// labelled hosts (or put them in any oVirt cluster) through CAPOV's engine user. The OVirtProvider's
/// `spec.tenantPlacement` now says which ones tenants may use: a machine asking for another gets MachineCreated
/// `PlacementNotAllowed` naming the field to fix and the provider field that allows it, and no VM; the OVirtCluster
/// shows no figures of an oVirt cluster it may not use. Allowing the label lets the waiting machine go on.
#[tokio::test]
async fn the_provider_says_which_host_labels_and_ovirt_clusters_tenants_may_use() {
    let mut world = World::new("tenant-placement").await;
    let control = world.sim.control().clone();
    control.seed(&racks()).expect("racks");
    patch_provider(
        &world,
        json!({"tenantPlacement": {"hostLabels": ["rack-a"], "ovirtClusters": ["Default"]}}),
    )
    .await;
    let domains = json!([
        {"name": "rack-a", "hostlabel": "rack-a"},
        {"name": "rack-b", "hostlabel": "rack-b"},
        {"name": "edge", "ovirtcluster": "Edge"}
    ]);
    let namespace = world.namespace.clone();
    patch_ovirt_cluster(&world, &namespace, &world.cluster, json!({"failureDomains": domains})).await;
    world.start_operator().await;
    let spec = |ovirt_cluster: &str| json!({"provider": world.provider, "ovirtcluster": ovirt_cluster, "template": "ubuntu-22.04"});
    for (name, domain) in [("in-a", "rack-a"), ("in-b", "rack-b"), ("at-edge", "edge")] {
        let machine = objects::MachineSpec {
            name,
            labels: world.labels(),
            spec: spec("Default"),
        };
        objects::create_machine_in_failure_domain(&world.client, &namespace, &world.cluster, machine, domain)
            .await
            .expect("machine");
    }
    world.create_machine("spec-edge", spec("Edge")).await;

    let vm_id = vm_up(&world, &namespace, "in-a").await;
    assert_eq!(
        control.vm_host(&vm_id).as_deref(),
        Some("a-1"),
        "an allowed label is used"
    );
    let in_b = refused(&world, "in-b", "PlacementNotAllowed").await;
    for part in [
        "\"rack-b\"",
        "spec.failureDomains[].hostlabel",
        "\"rack-b\" of the OVirtCluster",
        "spec.tenantPlacement.hostLabels",
        &world.provider,
    ] {
        assert!(in_b.contains(part), "{part:?} not in: {in_b}");
    }
    let at_edge = refused(&world, "at-edge", "PlacementNotAllowed").await;
    for part in [
        "\"Edge\"",
        "spec.failureDomains[].ovirtcluster",
        "spec.tenantPlacement.ovirtClusters",
    ] {
        assert!(at_edge.contains(part), "{part:?} not in: {at_edge}");
    }
    let spec_edge = refused(&world, "spec-edge", "PlacementNotAllowed").await;
    for part in ["\"Edge\"", "spec.ovirtcluster", "spec.tenantPlacement.ovirtClusters"] {
        assert!(spec_edge.contains(part), "{part:?} not in: {spec_edge}");
    }
    for name in ["in-b", "at-edge", "spec-edge"] {
        assert!(control.vm_by_name(name).is_none(), "{name}: a VM was created");
    }
    let groups: Vec<String> = control.affinity_groups().into_iter().map(|g| g.description).collect();
    assert_eq!(groups.len(), 1, "only in-a's host-label group: {groups:?}");
    assert!(groups[0].contains("/fd-rack-a "), "{groups:?}");

    // The OVirtCluster names Edge in a domain, and two refused machines ask for it, but it shows only what its
    // machines may use; the figures are read once they show a change made after every machine was refused.
    control.set_storage_available("data1", 77 * GIB).expect("data1");
    let clusters = Api::<OVirtCluster>::namespaced(world.client.clone(), &namespace);
    let shown = eventually(MINUTE, "the cluster's capacity after the change", || async {
        let capacity = clusters.get(&world.cluster).await.ok()?.status?.capacity?;
        let data1 = capacity.storage_domains.iter().find(|d| d.name == "data1")?;
        let names: Vec<String> = capacity.ovirt_clusters.iter().map(|c| c.name.clone()).collect();
        (data1.available_bytes == (77 * GIB) as i64).then_some(names)
    })
    .await;
    assert_eq!(shown, ["Default"]);

    // The administrator allows rack-b: the machine waiting for it gets its VM on the rack's host.
    patch_provider(
        &world,
        json!({"tenantPlacement": {"hostLabels": ["rack-a", "rack-b"], "ovirtClusters": ["Default"]}}),
    )
    .await;
    let vm_id = vm_up(&world, &namespace, "in-b").await;
    assert_eq!(control.vm_host(&vm_id).as_deref(), Some("b-1"));
    assert!(control.vm_by_name("at-edge").is_none() && control.vm_by_name("spec-edge").is_none());
    world.stop_operator().await;
    println!("refused placements: {in_b} | {at_edge} | {spec_edge}");
}

/// Issue #35 §4, capacity across `allowedNamespaces`: an OVirtCluster in a namespace the provider refuses kept
/// getting that provider's hosts, CPUs, memory and storage in `status.capacity`. Now the figures go once the provider
/// stops allowing the namespace (they were there while it did).
#[tokio::test]
async fn an_ovirt_cluster_shows_no_capacity_of_a_provider_that_refuses_its_namespace() {
    let mut world = World::new("capacity-boundary").await;
    world.start_operator().await;
    world
        .create_machine("m", json!({"ovirtcluster": "Default", "template": "ubuntu-22.04"}))
        .await;
    let clusters = Api::<OVirtCluster>::namespaced(world.client.clone(), &world.namespace);
    eventually(
        MINUTE,
        "the cluster's capacity while the namespace is allowed",
        || async {
            let capacity = clusters.get(&world.cluster).await.ok()?.status?.capacity?;
            (!capacity.ovirt_clusters.is_empty()).then_some(())
        },
    )
    .await;

    patch_provider(&world, json!({"allowedNamespaces": {"names": ["someone-else"]}})).await;
    world
        .wait_reason(MINUTE, "m", "CanConnectToOVirt", "NamespaceNotAllowed")
        .await;
    // A change of the OVirtCluster's spec makes it reconciled again: the status written for it (its failure
    // domains) holds the capacity as CAPOV computes it now.
    let namespace = world.namespace.clone();
    patch_ovirt_cluster(
        &world,
        &namespace,
        &world.cluster,
        json!({"failureDomains": [{"name": "later", "ovirtcluster": "Default"}]}),
    )
    .await;
    let status = eventually(MINUTE, "the OVirtCluster's status after the change", || async {
        let status = clusters.get(&world.cluster).await.ok()?.status?;
        status
            .failure_domains
            .iter()
            .any(|d| d.name == "later")
            .then_some(status)
    })
    .await;
    assert_eq!(
        status.capacity, None,
        "the figures of a provider that refuses the namespace"
    );
    world.stop_operator().await;
}
