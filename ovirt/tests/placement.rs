//! Hosts, affinity groups and the engine's placement refusals over the wire: the client's requests and decoding
//! against the simulator, which answers with the engine's rules and texts.

mod common;

use capov_ovirt::model::{AffinityGroup, AffinityRule, HostStatus, Ref, Vm};
use capov_ovirt::{Client, StartOptions};
use capov_ovirt_sim::{HostSeed, Inventory, SimulatorHandle};
use capov_testkit::eventually;

use common::{WAIT, setup};

/// A down VM of the default template in cluster Default; returns its id.
async fn down_vm(sim: &SimulatorHandle, client: &Client, name: &str) -> String {
    let control = sim.control();
    let vm = Vm {
        name: Some(name.into()),
        cluster: Some(Ref::name("Default")),
        template: Some(Ref::id(control.id_of("template", "ubuntu-22.04").expect("template"))),
        ..Vm::default()
    };
    let id = client.add_vm(&vm, false).await.expect("add").id.expect("id");
    eventually(WAIT, "the VM down", || async {
        (control.vm(&id)?.status == "down").then_some(())
    })
    .await;
    id
}

fn apart(name: &str, enforcing: bool) -> AffinityGroup {
    AffinityGroup {
        name: Some(name.into()),
        description: Some("kept apart".into()),
        vms_rule: Some(AffinityRule {
            enabled: Some(true),
            positive: Some(false),
            enforcing: Some(enforcing),
        }),
        hosts_rule: Some(AffinityRule {
            enabled: Some(false),
            ..AffinityRule::default()
        }),
        ..AffinityGroup::default()
    }
}

#[tokio::test]
async fn hosts_decode_with_status_memory_cpus_and_cluster() {
    let (sim, client) = setup().await;
    let hosts = client.hosts().await.expect("hosts");
    assert_eq!(hosts.len(), 3);
    let cluster = sim.control().id_of("cluster", "Default").expect("cluster");
    for host in &hosts {
        assert_eq!(host.status, Some(HostStatus::Up));
        assert_eq!(host.cluster.as_ref().and_then(|c| c.id.clone()), Some(cluster.clone()));
        assert_eq!(host.logical_cpus(), Some(4 * 64 * 2));
        assert_eq!(host.memory, host.max_scheduling_memory, "nothing runs yet");
    }
}

#[tokio::test]
async fn a_hard_anti_affinity_group_spreads_vms_and_refuses_a_start_with_the_engines_text() {
    let (sim, client) = setup().await;
    let control = sim.control();
    control
        .seed(&Inventory {
            clusters: vec![capov_ovirt_sim::ClusterSeed {
                name: "Small".into(),
                data_center: "Default".into(),
                ..Default::default()
            }],
            hosts: ["small-1", "small-2"]
                .map(|name| HostSeed {
                    name: name.into(),
                    cluster: "Small".into(),
                    ..HostSeed::default()
                })
                .to_vec(),
            ..Inventory::default()
        })
        .expect("seed");
    let cluster = control.id_of("cluster", "Small").expect("cluster");
    let group = client
        .add_affinity_group(&cluster, &apart("capov-apart", true))
        .await
        .expect("add group");
    let group_id = group.id.clone().expect("id");
    assert_eq!(
        client
            .add_affinity_group(&cluster, &apart("capov-apart", true))
            .await
            .map(|_| ())
            .err()
            .map(|e| e.is_affinity_group_name_taken()),
        Some(true)
    );

    let mut vms = Vec::new();
    for name in ["a", "b", "c"] {
        let vm = Vm {
            name: Some(name.into()),
            cluster: Some(Ref::id(cluster.clone())),
            template: Some(Ref::id(control.id_of("template", "ubuntu-22.04").expect("template"))),
            ..Vm::default()
        };
        let id = client.add_vm(&vm, false).await.expect("add").id.expect("id");
        client
            .add_affinity_group_vm(&cluster, &group_id, &id)
            .await
            .expect("join");
        vms.push(id);
    }
    let again = client.add_affinity_group_vm(&cluster, &group_id, &vms[0]).await;
    assert!(again.err().is_some_and(|e| e.is_already_a_member()));
    let listed = client.affinity_groups(&cluster).await.expect("groups");
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0].vm_ids(), vms);
    assert_eq!(listed[0].description.as_deref(), Some("kept apart"));

    for id in &vms {
        eventually(WAIT, "down", || async {
            (control.vm(id)?.status == "down").then_some(())
        })
        .await;
    }
    let options = StartOptions::default();
    client.start_vm(&vms[0], options).await.expect("start a");
    client.start_vm(&vms[1], options).await.expect("start b");
    assert_ne!(control.vm_host(&vms[0]), control.vm_host(&vms[1]));
    let refused = client.start_vm(&vms[2], options).await.expect_err("no host left");
    assert!(refused.is_no_host_to_run(), "{refused:?}");
    assert_eq!(
        refused.detail(),
        Some(
            "Cannot run VM. There is no host that satisfies current scheduling constraints. See below for details:, \
             The host small-1 did not satisfy internal filter VmAffinityGroups because it matched negative affinity \
             rules ., The host small-1 did not satisfy internal filter VmAffinityGroups because it matched negative \
             affinity rules ."
        )
    );
    client
        .remove_affinity_group(&cluster, &group_id)
        .await
        .expect("remove group");
    assert!(client.affinity_groups(&cluster).await.expect("groups").is_empty());
}

