//! `clusterctl upgrade apply` of CAPOV with machines running: the real clusterctl (built from Go modules) installs
//! the committed release v0.1.0 from a local provider repository into a harness apiserver that runs the CAPI core
//! manager, a Cluster with a control-plane Machine and a MachineDeployment gets its VMs from the engine simulator,
//! then the test publishes the next release (v0.2.0, rendered by `capov_release::next_release` from this source with
//! only the version changed) into the repository and upgrades to it.
//!
//! What stands in for the parts the harness lacks:
//! - The Deployment clusterctl installs has no kubelet (and no kube-controller-manager) to run it here, so the test
//!   plays both for that one Deployment: while it exists with replicas > 0, the real `manager` binary runs as a
//!   process named after the Deployment's image tag, and the Deployment's status reports it; when clusterctl scales
//!   the Deployment to 0 (its first upgrade step) the process is stopped and the status says 0, and when the new
//!   Deployment appears a new process starts. So the old operator is down while clusterctl swaps the components, as
//!   in a real cluster, and the new one must pick up the machines from what the API server and the engine hold.
//! - The core provider is the harness's CAPI manager, recorded in clusterctl's inventory with the version of the
//!   CAPI module `tools/capi` pins, and its repository holds only that module's own `metadata.yaml`; clusterctl
//!   reads nothing else of it as long as only CAPOV is installed or upgraded.
//! - cert-manager is not installed; CAPOV needs none. `clusterctl init` only probes it by creating an Issuer and a
//!   Certificate, so the test serves those two kinds with schemaless CRDs and nothing acting on them.
//!
//! Asserted: the inventory and every CAPOV CRD say the next version (the CRDs served/stored as its file says), the
//! Deployment runs the next image, the old operator stopped before the new one started, every machine stayed
//! Ready (sampled while the upgrade ran and until the new operator had scaled the cluster), every OVirtMachine
//! kept its providerID and VM, no VM was created or deleted by the upgrade, and the upgraded cluster scales up.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use capov_harness::{ControlPlane, objects, play_kubelets};
use capov_ovirt_sim::SimulatorHandle;
use capov_testkit::{WithLog, eventually, manifests, stdout_of};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, ApiResource, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use serde_json::json;
use tokio::task::JoinHandle;

use crate::world::clusterctl::{
    CURRENT, DEPLOYMENT, Management, apply_provider_file, create_cluster, inventory, workload_and_engine,
};
use crate::world::{CAPOV_NAMESPACE, Operator};

const CLUSTER: &str = "upgraded";
const MANAGER_DEPLOYMENT: &str = "capov-controller-manager";
const PROVIDER: &str = "ovirt-upgrade";
const NEXT: &str = "0.2.0";
const CRDS: [&str; 5] = [
    "ovirtclusters.infrastructure.cluster.x-k8s.io",
    "ovirtclustertemplates.infrastructure.cluster.x-k8s.io",
    "ovirtmachines.infrastructure.cluster.x-k8s.io",
    "ovirtmachinetemplates.infrastructure.cluster.x-k8s.io",
    "ovirtproviders.infrastructure.cluster.x-k8s.io",
];
const WAIT: Duration = Duration::from_secs(240);
/// The scale-up after the upgrade: in half the runs the new VM's start came 113-135 s after its affinity-group join,
/// the machine waiting out its AwaitSearch deadline (see docs/benchmarks.md), so this wait is longer.
const SCALE_UP_WAIT: Duration = Duration::from_secs(420);

/// A local provider repository with CAPOV's committed release and the core provider's metadata, the clusterctl
/// config naming both, and clusterctl's HOME.
struct Repository {
    dir: tempfile::TempDir,
}

