//! One provider's engine shared between two clusters (issue #24, item 3): while one cluster scales up 300 workers at
//! the default rate limit (10 requests/s), another cluster's control-plane machine, created 20 s later, gets its VM
//! running within 1.5 times the time it takes in an idle operator, plus 10 s. Before the fair queues it waited behind
//! the whole batch (11 times its idle time). And the same with a tenant gaming the share (issue #35, item 2): its
//! batch labelled control-plane, spread over many clusters of its namespace, some machines carrying CAPOV's
//! finalizer from the start; another namespace's worker still runs within the bound. The runtime runs in-process on
//! the shared apiserver with the engine simulator and the production poll interval.

mod support;

use std::time::{Duration, Instant};

use capov_actors::runtime::RuntimeSettings;
use capov_crds::labels::{CLUSTER_NAME_LABEL, CONTROL_PLANE_LABEL, MACHINE_FINALIZER, WATCH_FILTER_LABEL};
use capov_harness::objects;
use capov_testkit::eventually;
use futures::StreamExt as _;
use serde_json::json;
use support::{World, metric_sum};

/// The batch of the busy cluster.
const BATCH: usize = 300;
/// How long after the batch began the other cluster's control-plane machine is created.
const AFTER: Duration = Duration::from_secs(20);
/// The other cluster.
const OTHER: &str = "tenant-b";
/// How many clusters the gaming tenant spreads its batch over.
const GAMING_CLUSTERS: usize = 20;

/// The tests measure times against an idle time: one at a time, so that neither runs in the other's busy phase.
static ONE_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// How long `name`'s VM takes to be up in the engine after `started`, waiting at most `deadline`.
async fn vm_up_after(world: &World, name: &str, started: Instant, deadline: Duration) -> Duration {
    let control = world.sim.control().clone();
    eventually(deadline, format!("{name}: VM up"), || async {
        let vm = control.vms().into_iter().find(|vm| vm.name == name);
        match vm {
            Some(vm) if vm.status == "up" => Ok(()),
            Some(vm) => Err(format!("VM {}", vm.status)),
            None => Err("no VM yet".to_string()),
        }
    })
    .await;
    started.elapsed()
}

/// Creates a control-plane machine of cluster [`OTHER`] and returns how long until its VM is up in the engine.
async fn control_plane_runs_after(world: &World, name: &str) -> Duration {
    let started = Instant::now();
    let labels = json!({
        "cluster.x-k8s.io/watch-filter": world.namespace,
        "cluster.x-k8s.io/cluster-name": OTHER,
        "cluster.x-k8s.io/control-plane": "",
    });
    let spec = json!({"provider": world.provider, "ovirtcluster": "Default", "template": "ubuntu-22.04"});
    objects::create_machine(&world.client, &world.namespace, OTHER, name, labels, spec)
        .await
        .expect("control-plane machine");
    vm_up_after(world, name, started, Duration::from_secs(300)).await
}

