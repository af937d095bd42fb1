//! Hypervisor-aware machines and capacity (issue #27) on a real kube-apiserver with the engine simulator: a host
//! going into maintenance (the VM migrates, the machine follows and shows it), a host going non-responsive (no engine
//! write on its VMs until it is fenced), the clone preflight with the figures in the OVirtCluster's status, and the
//! engine's two refusals (low disk space on create, no host on start).

mod support;

use std::time::Duration;

use capov_crds::{ConditionStatus, OVirtCluster, Severity};
use capov_ovirt_sim::{ClusterSeed, GIB, HostDeviceSeed, HostSeed, Inventory, Timings};
use capov_testkit::eventually;
use k8s_openapi::api::core::v1::Node;
use kube::api::Api;
use serde_json::json;
use support::{World, condition};

const MINUTE: Duration = Duration::from_secs(60);
const HOST_LABEL: &str = "capov.infrastructure.cluster.x-k8s.io/ovirt-host";

/// The machine's status.host and its HostReady condition (status, reason), once both are there.
async fn host_of(world: &World, name: &str) -> Option<(String, ConditionStatus, String)> {
    let machine = world.machine(name).await;
    let host = machine.status.as_ref()?.host.clone()?;
    let ready = condition(&machine, "HostReady")?;
    Some((host, ready.status, ready.reason.to_string()))
}

async fn node_host_label(world: &World, node: &str) -> Option<String> {
    let nodes = Api::<Node>::all(world.workload.client().await.expect("workload client"));
    nodes.get(node).await.ok()?.metadata.labels?.get(HOST_LABEL).cloned()
}

#[tokio::test]
async fn a_host_going_into_maintenance_moves_the_vm_and_the_machine_follows_then_clears() {
    let mut world = World::new("maintenance").await;
    world.start_operator().await;
    let vm_id = world.bring_to_ready("mover").await;
    let control = world.sim.control().clone();
    let first = control.vm_host(&vm_id).expect("the VM runs on a host");
    let (host, status, reason) = eventually(MINUTE, "status.host and HostReady", || host_of(&world, "mover")).await;
    assert_eq!(
        (host.as_str(), status, reason.as_str()),
        (first.as_str(), ConditionStatus::True, "HostUp")
    );
    eventually(MINUTE, "the Node labelled with the host", || async {
        (node_host_label(&world, "mover-node").await? == first).then_some(())
    })
    .await;

    // Migrations long enough to be seen.
    control.set_timings(Timings {
        migration_ms: 4000,
        ..control.timings()
    });
    control.deactivate_host(&first).expect("maintenance");
    let preparing = world
        .wait_reason(MINUTE, "mover", "HostReady", "HostPreparingForMaintenance")
        .await;
    let host_ready = condition(&preparing, "HostReady").expect("HostReady");
    assert_eq!(host_ready.severity, Some(Severity::Warning));
    assert!(host_ready.message.contains(&first), "{}", host_ready.message);
    assert_eq!(
        condition(&preparing, "Ready").map(|c| c.status),
        Some(ConditionStatus::True),
        "a VM being migrated stays Ready"
    );

    let moved = eventually(MINUTE, "the machine on its new host, HostReady again", || async {
        match host_of(&world, "mover").await {
            Some((host, ConditionStatus::True, reason)) if host != first && reason == "HostUp" => Ok(host),
            other => Err(format!("{other:?}")),
        }
    })
    .await;
    assert_eq!(control.vm_host(&vm_id).as_deref(), Some(moved.as_str()));
    assert_eq!(control.host_by_name(&first).expect("host").status, "maintenance");
    eventually(MINUTE, "the Node labelled with the new host", || async {
        (node_host_label(&world, "mover-node").await? == moved).then_some(())
    })
    .await;
    world.stop_operator().await;
}

