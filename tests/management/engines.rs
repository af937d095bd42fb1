//! One cluster across engines (issue 39) under the real Cluster API core manager: three engine simulators, an
//! OVirtProvider each, an OVirtCluster with a failure domain per provider. CAPI core copies the published domains to
//! the Cluster (what KubeadmControlPlane spreads over); a control plane of 3 (created as KubeadmControlPlane would,
//! one per domain: no control-plane provider runs here) and a MachineDeployment of 2 per domain get their VMs on
//! their domain's engine. One engine's outage takes its domain off the Cluster and shows on its machines only; they
//! heal on their VMs when it returns.

use std::collections::BTreeMap;
use std::time::Duration;

use capov_harness::{ProviderSpec, objects, play_kubelets};
use capov_ovirt_sim::{Control, Simulator, SimulatorHandle, Timings};
use capov_testkit::eventually;
use kube::api::{DynamicObject, ListParams, Patch, PatchParams};
use serde_json::{Value, json};

use crate::world::{self, World};

const CLUSTER: &str = "engines";
const BOOTSTRAP_SECRET: &str = "worker-bootstrap";
const DEADLINE: Duration = Duration::from_secs(180);
const DOMAINS: [&str; 3] = ["site-a", "site-b", "site-c"];

async fn other_engine(world: &World, suffix: &str) -> (SimulatorHandle, String) {
    let sim = Simulator::builder()
        .timings(Timings::fast())
        .start()
        .await
        .expect("simulator");
    let spec = ProviderSpec {
        name: format!("{}-engine-{suffix}", world.namespace),
        ..ProviderSpec::for_simulator(&world.namespace, &sim)
    };
    spec.apply(&world.client).await.expect("provider");
    (sim, spec.name)
}

/// The Cluster's failure domains as CAPI core copied them from the OVirtCluster, sorted.
async fn cluster_domains(world: &World) -> Result<Vec<String>, String> {
    let cluster = world
        .api("Cluster", "clusters")
        .get(CLUSTER)
        .await
        .map_err(|e| e.to_string())?;
    let mut names: Vec<String> = cluster.data["status"]["failureDomains"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|d| d["name"].as_str().map(String::from))
        .collect();
    names.sort();
    Ok(names)
}

/// Waits until the Cluster offers exactly `expected` (sorted).
async fn cluster_domains_become(world: &World, what: &str, expected: &[&str]) {
    eventually(DEADLINE, what, || async {
        let names = cluster_domains(world).await?;
        if names == expected {
            Ok(())
        } else {
            Err(format!("{names:?}"))
        }
    })
    .await;
}

/// Every OVirtMachine's (provider, "<domain> <VM id>") once all `count` Machines are Running.
async fn placements(world: &World, count: usize) -> Result<BTreeMap<String, (String, String)>, String> {
    placements_except(world, count, &BTreeMap::new()).await
}

