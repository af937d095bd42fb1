//! CAPOV under the real Cluster API: the CAPI core manager (built from Go modules, its webhooks registered with the
//! apiserver) drives a MachineDeployment of OVirtMachineTemplate-based machines, and the real `manager` binary
//! makes the VMs in the engine simulator. A second apiserver plays the workload cluster; the test plays each VM's
//! kubelet by registering a Node whose systemUUID is the VM id.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use capov_harness::{ControlPlane, objects};
use capov_testkit::eventually;
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, DynamicObject, ListParams, Patch, PatchParams};
use serde_json::{Value, json};
use tokio::task::JoinHandle;

use crate::world::{self, Operator, World};

const CLUSTER: &str = "capi-e2e";
const BOOTSTRAP_SECRET: &str = "worker-bootstrap";
const DEPLOYMENT: &str = "workers";
/// A control-plane Machine of its own (no control-plane provider): CAPI counts the control plane initialized once
/// it has a Node, and only then looks at the workers' Nodes.
const CONTROL_PLANE: &str = "control-plane-0";

/// The shared world with a provisioned Cluster in the namespace, its control-plane Machine, the workers'
/// bootstrap Secret, the namespace's operator and the kubelets; no workers yet.
async fn provisioned(prefix: &str) -> World {
    let mut world = World::new(prefix).await;
    objects::apply_secret(
        &world.client,
        &world.namespace,
        BOOTSTRAP_SECRET,
        &[
            ("value", "#cloud-config\nhostname: worker\n"),
            ("format", "cloud-config"),
        ],
    )
    .await
    .expect("bootstrap secret");
    let port = world.workload.api_port();
    let kubeconfig = world.workload.kubeconfig_yaml().expect("workload kubeconfig");
    objects::create_capi_managed_cluster(
        &world.client,
        &world.namespace,
        CLUSTER,
        ("127.0.0.1", port),
        &kubeconfig,
    )
    .await
    .expect("cluster");

    let labels = json!({"cluster.x-k8s.io/cluster-name": CLUSTER, "cluster.x-k8s.io/control-plane": ""});
    objects::create_machine(
        &world.client,
        &world.namespace,
        CLUSTER,
        CONTROL_PLANE,
        labels,
        template_spec(&world.provider, 30),
    )
    .await
    .expect("control-plane machine");
    world.start_operator();
    world.play_kubelets().await;
    world
}

/// A MachineDeployment [`DEPLOYMENT`] of `replicas` machines from a new OVirtMachineTemplate `template` of `spec`.
async fn deploy(world: &World, template: &str, replicas: u32, spec: Value) {
    objects::apply_machine_template(&world.client, &world.namespace, template, spec)
        .await
        .expect("template");
    objects::apply_machine_deployment(
        &world.client,
        &world.namespace,
        DEPLOYMENT,
        CLUSTER,
        replicas,
        template,
        BOOTSTRAP_SECRET,
    )
    .await
    .expect("machine deployment");
}