impl Repository {
    fn new(capi_version: &str, capi_metadata: &Path) -> Repository {
        let dir = tempfile::tempdir().expect("temporary directory");
        let repo = dir.path().join("repo");
        let committed = capov_release::version_dir(&capov_release::repo_root().join("release"), CURRENT);
        let current = capov_release::version_dir(&repo, CURRENT);
        std::fs::create_dir_all(&current).expect("release directory");
        for entry in std::fs::read_dir(&committed).expect("the committed release") {
            let path = entry.expect("entry").path();
            std::fs::copy(&path, current.join(path.file_name().expect("name"))).expect("copy the release");
        }
        let core = repo.join("cluster-api").join(capi_version);
        std::fs::create_dir_all(&core).expect("core directory");
        std::fs::copy(capi_metadata, core.join("metadata.yaml")).expect("core metadata");
        let config = format!(
            "providers:\n  - name: cluster-api\n    url: file://{}\n    type: CoreProvider\n  - name: ovirt\n    \
             url: file://{}\n    type: InfrastructureProvider\n",
            core.join("core-components.yaml").display(),
            current.join("infrastructure-components.yaml").display()
        );
        std::fs::write(dir.path().join("clusterctl.yaml"), config).expect("config");
        std::fs::create_dir(dir.path().join("home")).expect("home");
        Repository { dir }
    }

    /// Publishes the next release beside the current one.
    fn publish_next(&self) -> PathBuf {
        let root = capov_release::repo_root();
        let helm = capov_release::helm_dir(&root).unwrap_or_else(|err| panic!("{err}"));
        let artifacts =
            capov_release::next_release(&root, &helm.join("helm"), NEXT).unwrap_or_else(|err| panic!("{err}"));
        capov_release::write_version(&self.dir.path().join("repo"), NEXT, &artifacts).expect("write the next release")
    }

    fn home(&self) -> PathBuf {
        self.dir.path().join("home")
    }

    /// clusterctl, offline, against `plane` with this config.
    fn clusterctl(&self, plane: &ControlPlane, args: &[&str]) -> Command {
        let mut command = capov_harness::offline_clusterctl(&self.home()).unwrap_or_else(|err| panic!("{err}"));
        command
            .args(args)
            .arg("--config")
            .arg(self.dir.path().join("clusterctl.yaml"))
            .arg(format!("--kubeconfig={}", plane.kubeconfig_path().display()))
            .arg("--v=1");
        command
    }
}

/// One start of the operator by the Deployment stand-in: the image tag it runs and when.
#[derive(Clone, Debug)]
struct Run {
    tag: String,
    started: Instant,
    stopped: Option<Instant>,
}

