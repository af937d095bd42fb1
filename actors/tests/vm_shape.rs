//! The shape of a machine's VM on the engine simulator (issue #25): data disks created, attached, reported, counted
//! as the VM's own and deleted with it while a CSI disk still blocks deletion; the VM name template; the tags;
//! another namespace's machine of the same name clashing without the template and not with it; the graceful
//! shutdown on deletion and its fallback to a forced stop.

mod support;

use std::time::Duration;

use capov_crds::OVirtMachine;
use capov_crds::labels::SYSTEM_DISKS_ANNOTATION;
use capov_ovirt::{Client, ClientConfig, TlsMode};
use capov_ovirt_sim::{EngineVersion, InstanceTypeSeed, Inventory, TemplateDiskSeed, TemplateSeed, VmSeed};
use capov_testkit::eventually;
use kube::ResourceExt;
use kube::api::{Api, DeleteParams};
use serde_json::{Value, json};
use support::{World, condition};

const MINUTE: Duration = Duration::from_secs(60);

async fn provisioned(world: &World, name: &str) -> OVirtMachine {
    eventually(MINUTE, &format!("{name}: provisioned"), || async {
        let machine = world.machine(name).await;
        machine.status.as_ref().is_some_and(|s| s.ready).then_some(machine)
    })
    .await
}

async fn gone(world: &World, name: &str, within: Duration) {
    let machines: Api<OVirtMachine> = Api::namespaced(world.client.clone(), &world.namespace);
    eventually(within, &format!("{name}: deleted"), || async {
        machines.get_opt(name).await.ok()?.is_none().then_some(())
    })
    .await;
}

/// The (method, last path segment) of the engine writes on this VM.
fn vm_writes(world: &World, vm_id: &str) -> Vec<(String, String)> {
    world
        .sim
        .control()
        .writes()
        .into_iter()
        .filter(|w| w.path.contains(vm_id))
        .map(|w| (w.method, w.path.rsplit('/').next().unwrap_or_default().to_string()))
        .collect()
}

fn spec(extra: Value) -> Value {
    let mut spec = json!({"ovirtcluster": "Default", "template": "ubuntu-22.04"});
    for (key, value) in extra.as_object().cloned().unwrap_or_default() {
        spec[key] = value;
    }
    spec
}