#[tokio::test]
async fn a_vm_on_a_host_going_into_maintenance_migrates_and_reports_its_new_host() {
    let (sim, client) = setup().await;
    let control = sim.control();
    let id = down_vm(&sim, &client, "mover").await;
    client.start_vm(&id, StartOptions::default()).await.expect("start");
    let first = eventually(WAIT, "up on a host", || async {
        let vm = client.vm(&id).await.ok()?;
        (vm.status.as_ref().map(|s| s.as_str()) == Some("up")).then_some(vm.host?.id?)
    })
    .await;
    let first_name = control.vm_host(&id).expect("host");
    control.deactivate_host(&first_name).expect("maintenance");
    let seen = client.vm(&id).await.expect("vm");
    assert_eq!(
        seen.status.map(|s| s.as_str().to_string()).as_deref(),
        Some("migrating")
    );
    let moved = eventually(WAIT, "up on another host", || async {
        let vm = client.vm(&id).await.ok()?;
        let host = vm.host?.id?;
        (vm.status.as_ref().map(|s| s.as_str()) == Some("up") && host != first).then_some(host)
    })
    .await;
    let hosts = client.hosts().await.expect("hosts");
    let status_of = |id: &str| {
        hosts
            .iter()
            .find(|h| h.id.as_deref() == Some(id))
            .and_then(|h| h.status.clone())
    };
    assert_eq!(status_of(&first), Some(HostStatus::Maintenance));
    assert_eq!(status_of(&moved), Some(HostStatus::Up));
}

#[tokio::test]
async fn an_add_is_refused_with_low_disk_space_and_storage_domains_report_their_threshold() {
    let (sim, client) = setup().await;
    let control = sim.control();
    control.set_storage_available("data1", 4 << 30).expect("shrink data1");
    let vm = Vm {
        name: Some("tight".into()),
        cluster: Some(Ref::name("Default")),
        template: Some(Ref::id(control.id_of("template", "ubuntu-22.04").expect("template"))),
        ..Vm::default()
    };
    let refused = client.add_vm(&vm, false).await.expect_err("below the 5 GiB threshold");
    assert!(refused.is_low_disk_space(), "{refused:?}");
    assert_eq!(
        refused.detail(),
        Some("Cannot add VM. Low disk space on Storage Domain data1.")
    );
    let domains = client.storage_domains().await.expect("domains");
    let data1 = domains
        .iter()
        .find(|d| d.name.as_deref() == Some("data1"))
        .expect("data1");
    assert_eq!(data1.available, Some(4 << 30));
    assert_eq!(data1.critical_space_action_blocker, Some(5));
}
