//! `clusterctl move` between two management clusters, as the product documents' pivot from a bootstrap cluster
//! does it: two harness apiservers, each with the CAPI core manager, clusterctl's inventory and the real `manager`
//! binary with its own default management cluster id (its `kube-system` UID); one engine simulator; one workload
//! apiserver whose Nodes the test registers as each VM's kubelet would. The real clusterctl (built from Go modules)
//! moves a Cluster with a control-plane Machine and a MachineDeployment, the OVirtProvider rendered from
//! `release/…/ovirt-provider.yaml` and its credentials Secret. The target's CAPOV adopts every VM without creating or
//! deleting one, the source's lets go, and the moved cluster then scales up and down to nothing left behind.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use capov_crds::labels::MANAGEMENT_CLUSTER_ANNOTATION;
use capov_harness::{objects, play_kubelets};
use capov_ovirt_sim::SimulatorHandle;
use capov_testkit::{WithLog, eventually, stdout_of};
use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, DeleteParams, DynamicObject, ListParams, Patch, PatchParams};
use serde_json::json;

use crate::world::CAPOV_NAMESPACE;
use crate::world::clusterctl::{
    BOOTSTRAP_SECRET, CONTROL_PLANE, CURRENT, DEPLOYMENT, Management, apply_provider_file, create_cluster,
    workload_and_engine,
};

const CLUSTER: &str = "moved";
const PROVIDER: &str = "ovirt-move";
const MOVE_LABEL: &str = "clusterctl.cluster.x-k8s.io/move";
const WAIT: Duration = Duration::from_secs(240);

/// A management cluster with CAPOV's and CAPI's CRDs as `clusterctl init` leaves them for `clusterctl move`: every
/// CRD labelled for discovery, the inventory with CAPOV's entry in [`CAPOV_NAMESPACE`] (where clusterctl looks for
/// Secrets to move), and that namespace.
async fn management(name: &'static str) -> Management {
    let management = Management::start("move", name, true).await;
    management.create_namespace(CAPOV_NAMESPACE).await;
    management.kubectl(&["label", "crd", "--all", "clusterctl.cluster.x-k8s.io=", "--overwrite"]);
    management.install_inventory_crd();
    let version = format!("v{CURRENT}");
    management
        .record_provider(
            CAPOV_NAMESPACE,
            "infrastructure-ovirt",
            "ovirt",
            "InfrastructureProvider",
            &version,
        )
        .await;
    management
}

fn machines(management: &Management, namespace: &str) -> Api<DynamicObject> {
    management.api(namespace, &objects::capi("Machine", "machines"))
}

fn ovirt_machines(management: &Management, namespace: &str) -> Api<DynamicObject> {
    management.api(namespace, &objects::capov("OVirtMachine", "ovirtmachines"))
}

fn providers(management: &Management) -> Api<DynamicObject> {
    Api::all_with(
        management.client.clone(),
        &objects::capov("OVirtProvider", "ovirtproviders"),
    )
}

/// When exactly `count` Machines exist on `management`, all Running with a nodeRef and a providerID naming a VM the
/// engine has: each Machine's VM id. Else what is not so yet.
async fn running(
    management: &Management,
    namespace: &str,
    count: usize,
    sim: &SimulatorHandle,
) -> Result<BTreeMap<String, String>, String> {
    let list = machines(management, namespace)
        .list(&ListParams::default())
        .await
        .map_err(|err| err.to_string())?;
    let mut vms = BTreeMap::new();
    for machine in &list.items {
        let name = machine.metadata.name.clone().unwrap_or_default();
        let vm = crate::world::running_vm(machine).map_err(|what| format!("{}: {what}", management.name))?;
        if sim.control().vm(vm).is_none() {
            return Err(format!("{}: {name}: VM {vm} is not in the engine", management.name));
        }
        vms.insert(name, vm.to_string());
    }
    if vms.len() == count {
        Ok(vms)
    } else {
        Err(format!("{}: {} Machines: {vms:?}", management.name, vms.len()))
    }
}

async fn settle(
    management: &Management,
    namespace: &str,
    count: usize,
    sim: &SimulatorHandle,
    what: &str,
) -> BTreeMap<String, String> {
    let waited = WithLog::new(format!("{}: {what}", management.name), &management.log);
    eventually(WAIT, waited, || running(management, namespace, count, sim)).await
}