/// When exactly `count` workers' Machines exist, all Running with a providerID that names an existing VM and a
/// nodeRef, and the engine holds exactly their VMs (besides the control plane's): the VM id of each Machine. Else
/// what is not so yet.
async fn settled(world: &World, count: usize) -> Result<BTreeMap<String, String>, String> {
    let workers = ListParams::default().labels(&format!("cluster.x-k8s.io/deployment-name={DEPLOYMENT}"));
    let list = world
        .api("Machine", "machines")
        .list(&workers)
        .await
        .map_err(|err| err.to_string())?;
    let mut vms = BTreeMap::new();
    for machine in &list.items {
        let name = machine.metadata.name.clone().unwrap_or_default();
        let vm_id = world::running_vm(machine)?;
        if world.sim.control().vm(vm_id).is_none() {
            return Err(format!("{name}: VM {vm_id} is not in the engine"));
        }
        vms.insert(name, vm_id.to_string());
    }
    let engine: BTreeSet<String> = world
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

async fn settle(world: &World, count: usize, what: &str) -> BTreeMap<String, String> {
    eventually(Duration::from_secs(240), what, || settled(world, count)).await
}

fn template_spec(provider: &str, disk_gb: u64) -> Value {
    json!({"provider": provider, "ovirtcluster": "Default", "template": "ubuntu-22.04", "osdisksizegb": disk_gb,
           "cpu": {"sockets": 1, "cores": 2, "threads": 1}, "memory": {"sizemb": 4096},
           "nics": [{"vnicprofile": "ovirtmgmt"}]})
}

#[tokio::test]
async fn a_machine_deployment_scales_rolls_out_and_goes_with_its_cluster() {
    let world = provisioned("capi-md").await;
    deploy(&world, "workers-a", 3, template_spec(&world.provider, 30)).await;

    // Three Running Machines with providerID and nodeRef; the Nodes carry the providerID CAPOV set.
    let first = settle(&world, 3, "3 Running Machines").await;
    let nodes: Api<k8s_openapi::api::core::v1::Node> = Api::all(world.workload.client().await.expect("workload"));
    for vm_id in first.values() {
        let vm = world.sim.control().vm(vm_id).expect("vm");
        let node = nodes.get(&vm.name).await.expect("node");
        let provider_id = node.spec.and_then(|spec| spec.provider_id);
        assert_eq!(provider_id, Some(format!("ovirt://{vm_id}")));
    }
    let output = world
        .management
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
    world.scale(DEPLOYMENT, 6).await;
    let six = settle(&world, 6, "6 Running Machines").await;
    assert!(
        first.iter().all(|(name, vm)| six.get(name) == Some(vm)),
        "scale-up replaced machines"
    );
    world.scale(DEPLOYMENT, 1).await;
    let one = settle(&world, 1, "1 Running Machine").await;
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
    objects::apply_machine_template(
        &world.client,
        &world.namespace,
        "workers-b",
        template_spec(&world.provider, 40),
    )
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
        let vms = settled(&world, 1).await;
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
    let world = provisioned("capi-pause").await;
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
        template_spec(&world.provider, 30),
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

/// IPAM's API (`ipam.cluster.x-k8s.io/v1beta2`, shipped with CAPI core).
fn ipam(kind: &str, plural: &str) -> kube::api::ApiResource {
    kube::api::ApiResource::from_gvk_with_plural(
        &kube::api::GroupVersionKind::gvk("ipam.cluster.x-k8s.io", "v1beta2", kind),
        plural,
    )
}

/// The pools the tests' machines and clusters name: (name, first address, last address, prefix, gateway). The real
/// provider gets them as InClusterIPPools; the stand-in hands out their addresses in the same way.
const POOLS: [(&str, &str, &str, u8, &str); 3] = [
    ("v4-pool", "192.0.2.10", "192.0.2.99", 24, "192.0.2.1"),
    ("v6-pool", "2001:db8::10", "2001:db8::99", 64, "2001:db8::1"),
    ("vip-pool", "198.51.100.10", "198.51.100.19", 24, "198.51.100.1"),
];

/// Finalizers of cluster-api-ipam-provider-in-cluster: on a claim until its address is released, on an address
/// until its claim goes.
const RELEASE_FINALIZER: &str = "ipam.cluster.x-k8s.io/ReleaseAddress";
const PROTECT_FINALIZER: &str = "ipam.cluster.x-k8s.io/ProtectAddress";

/// Who answers the IPAddressClaims of a namespace: the real cluster-api-ipam-provider-in-cluster with [`POOLS`] as
/// InClusterIPPools when `CAPOV_IPAM_PROVIDER_DIR` names its build (user book, configuration/addresses.md, "Tested
/// with cluster-api-ipam-provider-in-cluster"), else the stand-in [`fulfil_claims`] (CI: the Go module proxy does not
/// serve the provider). Stops with the value.
enum Allocator {
    /// Kept for its Drop, which stops the process.
    Real {
        _provider: capov_harness::IpamProvider,
    },
    StandIn(JoinHandle<()>),
}

impl Allocator {
    /// The real provider's refused writes of a claim's finalizers: it writes the list from its cached copy, so one
    /// that CAPOV changed while deleting the claim comes back refused ("no new finalizers can be added if the object
    /// is being deleted") and the release waits for its retry. CAPOV lets go of a claim before deleting it, so there
    /// are none. (Nothing to check with the stand-in, which writes against the object's resourceVersion.)
    fn refused_finalizer_writes(&self) -> Vec<String> {
        let Allocator::Real { _provider: provider } = self else {
            return Vec::new();
        };
        let log = std::fs::read_to_string(provider.log_path()).unwrap_or_default();
        log.lines()
            .filter(|line| line.contains("no new finalizers can be added"))
            .map(String::from)
            .collect()
    }

    async fn start(plane: &ControlPlane, client: &kube::Client, namespace: &str) -> Allocator {
        let Some(dir) = capov_harness::ipam_provider_dir() else {
            return Allocator::StandIn(fulfil_claims(client.clone(), namespace.to_string()));
        };
        let provider = capov_harness::IpamProvider::start(plane, &dir, namespace)
            .await
            .unwrap_or_else(|err| panic!("cluster-api-ipam-provider-in-cluster from {}: {err}", dir.display()));
        eprintln!("IPAM provider log: {}", provider.log_path().display());
        for (name, first, last, prefix, gateway) in POOLS {
            capov_harness::apply_in_cluster_pool(client, namespace, name, &format!("{first}-{last}"), prefix, gateway)
                .await
                .unwrap_or_else(|err| panic!("InClusterIPPool {name}: {err}"));
        }
        Allocator::Real { _provider: provider }
    }
}

impl Drop for Allocator {
    fn drop(&mut self) {
        if let Allocator::StandIn(task) = self {
            task.abort();
        }
    }
}

/// The `index`-th address of a pool of [`POOLS`] with its prefix and gateway.
fn pool_address(pool: &str, index: u32) -> Option<(String, u8, &'static str)> {
    let (_, first, _, prefix, gateway) = POOLS.iter().find(|p| p.0 == pool)?;
    let address = match first.parse::<std::net::IpAddr>().ok()? {
        std::net::IpAddr::V4(v4) => std::net::Ipv4Addr::from(u32::from(v4) + index).to_string(),
        std::net::IpAddr::V6(v6) => std::net::Ipv6Addr::from(u128::from(v6) + u128::from(index)).to_string(),
    };
    Some((address, *prefix, gateway))
}

/// Stands in for cluster-api-ipam-provider-in-cluster (not served by the Go module proxy here, so CI cannot run
/// it) and behaves as it does: it puts its finalizer on each claim on a pool of [`POOLS`], then writes an IPAddress
/// named after the claim, owned by it (controller), labelled with the claim's cluster, held by its own finalizer,
/// with `claimRef`, `poolRef`, the address, the pool's prefix and gateway, and sets the claim's
/// `status.addressRef`. When a claim is deleted it deletes the address (lifting its finalizer) and then lets the
/// claim go. Addresses are handed out in order and never reused. (The real provider also owns the address by the
/// pool, and waits while the claim's Cluster does not exist; the stand-in has no pool objects and skips that.)
fn fulfil_claims(client: kube::Client, namespace: String) -> JoinHandle<()> {
    use futures::StreamExt;
    use kube::runtime::{WatchStreamExt, watcher};
    tokio::spawn(async move {
        let claims: Api<DynamicObject> =
            Api::namespaced_with(client.clone(), &namespace, &ipam("IPAddressClaim", "ipaddressclaims"));
        let addresses: Api<DynamicObject> =
            Api::namespaced_with(client.clone(), &namespace, &ipam("IPAddress", "ipaddresses"));
        let mut next = 0u32;
        let stream = watcher(claims.clone(), watcher::Config::default()).applied_objects();
        let mut stream = std::pin::pin!(stream);
        while let Some(item) = stream.next().await {
            let Ok(claim) = item else { continue };
            let name = claim.metadata.name.clone().unwrap_or_default();
            let held = claim.finalizers().iter().any(|f| f == RELEASE_FINALIZER);
            if claim.metadata.deletion_timestamp.is_some() {
                if held && let Err(err) = stand_in_release(&claims, &addresses, &claim).await {
                    eprintln!("stand-in IPAM: releasing {name}: {err}");
                }
                continue;
            }
            let pool = claim.data["spec"]["poolRef"].clone();
            let Some((address, prefix, gateway)) = pool["name"].as_str().and_then(|p| pool_address(p, next)) else {
                continue;
            };
            if !held {
                if let Err(err) = set_finalizer(&claims, &claim, RELEASE_FINALIZER, true).await {
                    eprintln!("stand-in IPAM: finalizer on {name}: {err}");
                }
                continue;
            }
            if claim.data["status"]["addressRef"]["name"].is_string() {
                continue;
            }
            next += 1;
            let labels: BTreeMap<String, String> = claim
                .labels()
                .iter()
                .filter(|(key, _)| key.as_str() == "cluster.x-k8s.io/cluster-name")
                .map(|(key, value)| (key.clone(), value.clone()))
                .collect();
            let body: DynamicObject = serde_json::from_value(json!({
                "apiVersion": "ipam.cluster.x-k8s.io/v1beta2", "kind": "IPAddress",
                "metadata": {"name": name, "labels": labels, "finalizers": [PROTECT_FINALIZER], "ownerReferences": [{
                    "apiVersion": "ipam.cluster.x-k8s.io/v1beta2", "kind": "IPAddressClaim", "name": name,
                    "uid": claim.metadata.uid, "controller": true, "blockOwnerDeletion": true}]},
                "spec": {"claimRef": {"name": name}, "poolRef": pool, "address": address, "prefix": prefix,
                         "gateway": gateway},
            }))
            .expect("IPAddress");
            if let Err(err) = addresses.create(&kube::api::PostParams::default(), &body).await {
                eprintln!("stand-in IPAM: IPAddress {name}: {err}");
                continue;
            }
            let status = json!({"status": {"addressRef": {"name": name}}});
            if let Err(err) = claims
                .patch_status(&name, &PatchParams::default(), &Patch::Merge(&status))
                .await
            {
                eprintln!("stand-in IPAM: claim {name}: {err}");
            }
        }
    })
}

/// The stand-in's release of a deleted claim: its address loses the protecting finalizer and goes, then the claim
/// loses the releasing one.
async fn stand_in_release(
    claims: &Api<DynamicObject>,
    addresses: &Api<DynamicObject>,
    claim: &DynamicObject,
) -> Result<(), kube::Error> {
    let name = claim.name_any();
    if let Some(address) = addresses.get_opt(&name).await? {
        set_finalizer(addresses, &address, PROTECT_FINALIZER, false).await?;
        match addresses.delete(&name, &DeleteParams::default()).await {
            Ok(_) => {}
            Err(kube::Error::Api(status)) if status.code == 404 => {}
            Err(err) => return Err(err),
        }
    }
    set_finalizer(claims, claim, RELEASE_FINALIZER, false).await
}

/// Writes `object`'s finalizers with or without `finalizer`; the object's resourceVersion in the patch makes it fail
/// (409) if someone changed the object meanwhile. One already gone counts as done.
async fn set_finalizer(
    api: &Api<DynamicObject>,
    object: &DynamicObject,
    finalizer: &str,
    present: bool,
) -> Result<(), kube::Error> {
    let mut finalizers: Vec<String> = object
        .finalizers()
        .iter()
        .filter(|f| *f != finalizer)
        .cloned()
        .collect();
    if present {
        finalizers.push(finalizer.to_string());
    }
    let patch = json!({"metadata": {"resourceVersion": object.resource_version(), "finalizers": finalizers}});
    match api
        .patch(&object.name_any(), &PatchParams::default(), &Patch::Merge(&patch))
        .await
    {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(status)) if status.code == 404 => Ok(()),
        Err(err) => Err(err),
    }
}

/// Checks what every IPAM provider following CAPI's contract (and the stand-in) writes, as CAPOV relies on it: each
/// IPAddress is named after its claim and owned by it as controller, names the claim's pool, and holds an address
/// of that pool with the pool's prefix and gateway; each claim points at its address.
async fn assert_addresses_follow_the_pools(client: &kube::Client, namespace: &str) {
    let claims: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), namespace, &ipam("IPAddressClaim", "ipaddressclaims"));
    let addresses: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), namespace, &ipam("IPAddress", "ipaddresses"));
    for claim in claims.list(&ListParams::default()).await.expect("claims").items {
        let name = claim.name_any();
        assert_eq!(
            claim.data["status"]["addressRef"]["name"].as_str(),
            Some(name.as_str()),
            "{claim:?}"
        );
        let address = addresses.get(&name).await.expect("the claim's IPAddress");
        let owner = address.owner_references().iter().find(|o| o.controller == Some(true));
        assert_eq!(
            owner.map(|o| (o.kind.as_str(), &o.uid)),
            Some(("IPAddressClaim", claim.metadata.uid.as_ref().expect("uid")))
        );
        let pool = claim.data["spec"]["poolRef"]["name"].as_str().unwrap_or_default();
        assert_eq!(address.data["spec"]["poolRef"]["name"].as_str(), Some(pool));
        let (_, first, last, prefix, gateway) = POOLS.iter().find(|p| p.0 == pool).expect("a pool of POOLS");
        let spec = &address.data["spec"];
        let ip: std::net::IpAddr = spec["address"]
            .as_str()
            .and_then(|a| a.parse().ok())
            .expect("an IP address");
        let (first, last): (std::net::IpAddr, std::net::IpAddr) =
            (first.parse().expect("ip"), last.parse().expect("ip"));
        assert!(first <= ip && ip <= last, "{name}: {ip} outside {first}-{last}");
        assert_eq!(spec["prefix"].as_u64(), Some(u64::from(*prefix)), "{name}");
        assert_eq!(spec["gateway"].as_str(), Some(*gateway), "{name}");
    }
}