#[tokio::test]
async fn a_non_responsive_host_gets_no_engine_write_on_its_vms_until_it_is_fenced() {
    let mut world = World::new("lost-host").await;
    world.start_operator().await;
    let vm_id = world.bring_to_ready("stranded").await;
    let control = world.sim.control().clone();
    let host = control.vm_host(&vm_id).expect("host");
    control.lose_host(&host).expect("lose the host");
    let lost_at = now_ms();
    let machine = world
        .wait_reason(MINUTE, "stranded", "HostReady", "HostNonResponsive")
        .await;
    let host_ready = condition(&machine, "HostReady").expect("HostReady");
    assert_eq!(host_ready.severity, Some(Severity::Error));
    assert!(host_ready.message.contains("no engine call"), "{}", host_ready.message);

    // Deleting the machine would stop and remove the VM: held back, and said so.
    let machines = Api::<capov_crds::OVirtMachine>::namespaced(world.client.clone(), &world.namespace);
    machines.delete("stranded", &Default::default()).await.expect("delete");
    let held = world
        .wait_reason(MINUTE, "stranded", "MachineDeleted", "HostNonResponsive")
        .await;
    assert!(
        condition(&held, "MachineDeleted").is_some_and(|c| c.message.contains("until the host is back or fenced")),
        "{:?}",
        condition(&held, "MachineDeleted")
    );
    let fenced_at = now_ms();
    control.fence_host(&host).expect("fence");
    eventually(MINUTE, "the machine gone once the host was fenced", || async {
        machines.get_opt("stranded").await.expect("get").is_none().then_some(())
    })
    .await;
    assert!(control.vm(&vm_id).is_none(), "the VM was deleted after the fence");
    let writes_on_vm = |from: u64, to: u64| {
        control
            .writes()
            .into_iter()
            .filter(|w| w.path.contains(&vm_id) && w.received_ms >= from && w.received_ms < to)
            .count()
    };
    assert_eq!(
        writes_on_vm(lost_at, fenced_at),
        0,
        "an engine write while the host was non-responsive"
    );
    assert!(
        writes_on_vm(fenced_at, u64::MAX) > 0,
        "the deletion went on after the fence"
    );
    world.stop_operator().await;
}

fn now_ms() -> u64 {
    u64::try_from(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .expect("clock")
            .as_millis(),
    )
    .expect("ms")
}

#[tokio::test]
async fn a_clone_that_does_not_fit_is_refused_before_the_engine_is_asked_and_the_cluster_shows_the_figures() {
    let mut world = World::new("preflight").await;
    let control = world.sim.control().clone();
    // The template allocates 2.5 GiB: a clone needs 2.75 GiB; 2 GiB are left (and the 5 GiB threshold is off).
    control.set_storage_available("data1", 2 * GIB).expect("data1");
    world.start_operator().await;
    world
        .create_machine(
            "big-clone",
            json!({"ovirtcluster": "Default", "template": "ubuntu-22.04", "diskclone": true}),
        )
        .await;
    let machine = world
        .wait_reason(MINUTE, "big-clone", "MachineCreated", "InsufficientStorage")
        .await;
    let created = condition(&machine, "MachineCreated").expect("MachineCreated");
    assert_eq!(created.severity, Some(Severity::Warning));
    for part in ["\"data1\"", "2147483648 bytes", "needs 2952790016 bytes"] {
        assert!(created.message.contains(part), "{part} not in: {}", created.message);
    }
    assert_eq!(control.counter("POST /vms"), 0, "the engine was asked to create the VM");

    let clusters = Api::<OVirtCluster>::namespaced(world.client.clone(), &world.namespace);
    let capacity = eventually(MINUTE, "the cluster's capacity", || async {
        let cluster = clusters.get(&world.cluster).await.ok()?;
        let capacity = cluster.status?.capacity?;
        let data1 = capacity.storage_domains.iter().find(|d| d.name == "data1")?;
        (data1.available_bytes == (2 * GIB) as i64).then_some(capacity)
    })
    .await;
    let default = capacity
        .ovirt_clusters
        .iter()
        .find(|c| c.name == "Default")
        .expect("the Default cluster");
    assert_eq!((default.hosts, default.hosts_up), (3, 3));
    assert_eq!(default.provider, world.provider);
    assert_eq!(default.cpus, 3 * 4 * 64 * 2);
    assert_eq!(default.largest_free_memory_bytes, (16 * 1024 * GIB) as i64);

    // Room again: the next inventory poll shows it and the machine's retry creates the VM.
    control.set_storage_available("data1", 100 * GIB).expect("data1");
    world.vm_id("big-clone").await;
    world.stop_operator().await;
}