#[tokio::test]
async fn data_disks_names_tags_and_graceful_shutdown_on_the_simulator() {
    let mut world = World::new("vmshape").await;
    world
        .apply_provider(provider_spec(&world, json!({"vmtags": true})))
        .await;
    world.start_operator().await;
    let control = world.sim.control().clone();
    let data1 = control.id_of("storagedomain", "data1").expect("data1");
    let data2 = control.id_of("storagedomain", "data2").expect("data2");
    let profile2 = control.id_of("diskprofile", "data2").expect("data2's disk profile");
    // An administrator's own tag of the name CAPOV wants: assigned, never changed.
    control.add_tag("capov", "the admins' own").expect("tag");
    // Machines `worker` and `twin` of another namespace, created without a name template, own VMs of those names.
    let foreign = |name: &str| VmSeed {
        name: name.into(),
        cluster: Some("Default".into()),
        description: format!("capov:team-b/{name} uid:0b0b0b0b-0000-4000-8000-000000000001 mc:other"),
        ..VmSeed::default()
    };
    control
        .seed(&Inventory {
            vms: vec![foreign("worker"), foreign("twin")],
            ..Inventory::default()
        })
        .expect("seed");
    let foreign_vms = control.vms();

    world
        .create_machine(
            "worker",
            spec(json!({
                "vmnametemplate": "{namespace}-{name}",
                "datadisks": [
                    {"name": "data", "sizegb": 2, "storagedomainname": "data1"},
                    {"name": "etcd", "sizegb": 1, "storagedomainname": "data2", "interface": "virtio",
                     "format": "raw", "sparse": false, "diskprofile": "data2"}
                ]
            })),
        )
        .await;
    world.create_machine("twin", spec(json!({}))).await;
    world
        .create_machine("polite", spec(json!({"gracefulshutdowntimeoutseconds": 30})))
        .await;
    world
        .create_machine("stubborn", spec(json!({"gracefulshutdowntimeoutseconds": 3})))
        .await;

    // The name template, the data disks as the engine made them, their report, and the tags.
    let machine = provisioned(&world, "worker").await;
    let vm_name = format!("{}-worker", world.namespace);
    let vm = control.vm_by_name(&vm_name).expect("the VM is named by the template");
    // Without a template the other namespace's `twin` blocks this one's; with it, `worker` did not clash.
    world
        .wait_reason(MINUTE, "twin", "MachineCreated", "VMNameConflict")
        .await;
    let data_disks: Vec<_> = vm.disks.iter().filter(|d| !d.bootable).collect();
    let shape: Vec<_> = data_disks
        .iter()
        .map(|d| {
            (
                d.alias.clone(),
                d.provisioned_size,
                d.format.clone(),
                d.sparse,
                d.interface.clone(),
                d.storage_domain_ids.clone(),
            )
        })
        .collect();
    assert_eq!(
        shape,
        [
            (
                format!("{vm_name}_data"),
                2 << 30,
                "cow".into(),
                true,
                "virtio_scsi".into(),
                vec![data1]
            ),
            (
                format!("{vm_name}_etcd"),
                1 << 30,
                "raw".into(),
                false,
                "virtio".into(),
                vec![data2]
            ),
        ]
    );
    assert_eq!(data_disks[1].disk_profile_id.as_deref(), Some(profile2.as_str()));
    let reported: Vec<_> = machine
        .status
        .as_ref()
        .map(|s| {
            s.data_disks
                .iter()
                .map(|d| (d.name.clone(), d.disk_id.clone()))
                .collect()
        })
        .unwrap_or_default();
    assert_eq!(
        reported,
        [
            ("data".to_string(), data_disks[0].id.clone()),
            ("etcd".to_string(), data_disks[1].id.clone())
        ]
    );
    let recorded = machine
        .annotations()
        .get(SYSTEM_DISKS_ANNOTATION)
        .cloned()
        .unwrap_or_default();
    assert!(vm.disks.iter().all(|d| recorded.contains(&d.id)), "{recorded}");
    let cluster_tag = format!("capov.cluster.{}.{}", world.namespace, world.cluster);
    let mut tags = vm.tags.clone();
    tags.sort();
    let mut expected = vec![
        "capov".to_string(),
        format!("capov-ns-{}", world.namespace),
        cluster_tag,
    ];
    expected.sort();
    assert_eq!(tags, expected);
    assert!(
        control.tags().contains(&("capov".into(), "the admins' own".into())),
        "a tag CAPOV did not create is left as it was"
    );

    // Deletion: a CSI disk still blocks it (the data disks do not); once it is detached, the VM goes with its data
    // disks.
    let csi = control.attach_disk(&vm.id, "pvc-0001", 1 << 30).expect("CSI disk");
    let machines: Api<OVirtMachine> = Api::namespaced(world.client.clone(), &world.namespace);
    machines
        .delete("worker", &DeleteParams::default())
        .await
        .expect("delete");
    world
        .wait_reason(MINUTE, "worker", "MachineDeleted", "VMHasNonSystemDisk")
        .await;
    assert!(control.vm(&vm.id).is_some());
    control.detach_disk(&vm.id, &csi).expect("detach");

    // Meanwhile: a guest that shuts down when asked, and one that ignores ACPI and is powered off at the deadline.
    let polite = world.vm_id("polite").await;
    let stubborn = world.vm_id("stubborn").await;
    provisioned(&world, "polite").await;
    provisioned(&world, "stubborn").await;
    control.set_guest_ignores_acpi(&stubborn, true).expect("stubborn guest");
    machines
        .delete("polite", &DeleteParams::default())
        .await
        .expect("delete");
    machines
        .delete("stubborn", &DeleteParams::default())
        .await
        .expect("delete");
    let started = std::time::Instant::now();
    let shutting_down = world
        .wait_reason(MINUTE, "polite", "MachineDeleted", "VMShuttingDown")
        .await;
    // Ready describes the deletion too (CAPI mirrors it into the Machine's InfrastructureReady).
    let ready = condition(&shutting_down, "Ready").map(|c| (c.status, c.reason.to_string()));
    assert_eq!(
        ready,
        Some((capov_crds::ConditionStatus::False, "VMShuttingDown".to_string())),
        "Ready of a machine being deleted"
    );
    gone(&world, "polite", MINUTE).await;
    gone(&world, "stubborn", MINUTE).await;
    let polite_writes = vm_writes(&world, &polite);
    assert!(
        polite_writes.contains(&("POST".into(), "shutdown".into())),
        "{polite_writes:?}"
    );
    assert!(
        !polite_writes.contains(&("POST".into(), "stop".into())),
        "{polite_writes:?}"
    );
    let stubborn_writes = vm_writes(&world, &stubborn);
    let shutdown_at = stubborn_writes.iter().position(|w| w.1 == "shutdown");
    let stop_at = stubborn_writes.iter().position(|w| w.1 == "stop");
    assert!(
        matches!((shutdown_at, stop_at), (Some(a), Some(b)) if a < b),
        "asked first, then forced: {stubborn_writes:?}"
    );
    assert!(
        started.elapsed() >= Duration::from_secs(2),
        "the stop waited for the deadline"
    );

    gone(&world, "worker", Duration::from_secs(150)).await;
    assert!(control.vm(&vm.id).is_none());
    let disks_left: Vec<_> = data_disks.iter().filter(|d| control.disk_exists(&d.id)).collect();
    assert!(disks_left.is_empty(), "the data disks go with the VM");
    assert!(control.disk_exists(&csi), "the CSI disk stays");
    for before in &foreign_vms {
        assert_eq!(control.vm(&before.id).as_ref(), Some(before), "{} changed", before.name);
    }
    assert_eq!(control.rejected_bodies(), Default::default());
    world.stop_operator().await;
}

