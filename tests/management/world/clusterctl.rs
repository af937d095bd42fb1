//! What the clusterctl tests (move, upgrade) share: a management cluster of their own with the CAPI core manager
//! and clusterctl's provider inventory, CAPOV on it as clusterctl's Deployment runs it, the OVirtProvider a user
//! renders from the release with `clusterctl generate yaml`, and the Cluster whose machines they watch.

use std::path::{Path, PathBuf};

use base64::Engine as _;
use capov_harness::{ADMIN_PASSWORD, ADMIN_USER, ControlPlane, Options, objects};
use capov_ovirt_sim::{Simulator, SimulatorHandle, Timings};
use capov_testkit::{manifests, stdout_of};
use k8s_openapi::api::core::v1::Namespace;
use kube::api::{Api, ApiResource, DynamicObject, PostParams};
use kube::core::GroupVersionKind;
use serde_json::{Value, json};

use super::{CAPOV_NAMESPACE, Operator};

/// The Cluster's MachineDeployment, control-plane Machine and the workers' prepared bootstrap Secret.
pub const DEPLOYMENT: &str = "workers";
pub const CONTROL_PLANE: &str = "control-plane-0";
pub const BOOTSTRAP_SECRET: &str = "workers-bootstrap";
/// The release the tests start from, as committed under `release/`.
pub const CURRENT: &str = "0.1.0";

/// One management cluster of a test's own: its control plane with the CAPI core manager (no kube-controller-manager:
/// nothing here needs it), its own id, and CAPOV once started on it.
pub struct Management {
    pub name: &'static str,
    pub plane: ControlPlane,
    pub client: kube::Client,
    /// The UID of its `kube-system`: CAPOV's default management cluster id.
    pub id: String,
    /// The operator's log (`capov-<test>-<name>-<pid>.log` in the temporary directory).
    pub log: PathBuf,
    operator: Option<Operator>,
}

impl Drop for Management {
    fn drop(&mut self) {
        self.operator.take();
        // The control plane's files go with it: keep CAPI's log of a failed run beside the operator's.
        if std::thread::panicking()
            && let Some(log) = self.plane.log_path("capi-manager")
        {
            let kept = self.log.with_extension("capi-manager.log");
            if std::fs::copy(log, &kept).is_ok() {
                eprintln!("{} CAPI manager log: {}", self.name, kept.display());
            }
        }
    }
}

impl Management {
    /// A control plane with CAPI's CRDs and core manager, and CAPOV's CRDs when `capov_crds` (else clusterctl
    /// installs them). `test` names the operator's log with `name`.
    pub async fn start(test: &str, name: &'static str, capov_crds: bool) -> Management {
        let options = Options {
            controller_manager: false,
            crds: capov_crds,
            capi_crds: true,
            capi_manager: true,
        };
        let plane = ControlPlane::start(options)
            .await
            .unwrap_or_else(|err| panic!("{name}: {err}"));
        let client = plane.client().await.expect("client");
        let id = Api::<Namespace>::all(client.clone())
            .get("kube-system")
            .await
            .ok()
            .and_then(|ns| ns.metadata.uid)
            .expect("kube-system UID");
        let log = std::env::temp_dir().join(format!("capov-{test}-{name}-{}.log", std::process::id()));
        let _ = std::fs::remove_file(&log);
        Management {
            name,
            plane,
            client,
            id,
            log,
            operator: None,
        }
    }

    /// kubectl `args` against this cluster: its stdout, or the test fails.
    pub fn kubectl(&self, args: &[&str]) -> String {
        let mut command = self.plane.kubectl().expect("kubectl");
        stdout_of(command.args(args)).unwrap_or_else(|err| panic!("{}: {err}", self.name))
    }

    /// Creates the namespace `name`.
    pub async fn create_namespace(&self, name: &str) {
        let namespace = json!({"metadata": {"name": name}});
        Api::<Namespace>::all(self.client.clone())
            .create(
                &PostParams::default(),
                &serde_json::from_value(namespace).expect("namespace"),
            )
            .await
            .unwrap_or_else(|err| panic!("{}: namespace {name}: {err}", self.name));
    }

    /// clusterctl's inventory CRD (`providers.clusterctl.cluster.x-k8s.io`) of the pinned CAPI module, established.
    pub fn install_inventory_crd(&self) {
        let module = capov_harness::capi_module().expect("CAPI module");
        let crd = module.dir.join("cmd/clusterctl/config/manifest/clusterctl-api.yaml");
        self.kubectl(&["apply", "--server-side", "-f", crd.to_str().expect("path")]);
        self.kubectl(&[
            "wait",
            "--for=condition=Established",
            "crd/providers.clusterctl.cluster.x-k8s.io",
            "--timeout=60s",
        ]);
    }

