//! Failure domains and anti-affinity (issue #25) under the real Cluster API: the CAPI core manager copies the
//! OVirtCluster's failure domains to the Cluster, the real `manager` binary places each control-plane machine in its
//! domain with a hard anti-affinity group, and the engine simulator enforces the groups when it starts the VMs.
//!
//! No KubeadmControlPlane runs here (the control-plane provider needs a real etcd in the workload cluster): the test
//! creates the control-plane Machines as it would, one per failure domain marked for control planes, each with its
//! OVirtMachine from the same template.

use std::collections::BTreeSet;
use std::time::Duration;

use capov_harness::objects;
use capov_ovirt_sim::{AffinityGroupSeed, AffinityLabelSeed, ClusterSeed, HostSeed, Inventory};
use capov_testkit::eventually;
use kube::api::{Api, DeleteParams, DynamicObject, Patch, PatchParams};
use serde_json::json;

use crate::world::World;

const CLUSTER: &str = "placed";
const DEADLINE: Duration = Duration::from_secs(180);

/// Racks a and b are hosts of cluster Default carrying affinity labels; Edge is a cluster of its own.
fn racks() -> Inventory {
    let host = |name: &str, cluster: &str, label: Option<&str>| HostSeed {
        name: name.into(),
        cluster: cluster.into(),
        labels: label.map(String::from).into_iter().collect(),
        ..HostSeed::default()
    };
    Inventory {
        clusters: vec![ClusterSeed {
            name: "Edge".into(),
            data_center: "Default".into(),
            ..Default::default()
        }],
        affinity_labels: ["rack-a", "rack-b"]
            .map(|name| AffinityLabelSeed {
                name: name.into(),
                ..Default::default()
            })
            .to_vec(),
        hosts: vec![
            host("a-1", "Default", Some("rack-a")),
            host("a-2", "Default", Some("rack-a")),
            host("b-1", "Default", Some("rack-b")),
            host("edge-1", "Edge", None),
        ],
        ..Inventory::default()
    }
}