/// Both clusters are in one namespace. The other cluster's machine is labelled control-plane, as CAPI labels them;
/// since issue #35 the label orders nothing (no control-plane object controls its Machine here), so the machine runs
/// in time by its cluster's turns within the namespace's share.
#[tokio::test]
async fn another_clusters_control_plane_runs_while_a_batch_scales_up() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let _alone = ONE_AT_A_TIME.lock().await;
    let mut world = World::new("fairness").await;
    let kubeconfig = world.workload.kubeconfig_yaml().expect("kubeconfig");
    let labels = objects::cluster_labels(&world.namespace, OTHER);
    objects::create_workload_cluster(&world.client, &world.namespace, OTHER, labels, &kubeconfig)
        .await
        .expect("the other cluster");
    let defaults = RuntimeSettings::default();
    world
        .start_operator_with(RuntimeSettings {
            // The defaults of the rate limit and the poll: what the two clusters share.
            ovirt_qps: defaults.ovirt_qps,
            ovirt_burst: defaults.ovirt_burst,
            poll_interval: defaults.poll_interval,
            ..world.settings()
        })
        .await;

    let idle = control_plane_runs_after(&world, "b-idle-cp").await;

    let names: Vec<String> = (0..BATCH).map(|i| format!("a-worker-{i}")).collect();
    let batch = {
        let world = &world;
        async move { world.create_machines(&names).await }
    };
    let other = async {
        tokio::time::sleep(AFTER).await;
        control_plane_runs_after(&world, "b-cp").await
    };
    let ((), busy) = tokio::join!(batch, other);
    let batch_vms = world
        .sim
        .control()
        .vms()
        .iter()
        .filter(|vm| vm.name.starts_with("a-worker-"))
        .count();
    // The reconcile queue's waits of the batch's cluster, under its own label (a histogram: its sample count).
    let batch_label = format!("{}/{}", world.namespace, world.cluster);
    let batch_passes = metric_sum(
        &world.metrics,
        "capov_reconcile_queue_wait_seconds",
        &[("cluster", &batch_label)],
    );
    world.stop_operator().await;

    let bound = idle.mul_f64(1.5) + Duration::from_secs(10);
    println!(
        "fairness: the control-plane machine ran after {:.1} s idle and {:.1} s while the other cluster scaled up \
         ({:.2} × idle; bound {:.1} s); the batch had {batch_vms} VMs of {BATCH} and {batch_passes} passes by then",
        idle.as_secs_f64(),
        busy.as_secs_f64(),
        busy.as_secs_f64() / idle.as_secs_f64(),
        bound.as_secs_f64(),
    );
    assert!(batch_passes > 0.0, "the batch's waits show under its own cluster label");
    assert!(
        busy <= bound,
        "the control-plane machine ran after {busy:?}, idle {idle:?}: more than 1.5 × idle + 10 s"
    );
}

/// A machine of the gaming tenant: labelled control-plane (OVirtMachine and Machine) in `cluster`, and, when
/// `finalizer`, carrying CAPOV's finalizer from its creation, as if its provisioning had begun.
async fn create_gaming_machine(world: &World, cluster: &str, name: &str, finalizer: bool) {
    let labels = json!({
        WATCH_FILTER_LABEL: world.namespace,
        CLUSTER_NAME_LABEL: cluster,
        CONTROL_PLANE_LABEL: "",
    });
    let spec = json!({"provider": world.provider, "ovirtcluster": "Default", "template": "ubuntu-22.04"});
    if !finalizer {
        objects::create_machine(&world.client, &world.namespace, cluster, name, labels, spec)
            .await
            .expect("machine");
        return;
    }
    let bootstrap = format!("{name}-bootstrap");
    objects::apply_secret(
        &world.client,
        &world.namespace,
        &bootstrap,
        &[("value", "#cloud-config\nhostname: test\n"), ("format", "cloud-config")],
    )
    .await
    .expect("bootstrap secret");
    let machines: kube::Api<kube::api::DynamicObject> = kube::Api::namespaced_with(
        world.client.clone(),
        &world.namespace,
        &objects::capi("Machine", "machines"),
    );
    let machine = serde_json::from_value(json!({
        "apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Machine",
        "metadata": {"name": name, "labels": labels},
        "spec": {
            "clusterName": cluster,
            "bootstrap": {"dataSecretName": bootstrap},
            "infrastructureRef": {"apiGroup": "infrastructure.cluster.x-k8s.io", "kind": "OVirtMachine", "name": name}
        }
    }))
    .expect("machine body");
    let created = machines
        .create(&kube::api::PostParams::default(), &machine)
        .await
        .expect("machine");
    let ovirt_machine = json!({
        "apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1", "kind": "OVirtMachine",
        "metadata": {
            "name": name, "labels": labels, "finalizers": [MACHINE_FINALIZER],
            "ownerReferences": [{"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Machine", "name": name,
                                 "uid": created.metadata.uid, "controller": true, "blockOwnerDeletion": true}]
        },
        "spec": spec
    });
    objects::apply(
        &world.client,
        &objects::capov("OVirtMachine", "ovirtmachines"),
        Some(&world.namespace),
        ovirt_machine,
    )
    .await
    .expect("OVirtMachine");
}