/// Names of the IPAddressClaims and IPAddresses of `namespace`.
async fn ipam_objects_in(
    client: &kube::Client,
    namespace: &str,
) -> Result<(BTreeSet<String>, BTreeSet<String>), String> {
    let names = |list: kube::core::ObjectList<DynamicObject>| -> BTreeSet<String> {
        list.items.into_iter().filter_map(|o| o.metadata.name).collect()
    };
    let claims: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), namespace, &ipam("IPAddressClaim", "ipaddressclaims"));
    let addresses: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), namespace, &ipam("IPAddress", "ipaddresses"));
    let params = ListParams::default();
    let claims = claims.list(&params).await.map_err(|err| err.to_string())?;
    let addresses = addresses.list(&params).await.map_err(|err| err.to_string())?;
    Ok((names(claims), names(addresses)))
}

async fn ipam_objects(world: &World) -> Result<(BTreeSet<String>, BTreeSet<String>), String> {
    ipam_objects_in(&world.client, &world.namespace).await
}

#[tokio::test]
async fn static_addresses_from_pools_reach_the_vm_and_are_released_on_scale_down() {
    let world = provisioned("capi-ipam").await;
    let pool = |name: &str| json!({"apiGroup": "ipam.cluster.x-k8s.io", "kind": "InClusterIPPool", "name": name});
    let mut spec = template_spec(&world.provider, 30);
    spec["nics"] = json!([{"vnicprofile": "ovirtmgmt", "addressesFromPools": [pool("v4-pool"), pool("v6-pool")]}]);
    spec["dns"] = json!({"servers": ["192.0.2.53"], "searchDomains": ["example.com"]});
    deploy(&world, "workers-ipam", 2, spec).await;
    // Before any IPAM provider answers, the machines wait for their addresses and say so; no VM is created.
    eventually(
        Duration::from_secs(60),
        "a worker waiting for its addresses",
        || async {
            let machines = world.ovirt_machines().list(&ListParams::default()).await.ok()?;
            machines.items.iter().find_map(|machine| {
                let conditions = machine.data["status"]["conditions"].as_array()?;
                conditions
                    .iter()
                    .any(|c| c["type"] == "MachineCreated" && c["reason"] == "WaitingForIPAddress")
                    .then_some(())
            })
        },
    )
    .await;
    assert!(
        world.sim.control().vms().iter().all(|vm| vm.name == CONTROL_PLANE),
        "a worker VM was created before its addresses"
    );
    let allocator = Allocator::start(world.management, &world.client, &world.namespace).await;
    let two = settle(&world, 2, "2 Running Machines with static addresses").await;

    // Each VM's initialization carries its IPv4 and IPv6 address as the engine hands them to cloud-init, and its
    // Machine reports them.
    let machines = world.api("Machine", "machines");
    for (name, vm_id) in &two {
        let delivered = world
            .sim
            .control()
            .delivered_payload(vm_id)
            .expect("delivered at start");
        let network = delivered.network_data.expect("network_data.json").to_string();
        assert!(
            network.contains("192.0.2.") && network.contains("2001:db8::"),
            "{network}"
        );
        assert!(network.contains("192.0.2.53"), "DNS missing: {network}");
        assert!(
            network.contains("192.0.2.1\"") && network.contains("2001:db8::1\""),
            "the pools' gateways missing: {network}"
        );
        let machine = machines.get(name).await.expect("machine");
        let reported: Vec<&str> = machine.data["status"]["addresses"]
            .as_array()
            .map(|list| list.iter().filter_map(|a| a["address"].as_str()).collect())
            .unwrap_or_default();
        assert!(
            reported.iter().any(|a| a.starts_with("192.0.2.")) && reported.iter().any(|a| a.starts_with("2001:db8::")),
            "{name}: {reported:?}"
        );
        assert!(network.contains(reported[0]), "{name}: {reported:?} not in {network}");
    }
    let (claims, addresses) = ipam_objects(&world).await.expect("ipam objects");
    assert_eq!((claims.len(), addresses.len()), (4, 4), "{claims:?} {addresses:?}");
    assert_addresses_follow_the_pools(&world.client, &world.namespace).await;

    // Scale-down: the deleted machine's claims and addresses go, the other machine keeps its own.
    world.scale(DEPLOYMENT, 1).await;
    let one = settle(&world, 1, "1 Running Machine").await;
    let kept = one.keys().next().expect("one machine").clone();
    let kept_infra = machines.get(&kept).await.expect("machine").data["spec"]["infrastructureRef"]["name"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    let left = eventually(
        Duration::from_secs(60),
        "the deleted machine's claims released",
        || async {
            let (claims, addresses) = ipam_objects(&world).await?;
            if claims.len() == 2 && addresses.len() == 2 {
                Ok((claims, addresses))
            } else {
                Err(format!("claims {claims:?}, addresses {addresses:?}"))
            }
        },
    )
    .await;
    assert!(
        left.0.iter().all(|claim| claim.starts_with(&kept_infra)),
        "{left:?} vs {kept_infra}"
    );
    assert_eq!(allocator.refused_finalizer_writes(), Vec::<String>::new());
    drop(allocator);
}

#[tokio::test]
async fn the_control_plane_endpoint_comes_from_a_pool_and_goes_back_with_the_cluster() {
    let (plane, client, namespace) = world::namespace("capi-vip").await;
    let allocator = Allocator::start(plane, &client, &namespace).await;
    let _operator = Operator::for_namespace(plane, &namespace, &[]);
    let ovirt_clusters: Api<DynamicObject> = Api::namespaced_with(
        client.clone(),
        &namespace,
        &objects::capov("OVirtCluster", "ovirtclusters"),
    );
    let clusters: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), &namespace, &objects::capi("Cluster", "clusters"));
    let apply = |body: Value| -> DynamicObject { serde_json::from_value(body).expect("object") };
    let pool = json!({"apiGroup": "ipam.cluster.x-k8s.io", "kind": "InClusterIPPool", "name": "vip-pool"});
    let params = kube::api::PostParams::default();
    ovirt_clusters
        .create(
            &params,
            &apply(json!({
                "apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1", "kind": "OVirtCluster",
                "metadata": {"name": "vip", "labels": {"cluster.x-k8s.io/cluster-name": "vip"}},
                "spec": {"controlPlaneEndpointFromPool": pool},
            })),
        )
        .await
        .expect("OVirtCluster");
    clusters
        .create(
            &params,
            &apply(json!({
                "apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Cluster", "metadata": {"name": "vip"},
                "spec": {"infrastructureRef": {
                    "apiGroup": "infrastructure.cluster.x-k8s.io", "kind": "OVirtCluster", "name": "vip"}},
            })),
        )
        .await
        .expect("Cluster");

    // The pool's address becomes the endpoint of the OVirtCluster, then of the CAPI Cluster.
    let host = eventually(
        Duration::from_secs(60),
        "the Cluster's endpoint from the pool",
        || async {
            let cluster = clusters.get("vip").await.map_err(|err| err.to_string())?;
            let ovirt = ovirt_clusters.get("vip").await.map_err(|err| err.to_string())?;
            let host = cluster.data["spec"]["controlPlaneEndpoint"]["host"]
                .as_str()
                .map(String::from);
            match host {
                Some(host) if ovirt.data["spec"]["controlPlaneEndpoint"]["host"] == json!(host) => Ok(host),
                _ => Err(format!(
                    "Cluster {:?}, OVirtCluster {:?}",
                    cluster.data["spec"], ovirt.data["status"]
                )),
            }
        },
    )
    .await;
    assert!(host.starts_with("198.51.100."), "{host}");
    let (claims, addresses) = ipam_objects_in(&client, &namespace).await.expect("ipam");
    assert_eq!(claims, BTreeSet::from(["vip-vip".to_string()]));
    assert_eq!(addresses.len(), 1);
    assert_addresses_follow_the_pools(&client, &namespace).await;

    // Deleting the Cluster releases the address; the OVirtCluster goes.
    clusters.delete("vip", &DeleteParams::default()).await.expect("delete");
    eventually(Duration::from_secs(60), "the claim and address released", || async {
        let (claims, addresses) = ipam_objects_in(&client, &namespace).await?;
        let left = ovirt_clusters.get_opt("vip").await.map_err(|err| err.to_string())?;
        if claims.is_empty() && addresses.is_empty() && left.is_none() {
            Ok(())
        } else {
            Err(format!(
                "claims {claims:?}, addresses {addresses:?}, OVirtCluster left {}",
                left.is_some()
            ))
        }
    })
    .await;
    assert_eq!(allocator.refused_finalizer_writes(), Vec::<String>::new());
    drop(allocator);
}