#[tokio::test]
async fn a_control_plane_spreads_over_failure_domains_and_a_hard_rule_that_cannot_be_met_says_so() {
    let mut world = World::new("placed").await;
    let (client, namespace) = (world.client.clone(), world.namespace.clone());
    let control = world.sim.control().clone();
    control.seed(&racks()).expect("racks");
    let kubeconfig = world.workload.kubeconfig_yaml().expect("kubeconfig");
    objects::create_capi_managed_cluster(
        &client,
        &namespace,
        CLUSTER,
        ("127.0.0.1", world.workload.api_port()),
        &kubeconfig,
    )
    .await
    .expect("cluster");
    let domains = json!([
        {"name": "rack-a", "hostlabel": "rack-a"},
        {"name": "rack-b", "hostlabel": "rack-b"},
        {"name": "edge", "ovirtcluster": "Edge"},
        {"name": "edge-workers", "ovirtcluster": "Edge", "controlPlane": false}
    ]);
    let ovirt_clusters: Api<DynamicObject> = Api::namespaced_with(
        client.clone(),
        &namespace,
        &objects::capov("OVirtCluster", "ovirtclusters"),
    );
    ovirt_clusters
        .patch(
            CLUSTER,
            &PatchParams::default(),
            &Patch::Merge(&json!({"spec": {"failureDomains": domains}})),
        )
        .await
        .expect("failure domains");
    world.start_operator();
    world.play_kubelets().await;

    // CAPI core copies the published domains to the Cluster: KubeadmControlPlane reads them there.
    let clusters: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), &namespace, &objects::capi("Cluster", "clusters"));
    let for_control_planes = eventually(DEADLINE, "the Cluster's failure domains", || async {
        let cluster = clusters.get(CLUSTER).await.map_err(|e| e.to_string())?;
        let listed = cluster.data["status"]["failureDomains"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        if listed.len() != 4 {
            return Err(format!("{listed:?}"));
        }
        Ok(listed
            .iter()
            .filter(|d| d["controlPlane"] == json!(true))
            .filter_map(|d| d["name"].as_str().map(String::from))
            .collect::<BTreeSet<String>>())
    })
    .await;
    assert_eq!(
        for_control_planes,
        BTreeSet::from(["edge".into(), "rack-a".into(), "rack-b".into()])
    );

    // One control-plane machine per domain, with hard anti-affinity, as KubeadmControlPlane would create them.
    let spec = json!({"provider": world.provider, "ovirtcluster": "Default", "template": "ubuntu-22.04",
                      "antiaffinity": "hard", "memory": {"sizemb": 4096}});
    let control_plane = |name: &'static str, domain: &'static str| {
        let (client, namespace, spec) = (client.clone(), namespace.clone(), spec.clone());
        async move {
            let labels = json!({"cluster.x-k8s.io/cluster-name": CLUSTER, "cluster.x-k8s.io/control-plane": ""});
            let machine = objects::MachineSpec { name, labels, spec };
            objects::create_machine_in_failure_domain(&client, &namespace, CLUSTER, machine, domain)
                .await
                .expect("control-plane machine");
        }
    };
    for (name, domain) in [("cp-a", "rack-a"), ("cp-b", "rack-b"), ("cp-edge", "edge")] {
        control_plane(name, domain).await;
    }
    let machines: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), &namespace, &objects::capi("Machine", "machines"));
    let running = |names: &'static [&'static str]| {
        let machines = machines.clone();
        async move {
            for name in names {
                let machine = machines.get(name).await.map_err(|e| e.to_string())?;
                let phase = machine.data["status"]["phase"].as_str().unwrap_or_default().to_string();
                if phase != "Running" {
                    return Err(format!("{name}: {phase}"));
                }
            }
            Ok(())
        }
    };
    eventually(DEADLINE, "three Running control-plane Machines", || {
        running(&["cp-a", "cp-b", "cp-edge"])
    })
    .await;
    let host_of = |name: &str| control.vm_by_name(name).and_then(|vm| control.vm_host(&vm.id));
    assert!(
        matches!(host_of("cp-a").as_deref(), Some("a-1" | "a-2")),
        "{:?}",
        host_of("cp-a")
    );
    assert_eq!(host_of("cp-b").as_deref(), Some("b-1"));
    assert_eq!(host_of("cp-edge").as_deref(), Some("edge-1"));
    let edge = control.id_of("cluster", "Edge").expect("Edge");
    assert_eq!(
        control.vm_by_name("cp-edge").expect("vm").cluster_id,
        edge,
        "in its domain's oVirt cluster"
    );
    let ovirt_machines: Api<DynamicObject> = Api::namespaced_with(
        client.clone(),
        &namespace,
        &objects::capov("OVirtMachine", "ovirtmachines"),
    );
    let status_of = |name: &'static str| {
        let ovirt_machines = ovirt_machines.clone();
        async move { ovirt_machines.get(name).await.expect("machine").data["status"].clone() }
    };
    assert_eq!(status_of("cp-edge").await["failureDomain"], "edge");
    // The host is reported once the provider's host inventory names it, which on a busy test host can come after
    // the Machine is Running.
    let host = eventually(DEADLINE, "cp-b's status names its host", || async {
        let host = status_of("cp-b").await["host"].clone();
        host.is_string().then_some(host)
    })
    .await;
    assert_eq!(host, "b-1");

    // A second machine in rack-a goes to its other host; a third has no host left there without a sibling.
    control_plane("cp-a2", "rack-a").await;
    eventually(DEADLINE, "cp-a2 Running", || running(&["cp-a2"])).await;
    let rack_a: BTreeSet<Option<String>> = [host_of("cp-a"), host_of("cp-a2")].into();
    assert_eq!(rack_a, BTreeSet::from([Some("a-1".into()), Some("a-2".into())]));
    control_plane("cp-a3", "rack-a").await;
    let refused = eventually(DEADLINE, "cp-a3 refused a host", || async {
        let status = status_of("cp-a3").await;
        let on = status["conditions"]
            .as_array()?
            .iter()
            .find(|c| c["type"] == "MachineOn" && c["reason"] == "NoSchedulableHost")?
            .clone();
        Some(on)
    })
    .await;
    let message = refused["message"].as_str().unwrap_or_default();
    assert!(message.contains("spec.antiaffinity: hard forbids"), "{message}");
    assert!(message.contains("VmAffinityGroups"), "{message}");
    assert_eq!(refused["severity"], "Warning");
    assert_eq!(control.vm_by_name("cp-a3").expect("vm").status, "down", "no stacked VM");
    let hosts: Vec<Option<String>> = ["cp-a", "cp-a2", "cp-b", "cp-edge"]
        .iter()
        .map(|n| host_of(n))
        .collect();
    assert_eq!(
        hosts.iter().collect::<BTreeSet<_>>().len(),
        4,
        "two control-plane VMs share a host: {hosts:?}"
    );

    let groups = control.affinity_groups();
    let names: BTreeSet<&str> = groups.iter().map(|g| g.name.as_str()).collect();
    let group = |purpose: &str, ovirt_cluster: &str| format!("capov.{namespace}.{CLUSTER}.{purpose}.{ovirt_cluster}");
    for expected in [
        group("control-plane", "Default"),
        group("control-plane", "Edge"),
        group("fd-rack-a", "Default"),
        group("fd-rack-b", "Default"),
    ] {
        assert!(names.contains(expected.as_str()), "{expected} not in {names:?}");
    }
    let in_default = groups
        .iter()
        .find(|g| g.name == group("control-plane", "Default"))
        .expect("group");
    assert_eq!(in_default.vm_ids.len(), 4, "cp-a, cp-a2, cp-a3 and cp-b");
    assert!(in_default.vms_rule.enforcing && !in_default.vms_rule.positive);

    // A group an administrator made under the name CAPOV would give the workers' group: a soft rule starts the
    // worker without it, and the group is never changed or removed.
    let foreign = format!("capov.{namespace}.{CLUSTER}.md-workers.Default");
    let admins_group = AffinityGroupSeed {
        name: foreign.clone(),
        cluster: "Default".into(),
        description: "made by hand".into(),
        ..AffinityGroupSeed::default()
    };
    control
        .seed(&Inventory {
            affinity_groups: vec![admins_group],
            ..Inventory::default()
        })
        .expect("the administrator's group");
    let worker_labels =
        json!({"cluster.x-k8s.io/cluster-name": CLUSTER, "cluster.x-k8s.io/deployment-name": "workers"});
    let worker_spec = json!({"provider": world.provider, "ovirtcluster": "Default", "template": "ubuntu-22.04"});
    objects::create_machine(&client, &namespace, CLUSTER, "worker", worker_labels, worker_spec)
        .await
        .expect("worker");
    eventually(DEADLINE, "the worker Running", || running(&["worker"])).await;
    let placed = status_of("worker").await["conditions"]
        .as_array()
        .and_then(|all| all.iter().find(|c| c["type"] == "MachinePlacementSet").cloned())
        .expect("MachinePlacementSet");
    assert_eq!(
        (&placed["status"], &placed["reason"]),
        (&json!("True"), &json!("AntiAffinitySkipped"))
    );
    let said = placed["message"].as_str().unwrap_or_default();
    assert!(
        said.contains(&foreign) && said.contains("CAPOV leaves it alone"),
        "{said}"
    );
    let untouched = |control: &capov_ovirt_sim::Control| {
        let group = control.affinity_groups().into_iter().find(|g| g.name == foreign);
        group.is_some_and(|g| g.description == "made by hand" && g.vm_ids.is_empty())
    };
    assert!(untouched(&control), "{:?}", control.affinity_groups());

    // Membership follows the machines; the last member takes its group along.
    Api::<DynamicObject>::namespaced_with(client.clone(), &namespace, &objects::capi("Machine", "machines"))
        .delete("cp-a3", &DeleteParams::default())
        .await
        .expect("delete cp-a3");
    eventually(DEADLINE, "cp-a3 out of its groups", || async {
        let in_default = control
            .affinity_groups()
            .into_iter()
            .find(|g| g.name == group("control-plane", "Default"))?;
        (in_default.vm_ids.len() == 3).then_some(())
    })
    .await;
    clusters
        .delete(CLUSTER, &DeleteParams::default())
        .await
        .expect("delete cluster");
    eventually(
        DEADLINE,
        "every VM and CAPOV's affinity groups gone with the Cluster",
        || async {
            let left = (control.vm_count(), control.affinity_groups().len());
            if left == (0, 1) {
                Ok(())
            } else {
                Err(format!("VMs, groups: {left:?}"))
            }
        },
    )
    .await;
    assert!(untouched(&control), "the administrator's group is left as it was");
}