#[tokio::test]
async fn the_engine_refuses_a_create_for_low_disk_space_and_a_start_without_a_host_with_its_own_texts() {
    let mut world = World::new("refusals").await;
    let control = world.sim.control().clone();
    control
        .seed(&Inventory {
            clusters: vec![ClusterSeed {
                name: "Tiny".into(),
                data_center: "Default".into(),
                ..Default::default()
            }],
            hosts: vec![HostSeed {
                name: "tiny-1".into(),
                cluster: "Tiny".into(),
                memory_bytes: 2 * GIB,
                ..HostSeed::default()
            }],
            ..Inventory::default()
        })
        .expect("seed");
    // data2 holds no template disk: a thin VM goes to data1, below its 5 GiB threshold.
    control.set_storage_available("data1", 4 * GIB).expect("data1");
    world.start_operator().await;
    world
        .create_machine("thin", json!({"ovirtcluster": "Default", "template": "ubuntu-22.04"}))
        .await;
    let machine = world
        .wait_reason(MINUTE, "thin", "MachineCreated", "LowDiskSpace")
        .await;
    let created = condition(&machine, "MachineCreated").expect("MachineCreated");
    assert_eq!(created.severity, Some(Severity::Warning));
    assert!(
        created
            .message
            .ends_with("oVirt said: Cannot add VM. Low disk space on Storage Domain data1."),
        "{}",
        created.message
    );

    control.set_storage_available("data1", 100 * GIB).expect("data1");
    world
        .create_machine(
            "too-big",
            json!({"ovirtcluster": "Tiny", "template": "ubuntu-22.04", "memory": {"sizemb": 4096}}),
        )
        .await;
    let machine = world
        .wait_reason(MINUTE, "too-big", "MachineOn", "NoSchedulableHost")
        .await;
    let on = condition(&machine, "MachineOn").expect("MachineOn");
    assert_eq!(on.severity, Some(Severity::Warning));
    for part in [
        "no host has the memory",
        "Cannot run VM. There is no host that satisfies current scheduling constraints.",
        "The host tiny-1 did not satisfy internal filter Memory because its available memory is too low (2048 MB)",
    ] {
        assert!(on.message.contains(part), "{part} not in: {}", on.message);
    }
    let vm_id = world.vm_id("too-big").await;
    assert_eq!(control.vm(&vm_id).expect("vm").status, "down");

    // A host with room: the start is retried and succeeds; the low-disk machine got its VM too.
    control
        .seed(&Inventory {
            hosts: vec![HostSeed {
                name: "tiny-2".into(),
                cluster: "Tiny".into(),
                memory_bytes: 64 * GIB,
                ..HostSeed::default()
            }],
            ..Inventory::default()
        })
        .expect("seed");
    eventually(MINUTE, "the VM up on the new host", || async {
        (control.vm_host(&vm_id)? == "tiny-2" && control.vm(&vm_id)?.status == "up").then_some(())
    })
    .await;
    world.vm_id("thin").await;
    world.stop_operator().await;
}

/// The names of the machines that have a VM in the simulator, among `names`.
fn with_vm(control: &capov_ovirt_sim::Control, names: &[&str]) -> Vec<String> {
    names
        .iter()
        .filter(|name| control.vm_by_name(name).is_some())
        .map(|name| name.to_string())
        .collect()
}

