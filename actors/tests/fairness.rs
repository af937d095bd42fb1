//! One provider's engine shared between two clusters (issue #24, item 3): while one cluster scales up 300 workers at
//! the default rate limit (10 requests/s), another cluster's control-plane machine, created 20 s later, gets its VM
//! running within 1.5 times the time it takes in an idle operator, plus 10 s. Before the fair queues it waited behind
//! the whole batch (11 times its idle time). The runtime runs in-process on the shared apiserver with the engine
//! simulator and the production poll interval.

mod support;

use std::time::{Duration, Instant};

use capov_actors::runtime::RuntimeSettings;
use capov_harness::objects;
use capov_testkit::eventually;
use serde_json::json;
use support::{World, metric_sum};

/// The batch of the busy cluster.
const BATCH: usize = 300;
/// How long after the batch began the other cluster's control-plane machine is created.
const AFTER: Duration = Duration::from_secs(20);
/// The other cluster.
const OTHER: &str = "tenant-b";

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
    let control = world.sim.control().clone();
    eventually(Duration::from_secs(300), format!("{name}: VM up"), || async {
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

#[tokio::test]
async fn another_clusters_control_plane_runs_while_a_batch_scales_up() {
    let _ = rustls::crypto::ring::default_provider().install_default();
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