/// [`placements`] of the Machines whose OVirtMachine is not in `known`, once `count` Machines exist in all and those
/// are Running.
async fn placements_except(
    world: &World,
    count: usize,
    known: &BTreeMap<String, (String, String)>,
) -> Result<BTreeMap<String, (String, String)>, String> {
    let machines = world
        .api("Machine", "machines")
        .list(&ListParams::default())
        .await
        .map_err(|e| e.to_string())?;
    if machines.items.len() != count {
        return Err(format!("{} Machines", machines.items.len()));
    }
    let mut placed = BTreeMap::new();
    for machine in &machines.items {
        let infra = machine.data["spec"]["infrastructureRef"]["name"]
            .as_str()
            .unwrap_or_default();
        if known.contains_key(infra) {
            continue;
        }
        let vm_id = world::running_vm(machine)?.to_string();
        let infra = machine.data["spec"]["infrastructureRef"]["name"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        let ovirt_machine: DynamicObject = world.ovirt_machines().get(&infra).await.map_err(|e| e.to_string())?;
        let provider = ovirt_machine.data["spec"]["provider"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        let domain = machine.data["spec"]["failureDomain"].as_str().unwrap_or_default();
        placed.insert(infra, (provider, format!("{domain} {vm_id}")));
    }
    Ok(placed)
}

/// A control-plane Machine (with its OVirtMachine of `spec`) in failure domain `domain`, as KubeadmControlPlane
/// creates one: no control-plane provider runs here.
async fn control_plane_machine(world: &World, name: &str, domain: &str, spec: &Value) {
    let labels = json!({"cluster.x-k8s.io/cluster-name": CLUSTER, "cluster.x-k8s.io/control-plane": ""});
    let machine = objects::MachineSpec {
        name,
        labels,
        spec: spec.clone(),
    };
    objects::create_machine_in_failure_domain(&world.client, &world.namespace, CLUSTER, machine, domain)
        .await
        .expect("control-plane machine");
}

fn connect_reason(machine: &DynamicObject) -> Option<(String, String)> {
    machine.data["status"]["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == "CanConnectToOVirt")
        .map(|c| {
            (
                c["reason"].as_str().unwrap_or_default().to_string(),
                c["lastTransitionTime"].as_str().unwrap_or_default().to_string(),
            )
        })
}

#[tokio::test]
async fn a_cluster_spread_over_three_engines_places_each_domain_on_its_engine_and_survives_one_engines_outage() {
    let mut world = World::new("engines").await;
    let (b_sim, b_provider) = other_engine(&world, "b").await;
    let (c_sim, c_provider) = other_engine(&world, "c").await;
    let engines: BTreeMap<String, Control> = [
        (world.provider.clone(), world.sim.control().clone()),
        (b_provider.clone(), b_sim.control().clone()),
        (c_provider.clone(), c_sim.control().clone()),
    ]
    .into();
    let a_provider = world.provider.clone();
    let domain_provider: BTreeMap<&str, &String> = DOMAINS
        .into_iter()
        .zip([&a_provider, &b_provider, &c_provider])
        .collect();

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
    let kubeconfig = world.workload.kubeconfig_yaml().expect("kubeconfig");
    objects::create_capi_managed_cluster(
        &world.client,
        &world.namespace,
        CLUSTER,
        ("127.0.0.1", world.workload.api_port()),
        &kubeconfig,
    )
    .await
    .expect("cluster");
    let domains: Vec<Value> = DOMAINS
        .iter()
        .map(|name| json!({"name": name, "provider": domain_provider[name]}))
        .collect();
    world
        .api_of(&objects::capov("OVirtCluster", "ovirtclusters"))
        .patch(
            CLUSTER,
            &PatchParams::default(),
            &Patch::Merge(&json!({"spec": {"failureDomains": domains}})),
        )
        .await
        .expect("failure domains");
    world.start_operator();
    world.play_kubelets().await;
    let workload = world.workload.client().await.expect("workload client");
    let kubelets = [
        play_kubelets(b_sim.control().clone(), workload.clone()),
        play_kubelets(c_sim.control().clone(), workload),
    ];

    // CAPI core copies the three published domains to the Cluster.
    cluster_domains_become(&world, "the Cluster's three failure domains", &DOMAINS).await;

    // The template names no provider: each machine takes its domain's.
    let spec = json!({"ovirtcluster": "Default", "template": "ubuntu-22.04"});
    for (n, domain) in DOMAINS.iter().enumerate() {
        control_plane_machine(&world, &format!("cp-{n}"), domain, &spec).await;
    }
    objects::apply_machine_template(&world.client, &world.namespace, "workers", spec.clone())
        .await
        .expect("template");
    for domain in DOMAINS {
        let deployment = format!("workers-{domain}");
        objects::apply_machine_deployment(
            &world.client,
            &world.namespace,
            &deployment,
            CLUSTER,
            2,
            "workers",
            BOOTSTRAP_SECRET,
        )
        .await
        .expect("machine deployment");
        world
            .api("MachineDeployment", "machinedeployments")
            .patch(
                &deployment,
                &PatchParams::default(),
                &Patch::Merge(&json!({"spec": {"template": {"spec": {"failureDomain": domain}}}})),
            )
            .await
            .expect("the deployment's domain");
    }

    let placed = eventually(DEADLINE, "nine Running Machines", || {
        world.dump_once_after(Duration::from_secs(150));
        placements(&world, 9)
    })
    .await;
    let mut per_engine: BTreeMap<&str, usize> = BTreeMap::new();
    for (name, (provider, at)) in &placed {
        let (domain, vm_id) = at.split_once(' ').expect("domain and VM");
        assert_eq!(
            provider, domain_provider[domain],
            "{name}: not on its domain's provider"
        );
        let vm = engines[provider]
            .vm(vm_id)
            .unwrap_or_else(|| panic!("{name}: VM {vm_id} not on {provider}'s engine"));
        assert!(
            vm.description.contains(&format!("/{name} ")),
            "{name}: marker {}",
            vm.description
        );
        *per_engine.entry(domain).or_default() += 1;
    }
    assert_eq!(
        per_engine.values().copied().collect::<Vec<_>>(),
        [3, 3, 3],
        "{per_engine:?}"
    );
    for (provider, control) in &engines {
        assert_eq!(
            control.vm_count(),
            3,
            "{provider}: one control-plane VM and two workers"
        );
    }

    // Engine C goes down: the Cluster no longer offers site-c, its three machines say so, no other machine changes.
    let before: BTreeMap<String, Option<(String, String)>> = {
        let list = world
            .ovirt_machines()
            .list(&ListParams::default())
            .await
            .expect("machines");
        list.items
            .iter()
            .map(|m| (m.metadata.name.clone().unwrap_or_default(), connect_reason(m)))
            .collect()
    };
    c_sim.control().set_outage(true);
    cluster_domains_become(&world, "site-c off the Cluster", &["site-a", "site-b"]).await;
    let on_c: Vec<&String> = placed
        .iter()
        .filter(|(_, (p, _))| *p == c_provider)
        .map(|(n, _)| n)
        .collect();
    eventually(DEADLINE, "engine C's machines EngineUnreachable", || async {
        for name in &on_c {
            let machine = world.ovirt_machines().get(name).await.map_err(|e| e.to_string())?;
            let reason = connect_reason(&machine).map(|(reason, _)| reason);
            if reason.as_deref() != Some("EngineUnreachable") {
                return Err(format!("{name}: {reason:?}"));
            }
        }
        Ok(())
    })
    .await;
    for (name, was) in &before {
        if on_c.contains(&name) {
            continue;
        }
        let machine = world.ovirt_machines().get(name).await.expect("machine");
        assert_eq!(&connect_reason(&machine), was, "{name}: its CanConnectToOVirt changed");
    }

    // Scaling while C is down: a control-plane machine placed as KubeadmControlPlane places one (in the Cluster's
    // failure domain with the fewest control-plane machines, of those it lists now) and a fourth worker of site-a's
    // MachineDeployment both get their VMs on live engines.
    let offered = cluster_domains(&world).await.expect("the Cluster's domains");
    assert_eq!(offered, ["site-a", "site-b"], "the dead engine's domain is not offered");
    control_plane_machine(&world, "cp-3", &offered[0], &spec).await;
    world
        .api("MachineDeployment", "machinedeployments")
        .patch(
            "workers-site-a",
            &PatchParams::default(),
            &Patch::Merge(&json!({"spec": {"replicas": 3}})),
        )
        .await
        .expect("site-a's workers scaled up");
    let grown = eventually(DEADLINE, "the two new machines running on live engines", || {
        placements_except(&world, 11, &placed)
    })
    .await;
    assert_eq!(grown.len(), 2, "{grown:?}");
    for (name, (provider, at)) in &grown {
        assert_ne!(provider, &c_provider, "{name} was placed on the dead engine");
        let vm_id = at.split_once(' ').map(|(_, vm)| vm).unwrap_or_default();
        assert!(
            engines[provider].vm(vm_id).is_some(),
            "{name}: no VM on {provider}'s engine"
        );
    }

    // Engine C returns: site-c is offered again and its machines heal on the VMs they had.
    c_sim.control().set_outage(false);
    cluster_domains_become(&world, "site-c back on the Cluster", &DOMAINS).await;
    let healed = eventually(DEADLINE, "eleven Running Machines again", || async {
        let mut now = placements(&world, 11).await?;
        now.retain(|name, _| placed.contains_key(name));
        for name in &on_c {
            let machine = world.ovirt_machines().get(name).await.map_err(|e| e.to_string())?;
            let reason = connect_reason(&machine).map(|(reason, _)| reason);
            if reason.as_deref() != Some("Connected") {
                return Err(format!("{name}: {reason:?}"));
            }
        }
        Ok(now)
    })
    .await;
    assert_eq!(healed, placed, "a machine was re-created or moved");
    assert_eq!(c_sim.control().vm_count(), 3);
    for kubelet in kubelets {
        kubelet.abort();
    }
    println!(
        "three engines: 3 VMs each (1 control plane, 2 workers); engine c's outage took site-c off the Cluster, and \
         a control-plane machine and a worker added meanwhile went to live engines"
    );
}