/// Machines of a MachineDeployment whose OVirtMachineTemplate has a name template, a data disk and a graceful
/// shutdown: the VMs carry the namespace in their names (and their Nodes are found by them), get their data disk
/// and their tags, report the disk, and on scale-down are shut down through the guest and go with their data disk.
#[tokio::test]
async fn template_data_disks_names_tags_and_graceful_shutdown_under_capi() {
    let world = provisioned("capi-shape").await;
    let tag_vms = json!({"spec": {"vmtags": true}});
    let providers =
        Api::<DynamicObject>::all_with(world.client.clone(), &objects::capov("OVirtProvider", "ovirtproviders"));
    providers
        .patch(&world.provider, &PatchParams::default(), &Patch::Merge(&tag_vms))
        .await
        .expect("tag VMs");
    eventually(
        Duration::from_secs(60),
        "the provider's spec to reach CAPOV",
        || async {
            let provider = providers.get(&world.provider).await.ok()?;
            let seen = provider.data["status"]["conditions"][0]["observedGeneration"].as_i64();
            (provider.metadata.generation == seen).then_some(())
        },
    )
    .await;
    let mut spec = template_spec(&world.provider, 30);
    spec["vmnametemplate"] = json!("{namespace}-{name}");
    spec["gracefulshutdowntimeoutseconds"] = json!(30);
    spec["datadisks"] = json!([{"name": "data", "sizegb": 5, "storagedomainname": "data2"}]);
    deploy(&world, "shaped", 2, spec).await;
    let two = settle(&world, 2, "2 Running Machines").await;

    let control = world.sim.control();
    let machines = world.ovirt_machines().list(&ListParams::default()).await.expect("list");
    let mut data_disks = BTreeMap::new();
    for machine in machines
        .items
        .iter()
        .filter(|m| m.metadata.name.as_deref() != Some(CONTROL_PLANE))
    {
        let name = machine.metadata.name.clone().unwrap_or_default();
        let vm_id = machine.data["spec"]["providerID"]
            .as_str()
            .and_then(|id| id.strip_prefix("ovirt://"))
            .expect("providerID");
        let vm = control.vm(vm_id).expect("vm");
        let vm_name = format!("{}-{name}", world.namespace);
        assert_eq!(vm.name, vm_name);
        let disk = vm
            .disks
            .iter()
            .find(|d| d.alias == format!("{vm_name}_data"))
            .unwrap_or_else(|| panic!("{vm_name}: no data disk in {:?}", vm.disks));
        assert_eq!(disk.provisioned_size, 5 << 30);
        assert_eq!(
            machine.data["status"]["dataDisks"][0]["diskID"].as_str(),
            Some(disk.id.as_str())
        );
        let mut tags = vm.tags.clone();
        tags.sort();
        assert_eq!(
            tags,
            [
                "capov".to_string(),
                format!("capov-ns-{}", world.namespace),
                format!("capov.cluster.{}.{CLUSTER}", world.namespace),
            ]
        );
        data_disks.insert(vm_id.to_string(), disk.id.clone());
    }
    assert_eq!(data_disks.len(), 2);

    world.scale(DEPLOYMENT, 1).await;
    let one = settle(&world, 1, "1 Running Machine").await;
    let removed: Vec<&String> = two
        .values()
        .filter(|vm| !one.values().any(|kept| kept == *vm))
        .collect();
    assert_eq!(removed.len(), 1);
    let removed = removed[0];
    assert!(
        !control.disk_exists(&data_disks[removed]),
        "the data disk goes with the VM"
    );
    let writes: Vec<String> = control
        .writes()
        .into_iter()
        .filter(|w| w.path.contains(removed.as_str()) && w.method == "POST")
        .map(|w| w.path.rsplit('/').next().unwrap_or_default().to_string())
        .collect();
    assert!(writes.contains(&"shutdown".to_string()), "{writes:?}");
    assert!(
        !writes.contains(&"stop".to_string()),
        "the guest shut down in time: {writes:?}"
    );
}

