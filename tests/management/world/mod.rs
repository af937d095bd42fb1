//! The world the Cluster API tests share. One management cluster per test process (kube-apiserver with the
//! controller manager, CAPOV's and CAPI's CRDs and the CAPI core manager), on which each test works in a namespace
//! of its own: its own engine simulator and OVirtProvider, its own workload cluster, and its own operator process
//! restricted to that namespace ([`World`]). The clusterctl tests, which need management clusters of their own
//! (two for a move; an upgrade installs CAPOV's CRDs of another version), build them with [`clusterctl`].

pub mod clusterctl;
mod operator;

use std::process::Command;
use std::time::{Duration, Instant};

use capov_harness::{ControlPlane, Engine, Options, objects, play_kubeadm, play_kubelets};
use capov_ovirt_sim::{Simulator, SimulatorHandle, Timings};
use kube::api::{Api, ApiResource, DynamicObject, Patch, PatchParams};
use serde_json::json;
use tokio::task::JoinHandle;

pub use operator::{CAPOV_NAMESPACE, Operator};

/// The shared management cluster, started by the first test that asks for it.
pub async fn management() -> &'static ControlPlane {
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

/// A new namespace on the shared management cluster (named `prefix-…`), with an admin client.
pub async fn namespace(prefix: &str) -> (&'static ControlPlane, kube::Client, String) {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let plane = management().await;
    let client = plane.client().await.expect("client");
    let namespace = plane.create_namespace(&client, prefix).await.expect("namespace");
    (plane, client, namespace)
}

/// The kubeadm control-plane and bootstrap CRDs of the pinned CAPI module on the shared management cluster, with
/// the contract labels CAPI's kustomization adds (the topology controller finds a template's contract by them);
/// installed by the first test that asks, once.
pub async fn install_kubeadm_crds() {
    static INSTALLED: tokio::sync::OnceCell<()> = tokio::sync::OnceCell::const_new();
    INSTALLED
        .get_or_init(|| async {
            let plane = management().await;
            let module = capov_harness::capi_crd_dir().expect("CAPI module").join("../../../..");
            for dir in [
                "controlplane/kubeadm/config/crd/bases",
                "bootstrap/kubeadm/config/crd/bases",
            ] {
                let mut apply = plane.kubectl().expect("kubectl");
                apply
                    .args(["apply", "--server-side", "--field-manager=capov-test", "-f"])
                    .arg(module.join(dir));
                run(apply, dir);
            }
            let crds = [
                "kubeadmcontrolplanes.controlplane.cluster.x-k8s.io",
                "kubeadmcontrolplanetemplates.controlplane.cluster.x-k8s.io",
                "kubeadmconfigs.bootstrap.cluster.x-k8s.io",
                "kubeadmconfigtemplates.bootstrap.cluster.x-k8s.io",
            ];
            let mut label = plane.kubectl().expect("kubectl");
            label
                .args(["label", "--overwrite", "crd"])
                .args(crds)
                .args(["cluster.x-k8s.io/v1beta1=v1beta1", "cluster.x-k8s.io/v1beta2=v1beta2"]);
            run(label, "label the kubeadm CRDs");
            let mut wait = plane.kubectl().expect("kubectl");
            wait.args(["wait", "--for=condition=Established", "--timeout=60s"])
                .args(crds.iter().map(|crd| format!("crd/{crd}")));
            run(wait, "kubeadm CRDs established");
        })
        .await;
}

