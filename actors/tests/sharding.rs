//! Past one replica: two operator shards side by side, each with its own `--watch-filter` value (and, as deployed,
//! its own Lease), split one set of clusters on one engine. Each shard has its OVirtProvider (the same engine and
//! credentials) and its clusters; every machine reaches Ready, each shard runs actors for its own machines only, and
//! the engine saw every write to a shard's VMs from that shard alone (its name in the User-Agent).

mod support;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Mutex;
use std::time::Duration;

use capov_actors::metrics::Metrics;
use capov_actors::runtime::{self, RuntimeSettings};
use capov_crds::{ConditionStatus, OVirtMachine};
use capov_harness::{CREDENTIALS_SECRET, objects, trusting};
use capov_testkit::eventually;
use serde_json::json;
use support::{World, condition, metric_sum, operator_clients};

const SHARDS: [&str; 2] = ["shard-a", "shard-b"];
const MACHINES_PER_SHARD: usize = 4;

fn is_ready(machine: &OVirtMachine) -> bool {
    condition(machine, "Ready").is_some_and(|c| c.status == ConditionStatus::True)
}

#[tokio::test]
async fn two_shards_split_the_machines_and_never_touch_each_others() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let world = World::new("shards").await;
    let control = world.sim.control().clone();
    let tls = trusting(world.sim.ca_pem().expect("https simulator"));
    let kubeconfig = world.workload.kubeconfig_yaml().expect("kubeconfig");

    // Per shard: a provider for the shared engine, a cluster and its machines, all labelled with the shard.
    let mut owner_of: BTreeMap<String, &str> = BTreeMap::new();
    for shard in SHARDS {
        let provider = format!("{}-{shard}", world.namespace);
        let spec = json!({"engine": world.sim.api_url(), "credentialsSecretName": CREDENTIALS_SECRET, "tls": tls});
        objects::apply_provider(
            &world.client,
            &provider,
            json!({"cluster.x-k8s.io/watch-filter": shard}),
            spec,
        )
        .await
        .expect("provider");
        let cluster = format!("cluster-{shard}");
        let labels = objects::cluster_labels(shard, &cluster);
        objects::create_workload_cluster(&world.client, &world.namespace, &cluster, labels.clone(), &kubeconfig)
            .await
            .expect("cluster");
        for i in 0..MACHINES_PER_SHARD {
            let name = format!("{shard}-m{i}");
            let spec = json!({"provider": provider, "ovirtcluster": "Default", "template": "ubuntu-22.04"});
            objects::create_machine(&world.client, &world.namespace, &cluster, &name, labels.clone(), spec)
                .await
                .expect("machine");
            owner_of.insert(name, shard);
        }
    }

    // One runtime per shard, as two Deployments would run them.
    let mut operators = Vec::new();
    for shard in SHARDS {
        let metrics = Metrics::new();
        let settings = RuntimeSettings {
            watch_filter: Some(shard.to_string()),
            instance: Some(shard.to_string()),
            ..world.settings()
        };
        let operator = runtime::start(operator_clients().await, settings, metrics.clone())
            .await
            .expect("runtime");
        operators.push((shard, operator, metrics));
    }

    let workload = world.workload.client().await.expect("workload client");
    let registered = Mutex::new(BTreeSet::new());
    let machines = eventually(Duration::from_secs(180), "every machine Ready", || async {
        let items = world.register_up_nodes(&workload, &registered).await;
        let ours: Vec<OVirtMachine> = items
            .into_iter()
            .filter(|m| m.metadata.name.as_ref().is_some_and(|n| owner_of.contains_key(n)))
            .collect();
        let not_ready: Vec<_> = ours.iter().filter(|m| !is_ready(m)).map(|m| &m.metadata.name).collect();
        if ours.len() == owner_of.len() && not_ready.is_empty() {
            Ok(ours)
        } else {
            Err(format!(
                "{} of {} listed; not Ready: {not_ready:?}",
                ours.len(),
                owner_of.len()
            ))
        }
    })
    .await;

    // Each shard took up each of its own machines (an actor, or its dormant state once Ready), and no other.
    for (shard, _, metrics) in &operators {
        let live = metric_sum(metrics, "capov_actors_live", &[("kind", "machine")]);
        let dormant = metric_sum(metrics, "capov_machines_dormant", &[]);
        assert_eq!(live + dormant, MACHINES_PER_SHARD as f64, "{shard}: machines taken up");
    }
    // Every engine write to a shard's VM came from that shard; each shard created its own VMs.
    let vm_shard: BTreeMap<String, &str> = machines
        .iter()
        .filter_map(|m| {
            let name = m.metadata.name.clone()?;
            let vm = m.spec.provider_id.as_deref()?.strip_prefix("ovirt://")?.to_string();
            Some((vm, owner_of[&name]))
        })
        .collect();
    assert_eq!(vm_shard.len(), owner_of.len(), "a VM per machine");
    let writes = control.writes();
    let mut per_shard: BTreeMap<&str, usize> = BTreeMap::new();
    for write in &writes {
        let Some(writer) = SHARDS.iter().find(|s| write.user_agent.ends_with(&format!("({s})"))) else {
            panic!("a write from neither shard: {write:?}");
        };
        *per_shard.entry(writer).or_default() += 1;
        let target = write
            .path
            .strip_prefix("/ovirt-engine/api/vms/")
            .and_then(|rest| rest.split('/').next())
            .filter(|id| !id.is_empty());
        if let Some(vm) = target {
            let owner = vm_shard.get(vm).copied();
            assert_eq!(owner, Some(*writer), "{write:?} on a VM of {owner:?}");
        }
    }
    let creates = |shard: &str| {
        writes
            .iter()
            .filter(|w| {
                w.method == "POST" && w.path == "/ovirt-engine/api/vms" && w.user_agent.ends_with(&format!("({shard})"))
            })
            .count()
    };
    for shard in SHARDS {
        assert_eq!(creates(shard), MACHINES_PER_SHARD, "{shard}: VMs created");
    }
    println!(
        "sharding: 2 shards (watch filters {SHARDS:?}) on one engine, {MACHINES_PER_SHARD} machines each: all Ready; \
         machine actors {MACHINES_PER_SHARD} per shard; engine writes {per_shard:?}, each on its own shard's VMs only"
    );
    for (_, operator, _) in operators {
        let _ = operator.stop_and_wait(None, Some(Duration::from_secs(10))).await;
    }
}