/// Every version of the objects of `api` the apiserver shows from now on, in order (also a deleted object's last),
/// until the task is aborted: a short-lived state, such as a Machine's deletion, is seen however fast it passes.
fn record(api: Api<DynamicObject>) -> (Arc<Mutex<Vec<DynamicObject>>>, JoinHandle<()>) {
    use futures::StreamExt;
    use kube::runtime::watcher;
    let seen = Arc::new(Mutex::new(Vec::new()));
    let sink = Arc::clone(&seen);
    let task = tokio::spawn(async move {
        let mut stream = std::pin::pin!(watcher(api, watcher::Config::default()));
        while let Some(event) = stream.next().await {
            if let Ok(
                watcher::Event::Apply(object) | watcher::Event::InitApply(object) | watcher::Event::Delete(object),
            ) = event
            {
                sink.lock().unwrap_or_else(|err| err.into_inner()).push(object);
            }
        }
    });
    (seen, task)
}

/// The `(status, reason)` of each version's condition `type_`, for the versions of `name` in `seen`, with whether
/// that version was being deleted.
fn condition_history(seen: &Mutex<Vec<DynamicObject>>, name: &str, type_: &str) -> Vec<(String, String, bool)> {
    let seen = seen.lock().unwrap_or_else(|err| err.into_inner());
    seen.iter()
        .filter(|object| object.metadata.name.as_deref() == Some(name))
        .filter_map(|object| {
            let conditions = object.data["status"]["conditions"].as_array()?;
            let condition = conditions.iter().find(|c| c["type"] == type_)?;
            Some((
                condition["status"].as_str().unwrap_or_default().to_string(),
                condition["reason"].as_str().unwrap_or_default().to_string(),
                object.metadata.deletion_timestamp.is_some(),
            ))
        })
        .collect()
}

/// `(readyReplicas, availableReplicas)` of the MachineDeployment.
async fn deployment_ready(world: &World) -> Result<(i64, i64), String> {
    let deployment = world
        .api("MachineDeployment", "machinedeployments")
        .get(DEPLOYMENT)
        .await
        .map_err(|err| err.to_string())?;
    let status = &deployment.data["status"];
    Ok((
        status["readyReplicas"].as_i64().unwrap_or_default(),
        status["availableReplicas"].as_i64().unwrap_or_default(),
    ))
}

/// A MachineDeployment of 2 workers and a MachineHealthCheck over them (`Ready=False` for 5 s), once both workers
/// are Ready and the health check counts both healthy: the VM id of each worker's Machine.
async fn two_checked_workers(world: &World) -> BTreeMap<String, String> {
    deploy(world, "workers-mhc", 2, template_spec(&world.provider, 30)).await;
    let two = settle(world, 2, "2 Running Machines").await;
    let selector = json!({"cluster.x-k8s.io/deployment-name": DEPLOYMENT});
    objects::apply_machine_health_check(&world.client, &world.namespace, "workers-mhc", CLUSTER, selector, 5)
        .await
        .expect("machine health check");
    let health_checks = world.api("MachineHealthCheck", "machinehealthchecks");
    eventually(
        Duration::from_secs(120),
        "2 Ready workers, both healthy for the health check",
        || async {
            let check = health_checks.get("workers-mhc").await.map_err(|err| err.to_string())?;
            let status = &check.data["status"];
            let counts = (status["expectedMachines"].as_i64(), status["currentHealthy"].as_i64());
            let ready = deployment_ready(world).await?;
            if counts == (Some(2), Some(2)) && ready == (2, 2) {
                Ok(())
            } else {
                Err(format!("health check {counts:?}, deployment ready/available {ready:?}"))
            }
        },
    )
    .await;
    two
}