async fn scale(management: &Management, namespace: &str, replicas: u32) {
    let patch = json!({"spec": {"replicas": replicas}});
    management
        .api(namespace, &objects::capi("MachineDeployment", "machinedeployments"))
        .patch(DEPLOYMENT, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .expect("scale");
}

/// The bootstrap Secrets of the Cluster get clusterctl's move label, as README tells users to do for Secrets they
/// made themselves (a Secret CAPI does not own moves only with it).
async fn label_for_move(client: &kube::Client, namespace: &str) {
    let label = json!({"metadata": {"labels": {MOVE_LABEL: ""}}});
    let secret_api: Api<Secret> = Api::namespaced(client.clone(), namespace);
    for secret in [BOOTSTRAP_SECRET.to_string(), format!("{CONTROL_PLANE}-bootstrap")] {
        secret_api
            .patch(&secret, &PatchParams::default(), &Patch::Merge(&label))
            .await
            .expect("move label");
    }
}

/// `clusterctl move` of `namespace` from `source` to `target`, offline.
fn clusterctl_move(source: &Management, target: &Management, namespace: &str, home: &std::path::Path) {
    let mut clusterctl = capov_harness::offline_clusterctl(home).expect("clusterctl");
    clusterctl
        .arg("move")
        .arg(format!("--kubeconfig={}", source.plane.kubeconfig_path().display()))
        .arg(format!("--to-kubeconfig={}", target.plane.kubeconfig_path().display()))
        .arg(format!("--namespace={namespace}"))
        .arg("--v=1");
    let output = stdout_of(&mut clusterctl).unwrap_or_else(|err| panic!("clusterctl move: {err}"));
    eprintln!("clusterctl move:\n{output}");
}

/// The management cluster id a VM's marker names, and its UID.
fn marker_ids(sim: &SimulatorHandle, vm: &str) -> Option<(String, String)> {
    let description = sim.control().vm(vm)?.description;
    let word = |prefix: &str| {
        description
            .split_whitespace()
            .find_map(|w| w.strip_prefix(prefix))
            .map(String::from)
    };
    Some((word("uid:")?, word("mc:")?))
}

/// Every OVirtMachine of `namespace` on `management` is Ready and its VM's marker names its UID (rewritten after
/// the move) and `mc`.
async fn adopted(management: &Management, namespace: &str, sim: &SimulatorHandle, mc: &str) -> Result<usize, String> {
    let list = ovirt_machines(management, namespace)
        .list(&ListParams::default())
        .await
        .map_err(|err| err.to_string())?;
    for machine in &list.items {
        let name = machine.metadata.name.clone().unwrap_or_default();
        let uid = machine.metadata.uid.clone().unwrap_or_default();
        let ready = machine.data["status"]["conditions"]
            .as_array()
            .is_some_and(|conditions| conditions.iter().any(|c| c["type"] == "Ready" && c["status"] == "True"));
        let vm = machine.data["spec"]["providerID"]
            .as_str()
            .and_then(|id| id.strip_prefix("ovirt://"))
            .unwrap_or_default();
        let marker = marker_ids(sim, vm);
        if !ready || marker != Some((uid.clone(), mc.to_string())) {
            return Err(format!("{name} (UID {uid}): Ready {ready}, marker {marker:?}"));
        }
    }
    Ok(list.items.len())
}

/// Engine writes to VMs sent by `instance` (its User-Agent) since `since_ms`.
fn vm_writes_by(sim: &SimulatorHandle, instance: &str, since_ms: u64) -> Vec<String> {
    sim.control()
        .writes()
        .into_iter()
        .filter(|w| w.received_ms >= since_ms && w.user_agent.contains(instance) && w.path.contains("/vms"))
        .map(|w| format!("{} {}", w.method, w.path))
        .collect()
}

fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or_default()
}

