//! CAPOV under the real Cluster API: the CAPI core manager (built from Go modules, its webhooks registered with the
//! apiserver) drives a MachineDeployment of OVirtMachineTemplate-based machines, and the real `manager` binary
//! makes the VMs in the engine simulator. A second apiserver plays the workload cluster; the test plays each VM's
//! kubelet by registering a Node whose systemUUID is the VM id.

use std::collections::{BTreeMap, BTreeSet};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use capov_harness::{ControlPlane, Engine, Options, objects, play_kubelets};
use capov_ovirt_sim::{Simulator, SimulatorHandle, Timings};
use capov_testkit::eventually;
use kube::api::{Api, DeleteParams, DynamicObject, ListParams, Patch, PatchParams};
use serde_json::{Value, json};
use tokio::task::JoinHandle;

const CLUSTER: &str = "capi-e2e";
const BOOTSTRAP_SECRET: &str = "worker-bootstrap";
const DEPLOYMENT: &str = "workers";
/// A control-plane Machine of its own (no control-plane provider): CAPI counts the control plane initialized once
/// it has a Node, and only then looks at the workers' Nodes.
const CONTROL_PLANE: &str = "control-plane-0";

/// The management cluster of this test binary: kube-apiserver + controller manager + CAPOV's and CAPI's CRDs +
/// the CAPI core manager.
async fn management() -> &'static ControlPlane {
    static PLANE: tokio::sync::OnceCell<ControlPlane> = tokio::sync::OnceCell::const_new();
    PLANE
        .get_or_init(|| async {
            let options = Options {
                controller_manager: true,
                crds: true,
                capi_crds: true,
                capi_manager: true,
            };
            ControlPlane::start(options)
                .await
                .unwrap_or_else(|err| panic!("management cluster: {err}"))
        })
        .await
}

/// One test's world: a namespace, the simulator, the workload cluster, the operator process and the kubelets.
struct World {
    management: &'static ControlPlane,
    client: kube::Client,
    namespace: String,
    sim: SimulatorHandle,
    workload: ControlPlane,
    operator: Child,
    kubelets: JoinHandle<()>,
    provider: String,
}

impl Drop for World {
    fn drop(&mut self) {
        self.kubelets.abort();
        let _ = self.operator.kill();
        let _ = self.operator.wait();
    }
}

impl World {
    /// Everything up to a provisioned Cluster; no machines yet.
    async fn new(prefix: &str) -> World {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let plane = management().await;
        let client = plane.client().await.expect("client");
        let namespace = plane.create_namespace(&client, prefix).await.expect("namespace");
        let engine = Engine::start(&client, &namespace, Simulator::builder().timings(Timings::fast()))
            .await
            .expect("engine");
        let (sim, provider) = (engine.sim, engine.provider);
        let workload = ControlPlane::start(Options::default()).await.expect("workload cluster");

        objects::apply_secret(
            &client,
            &namespace,
            BOOTSTRAP_SECRET,
            &[
                ("value", "#cloud-config\nhostname: worker\n"),
                ("format", "cloud-config"),
            ],
        )
        .await
        .expect("bootstrap secret");
        let port = workload.api_port();
        let kubeconfig = workload.kubeconfig_yaml().expect("workload kubeconfig");
        objects::create_capi_managed_cluster(&client, &namespace, CLUSTER, ("127.0.0.1", port), &kubeconfig)
            .await
            .expect("cluster");

        let labels = json!({"cluster.x-k8s.io/cluster-name": CLUSTER, "cluster.x-k8s.io/control-plane": ""});
        objects::create_machine(
            &client,
            &namespace,
            CLUSTER,
            CONTROL_PLANE,
            labels,
            template_spec(&provider, 30),
        )
        .await
        .expect("control-plane machine");
        let operator = start_operator(plane, &namespace);
        let kubelets = play_kubelets(sim.control().clone(), workload.client().await.expect("workload client"));
        World {
            management: plane,
            client,
            namespace,
            sim,
            workload,
            operator,
            kubelets,
            provider,
        }
    }

    fn template_spec(&self, disk_gb: u64) -> Value {
        template_spec(&self.provider, disk_gb)
    }