/// Plays kube-controller-manager and kubelet for clusterctl's CAPOV Deployment (see the file's doc), until aborted.
fn run_deployment(
    client: kube::Client,
    kubeconfig: PathBuf,
    log: PathBuf,
    runs: Arc<Mutex<Vec<Run>>>,
) -> JoinHandle<()> {
    tokio::spawn(async move {
        let deployments: Api<Deployment> = Api::namespaced(client, CAPOV_NAMESPACE);
        let mut pod: Option<(Operator, String)> = None;
        loop {
            let wanted = match deployments.get_opt(MANAGER_DEPLOYMENT).await {
                Ok(found) => found.and_then(|d| wanted_tag(&d)),
                Err(_) => {
                    tokio::time::sleep(Duration::from_millis(200)).await;
                    continue;
                }
            };
            let running = pod.as_ref().map(|(_, tag)| tag.clone());
            if running != wanted {
                if pod.take().is_some()
                    && let Some(run) = runs.lock().expect("runs").last_mut()
                {
                    run.stopped = Some(Instant::now());
                }
                if let Some(tag) = &wanted {
                    pod = Some((
                        Operator::as_installed(&kubeconfig, &format!("capov-{tag}"), &log),
                        tag.clone(),
                    ));
                    runs.lock().expect("runs").push(Run {
                        tag: tag.clone(),
                        started: Instant::now(),
                        stopped: None,
                    });
                }
            }
            let replicas = i32::from(pod.is_some());
            let status = json!({"status": {"replicas": replicas, "readyReplicas": replicas,
                                           "availableReplicas": replicas, "updatedReplicas": replicas}});
            let _ = deployments
                .patch_status(MANAGER_DEPLOYMENT, &PatchParams::default(), &Patch::Merge(&status))
                .await;
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    })
}

/// The image tag of the manager container when the Deployment wants a replica.
fn wanted_tag(deployment: &Deployment) -> Option<String> {
    let spec = deployment.spec.as_ref()?;
    if spec.replicas.unwrap_or(1) < 1 || deployment.metadata.deletion_timestamp.is_some() {
        return None;
    }
    let containers = &spec.template.spec.as_ref()?.containers;
    let image = containers.iter().find(|c| c.name == "manager")?.image.as_ref()?;
    image.rsplit_once(':').map(|(_, tag)| tag.to_string())
}

/// What `clusterctl init` finds in place here: its inventory CRD with the core provider (the harness's CAPI
/// manager) recorded, and the two cert-manager kinds it probes.
async fn prepare_management(management: &Management, capi_version: &str) {
    management.install_inventory_crd();
    for (kind, plural) in [("Issuer", "issuers"), ("Certificate", "certificates")] {
        let crd = json!({
            "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": format!("{plural}.cert-manager.io")},
            "spec": {"group": "cert-manager.io", "scope": "Namespaced",
                     "names": {"kind": kind, "plural": plural, "singular": kind.to_lowercase()},
                     "versions": [{"name": "v1", "served": true, "storage": true,
                                   "schema": {"openAPIV3Schema": {"type": "object",
                                              "x-kubernetes-preserve-unknown-fields": true}}}]}
        });
        let crds: Api<CustomResourceDefinition> = Api::all(management.client.clone());
        crds.create(&PostParams::default(), &serde_json::from_value(crd).expect("crd"))
            .await
            .expect("cert-manager stand-in CRD");
    }
    management.kubectl(&[
        "wait",
        "--for=condition=Established",
        "crd/issuers.cert-manager.io",
        "crd/certificates.cert-manager.io",
        "--timeout=60s",
    ]);
    management.create_namespace("capi-system").await;
    management
        .record_provider(
            "capi-system",
            "cluster-api",
            "cluster-api",
            "CoreProvider",
            capi_version,
        )
        .await;
}

/// The version clusterctl's inventory records for CAPOV.
async fn inventory_version(client: &kube::Client) -> Option<String> {
    let entry = Api::<DynamicObject>::namespaced_with(client.clone(), CAPOV_NAMESPACE, &inventory())
        .get_opt("infrastructure-ovirt")
        .await
        .ok()??;
    entry.data["version"].as_str().map(String::from)
}

fn condition_true(object: &DynamicObject, kind: &str) -> bool {
    object.data["status"]["conditions"]
        .as_array()
        .is_some_and(|conditions| conditions.iter().any(|c| c["type"] == kind && c["status"] == "True"))
}

/// Each Machine's and each OVirtMachine's readiness and VM: Machine name → (Running with a Node and Ready,
/// OVirtMachine Ready, the OVirtMachine's providerID).
async fn machines(client: &kube::Client, namespace: &str) -> Result<BTreeMap<String, (bool, bool, String)>, String> {
    let list = |resource: ApiResource| {
        let api = Api::<DynamicObject>::namespaced_with(client.clone(), namespace, &resource);
        async move { api.list(&ListParams::default()).await.map_err(|err| err.to_string()) }
    };
    let machines = list(objects::capi("Machine", "machines")).await?;
    let ovirt_machines = list(objects::capov("OVirtMachine", "ovirtmachines")).await?;
    let mut seen = BTreeMap::new();
    for machine in &machines.items {
        let name = machine.metadata.name.clone().unwrap_or_default();
        let running = machine.data["status"]["phase"] == "Running"
            && machine.data["status"]["nodeRef"]["name"].is_string()
            && condition_true(machine, "Ready");
        let infra = machine.data["spec"]["infrastructureRef"]["name"].as_str();
        let ovirt = ovirt_machines
            .items
            .iter()
            .find(|o| infra.is_some() && o.metadata.name.as_deref() == infra);
        let ovirt_ready = ovirt.is_some_and(|o| condition_true(o, "Ready"));
        let provider_id = ovirt
            .and_then(|o| o.data["spec"]["providerID"].as_str())
            .unwrap_or_default()
            .to_string();
        seen.insert(name, (running, ovirt_ready, provider_id));
    }
    Ok(seen)
}