    /// Records a provider in clusterctl's inventory as `clusterctl init` does: `provider` (e.g. `ovirt`) of `type_`
    /// (e.g. `InfrastructureProvider`) at `version`, installed in `namespace`, under the entry `entry` (e.g.
    /// `infrastructure-ovirt`).
    pub async fn record_provider(&self, namespace: &str, entry: &str, provider: &str, type_: &str, version: &str) {
        let body = json!({
            "apiVersion": "clusterctl.cluster.x-k8s.io/v1alpha3", "kind": "Provider",
            "metadata": {"name": entry, "labels": {
                "clusterctl.cluster.x-k8s.io": "", "cluster.x-k8s.io/provider": entry}},
            "providerName": provider, "type": type_, "version": version
        });
        objects::apply(&self.client, &inventory(), Some(namespace), body)
            .await
            .unwrap_or_else(|err| panic!("{}: inventory entry {entry}: {err}", self.name));
    }

    /// Starts CAPOV on this cluster as clusterctl's Deployment runs it ([`Operator::as_installed`]); its engine
    /// requests carry this cluster's name.
    pub fn start_operator(&mut self) {
        self.operator = Some(Operator::as_installed(
            self.plane.kubeconfig_path(),
            self.name,
            &self.log,
        ));
    }

    /// The objects of `resource` in `namespace`.
    pub fn api(&self, namespace: &str, resource: &ApiResource) -> Api<DynamicObject> {
        Api::namespaced_with(self.client.clone(), namespace, resource)
    }
}

/// A workload cluster and an engine simulator (fast timings), started side by side: what a clusterctl test's
/// machines run on, whichever management cluster holds them.
pub async fn workload_and_engine() -> (ControlPlane, SimulatorHandle) {
    tokio::join!(
        async { ControlPlane::start(Options::default()).await.expect("workload cluster") },
        async {
            Simulator::builder()
                .timings(Timings::fast())
                .start()
                .await
                .expect("simulator")
        },
    )
}

/// clusterctl's inventory kind.
pub fn inventory() -> ApiResource {
    let gvk = GroupVersionKind::gvk("clusterctl.cluster.x-k8s.io", "v1alpha3", "Provider");
    ApiResource::from_gvk_with_plural(&gvk, "providers")
}

/// The OVirtProvider `provider` and its credentials Secret in [`CAPOV_NAMESPACE`], as a user creates them: the
/// release's `ovirt-provider.yaml` (with its move labels) rendered by `clusterctl generate yaml` (HOME `home`) for
/// the engine `sim`, applied with `client`.
pub async fn apply_provider_file(client: &kube::Client, sim: &SimulatorHandle, home: &Path, provider: &str) {
    let file =
        capov_release::version_dir(&capov_release::repo_root().join("release"), CURRENT).join("ovirt-provider.yaml");
    let ca = base64::engine::general_purpose::STANDARD.encode(sim.ca_pem().expect("the simulator serves https"));
    let mut clusterctl = capov_harness::offline_clusterctl(home).expect("clusterctl");
    clusterctl.args(["generate", "yaml", "--from"]).arg(&file).envs([
        ("OVIRT_URL", sim.api_url().as_str()),
        ("OVIRT_USERNAME", ADMIN_USER),
        ("OVIRT_PASSWORD", ADMIN_PASSWORD),
        ("OVIRT_CA_BUNDLE", ca.as_str()),
        ("OVIRT_PROVIDER", provider),
        ("CAPOV_NAMESPACE", CAPOV_NAMESPACE),
    ]);
    let yaml = stdout_of(&mut clusterctl).unwrap_or_else(|err| panic!("{err}"));
    for document in manifests::documents(&yaml) {
        let (resource, namespace) = match document["kind"].as_str() {
            Some("Secret") => (objects::secrets(), Some(CAPOV_NAMESPACE)),
            Some("OVirtProvider") => (objects::capov("OVirtProvider", "ovirtproviders"), None),
            other => panic!("unexpected {other:?} in ovirt-provider.yaml"),
        };
        objects::apply(client, &resource, namespace, document)
            .await
            .expect("apply ovirt-provider.yaml");
    }
}

/// A Cluster `name` with the control-plane Machine [`CONTROL_PLANE`] and the MachineDeployment [`DEPLOYMENT`] of
/// `workers` machines on the engine of `provider`, on the workload apiserver `workload`.
pub async fn create_cluster(
    client: &kube::Client,
    namespace: &str,
    workload: &ControlPlane,
    (name, workers): (&str, u32),
    provider: &str,
) {
    let kubeconfig = workload.kubeconfig_yaml().expect("workload kubeconfig");
    let cluster = objects::TestCluster {
        name,
        control_plane: CONTROL_PLANE,
        deployment: DEPLOYMENT,
        bootstrap_secret: BOOTSTRAP_SECRET,
        workers,
        machine_spec: machine_spec(provider),
    };
    objects::create_test_cluster(client, namespace, (workload.api_port(), &kubeconfig), &cluster)
        .await
        .expect("cluster");
}

fn machine_spec(provider: &str) -> Value {
    json!({"provider": provider, "ovirtcluster": "Default", "template": "ubuntu-22.04",
           "cpu": {"sockets": 1, "cores": 2, "threads": 1}, "memory": {"sizemb": 4096}})
}