/// What CAPI showed on the remediated Machine (the failed health check, the owner's remediation, the deletion) and
/// CAPOV on its OVirtMachine (the VM powered off, then deleted), from the recorded versions; the histories, to print.
fn assert_remediation_shown(
    machines_seen: &Mutex<Vec<DynamicObject>>,
    ovirt_seen: &Mutex<Vec<DynamicObject>>,
    (machine, infra): (&str, &str),
) -> String {
    let health = condition_history(machines_seen, machine, "HealthCheckSucceeded");
    assert!(
        health
            .iter()
            .any(|(status, reason, _)| status == "False" && reason == "UnhealthyNode"),
        "{health:?}"
    );
    assert!(
        health.iter().any(|(_, _, deleting)| *deleting),
        "the Machine was never seen deleting: {health:?}"
    );
    let remediated = condition_history(machines_seen, machine, "OwnerRemediated");
    assert!(
        remediated
            .iter()
            .any(|(status, reason, _)| status == "False" && reason == "WaitingForRemediation"),
        "{remediated:?}"
    );
    let deleted = condition_history(ovirt_seen, infra, "MachineDeleted");
    let reasons: Vec<&str> = deleted.iter().map(|(_, reason, _)| reason.as_str()).collect();
    let stopping = reasons.iter().position(|r| *r == "VMStopping");
    // The engine locks a VM while it removes it (`RemoveVmCommand`), and the status writer writes only an object's
    // latest status: on a busy machine VMDeleting can be replaced by VMLocked before it is written. The removal
    // itself is proven by the engine's answers (`engine_removal`).
    let removing = reasons.iter().rposition(|r| *r == "VMDeleting" || *r == "VMLocked");
    assert!(
        matches!((stopping, removing), (Some(s), Some(d)) if s < d),
        "{deleted:?}"
    );
    format!("{machine}: HealthCheckSucceeded {health:?}\nOwnerRemediated {remediated:?}\nMachineDeleted {deleted:?}")
}

/// When (ms since the Unix epoch) the engine answered the VM's stop and then its removal, both successfully. Only
/// writes to the VM itself count, not to its membership of an affinity group (`…/affinitygroups/{group}/vms/{id}`).
fn engine_removal(writes: &[capov_ovirt_sim::WriteRecord], vm_id: &str) -> (u64, u64) {
    let vm_path = format!("/api/vms/{vm_id}");
    let of_vm: Vec<_> = writes.iter().filter(|w| w.path.contains(&vm_path)).collect();
    let stop = of_vm
        .iter()
        .position(|w| w.method == "POST" && w.path.ends_with("/stop") && w.status < 300);
    let delete = of_vm
        .iter()
        .position(|w| w.method == "DELETE" && w.path.ends_with(&vm_path) && w.status < 300);
    match (stop, delete) {
        (Some(stop), Some(delete)) if stop < delete => (of_vm[stop].received_ms, of_vm[delete].received_ms),
        _ => {
            let seen: Vec<String> = of_vm
                .iter()
                .map(|w| format!("{} {} {}", w.method, w.path, w.status))
                .collect();
            panic!("no stop, then delete of VM {vm_id}: {seen:?}")
        }
    }
}

/// The VM was never stopped, shut down, rebooted or removed, and no write named it from `since_ms` on.
fn assert_untouched(writes: &[capov_ovirt_sim::WriteRecord], vm_id: &str, since_ms: u64) {
    let path = format!("/vms/{vm_id}");
    let touched: Vec<String> = writes
        .iter()
        .filter(|w| w.path.contains(&path))
        .filter(|w| {
            w.received_ms >= since_ms
                || w.method == "DELETE"
                || ["/stop", "/shutdown", "/reboot", "/suspend"]
                    .iter()
                    .any(|a| w.path.ends_with(a))
        })
        .map(|w| format!("{} {}", w.method, w.path))
        .collect();
    assert!(touched.is_empty(), "VM {vm_id} was touched: {touched:?}");
}