/// The provider spec of `world`'s engine with `extra` fields.
fn provider_spec(world: &World, extra: Value) -> Value {
    use base64::Engine as _;
    let ca = base64::engine::general_purpose::STANDARD.encode(world.sim.ca_pem().expect("ca"));
    let mut spec =
        json!({"engine": world.sim.api_url(), "credentialsSecretName": "engine-credentials", "tls": {"certs": ca}});
    for (key, value) in extra.as_object().cloned().unwrap_or_default() {
        spec[key] = value;
    }
    spec
}

/// Issue 38's create-time settings: a pinned template version, oVirt high availability with a VM lease, the CPU
/// mode and model, hugepages and an instance type reach the engine's VM; a version the template lacks is reported
/// with the versions there are, and an instance type the engine lacks by name, and no VM is created for either.
#[tokio::test]
async fn workload_tuning_and_a_pinned_template_version_reach_the_engine() {
    let mut world = World::new("tuning").await;
    world.apply_provider(provider_spec(&world, json!({}))).await;
    let control = world.sim.control().clone();
    let version = |number: u32| TemplateSeed {
        id: Some(format!("7e000000-0000-4000-8000-00000000000{number}")),
        name: "ubuntu-22.04".into(),
        cluster: Some("Default".into()),
        os_type: "other_linux".into(),
        version_number: number,
        version_name: Some(format!("v{number}")),
        disks: vec![TemplateDiskSeed {
            alias: format!("ubuntu-22.04-v{number}_Disk1"),
            size_bytes: 10 << 30,
            storage_domains: vec!["data1".into()],
            ..TemplateDiskSeed::default()
        }],
        ..TemplateSeed::default()
    };
    control
        .seed(&Inventory {
            templates: vec![version(2), version(3)],
            instance_types: vec![InstanceTypeSeed {
                name: "Large".into(),
                memory_bytes: 8 << 30,
                sockets: 2,
                cores: 2,
                threads: 1,
                ..InstanceTypeSeed::default()
            }],
            ..Inventory::default()
        })
        .expect("template versions and an instance type");
    // CPU pinning policies came with 4.5 (4.4 would be refused before the create, a core unit test shows).
    control.set_engine_version(EngineVersion::new(4, 5, 4));
    world.start_operator().await;

    let tuned = json!({
        "templateversion": {"name": "v2"},
        "highavailability": {"enabled": true, "priority": 50, "leasestoragedomain": "data2"},
        "cputuning": {"mode": "custom", "custommodel": "Skylake-Server", "pinningpolicy": "isolate_threads"},
        "hugepageskib": 2048,
    });
    world.create_machine("tuned", spec(tuned)).await;
    world
        .create_machine("pinned-missing", spec(json!({"templateversion": {"number": 9}})))
        .await;
    world
        .create_machine("sized", spec(json!({"instancetype": "Large"})))
        .await;
    world
        .create_machine("sized-missing", spec(json!({"instancetype": "Huge"})))
        .await;
    let numa = json!({
        "cpu": {"sockets": 1, "cores": 3, "threads": 1},
        "memory": {"sizemb": 4096},
        "numa": {"nodes": 2, "tunemode": "strict"},
    });
    world.create_machine("numa", spec(numa)).await;

    provisioned(&world, "tuned").await;
    let vm_id = world.vm_id("tuned").await;
    let ca = world.sim.ca_pem().expect("ca").as_bytes().to_vec();
    let config = ClientConfig::new(world.sim.api_url(), "admin@internal", "admin").with_tls(TlsMode::Verify {
        system_roots: false,
        extra_ca_pem: ca,
    });
    let engine = Client::new(config).expect("engine client");
    let vm = engine.vm(&vm_id).await.expect("the VM");
    let v2 = "7e000000-0000-4000-8000-000000000002".to_string();
    assert_eq!(
        vm.template.and_then(|t| t.id),
        Some(v2),
        "the pinned version, not the newest (3)"
    );
    let ha = vm.high_availability.expect("high availability");
    assert_eq!((ha.enabled, ha.priority), (Some(true), Some(50)));
    let data2 = control.id_of("storagedomain", "data2").expect("data2");
    assert_eq!(
        vm.lease.and_then(|l| l.storage_domain).and_then(|sd| sd.id),
        Some(data2)
    );
    assert_eq!(vm.cpu.and_then(|cpu| cpu.mode).as_deref(), Some("custom"));
    assert_eq!(vm.custom_cpu_model.as_deref(), Some("Skylake-Server"));
    assert_eq!(
        vm.cpu_pinning_policy.as_ref().map(|policy| policy.as_str()),
        Some("isolate_threads")
    );
    assert_eq!(
        vm.custom_properties.as_ref().and_then(|p| p.get("hugepages")),
        Some("2048")
    );

    // Virtual NUMA nodes: the VM pinned to the Default cluster's hosts, its 3 vCPUs and 4 GiB split over 2 nodes.
    provisioned(&world, "numa").await;
    let numa_vm = world.vm_id("numa").await;
    let mut hosts: Vec<String> = ["host-1", "host-2", "host-3"]
        .iter()
        .map(|name| control.id_of("host", name).expect("a Default host"))
        .collect();
    hosts.sort();
    let mut pinned = control.vm(&numa_vm).expect("the NUMA VM").dedicated_hosts;
    pinned.sort();
    assert_eq!(pinned, hosts);
    let mut nodes: Vec<(u32, u64, Vec<u32>, Option<String>)> = engine
        .vm_numa_nodes(&numa_vm)
        .await
        .expect("the VM's NUMA nodes")
        .into_iter()
        .map(|node| {
            let cores = node
                .cpu
                .and_then(|cpu| cpu.cores)
                .map(|cores| cores.items)
                .unwrap_or_default();
            (
                node.index.unwrap_or(99),
                node.memory.unwrap_or(0),
                cores.into_iter().filter_map(|core| core.index).collect(),
                node.numa_tune_mode.map(|mode| mode.to_string()),
            )
        })
        .collect();
    nodes.sort();
    let strict = Some("strict".to_string());
    assert_eq!(
        nodes,
        vec![(0, 2048, vec![0, 1], strict.clone()), (1, 2048, vec![2], strict)]
    );

    let missing = world
        .wait_reason(MINUTE, "pinned-missing", "MachineCreated", "TemplateVersionNotFound")
        .await;
    let message = condition(&missing, "MachineCreated")
        .map(|c| c.message.clone())
        .unwrap_or_default();
    assert!(
        message.contains("number 9") && message.contains("1, 2 (\"v2\"), 3 (\"v3\")"),
        "{message}"
    );
    assert!(
        control.vms().iter().all(|vm| vm.name != "pinned-missing"),
        "no VM for a missing version"
    );

    provisioned(&world, "sized").await;
    let sized = control.vm(&world.vm_id("sized").await).expect("the sized VM");
    let large = control.id_of("instancetype", "Large").expect("the instance type");
    assert_eq!(sized.instance_type_id, Some(large), "the VM is of the instance type");
    let missing = world
        .wait_reason(MINUTE, "sized-missing", "MachineCreated", "InstanceTypeNotFound")
        .await;
    let message = condition(&missing, "MachineCreated")
        .map(|c| c.message.clone())
        .unwrap_or_default();
    assert!(
        message.contains("\"Huge\"") && message.contains("spec.instancetype"),
        "{message}"
    );
}