#[tokio::test]
async fn a_passed_through_device_goes_to_one_machine_at_a_time_and_the_next_waits_until_it_is_given_back() {
    const GPU: &str = "pci_0000_3b_00_0";
    let mut world = World::new("passthrough").await;
    let control = world.sim.control().clone();
    let card = |name: &str| HostDeviceSeed {
        name: name.into(),
        iommu_group: Some(30),
        product_name: "TU104GL [Tesla T4]".into(),
        ..HostDeviceSeed::default()
    };
    control
        .seed(&Inventory {
            clusters: vec![ClusterSeed {
                name: "Gpu".into(),
                data_center: "Default".into(),
                ..Default::default()
            }],
            hosts: vec![
                HostSeed {
                    name: "gpu-a".into(),
                    cluster: "Gpu".into(),
                    ..HostSeed::default()
                },
                HostSeed {
                    name: "gpu-b".into(),
                    cluster: "Gpu".into(),
                    // The card's audio function shares its IOMMU group: the engine adds it beside the card.
                    devices: vec![card(GPU), card("pci_0000_3b_00_1")],
                    ..HostSeed::default()
                },
            ],
            ..Inventory::default()
        })
        .expect("seed");
    let gpu_b = control.id_of("host", "gpu-b").expect("gpu-b");
    world.start_operator().await;
    let spec = |devices: &[&str]| json!({"ovirtcluster": "Gpu", "template": "ubuntu-22.04", "hostdevices": devices});
    world.create_machine("pass-1", spec(&[GPU])).await;
    world.create_machine("pass-2", spec(&[GPU])).await;
    // The card and a function no host has: never created, and it keeps asking for the card.
    world
        .create_machine("pass-typo", spec(&[GPU, "pci_0000_3b_00_9"]))
        .await;

    // One of the two gets the card: its VM is pinned to gpu-b, has the card (and its group's placeholder), and runs
    // there. Which one is the first to claim it.
    let (winner, waiting) = eventually(MINUTE, "one machine's VM up with the card", || async {
        let up = |name: &str| control.vm_by_name(name).is_some_and(|vm| vm.status == "up");
        match (up("pass-1"), up("pass-2")) {
            (true, false) => Some(("pass-1", "pass-2")),
            (false, true) => Some(("pass-2", "pass-1")),
            _ => None,
        }
    })
    .await;
    let vm = control.vm_by_name(winner).expect("the winner's VM");
    assert_eq!(vm.dedicated_hosts, vec![gpu_b.clone()]);
    assert_eq!(control.vm_host(&vm.id).as_deref(), Some("gpu-b"));
    let mut devices = vm.host_devices.clone();
    devices.sort();
    assert_eq!(devices, vec![GPU.to_string(), "pci_0000_3b_00_1".to_string()]);

    // The other waits, without a VM, saying who holds the card.
    let held = world
        .wait_reason(MINUTE, waiting, "MachineCreated", "NoFreeHostDevice")
        .await;
    let created = condition(&held, "MachineCreated").expect("MachineCreated");
    assert_eq!(created.severity, Some(Severity::Warning));
    assert!(
        created.message.contains(&format!("{GPU} on gpu-b by")) && created.message.contains("given back"),
        "{}",
        created.message
    );
    // Devices no host has together are a spec to fix; the message names the host with some of them.
    let typo = world
        .wait_reason(MINUTE, "pass-typo", "MachineCreated", "NoFreeHostDevice")
        .await;
    let typo = condition(&typo, "MachineCreated").expect("MachineCreated");
    assert_eq!(typo.severity, Some(Severity::Error));
    assert!(
        typo.message.contains("pci_0000_3b_00_9") && typo.message.contains(&format!("gpu-b has only {GPU}")),
        "{}",
        typo.message
    );
    assert_eq!(with_vm(&control, &[waiting, "pass-typo"]), Vec::<String>::new());
    // The OVirtCluster's capacity counts the card: the one host that has it, and it is in use.
    let clusters = Api::<OVirtCluster>::namespaced(world.client.clone(), &world.namespace);
    let free_cards = || async {
        let capacity = clusters.get(&world.cluster).await.ok()?.status?.capacity?;
        let gpu_cluster = capacity.ovirt_clusters.into_iter().find(|c| c.name == "Gpu")?;
        gpu_cluster.free_host_devices.get(GPU).copied()
    };
    eventually(MINUTE, "the card counted as in use", || async {
        (free_cards().await? == 0).then_some(())
    })
    .await;

    // The card given back (its machine deleted): the waiting machine gets it, on gpu-b.
    world.delete_machine_and_wait(winner).await;
    eventually(2 * MINUTE, "the other machine's VM up with the card", || async {
        let vm = control.vm_by_name(waiting)?;
        (vm.status == "up" && vm.host_devices.iter().any(|d| d == GPU)).then_some(())
    })
    .await;
    // Given back for good (only the machine that can never have it still asks): counted free.
    world.delete_machine_and_wait(waiting).await;
    eventually(MINUTE, "the card counted as free", || async {
        (free_cards().await? == 1).then_some(())
    })
    .await;
    world.stop_operator().await;
}