/// Runs a kubectl `command`; fails the test with its stderr, saying `what` it was for, unless it succeeds.
pub fn run(mut command: Command, what: &str) {
    let output = command.output().expect("kubectl");
    assert!(
        output.status.success(),
        "{what}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
}

/// The VM id of a CAPI Machine that is Running with its Node and a providerID, and is not being deleted; else what
/// it shows instead (phase, VM, Node, deletion).
pub fn running_vm(machine: &DynamicObject) -> Result<&str, String> {
    let name = machine.metadata.name.as_deref().unwrap_or_default();
    let phase = machine.data["status"]["phase"].as_str();
    let node = machine.data["status"]["nodeRef"]["name"].as_str();
    let vm_id = machine.data["spec"]["providerID"]
        .as_str()
        .and_then(|id| id.strip_prefix("ovirt://"));
    let deleting = machine.metadata.deletion_timestamp.is_some();
    match vm_id {
        Some(vm_id) if phase == Some("Running") && node.is_some() && !deleting => Ok(vm_id),
        _ => Err(format!(
            "{name}: {phase:?}, VM {vm_id:?}, Node {node:?}, deleting {deleting}"
        )),
    }
}

/// One test's part of the shared management cluster: its namespace, an engine simulator (fast timings) with the
/// namespace's OVirtProvider, and a workload cluster; then, as the test starts them, the operator of the namespace
/// and the tasks that play the kubelets and kubeadm. Dropping it stops the operator and those tasks.
pub struct World {
    pub management: &'static ControlPlane,
    pub client: kube::Client,
    pub namespace: String,
    pub sim: SimulatorHandle,
    /// The OVirtProvider of the namespace, pointing at `sim`.
    pub provider: String,
    pub workload: ControlPlane,
    operator: Option<Operator>,
    tasks: Vec<JoinHandle<()>>,
}

impl Drop for World {
    fn drop(&mut self) {
        for task in &self.tasks {
            task.abort();
        }
    }
}

impl World {
    /// A namespace named `prefix-…` with its engine and workload cluster; nothing runs for it yet.
    pub async fn new(prefix: &str) -> World {
        let (management, client, namespace) = namespace(prefix).await;
        let (engine, workload) = tokio::join!(
            async {
                Engine::start(&client, &namespace, Simulator::builder().timings(Timings::fast()))
                    .await
                    .expect("engine")
            },
            async { ControlPlane::start(Options::default()).await.expect("workload cluster") }
        );
        World {
            management,
            client,
            namespace,
            sim: engine.sim,
            provider: engine.provider,
            workload,
            operator: None,
            tasks: Vec::new(),
        }
    }

    /// Starts the namespace's operator ([`Operator::for_namespace`]).
    pub fn start_operator(&mut self) {
        self.operator = Some(Operator::for_namespace(self.management, &self.namespace, &[]));
    }

    /// Plays each VM's kubelet in the workload cluster ([`play_kubelets`]) while the world lives.
    pub async fn play_kubelets(&mut self) {
        let workload = self.workload.client().await.expect("workload client");
        self.tasks.push(play_kubelets(self.sim.control().clone(), workload));
    }

    /// Plays the kubeadm providers for the namespace ([`play_kubeadm`]) while the world lives.
    pub fn play_kubeadm(&mut self) {
        self.tasks
            .push(play_kubeadm(self.client.clone(), self.namespace.clone()));
    }

    /// The namespace's objects of a Cluster API kind.
    pub fn api(&self, kind: &str, plural: &str) -> Api<DynamicObject> {
        self.api_of(&objects::capi(kind, plural))
    }

    /// The namespace's objects of `resource`.
    pub fn api_of(&self, resource: &ApiResource) -> Api<DynamicObject> {
        Api::namespaced_with(self.client.clone(), &self.namespace, resource)
    }

    pub fn ovirt_machines(&self) -> Api<DynamicObject> {
        self.api_of(&objects::capov("OVirtMachine", "ovirtmachines"))
    }

    /// Sets the replicas of the MachineDeployment `deployment`.
    pub async fn scale(&self, deployment: &str, replicas: u32) {
        let patch = json!({"spec": {"replicas": replicas}});
        self.api("MachineDeployment", "machinedeployments")
            .patch(deployment, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .expect("scale");
    }

    /// Prints the namespace's CAPI objects once per process, after `delay` of waiting, to show where a wait is stuck.
    pub fn dump_once_after(&self, delay: Duration) {
        static STARTED: std::sync::OnceLock<Instant> = std::sync::OnceLock::new();
        static DUMPED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
        let started = *STARTED.get_or_init(Instant::now);
        if started.elapsed() < delay || DUMPED.swap(true, std::sync::atomic::Ordering::SeqCst) {
            return;
        }
        let output = self
            .management
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
}