#[tokio::test]
async fn clusterctl_move_keeps_every_machine_owned_and_the_moved_cluster_scales() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let started = Instant::now();
    let (mut source, mut target, (workload, sim)) = tokio::join!(
        management("capov-source"),
        management("capov-target"),
        workload_and_engine(),
    );
    assert_ne!(source.id, target.id, "each management cluster has its own default id");
    eprintln!("planes up after {:.1?}", started.elapsed());
    let home = tempfile::tempdir().expect("clusterctl home");

    // The source: provider, cluster, machines, its CAPOV; the VMs made and their Nodes registered.
    apply_provider_file(&source.client, &sim, home.path(), PROVIDER).await;
    let namespace = source
        .plane
        .create_namespace(&source.client, "move")
        .await
        .expect("namespace");
    create_cluster(&source.client, &namespace, &workload, (CLUSTER, 2), PROVIDER).await;
    label_for_move(&source.client, &namespace).await;
    source.start_operator();
    target.start_operator();
    let kubelets = play_kubelets(sim.control().clone(), workload.client().await.expect("workload client"));
    let before = settle(&source, &namespace, 3, &sim, "3 Running Machines").await;
    eventually(WAIT, "the source's CAPOV records its id on the provider", || async {
        let provider = providers(&source).get(PROVIDER).await.ok()?;
        let recorded = provider
            .metadata
            .annotations?
            .get(MANAGEMENT_CLUSTER_ANNOTATION)?
            .clone();
        (recorded == source.id).then_some(())
    })
    .await;
    let (created, deleted) = (
        sim.control().counter("POST /vms"),
        sim.control().counter("DELETE /vms/{id}"),
    );
    assert_eq!(created, 3);
    assert!(
        vm_writes_by(&sim, source.name, 0).iter().any(|w| w.starts_with("POST")),
        "the source's engine writes are told apart by their User-Agent"
    );
    eprintln!("source settled after {:.1?}", started.elapsed());

    // The move.
    let moved_at = now_ms();
    clusterctl_move(&source, &target, &namespace, home.path());
    eprintln!("moved after {:.1?}", started.elapsed());

    // What arrived: the provider with the source's id, its Secret, the Cluster and every machine.
    let provider = providers(&target).get(PROVIDER).await.expect("the provider moved");
    assert_eq!(
        provider
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(MANAGEMENT_CLUSTER_ANNOTATION)),
        Some(&source.id),
        "the provider keeps the id its VMs are marked with"
    );
    let credentials = format!("{PROVIDER}-capov-provider-secret");
    Api::<Secret>::namespaced(target.client.clone(), CAPOV_NAMESPACE)
        .get(&credentials)
        .await
        .expect("the credentials Secret moved");
    target
        .api(&namespace, &objects::capi("Cluster", "clusters"))
        .get(CLUSTER)
        .await
        .expect("the Cluster moved");

    // The target's CAPOV adopts every VM (marker rewritten with the new UIDs), the same VMs, none made or removed.
    let after = settle(&target, &namespace, 3, &sim, "the moved Machines Running").await;
    assert_eq!(after, before, "the moved Machines name the same VMs");
    let waited = WithLog::new(
        "every moved OVirtMachine Ready with its VM's marker rewritten",
        &target.log,
    );
    let count = eventually(WAIT, waited, || adopted(&target, &namespace, &sim, &source.id)).await;
    assert_eq!(count, 3);
    assert_eq!(
        sim.control().counter("POST /vms"),
        created,
        "a VM was created by the move"
    );
    assert_eq!(
        sim.control().counter("DELETE /vms/{id}"),
        deleted,
        "a VM was deleted by the move"
    );
    let rewrites = vm_writes_by(&sim, target.name, moved_at);
    assert!(
        rewrites.len() == 3 && rewrites.iter().all(|w| w.starts_with("PUT ")),
        "the target's only VM writes are the three marker rewrites: {rewrites:?}"
    );

    // The source lets go: its objects are gone and its CAPOV sent the engine nothing about VMs since the move.
    let left = ovirt_machines(&source, &namespace)
        .list(&ListParams::default())
        .await
        .expect("list");
    assert!(
        left.items.is_empty(),
        "OVirtMachines left on the source: {}",
        left.items.len()
    );
    assert_eq!(
        vm_writes_by(&sim, source.name, moved_at),
        Vec::<String>::new(),
        "the source wrote"
    );
    eprintln!("adopted after {:.1?}", started.elapsed());

    // The moved cluster scales: a new VM under the target, then every worker goes, the moved ones included.
    scale(&target, &namespace, 3).await;
    settle(&target, &namespace, 4, &sim, "4 Running Machines").await;
    assert_eq!(sim.control().counter("POST /vms"), created + 1);
    scale(&target, &namespace, 0).await;
    let control_plane = settle(&target, &namespace, 1, &sim, "the control plane alone").await;
    let waited = WithLog::new("only the control plane's VM left", &target.log);
    eventually(WAIT, waited, || async {
        let vms: Vec<String> = sim.control().vms().into_iter().map(|vm| vm.id).collect();
        (vms.len() == 1 && control_plane.values().any(|vm| *vm == vms[0]))
            .then_some(())
            .ok_or(format!("{vms:?}"))
    })
    .await;
    for (name, vm) in &before {
        if name != CONTROL_PLANE {
            assert!(sim.control().vm(vm).is_none(), "{name}'s VM was left behind");
        }
    }

    // The Cluster goes with its moved control plane's VM: nothing left in the engine.
    target
        .api(&namespace, &objects::capi("Cluster", "clusters"))
        .delete(CLUSTER, &DeleteParams::default())
        .await
        .expect("delete the Cluster");
    let waited = WithLog::new("the Cluster and every VM gone", &target.log);
    eventually(WAIT, waited, || async {
        let cluster = target
            .api(&namespace, &objects::capi("Cluster", "clusters"))
            .get_opt(CLUSTER)
            .await
            .map_err(|err| err.to_string())?;
        let vms = sim.control().vm_count();
        (cluster.is_none() && vms == 0)
            .then_some(())
            .ok_or(format!("Cluster there: {}, VMs {vms}", cluster.is_some()))
    })
    .await;
    assert_eq!(
        vm_writes_by(&sim, source.name, moved_at),
        Vec::<String>::new(),
        "the source wrote"
    );
    kubelets.abort();
    println!(
        "clusterctl move: 3 machines moved, adopted by the target's CAPOV with no VM created or deleted (markers \
         rewritten, id {} kept on the provider); the source sent no VM write; 2 -> 3 -> 0 workers and the Cluster's \
         deletion left no VM; {:.1?} in all",
        source.id,
        started.elapsed()
    );
}