/// When exactly `count` Machines exist, all Running and Ready with Ready OVirtMachines whose VMs the engine has:
/// Machine name → providerID.
async fn settled(
    client: &kube::Client,
    namespace: &str,
    count: usize,
    sim: &SimulatorHandle,
) -> Result<BTreeMap<String, String>, String> {
    let seen = machines(client, namespace).await?;
    let ready: BTreeMap<String, String> = seen
        .iter()
        .filter(|(_, (running, ovirt_ready, id))| {
            *running
                && *ovirt_ready
                && id
                    .strip_prefix("ovirt://")
                    .is_some_and(|vm| sim.control().vm(vm).is_some())
        })
        .map(|(name, (_, _, id))| (name.clone(), id.clone()))
        .collect();
    if ready.len() == count && seen.len() == count {
        Ok(ready)
    } else {
        Err(format!("{seen:?}"))
    }
}

/// Samples the machines of `before` until aborted: how many samples, and every one where one of them was not Ready
/// or named another VM.
fn sample_readiness(
    client: kube::Client,
    namespace: String,
    before: BTreeMap<String, String>,
    samples: Arc<Mutex<(usize, Vec<String>)>>,
) -> JoinHandle<()> {
    tokio::spawn(async move {
        loop {
            if let Ok(seen) = machines(&client, &namespace).await {
                let mut sampled = samples.lock().expect("samples");
                sampled.0 += 1;
                for (name, id) in &before {
                    match seen.get(name) {
                        Some((true, true, now)) if now == id => {}
                        other => sampled.1.push(format!("{name}: {other:?}")),
                    }
                }
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
    })
}

/// POSTs and DELETEs of VMs the operator of `tag` sent.
fn vm_creations_and_deletions_by(sim: &SimulatorHandle, tag: &str) -> Vec<String> {
    let agent = format!("capov-{tag}");
    sim.control()
        .writes()
        .into_iter()
        .filter(|w| w.user_agent.contains(&agent))
        .filter(|w| {
            (w.method == "POST" && w.path.ends_with("/api/vms"))
                || (w.method == "DELETE" && w.path.contains("/api/vms/"))
        })
        .map(|w| format!("{} {}", w.method, w.path))
        .collect()
}

/// CRD name → its `app.kubernetes.io/version` label, and its versions as (name, served, storage).
type CrdVersions = BTreeMap<String, (Option<String>, Vec<(String, bool, bool)>)>;

/// Each CAPOV CRD on the API server.
async fn crd_versions(client: &kube::Client) -> CrdVersions {
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let mut found = BTreeMap::new();
    for name in CRDS {
        let crd = crds.get(name).await.unwrap_or_else(|err| panic!("{name}: {err}"));
        let label = crd
            .metadata
            .labels
            .as_ref()
            .and_then(|l| l.get(capov_release::VERSION_LABEL_KEY))
            .cloned();
        let versions = crd
            .spec
            .versions
            .iter()
            .map(|v| (v.name.clone(), v.served, v.storage))
            .collect();
        found.insert(name.to_string(), (label, versions));
    }
    found
}

/// The same for the CRDs of a release's components file.
fn crd_versions_in(components: &Path) -> CrdVersions {
    let yaml = std::fs::read_to_string(components).expect("components");
    manifests::documents(&yaml)
        .iter()
        .filter(|d| d["kind"] == "CustomResourceDefinition")
        .map(|d| {
            let label = d["metadata"]["labels"][capov_release::VERSION_LABEL_KEY]
                .as_str()
                .map(String::from);
            let versions = d["spec"]["versions"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|v| {
                    let name = v["name"].as_str().unwrap_or_default().to_string();
                    (name, v["served"] == true, v["storage"] == true)
                })
                .collect();
            (
                d["metadata"]["name"].as_str().unwrap_or_default().to_string(),
                (label, versions),
            )
        })
        .collect()
}

#[tokio::test]
async fn clusterctl_upgrade_keeps_every_machine_ready_and_its_vm() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let started = Instant::now();
    // clusterctl installs CAPOV's CRDs (and replaces them on upgrade): this management cluster is the test's own.
    let (management, (workload, sim)) =
        tokio::join!(Management::start("upgrade", "management", false), workload_and_engine(),);
    let client = management.client.clone();
    let module = capov_harness::capi_module().expect("CAPI module");
    let repository = Repository::new(&module.version, &module.dir.join("metadata.yaml"));
    prepare_management(&management, &module.version).await;
    eprintln!("planes up after {:.1?}", started.elapsed());

    // clusterctl init installs the committed release.
    let init = stdout_of(&mut repository.clusterctl(
        &management.plane,
        &["init", "--infrastructure", &format!("ovirt:v{CURRENT}")],
    ))
    .unwrap_or_else(|err| panic!("clusterctl init: {err}"));
    eprintln!("clusterctl init:\n{init}");
    assert_eq!(inventory_version(&client).await.as_deref(), Some("v0.1.0"));
    let log = management.log.clone();
    let runs = Arc::new(Mutex::new(Vec::new()));
    let pods = run_deployment(
        client.clone(),
        management.plane.kubeconfig_path().to_path_buf(),
        log.clone(),
        runs.clone(),
    );

    // A cluster with three machines made Ready by CAPOV 0.1.0.
    apply_provider_file(&client, &sim, &repository.home(), PROVIDER).await;
    let namespace = management
        .plane
        .create_namespace(&client, "upgrade")
        .await
        .expect("namespace");
    create_cluster(&client, &namespace, &workload, (CLUSTER, 2), PROVIDER).await;
    let kubelets = play_kubelets(sim.control().clone(), workload.client().await.expect("workload client"));
    let waited = WithLog::new("3 Machines Running and Ready", &log);
    let before = eventually(WAIT, waited, || settled(&client, &namespace, 3, &sim)).await;
    let (created, deleted) = (
        sim.control().counter("POST /vms"),
        sim.control().counter("DELETE /vms/{id}"),
    );
    assert_eq!(created, 3);
    eprintln!("settled after {:.1?}", started.elapsed());

    // The next release is published; clusterctl offers it.
    let next_dir = repository.publish_next();
    let plan = stdout_of(&mut repository.clusterctl(&management.plane, &["upgrade", "plan"]))
        .unwrap_or_else(|err| panic!("clusterctl upgrade plan: {err}"));
    eprintln!("clusterctl upgrade plan:\n{plan}");
    let offered = plan
        .lines()
        .any(|line| line.contains("infrastructure-ovirt") && line.contains("v0.1.0") && line.contains("v0.2.0"));
    assert!(offered, "the plan offers v0.2.0 for CAPOV:\n{plan}");

    // The upgrade, sampled.
    let samples = Arc::new(Mutex::new((0, Vec::new())));
    let sampler = sample_readiness(client.clone(), namespace.clone(), before.clone(), samples.clone());
    let upgrade_started = Instant::now();
    let mut apply = repository.clusterctl(
        &management.plane,
        &[
            "upgrade",
            "apply",
            "--infrastructure",
            &format!("{CAPOV_NAMESPACE}/ovirt:v{NEXT}"),
        ],
    );
    let applied = tokio::task::spawn_blocking(move || stdout_of(&mut apply))
        .await
        .expect("clusterctl upgrade apply ran")
        .unwrap_or_else(|err| panic!("clusterctl upgrade apply: {err}"));
    let apply_took = upgrade_started.elapsed();
    eprintln!(
        "clusterctl upgrade apply ({apply_took:.1?}), after {:.1?}:\n{applied}",
        started.elapsed()
    );

    // What clusterctl left: the inventory, the CRDs and the Deployment of the next version.
    assert_eq!(inventory_version(&client).await.as_deref(), Some("v0.2.0"));
    let expected = crd_versions_in(&next_dir.join("infrastructure-components.yaml"));
    assert_eq!(expected.len(), CRDS.len());
    let live = crd_versions(&client).await;
    assert_eq!(live, expected, "the CRDs are those of the next release");
    assert!(live.values().all(|(label, _)| label.as_deref() == Some(NEXT)));
    let deployment = Api::<Deployment>::namespaced(client.clone(), CAPOV_NAMESPACE)
        .get(MANAGER_DEPLOYMENT)
        .await
        .expect("the Deployment");
    assert_eq!(wanted_tag(&deployment).as_deref(), Some(NEXT));

    // The new operator takes over; the machines it finds stay as they are, and it scales the cluster up.
    eventually(WAIT, "the operator of the next version running", || async {
        let runs = runs.lock().expect("runs").clone();
        runs.iter()
            .any(|r| r.tag == NEXT)
            .then_some(())
            .ok_or(format!("{runs:?}"))
    })
    .await;
    let patch = json!({"spec": {"replicas": 3}});
    Api::<DynamicObject>::namespaced_with(
        client.clone(),
        &namespace,
        &objects::capi("MachineDeployment", "machinedeployments"),
    )
    .patch(DEPLOYMENT, &PatchParams::default(), &Patch::Merge(&patch))
    .await
    .expect("scale up");
    let waited = WithLog::new("4 Machines Running and Ready after the upgrade", &log);
    let after = eventually(SCALE_UP_WAIT, waited, || settled(&client, &namespace, 4, &sim)).await;
    eprintln!("scaled up after {:.1?}", started.elapsed());
    sampler.abort();
    let (sample_count, not_ready) = samples.lock().expect("samples").clone();

    assert!(sample_count >= 5, "only {sample_count} samples were taken");
    assert_eq!(not_ready, Vec::<String>::new(), "a machine was not Ready or changed VM");
    for (name, id) in &before {
        assert_eq!(after.get(name), Some(id), "{name} kept its providerID");
    }
    assert_eq!(
        sim.control().counter("POST /vms"),
        created + 1,
        "only the scale-up made a VM"
    );
    assert_eq!(sim.control().counter("DELETE /vms/{id}"), deleted, "a VM was deleted");
    let by_next = vm_creations_and_deletions_by(&sim, NEXT);
    assert_eq!(
        by_next.len(),
        1,
        "the new operator made one VM, deleted none: {by_next:?}"
    );
    let runs = runs.lock().expect("runs").clone();
    let tags: Vec<&str> = runs.iter().map(|r| r.tag.as_str()).collect();
    assert_eq!(tags, [CURRENT, NEXT], "one operator per version");
    let old_stopped = runs[0].stopped.expect("the old operator stopped");
    assert!(
        old_stopped <= runs[1].started,
        "the old operator stopped before the new one started"
    );
    kubelets.abort();
    pods.abort();
    println!(
        "clusterctl upgrade v{CURRENT} -> v{NEXT}: apply took {:.1?}; {sample_count} samples of 3 machines all Ready \
         with the same VMs; no VM created or deleted by the upgrade; the old operator down {:.1?} before the new \
         one; scale-up made 1 VM; {:.1?} in all",
        apply_took,
        runs[1].started.duration_since(old_stopped),
        started.elapsed()
    );
}