/// Creates a worker of cluster [`OTHER`] in `namespace` and returns how long until its VM is up in the engine.
async fn other_tenants_worker_runs_after(world: &World, namespace: &str, name: &str) -> Duration {
    let started = Instant::now();
    let labels = objects::cluster_labels(&world.namespace, OTHER);
    let spec = json!({"provider": world.provider, "ovirtcluster": "Default", "template": "ubuntu-22.04"});
    objects::create_machine(&world.client, namespace, OTHER, name, labels, spec)
        .await
        .expect("worker");
    // Long enough to measure the wait without the fair share (about 430 s), not only to pass.
    vm_up_after(world, name, started, Duration::from_secs(900)).await
}

/// Issue #35, item 2: tenant A (the world's namespace) labels its 300 workers `cluster.x-k8s.io/control-plane`,
/// spreads them over 20 clusters (20 `cluster-name` values) and gives a third of them CAPOV's finalizer at creation;
/// tenant B's worker, in a namespace of its own and created 20 s after A's batch began, still runs within
/// 1.5 × its idle time + 10 s. Before the namespace turns it waited behind A's whole batch (27.6 × idle).
#[tokio::test]
async fn a_tenant_gaming_labels_clusters_and_finalizers_gets_no_more_than_its_share() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let _alone = ONE_AT_A_TIME.lock().await;
    let mut world = World::new("fair-gaming").await;
    let kubeconfig = world.workload.kubeconfig_yaml().expect("kubeconfig");
    let gaming_clusters: Vec<String> = (0..GAMING_CLUSTERS).map(|i| format!("gamer-{i}")).collect();
    for cluster in &gaming_clusters {
        let labels = objects::cluster_labels(&world.namespace, cluster);
        objects::create_workload_cluster(&world.client, &world.namespace, cluster, labels, &kubeconfig)
            .await
            .expect("a gaming cluster");
    }
    // Tenant B: a namespace of its own, its objects under the same watch filter.
    let plane = capov_harness::shared().await;
    let other_namespace = plane
        .create_namespace(&world.client, "fair-other")
        .await
        .expect("the other tenant's namespace");
    let labels = objects::cluster_labels(&world.namespace, OTHER);
    objects::create_workload_cluster(&world.client, &other_namespace, OTHER, labels, &kubeconfig)
        .await
        .expect("the other tenant's cluster");
    let defaults = RuntimeSettings::default();
    world
        .start_operator_with(RuntimeSettings {
            ovirt_qps: defaults.ovirt_qps,
            ovirt_burst: defaults.ovirt_burst,
            poll_interval: defaults.poll_interval,
            // Both namespaces, by the watch filter alone.
            watch_namespace: None,
            ..world.settings()
        })
        .await;

    let idle = other_tenants_worker_runs_after(&world, &other_namespace, "b-idle-worker").await;

    let batch = {
        let (world, clusters) = (&world, &gaming_clusters);
        async move {
            futures::stream::iter(0..BATCH)
                .for_each_concurrent(10, |i| async move {
                    let cluster = &clusters[i % clusters.len()];
                    create_gaming_machine(world, cluster, &format!("a-worker-{i}"), i % 3 == 0).await;
                })
                .await;
        }
    };
    let other = async {
        tokio::time::sleep(AFTER).await;
        other_tenants_worker_runs_after(&world, &other_namespace, "b-worker").await
    };
    let ((), busy) = tokio::join!(batch, other);
    let batch_vms = world
        .sim
        .control()
        .vms()
        .iter()
        .filter(|vm| vm.name.starts_with("a-worker-"))
        .count();
    world.stop_operator().await;

    let bound = idle.mul_f64(1.5) + Duration::from_secs(10);
    println!(
        "fairness, gaming: the other tenant's worker ran after {:.1} s idle and {:.1} s while a tenant scaled up \
         {BATCH} workers labelled control-plane over {GAMING_CLUSTERS} clusters, a third with CAPOV's finalizer \
         ({:.2} × idle; bound {:.1} s); the batch had {batch_vms} VMs of {BATCH} by then",
        idle.as_secs_f64(),
        busy.as_secs_f64(),
        busy.as_secs_f64() / idle.as_secs_f64(),
        bound.as_secs_f64(),
    );
    assert!(batch_vms > 0, "the gaming batch ran meanwhile");
    assert!(
        busy <= bound,
        "the other tenant's worker ran after {busy:?}, idle {idle:?}: more than 1.5 × idle + 10 s"
    );
}