    fn api(&self, kind: &str, plural: &str) -> Api<DynamicObject> {
        Api::namespaced_with(self.client.clone(), &self.namespace, &objects::capi(kind, plural))
    }

    fn ovirt_machines(&self) -> Api<DynamicObject> {
        Api::namespaced_with(
            self.client.clone(),
            &self.namespace,
            &objects::capov("OVirtMachine", "ovirtmachines"),
        )
    }

    /// Prints the CAPI objects once, after `delay` of waiting, to show where a wait is stuck.
    fn dump_once_after(&self, delay: Duration) {
        static STARTED: std::sync::OnceLock<Instant> = std::sync::OnceLock::new();
        static DUMPED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
        let started = *STARTED.get_or_init(Instant::now);
        if started.elapsed() < delay || DUMPED.swap(true, std::sync::atomic::Ordering::SeqCst) {
            return;
        }
        let plane = self.management;
        let output = plane
            .kubectl()
            .and_then(|mut kubectl| {
                kubectl
                    .args([
                        "get",
                        "machinedeployments,machinesets,machines,ovirtmachines",
                        "-o",
                        "yaml",
                        "-n",
                    ])
                    .arg(&self.namespace)
                    .output()
                    .map_err(|err| capov_harness::HarnessError::Assets(err.to_string()))
            })
            .map(|output| String::from_utf8_lossy(&output.stdout).to_string())
            .unwrap_or_default();
        eprintln!("---- CAPI objects ----\n{output}");
    }