/// Whether the workload cluster's Node `name` reports Ready.
async fn node_ready(nodes: &Api<k8s_openapi::api::core::v1::Node>, name: &str) -> bool {
    let node = nodes.get(name).await.expect("node");
    node.status
        .and_then(|status| status.conditions)
        .is_some_and(|conditions| conditions.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

/// MachineHealthCheck remediation end to end: a worker whose Node turns `Ready=False` in the workload cluster is
/// found unhealthy by CAPI's MachineHealthCheck, its MachineSet deletes the Machine, CAPOV powers its VM off and
/// deletes it, and the replacement Machine gets a new VM that comes up and joins; the healthy worker's VM is never
/// touched.
#[tokio::test]
async fn an_unhealthy_node_gets_its_machine_remediated_onto_a_new_vm() {
    let started = Instant::now();
    let world = provisioned("capi-mhc").await;
    let two = two_checked_workers(&world).await;
    let before_break = started.elapsed();

    let (machines_seen, machine_watch) = record(world.api("Machine", "machines"));
    let (ovirt_seen, ovirt_watch) = record(world.ovirt_machines());
    let mut workers = two.iter();
    let (victim, victim_vm) = workers.next().expect("a first worker");
    let (healthy, healthy_vm) = workers.next().expect("a second worker");
    let control = world.sim.control();
    let victim_node = control.vm(victim_vm).expect("the victim's VM").name;
    let healthy_node = control.vm(healthy_vm).expect("the healthy VM").name;
    let machines = world.api("Machine", "machines");
    let victim_infra =
        machines.get(victim).await.expect("the victim's Machine").data["spec"]["infrastructureRef"]["name"]
            .as_str()
            .expect("the victim's OVirtMachine")
            .to_string();
    let workload = world.workload.client().await.expect("workload client");
    // The played kubelet never writes the Node again: it stays Ready=False until CAPI deletes it.
    objects::mark_node_not_ready(&workload, &victim_node)
        .await
        .expect("mark the Node not ready");
    let broken = Instant::now();
    let broken_ms = k8s_openapi::jiff::Timestamp::now().as_millisecond();

    // CAPI deletes the Machine, CAPOV its VM.
    eventually(
        Duration::from_secs(180),
        "the unhealthy Machine and its VM gone",
        || async {
            let machine = machines.get_opt(victim).await.map_err(|err| err.to_string())?;
            match (machine, control.vm(victim_vm)) {
                (None, None) => Ok(()),
                (machine, vm) => Err(format!(
                    "Machine {:?}, VM {:?}",
                    machine.map(|m| m.data["status"]["conditions"].clone()),
                    vm.map(|vm| vm.status)
                )),
            }
        },
    )
    .await;
    let removed = broken.elapsed();
    // The replacement: a new Machine on a new VM, Running with its Node; the deployment back at 2 Ready.
    let after = eventually(Duration::from_secs(240), "the replacement Machine", || async {
        let vms = settled(&world, 2).await?;
        let ready = deployment_ready(&world).await?;
        if vms.contains_key(victim) || ready != (2, 2) {
            return Err(format!("{vms:?}, deployment ready/available {ready:?}"));
        }
        Ok(vms)
    })
    .await;
    let replaced = broken.elapsed();
    machine_watch.abort();
    ovirt_watch.abort();

    let histories = assert_remediation_shown(&machines_seen, &ovirt_seen, (victim, &victim_infra));
    let writes = control.writes();
    let (stop_ms, delete_ms) = engine_removal(&writes, victim_vm);
    // When each part happened, in ms after the Node turned Ready=False (the deletion timestamp has second precision).
    let machine_deleting = machines_seen
        .lock()
        .unwrap_or_else(|err| err.into_inner())
        .iter()
        .filter(|m| m.metadata.name.as_deref() == Some(victim.as_str()))
        .find_map(|m| m.metadata.deletion_timestamp.as_ref().map(|t| t.0.as_millisecond()))
        .map(|at| at - broken_ms);
    let since_break = |at: u64| i64::try_from(at).unwrap_or(i64::MAX) - broken_ms;
    let phases = format!(
        "Machine deleting at {machine_deleting:?} ms, VM stop at {} ms, VM DELETE at {} ms",
        since_break(stop_ms),
        since_break(delete_ms)
    );

    // The replacement runs on a VM that did not exist before; the healthy worker kept its VM, untouched.
    let (new_machine, new_vm) = after
        .iter()
        .find(|(name, _)| *name != healthy)
        .expect("a replacement Machine");
    assert!(
        !two.values().any(|vm| vm == new_vm),
        "{new_machine} runs on an old VM {new_vm}"
    );
    assert_eq!(control.vm(new_vm).map(|vm| vm.status).as_deref(), Some("up"));
    assert_eq!(after.get(healthy), Some(healthy_vm), "the healthy worker's VM changed");
    assert_eq!(control.vm(healthy_vm).map(|vm| vm.status).as_deref(), Some("up"));
    assert_untouched(&writes, healthy_vm, u64::try_from(broken_ms).unwrap_or_default());
    let healthy_history = condition_history(&machines_seen, healthy, "HealthCheckSucceeded");
    assert!(
        !healthy_history.is_empty()
            && healthy_history
                .iter()
                .all(|(status, _, deleting)| status == "True" && !deleting),
        "{healthy_history:?}"
    );

    // The workload cluster: the unhealthy Node went with its Machine; the healthy and the new Node are Ready.
    let nodes: Api<k8s_openapi::api::core::v1::Node> = Api::all(workload);
    assert!(
        nodes.get_opt(&victim_node).await.expect("nodes").is_none(),
        "the unhealthy Node stayed"
    );
    let new_node = control.vm(new_vm).expect("the new VM").name;
    assert!(node_ready(&nodes, &healthy_node).await, "{healthy_node} is not Ready");
    assert!(node_ready(&nodes, &new_node).await, "{new_node} is not Ready");
    eprintln!("{histories}");
    eprintln!(
        "remediation: 2 workers ready after {before_break:?}; unhealthy VM deleted {removed:?} and replacement Ready \
         {replaced:?} after the Node turned Ready=False ({phases}); test {:?}",
        started.elapsed()
    );
}

/// The engine client of another team's administrator, on the world's engine.
fn engine_client(world: &World) -> capov_ovirt::Client {
    let ca = world.sim.ca_pem().expect("ca").as_bytes().to_vec();
    let config = capov_ovirt::ClientConfig::new(world.sim.api_url(), "admin@internal", "admin").with_tls(
        capov_ovirt::TlsMode::Verify {
            system_roots: false,
            extra_ca_pem: ca,
        },
    );
    capov_ovirt::Client::new(config).expect("engine client")
}

/// The OVirtMachines of the MachineDeployment's workers: name → (MachineOn's reason and message, Ready).
async fn workers_on(world: &World) -> BTreeMap<String, (String, String, bool)> {
    let workers = ListParams::default().labels(&format!("cluster.x-k8s.io/deployment-name={DEPLOYMENT}"));
    let list = world.ovirt_machines().list(&workers).await.expect("OVirtMachines");
    list.items
        .iter()
        .map(|machine| {
            let conditions = machine.data["status"]["conditions"]
                .as_array()
                .cloned()
                .unwrap_or_default();
            let on = conditions
                .iter()
                .find(|c| c["type"] == "MachineOn")
                .cloned()
                .unwrap_or_default();
            let text = |key: &str| on[key].as_str().unwrap_or_default().to_string();
            let ready = machine.data["status"]["ready"].as_bool().unwrap_or(false);
            (machine.name_any(), (text("reason"), text("message"), ready))
        })
        .collect()
}

/// Issue 38: a MachineDeployment of vGPU workers. Each VM gets an instance of the GPU's vGPU type; a machine that
/// finds none free waits with MachineOn NoSchedulableHost saying so, and starts once another team's VM gives its
/// instance back.
#[tokio::test]
async fn gpu_workers_each_get_a_vgpu_and_one_waits_until_an_instance_is_free() {
    let world = provisioned("capi-gpu").await;
    let control = world.sim.control().clone();
    let gpu = capov_ovirt_sim::HostDeviceSeed {
        name: "pci_0000_3b_00_0".into(),
        capability: "pci".into(),
        product_name: "GA102GL [A10]".into(),
        mdev_types: vec![capov_ovirt_sim::MdevTypeSeed::new("nvidia-22", "NVIDIA A10-4Q", 2)],
        ..capov_ovirt_sim::HostDeviceSeed::default()
    };
    control
        .seed(&capov_ovirt_sim::Inventory {
            hosts: vec![capov_ovirt_sim::HostSeed {
                name: "gpu-1".into(),
                devices: vec![gpu],
                ..capov_ovirt_sim::HostSeed::default()
            }],
            ..capov_ovirt_sim::Inventory::default()
        })
        .expect("a GPU host");
    // Another team's VM holds one of the GPU's two instances.
    let engine = engine_client(&world);
    let cluster = control.id_of("cluster", "Default").expect("cluster");
    let template = control.id_of("template", "ubuntu-22.04").expect("template");
    let theirs = capov_ovirt::model::Vm {
        name: Some("other-team-gpu".into()),
        cluster: Some(capov_ovirt::model::Ref::id(cluster)),
        template: Some(capov_ovirt::model::Ref::id(template)),
        custom_properties: Some(capov_ovirt::model::CustomProperties {
            items: vec![capov_ovirt::model::CustomProperty::new(
                "mdev_type",
                "nodisplay,nvidia-22",
            )],
        }),
        ..capov_ovirt::model::Vm::default()
    };
    let theirs = engine
        .add_vm(&theirs, false)
        .await
        .expect("their VM")
        .id
        .expect("its id");
    eventually(Duration::from_secs(60), "their VM's disks", || async {
        (control.vm(&theirs)?.status == "down").then_some(())
    })
    .await;
    engine
        .start_vm(&theirs, capov_ovirt::StartOptions::default())
        .await
        .expect("their VM starts");

    let mut spec = template_spec(&world.provider, 30);
    spec["vgpu"] = json!({"types": ["nvidia-22"]});
    deploy(&world, "gpu-workers", 2, spec).await;
    let waiting = eventually(
        Duration::from_secs(240),
        "one worker running, one waiting for a vGPU",
        || async {
            let workers = workers_on(&world).await;
            let ready = workers.values().filter(|(_, _, ready)| *ready).count();
            let waiting: Vec<(String, String)> = workers
                .iter()
                .filter(|(_, (reason, _, _))| reason == "NoSchedulableHost")
                .map(|(name, (_, message, _))| (name.clone(), message.clone()))
                .collect();
            (workers.len() == 2 && ready == 1 && waiting.len() == 1).then(|| waiting[0].clone())
        },
    )
    .await;
    assert!(
        waiting.1.contains("no instance free") && waiting.1.contains("spec.vgpu.types"),
        "{}",
        waiting.1
    );
    // The OVirtCluster's capacity counts the GPU's instances: none free while both are held.
    let clusters = Api::<capov_crds::OVirtCluster>::namespaced(world.client.clone(), &world.namespace);
    eventually(
        Duration::from_secs(60),
        "no nvidia-22 instance free in the capacity",
        || async {
            let listed = clusters.list(&ListParams::default()).await.ok()?;
            let capacity = listed.items.into_iter().find_map(|cluster| cluster.status?.capacity)?;
            let default = capacity.ovirt_clusters.into_iter().find(|c| c.name == "Default")?;
            (default.free_vgpus.get("nvidia-22") == Some(&0)).then_some(())
        },
    )
    .await;

    engine.stop_vm(&theirs, true).await.expect("their VM stops");
    let vms = settle_with(&world, 2, &theirs).await;
    for vm_id in vms.values() {
        let vm = control.vm(vm_id).expect("the worker's VM");
        assert_eq!(
            vm.mdev_assignments,
            [("pci_0000_3b_00_0".to_string(), "nvidia-22".to_string())],
            "each worker holds one vGPU instance of the GPU"
        );
    }
}

/// [`settle`], with another team's VM `theirs` in the engine beside the workers': removed once it is down, so that
/// the engine holds only the workers' VMs.
async fn settle_with(world: &World, count: usize, theirs: &str) -> BTreeMap<String, String> {
    let engine = engine_client(world);
    eventually(Duration::from_secs(240), "their VM down and removed", || async {
        match world.sim.control().vm(theirs) {
            None => Some(()),
            Some(vm) if vm.status == "down" => {
                let _ = engine.remove_vm(theirs).await;
                None
            }
            Some(_) => None,
        }
    })
    .await;
    settle(world, count, "2 Running vGPU workers").await
}

/// Issue 38: a highly available control-plane machine with a VM lease. When the engine loses its host, the engine
/// (not CAPOV) restarts the VM on another host; the machine keeps its VM and stays provisioned, CAPOV neither
/// stops, removes nor re-creates it, and CAPI remediates nothing.
#[tokio::test]
async fn an_ha_control_plane_vm_is_restarted_by_the_engine_on_another_host_and_the_machine_keeps_it() {
    let world = provisioned("capi-ha").await;
    let labels = json!({"cluster.x-k8s.io/cluster-name": CLUSTER, "cluster.x-k8s.io/control-plane": ""});
    let mut spec = template_spec(&world.provider, 30);
    spec["highavailability"] = json!({"enabled": true, "priority": 100, "leasestoragedomain": "data2"});
    objects::create_machine(
        &world.client,
        &world.namespace,
        CLUSTER,
        "control-plane-ha",
        labels,
        spec,
    )
    .await
    .expect("the HA control-plane machine");
    let machines = world.api("Machine", "machines");
    let (machine_uid, vm_id) = eventually(Duration::from_secs(240), "the HA machine Running", || async {
        let machine = machines.get("control-plane-ha").await.ok()?;
        let vm_id = world::running_vm(&machine).ok()?.to_string();
        Some((machine.uid().unwrap_or_default(), vm_id))
    })
    .await;
    let control = world.sim.control().clone();
    let vm = control.vm(&vm_id).expect("the VM");
    assert!(
        vm.high_availability.enabled && vm.lease_domain_id.is_some(),
        "HA with a lease: {vm:?}"
    );
    let lost = control.vm_host(&vm_id).expect("the VM's host");
    let since_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or_default();
    control.lose_host(&lost).expect("lose the host");

    let ovirt_machine = || async {
        let machine = world
            .ovirt_machines()
            .get("control-plane-ha")
            .await
            .expect("the OVirtMachine");
        let ready = machine.data["status"]["ready"].as_bool().unwrap_or(false);
        let on = machine.data["status"]["conditions"]
            .as_array()
            .and_then(|conditions| conditions.iter().find(|c| c["type"] == "MachineOn").cloned())
            .unwrap_or_default();
        (ready, on["status"] == "True")
    };
    let ever_unprovisioned = std::sync::atomic::AtomicBool::new(false);
    let new_host = eventually(
        Duration::from_secs(180),
        "the engine restarts the VM elsewhere",
        || async {
            let (ready, on) = ovirt_machine().await;
            if !ready {
                ever_unprovisioned.store(true, std::sync::atomic::Ordering::SeqCst);
            }
            let vm = control.vm(&vm_id)?;
            let host = control.vm_host(&vm_id)?;
            (vm.status == "up" && host != lost && vm.ha_restarts == 1 && on).then_some(host)
        },
    )
    .await;
    assert_ne!(new_host, lost);
    assert!(
        !ever_unprovisioned.load(std::sync::atomic::Ordering::SeqCst),
        "the machine stayed provisioned while its VM was restarted"
    );
    let machine = machines.get("control-plane-ha").await.expect("the Machine");
    assert_eq!(
        machine.uid().unwrap_or_default(),
        machine_uid,
        "CAPI did not replace the machine"
    );
    assert_eq!(
        machine.data["spec"]["providerID"].as_str(),
        Some(format!("ovirt://{vm_id}").as_str()),
        "the machine keeps its VM"
    );
    // CAPOV wrote nothing to the VM since its host was lost: the engine restarted it.
    let writes = control.writes();
    let capov_writes: Vec<_> = writes.iter().filter(|w| !w.path.contains("/hosts/")).cloned().collect();
    assert_untouched(&capov_writes, &vm_id, since_ms);
    assert!(
        !writes
            .iter()
            .any(|w| w.method == "POST" && w.path.ends_with("/api/vms") && w.received_ms >= since_ms),
        "no VM was created after the host was lost"
    );
}