    async fn scale(&self, replicas: u32) {
        let patch = json!({"spec": {"replicas": replicas}});
        self.api("MachineDeployment", "machinedeployments")
            .patch(DEPLOYMENT, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .expect("scale");
    }

    /// When exactly `count` Machines exist, all Running with a providerID that names an existing VM and a nodeRef,
    /// and the engine holds exactly their VMs: the VM id of each Machine. Else what is not so yet.
    async fn settled(&self, count: usize) -> Result<BTreeMap<String, String>, String> {
        let workers = ListParams::default().labels(&format!("cluster.x-k8s.io/deployment-name={DEPLOYMENT}"));
        let list = self
            .api("Machine", "machines")
            .list(&workers)
            .await
            .map_err(|err| err.to_string())?;
        let mut vms = BTreeMap::new();
        for machine in &list.items {
            let name = machine.metadata.name.clone().unwrap_or_default();
            let phase = machine.data["status"]["phase"].as_str();
            let node = machine.data["status"]["nodeRef"]["name"].as_str();
            let vm_id = machine.data["spec"]["providerID"]
                .as_str()
                .and_then(|id| id.strip_prefix("ovirt://"));
            let deleting = machine.metadata.deletion_timestamp.is_some();
            let vm_id = match vm_id {
                Some(vm_id) if phase == Some("Running") && node.is_some() && !deleting => vm_id,
                _ => {
                    return Err(format!(
                        "{name}: {phase:?}, VM {vm_id:?}, Node {node:?}, deleting {deleting}"
                    ));
                }
            };
            if self.sim.control().vm(vm_id).is_none() {
                return Err(format!("{name}: VM {vm_id} is not in the engine"));
            }
            vms.insert(name, vm_id.to_string());
        }
        let engine: BTreeSet<String> = self
            .sim
            .control()
            .vms()
            .into_iter()
            .filter(|vm| vm.name != CONTROL_PLANE)
            .map(|vm| vm.id)
            .collect();
        let owned: BTreeSet<String> = vms.values().cloned().collect();
        if list.items.len() != count {
            return Err(format!("{} Machines: {vms:?}", list.items.len()));
        }
        if engine != owned {
            return Err(format!(
                "worker VMs in the engine {engine:?}, of the Machines {owned:?}"
            ));
        }
        Ok(vms)
    }

    async fn settle(&self, count: usize, what: &str) -> BTreeMap<String, String> {
        eventually(Duration::from_secs(240), what, || self.settled(count)).await
    }
}

fn template_spec(provider: &str, disk_gb: u64) -> Value {
    json!({"provider": provider, "ovirtcluster": "Default", "template": "ubuntu-22.04", "osdisksizegb": disk_gb,
           "cpu": {"sockets": 1, "cores": 2, "threads": 1}, "memory": {"sizemb": 4096},
           "nics": [{"vnicprofile": "ovirtmgmt"}]})
}

fn start_operator(plane: &ControlPlane, namespace: &str) -> Child {
    let log = std::env::temp_dir().join(format!("capov-capi-e2e-{namespace}.log"));
    let file = std::fs::File::create(&log).expect("operator log");
    eprintln!("operator log: {}", log.display());
    Command::new(env!("CARGO_BIN_EXE_manager"))
        .arg(format!("--kubeconfig={}", plane.kubeconfig_path().display()))
        .arg(format!("--namespace={namespace}"))
        .arg(format!("--credentials-namespace={namespace}"))
        .arg("--metrics-bind-address=0")
        // The workload cluster runs on loopback.
        .arg("--allow-internal-workload-servers")
        .arg(format!(
            "--health-probe-bind-address=127.0.0.1:{}",
            capov_harness::free_port()
        ))
        .arg("--log-format=text")
        .stdin(Stdio::null())
        .stdout(file.try_clone().expect("log"))
        .stderr(file)
        .spawn()
        .expect("start the manager")
}

#[tokio::test]
async fn a_machine_deployment_scales_rolls_out_and_goes_with_its_cluster() {
    let world = World::new("capi-md").await;
    objects::apply_machine_template(&world.client, &world.namespace, "workers-a", world.template_spec(30))
        .await
        .expect("template");
    objects::apply_machine_deployment(
        &world.client,
        &world.namespace,
        DEPLOYMENT,
        CLUSTER,
        3,
        "workers-a",
        BOOTSTRAP_SECRET,
    )
    .await
    .expect("machine deployment");

    // Three Running Machines with providerID and nodeRef; the Nodes carry the providerID CAPOV set.
    let first = world.settle(3, "3 Running Machines").await;
    let nodes: Api<k8s_openapi::api::core::v1::Node> = Api::all(world.workload.client().await.expect("workload"));
    for vm_id in first.values() {
        let vm = world.sim.control().vm(vm_id).expect("vm");
        let node = nodes.get(&vm.name).await.expect("node");
        let provider_id = node.spec.and_then(|spec| spec.provider_id);
        assert_eq!(provider_id, Some(format!("ovirt://{vm_id}")));
    }
    let output = management()
        .await
        .kubectl()
        .expect("kubectl")
        .args(["get", "machines", "-n", &world.namespace])
        .output()
        .expect("kubectl get machines");
    let table = String::from_utf8_lossy(&output.stdout);
    for name in first.keys() {
        let row = table.lines().find(|line| line.starts_with(name.as_str()));
        assert!(
            row.is_some_and(|row| row.contains("Running")),
            "{name} not Running in:\n{table}"
        );
    }

    // Scale 3 → 6 → 1: the engine's VMs follow, and scale-down leaves nothing behind.
    world.scale(6).await;
    let six = world.settle(6, "6 Running Machines").await;
    assert!(
        first.iter().all(|(name, vm)| six.get(name) == Some(vm)),
        "scale-up replaced machines"
    );
    world.scale(1).await;
    let one = world.settle(1, "1 Running Machine").await;
    eventually(Duration::from_secs(60), "5 worker OVirtMachines deleted", || async {
        let left = world.ovirt_machines().list(&ListParams::default()).await.ok()?;
        let workers = left
            .items
            .iter()
            .filter(|m| m.metadata.name.as_deref() != Some(CONTROL_PLANE));
        (workers.count() == 1).then_some(())
    })
    .await;

    // A rollout to a new template replaces the machine; the old VM is gone afterwards.
    objects::apply_machine_template(&world.client, &world.namespace, "workers-b", world.template_spec(40))
        .await
        .expect("template b");
    let patch = json!({"spec": {"template": {"spec": {"infrastructureRef": {
        "apiGroup": "infrastructure.cluster.x-k8s.io", "kind": "OVirtMachineTemplate", "name": "workers-b"}}}}});
    world
        .api("MachineDeployment", "machinedeployments")
        .patch(DEPLOYMENT, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .expect("rollout");
    let rolled = eventually(Duration::from_secs(240), "the rollout", || async {
        let vms = world.settled(1).await;
        if vms.is_err() {
            world.dump_once_after(Duration::from_secs(120));
        }
        let vms = vms?;
        if vms.keys().eq(one.keys()) {
            Err(format!("still the machine before the rollout: {vms:?}"))
        } else {
            Ok(vms)
        }
    })
    .await;
    let (_, new_vm) = rolled.iter().next().expect("one machine");
    let boot_disk = world
        .sim
        .control()
        .vm(new_vm)
        .and_then(|vm| vm.disks.into_iter().find(|disk| disk.bootable))
        .map(|disk| disk.provisioned_size);
    assert_eq!(boot_disk, Some(40 << 30), "the new machine follows the new template");
    for old_vm in one.values() {
        assert!(
            world.sim.control().vm(old_vm).is_none(),
            "the old VM outlived the rollout"
        );
    }

    // Deleting the Cluster removes every VM, every OVirtMachine and every finalizer.
    world
        .api("Cluster", "clusters")
        .delete(CLUSTER, &DeleteParams::default())
        .await
        .expect("delete cluster");
    eventually(Duration::from_secs(180), "the Cluster to be gone", || async {
        let cluster = world.api("Cluster", "clusters").get_opt(CLUSTER).await.ok()?;
        cluster.is_none().then_some(())
    })
    .await;
    assert_eq!(
        world.sim.control().vm_count(),
        0,
        "VMs left after the Cluster was deleted"
    );
    let left = world.ovirt_machines().list(&ListParams::default()).await.expect("list");
    assert!(left.items.is_empty(), "OVirtMachines left: {}", left.items.len());
    let clusters: Api<DynamicObject> = Api::namespaced_with(
        world.client.clone(),
        &world.namespace,
        &objects::capov("OVirtCluster", "ovirtclusters"),
    );
    let left = clusters.list(&ListParams::default()).await.expect("list");
    assert!(left.items.is_empty(), "OVirtClusters left: {}", left.items.len());
}

#[tokio::test]
async fn pausing_the_cluster_stops_capov_until_it_is_unpaused() {
    let world = World::new("capi-pause").await;
    let clusters = world.api("Cluster", "clusters");
    let machines = world.api("Machine", "machines");
    // The control plane comes up first: the operator works for this cluster.
    eventually(
        Duration::from_secs(180),
        "the control-plane Machine Running",
        || async {
            let machine = machines.get_opt(CONTROL_PLANE).await.ok()??;
            (machine.data["status"]["phase"].as_str() == Some("Running")).then_some(())
        },
    )
    .await;

    let pause = |paused: bool| json!({"spec": {"paused": paused}});
    clusters
        .patch(CLUSTER, &PatchParams::default(), &Patch::Merge(&pause(true)))
        .await
        .expect("pause");
    let labels = json!({"cluster.x-k8s.io/cluster-name": CLUSTER});
    objects::create_machine(
        &world.client,
        &world.namespace,
        CLUSTER,
        "late-worker",
        labels,
        world.template_spec(30),
    )
    .await
    .expect("machine");
    // CAPOV saw the new machine and reports it paused; nothing was asked of the engine for it.
    eventually(Duration::from_secs(60), "the Paused condition", || async {
        let machine = world.ovirt_machines().get_opt("late-worker").await.ok()??;
        let conditions = machine.data["status"]["conditions"].as_array()?.clone();
        conditions
            .iter()
            .any(|c| c["type"] == "Paused" && c["status"] == "True")
            .then_some(())
    })
    .await;
    assert!(
        world.sim.control().vm_by_name("late-worker").is_none(),
        "a VM was created while the Cluster was paused"
    );

    clusters
        .patch(CLUSTER, &PatchParams::default(), &Patch::Merge(&pause(false)))
        .await
        .expect("unpause");
    eventually(
        Duration::from_secs(180),
        "the late worker Running after unpausing",
        || async {
            let machine = machines.get_opt("late-worker").await.ok()??;
            let running = machine.data["status"]["phase"].as_str() == Some("Running");
            (running && world.sim.control().vm_by_name("late-worker").is_some()).then_some(())
        },
    )
    .await;
}
