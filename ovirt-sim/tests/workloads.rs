//! Machines for real workloads, as the engine takes and refuses them (docs/simulator-fidelity.md names the engine
//! source of each rule): high availability and VM leases with the restart of HA VMs when their host is lost or
//! fenced; CPU mode, pinning, custom properties and NUMA nodes; host devices and vGPUs with the scheduler's filters;
//! instance types; template versions.

use std::time::Duration;

use capov_ovirt_sim::{
    EngineVersion, HostDeviceSeed, HostSeed, Inventory, MdevTypeSeed, Simulator, StorageDomainSeed, TemplateDiskSeed,
    TemplateSeed, default_inventory,
};
use capov_testkit::{Session, eventually};

const WAIT: Duration = Duration::from_secs(30);

async fn session_with(inventory: Inventory, version: EngineVersion) -> Session {
    let sim = Simulator::builder()
        .plain_http()
        .inventory(inventory)
        .engine_version(version)
        .start()
        .await
        .expect("simulator starts");
    Session::login(sim, "admin@internal", "admin").await
}

/// `<vm>` of a thin VM of `rhcos-4.14` in `Default`, with `extra` inside.
fn vm_body(name: &str, extra: &str) -> String {
    format!(
        "<vm><name>{name}</name><cluster><name>Default</name></cluster><template><name>rhcos-4.14</name></template>\
         {extra}</vm>"
    )
}

/// The fault detail of a refused request, checked for its status.
fn refused(answer: (u16, String), status: u16) -> String {
    assert_eq!(answer.0, status, "{}", answer.1);
    let body = answer.1;
    let start = body.find("<detail>").map(|i| i + "<detail>".len()).unwrap_or(0);
    let end = body.find("</detail>").unwrap_or(body.len());
    body[start..end].to_string()
}

/// Adds a VM, waits until it is down, and returns its id.
async fn down_vm(s: &Session, name: &str, extra: &str) -> String {
    let (status, body) = s.post("/vms", &vm_body(name, extra)).await;
    assert!(status == 201 || status == 202, "{status} {body}");
    let control = s.sim.control();
    let id = control.id_of("vm", name).expect("the new VM");
    eventually(WAIT, format!("{name} down"), || async {
        control.vm(&id).filter(|vm| vm.status == "down")
    })
    .await;
    id
}

async fn start(s: &Session, id: &str) -> (u16, String) {
    s.post(&format!("/vms/{id}/start"), "<action/>").await
}

async fn up_on(s: &Session, id: &str) -> String {
    let control = s.sim.control();
    eventually(WAIT, format!("{id} up"), || async {
        control.vm(id).filter(|vm| vm.status == "up")
    })
    .await;
    control.vm_host(id).expect("a running VM has a host")
}

fn data_domain(s: &Session, name: &str) -> String {
    s.sim.control().id_of("storagedomain", name).expect("storage domain")
}

#[tokio::test]
async fn high_availability_and_leases_are_taken_and_refused_as_by_the_engine() {
    let mut inventory = default_inventory();
    inventory.storage_domains.push(StorageDomainSeed {
        name: "resting".into(),
        data_center: Some("Default".into()),
        status: "maintenance".into(),
        ..Default::default()
    });
    inventory.storage_domains.push(StorageDomainSeed {
        name: "isos".into(),
        data_center: Some("Default".into()),
        kind: "iso".into(),
        ..Default::default()
    });
    let s = session_with(inventory, EngineVersion::DEFAULT).await;
    let data1 = data_domain(&s, "data1");
    let lease = |sd: &str| format!("<lease><storage_domain id=\"{sd}\"/></lease>");
    let ha = |on: bool, priority: i32| {
        format!("<high_availability><enabled>{on}</enabled><priority>{priority}</priority></high_availability>")
    };

    let id = down_vm(&s, "ha-1", &format!("{}{}", ha(true, 50), lease(&data1))).await;
    let vm = s.get_ok(&format!("/vms/{id}")).await;
    assert!(
        vm.contains("<high_availability><enabled>true</enabled><priority>50</priority></high_availability>"),
        "{vm}"
    );
    assert!(
        vm.contains(&format!(
            "<lease><storage_domain href=\"/ovirt-engine/api/storagedomains/{data1}\" id=\"{data1}\"/></lease>"
        )),
        "{vm}"
    );

    // `canAddLease`: high availability first, then a data domain of the VM's data center that is active.
    let detail = refused(
        s.post("/vms", &vm_body("ha-2", &format!("{}{}", ha(false, 1), lease(&data1))))
            .await,
        409,
    );
    assert_eq!(
        detail,
        "[Cannot add VM. A VM lease was defined but high availability option is set to false.]"
    );
    let detail = refused(
        s.post(
            "/vms",
            &vm_body(
                "ha-2",
                &format!("{}{}", ha(true, 1), lease("00000000-0000-4000-8000-00000000dead")),
            ),
        )
        .await,
        400,
    );
    assert_eq!(detail, "[Cannot add VM. Storage Domain doesn't exist.]");
    let resting = data_domain(&s, "resting");
    let detail = refused(
        s.post("/vms", &vm_body("ha-2", &format!("{}{}", ha(true, 1), lease(&resting))))
            .await,
        409,
    );
    assert_eq!(
        detail,
        "[Cannot add VM. The relevant Storage Domain's status is Maintenance.]"
    );
    let isos = data_domain(&s, "isos");
    let detail = refused(
        s.post("/vms", &vm_body("ha-2", &format!("{}{}", ha(true, 1), lease(&isos))))
            .await,
        400,
    );
    assert_eq!(detail, "[Cannot add VM. Action is only applicable for Data domains.]");
    let detail = refused(s.post("/vms", &vm_body("ha-2", &ha(true, 101))).await, 400);
    assert_eq!(
        detail,
        "[VM priority value passed the permitted max value, value should be between 0 and 100.]"
    );

    // Update: high availability on a plain VM, then a lease; no lease swap on a running VM.
    let plain = down_vm(&s, "plain-1", "").await;
    let (status, body) = s
        .send(
            reqwest::Method::PUT,
            &format!("/vms/{plain}"),
            Some(&format!("<vm>{}</vm>", lease(&data1))),
        )
        .await;
    assert_eq!(
        refused((status, body), 409),
        "[Cannot edit VM. A VM lease was defined but high availability option is set to false.]"
    );
    let (status, body) = s
        .send(
            reqwest::Method::PUT,
            &format!("/vms/{plain}"),
            Some(&format!("<vm>{}{}</vm>", ha(true, 10), lease(&data1))),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        s.sim.control().vm(&plain).unwrap().lease_domain_id.as_deref(),
        Some(data1.as_str())
    );
    start(&s, &plain).await;
    up_on(&s, &plain).await;
    let data2 = data_domain(&s, "data2");
    let (status, body) = s
        .send(
            reqwest::Method::PUT,
            &format!("/vms/{plain}"),
            Some(&format!("<vm>{}</vm>", lease(&data2))),
        )
        .await;
    assert_eq!(
        refused((status, body), 409),
        "[Cannot edit VM. Hot swapping of VM leases is not supported, please remove the current lease and then set a \
         new one.]"
    );
}

/// Three hosts; VMs started while only host-1 is up, so that all of them run there.
async fn three_vms_on_host_1(s: &Session) -> (String, String, String) {
    let control = s.sim.control();
    let data1 = data_domain(s, "data1");
    let leased = down_vm(
        s,
        "leased",
        &format!(
            "<high_availability><enabled>true</enabled><priority>80</priority></high_availability>\
             <lease><storage_domain id=\"{data1}\"/></lease>"
        ),
    )
    .await;
    let ha = down_vm(
        s,
        "ha",
        "<high_availability><enabled>true</enabled><priority>20</priority></high_availability>",
    )
    .await;
    let plain = down_vm(s, "plain", "").await;
    control.deactivate_host("host-2").unwrap();
    control.deactivate_host("host-3").unwrap();
    for id in [&leased, &ha, &plain] {
        let (status, body) = start(s, id).await;
        assert_eq!(status, 200, "{body}");
        assert_eq!(up_on(s, id).await, "host-1");
    }
    control.activate_host("host-2").unwrap();
    control.activate_host("host-3").unwrap();
    (leased, ha, plain)
}

#[tokio::test]
async fn a_lost_host_restarts_its_leased_ha_vms_elsewhere_and_fencing_restarts_the_other_ha_vms() {
    let s = Session::new().await;
    let control = s.sim.control();
    let (leased, ha, plain) = three_vms_on_host_1(&s).await;

    control.lose_host("host-1").unwrap();
    // The lease lets the engine start the VM elsewhere while its host is lost: it cannot run on there.
    let new_host = up_on(&s, &leased).await;
    assert_ne!(new_host, "host-1");
    assert_eq!(control.vm(&leased).unwrap().ha_restarts, 1);
    // Without a lease the engine cannot know whether the VM still runs: it waits for the host.
    for id in [&ha, &plain] {
        let vm = control.vm(id).unwrap();
        assert_eq!((vm.status.as_str(), vm.host_id.is_some()), ("unknown", true), "{vm:?}");
        assert_eq!(control.vm_host(id).as_deref(), Some("host-1"));
    }
    let vm_xml = s.get_ok(&format!("/vms/{leased}")).await;
    let new_host_id = control.id_of("host", &new_host).unwrap();
    assert!(
        vm_xml.contains(&format!("<host href=\"/ovirt-engine/api/hosts/{new_host_id}\"")),
        "{vm_xml}"
    );

    // Fencing: the HA VM is restarted on another host, the other one stays down, the leased one is untouched.
    control.fence_host("host-1").unwrap();
    assert_ne!(up_on(&s, &ha).await, "host-1");
    assert_eq!(control.vm(&ha).unwrap().ha_restarts, 1);
    let plain_vm = control.vm(&plain).unwrap();
    assert_eq!((plain_vm.status.as_str(), plain_vm.host_id), ("down", None));
    assert_eq!(control.vm_host(&leased), Some(new_host));
    assert_eq!(control.vm(&leased).unwrap().ha_restarts, 1);
}

#[tokio::test]
async fn a_leased_vm_never_runs_twice_when_its_lost_host_answers_again() {
    let s = Session::new().await;
    let control = s.sim.control();
    let (leased, ha, _plain) = three_vms_on_host_1(&s).await;
    control.lose_host("host-1").unwrap();
    let new_host = up_on(&s, &leased).await;
    control.recover_host("host-1").unwrap();
    // The host's VMs that ran all along are up there again; the leased one runs only where it was restarted.
    assert_eq!(up_on(&s, &ha).await, "host-1");
    assert_eq!(control.vm_host(&leased), Some(new_host.clone()));
    let on_host_1 = control.host_by_name("host-1").unwrap().vm_ids;
    assert!(!on_host_1.contains(&leased), "{on_host_1:?}");
    let on_new = control.host_by_name(&new_host).unwrap().vm_ids;
    assert!(on_new.contains(&leased), "{on_new:?}");
}

#[tokio::test]
async fn cpu_mode_pinning_custom_properties_and_numa_nodes_follow_the_engines_rules() {
    let s = Session::new().await;
    let host_1 = s.sim.control().id_of("host", "host-1").unwrap();
    let pinned = format!(
        "<placement_policy><affinity>pinned</affinity><hosts><host id=\"{host_1}\"/></hosts></placement_policy>"
    );
    let tuned = format!(
        "{pinned}<cpu><mode>host_passthrough</mode><topology><sockets>1</sockets><cores>4</cores><threads>1</threads>\
         </topology><cpu_tune><vcpu_pins><vcpu_pin><vcpu>0</vcpu><cpu_set>2</cpu_set></vcpu_pin><vcpu_pin><vcpu>1\
         </vcpu><cpu_set>3-4</cpu_set></vcpu_pin></vcpu_pins></cpu_tune></cpu><memory>8589934592</memory>\
         <memory_policy><ballooning>false</ballooning></memory_policy><custom_properties><custom_property><name>\
         hugepages</name><value>1048576</value></custom_property></custom_properties>"
    );
    let id = down_vm(&s, "tuned", &tuned).await;
    let vm = s.get_ok(&format!("/vms/{id}")).await;
    for expected in [
        "<mode>host_passthrough</mode>",
        "<vcpu_pin><vcpu>1</vcpu><cpu_set>3-4</cpu_set></vcpu_pin>",
        "<ballooning>false</ballooning>",
        "<custom_property><name>hugepages</name><value>1048576</value></custom_property>",
        &format!(
            "<affinity>pinned</affinity><hosts><host href=\"/ovirt-engine/api/hosts/{host_1}\" id=\"{host_1}\"/></hosts>"
        ),
    ] {
        assert!(vm.contains(expected), "{expected} in {vm}");
    }
    let (status, body) = start(&s, &id).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(up_on(&s, &id).await, "host-1");

    let pins = "<cpu><cpu_tune><vcpu_pins><vcpu_pin><vcpu>0</vcpu><cpu_set>1</cpu_set></vcpu_pin></vcpu_pins></cpu_tune></cpu>";
    let detail = refused(s.post("/vms", &vm_body("p-1", pins)).await, 400);
    assert_eq!(detail, "[Cannot set host CPU pinning when a host is not selected]");
    let bad = "<cpu><cpu_tune><vcpu_pins><vcpu_pin><vcpu>0</vcpu><cpu_set>a</cpu_set></vcpu_pin></vcpu_pins></cpu_tune></cpu>";
    let detail = refused(s.post("/vms", &vm_body("p-1", &format!("{pinned}{bad}"))).await, 400);
    assert_eq!(detail, "[CPU pinning format invalid.]");
    let beyond = "<cpu><cpu_tune><vcpu_pins><vcpu_pin><vcpu>9</vcpu><cpu_set>1</cpu_set></vcpu_pin></vcpu_pins></cpu_tune></cpu>";
    let detail = refused(s.post("/vms", &vm_body("p-1", &format!("{pinned}{beyond}"))).await, 400);
    assert_eq!(
        detail,
        "[CPU pinning validation failed - virtual CPU does not exist in vm.]"
    );
    let props = "<custom_properties><custom_property><name>hugepages</name><value>1G</value></custom_property>\
                 <custom_property><name>gpu</name><value>yes</value></custom_property></custom_properties>";
    let detail = refused(s.post("/vms", &vm_body("p-1", props)).await, 400);
    assert_eq!(
        detail,
        "[Cannot add VM if some of the specified custom properties are not configured by the system. The keys are: \
         gpu, Cannot add VM if some of the specified custom properties have illegal values. The keys are: hugepages]"
    );

    // NUMA nodes: a VM pinned to a host; the engine's texts keep `${action} ${type}` unresolved.
    let node = |index: u32, mib: u64, cpus: &[u32]| {
        let cores: String = cpus
            .iter()
            .map(|c| format!("<core><index>{c}</index></core>"))
            .collect();
        format!(
            "<vm_numa_node><index>{index}</index><memory>{mib}</memory><cpu><cores>{cores}</cores></cpu></vm_numa_node>"
        )
    };
    let stopped = s.post(&format!("/vms/{id}/stop"), "<action/>").await;
    assert_eq!(stopped.0, 200, "{}", stopped.1);
    let (status, body) = s.post(&format!("/vms/{id}/numanodes"), &node(0, 4096, &[0, 1])).await;
    assert_eq!(status, 201, "{body}");
    let detail = refused(
        s.post(&format!("/vms/{id}/numanodes"), &node(1, 8192, &[2, 3])).await,
        400,
    );
    assert_eq!(
        detail,
        "[The NUMA nodes' total memory of 12288 exceeds the VM's total memory of 8192.]"
    );
    let detail = refused(
        s.post(&format!("/vms/{id}/numanodes"), &node(1, 1024, &[1, 2])).await,
        400,
    );
    assert_eq!(
        detail,
        "[CPUs with the following indexes are assigned to two or more NUMA nodes: 1.]"
    );
    let (status, body) = s.post(&format!("/vms/{id}/numanodes"), &node(1, 4096, &[2, 3])).await;
    assert_eq!(status, 201, "{body}");
    let nodes = s.get_ok(&format!("/vms/{id}/numanodes")).await;
    assert_eq!(nodes.matches("<vm_numa_node ").count(), 2, "{nodes}");
    let loose = down_vm(&s, "loose", "").await;
    let detail = refused(
        s.post(&format!("/vms/{loose}/numanodes"), &node(0, 512, &[0])).await,
        409,
    );
    assert_eq!(
        detail,
        "[Cannot ${action} ${type}. VM must be pinned to at least one host.]"
    );
}

#[tokio::test]
async fn pinning_policies_exist_from_the_releases_that_brought_them() {
    let s = session_with(default_inventory(), EngineVersion::new(4, 4, 6)).await;
    let auto = "<auto_pinning_policy>existing</auto_pinning_policy>";
    let (status, body) = s.post("/vms", &vm_body("a-1", auto)).await;
    assert_eq!(status, 400, "{body}");
    assert!(body.contains("Request syntactically incorrect."), "{body}");
    s.sim.control().set_engine_version(EngineVersion::DEFAULT);
    down_vm(&s, "a-1", auto).await;
    let policy = "<cpu_pinning_policy>dedicated</cpu_pinning_policy>";
    let (status, body) = s.post("/vms", &vm_body("c-1", policy)).await;
    assert_eq!(status, 400, "{body}");
    s.sim.control().set_engine_version(EngineVersion::new(4, 5, 4));
    let id = down_vm(&s, "c-1", policy).await;
    let vm = s.get_ok(&format!("/vms/{id}")).await;
    assert!(
        vm.contains("<cpu_pinning_policy>dedicated</cpu_pinning_policy>"),
        "{vm}"
    );
}

fn gpu_inventory() -> Inventory {
    let mut inventory = default_inventory();
    let t4 = |bus: &str, group: u32, instances: u32| {
        HostDeviceSeed::gpu(
            bus,
            group,
            vec![MdevTypeSeed::new("nvidia-222", "GRID T4-1B", instances)],
        )
    };
    let audio = |bus: &str, group: u32| HostDeviceSeed {
        name: format!("pci_0000_{bus}_00_1"),
        product_id: "0x10f8".into(),
        product_name: "TU104 HD Audio Controller".into(),
        iommu_group: Some(group),
        driver: None,
        ..Default::default()
    };
    inventory.hosts = vec![
        HostSeed {
            name: "gpu-1".into(),
            devices: vec![t4("3b", 30, 2), audio("3b", 30)],
            ..Default::default()
        },
        HostSeed {
            name: "gpu-2".into(),
            devices: vec![t4("3b", 30, 0)],
            ..Default::default()
        },
    ];
    inventory
}

#[tokio::test]
async fn host_devices_need_a_pinned_vm_and_the_scheduler_keeps_them_exclusive() {
    let s = session_with(gpu_inventory(), EngineVersion::DEFAULT).await;
    let control = s.sim.control();
    let gpu_1 = control.id_of("host", "gpu-1").unwrap();
    let pinned = "<placement_policy><affinity>pinned</affinity><hosts><host><name>gpu-1</name></host></hosts>\
                  </placement_policy>";
    let devices = s.get_ok(&format!("/hosts/{gpu_1}/devices")).await;
    assert!(devices.contains("<name>pci_0000_3b_00_0</name>"), "{devices}");
    assert!(devices.contains("<m_dev_type><name>nvidia-222</name><human_readable_name>GRID T4-1B</human_readable_name><available_instances>2</available_instances></m_dev_type>"), "{devices}");
    // JSON with the engine's strings for scalars.
    let (status, json) = s.get_json(&format!("/hosts/{gpu_1}/devices")).await;
    assert_eq!(status, 200, "{json}");
    let json: serde_json::Value = serde_json::from_str(&json).unwrap();
    let first = &json["host_device"][0];
    assert_eq!(first["iommu_group"], "30", "{json}");
    assert_eq!(
        first["m_dev_types"]["m_dev_type"][0]["available_instances"], "2",
        "{json}"
    );
    let gpu = "<host_device><name>pci_0000_3b_00_0</name></host_device>";

    let loose = down_vm(&s, "loose", "").await;
    let detail = refused(s.post(&format!("/vms/{loose}/hostdevices"), gpu).await, 409);
    assert_eq!(detail, "[Cannot add Host devices. VM must be pinned to a host.]");

    let a = down_vm(&s, "gpu-a", pinned).await;
    let detail = refused(
        s.post(
            &format!("/vms/{a}/hostdevices"),
            "<host_device><name>pci_0000_99_00_0</name></host_device>",
        )
        .await,
        400,
    );
    assert_eq!(
        detail,
        "[Cannot add Host devices. One or more of specified host devices not found.]"
    );
    let (status, body) = s.post(&format!("/vms/{a}/hostdevices"), gpu).await;
    assert_eq!(status, 201, "{body}");
    // The audio function shares the GPU's IOMMU group: it goes along as a placeholder.
    let attached = s.get_ok(&format!("/vms/{a}/hostdevices")).await;
    assert!(attached.contains("<name>pci_0000_3b_00_1</name>"), "{attached}");
    assert_eq!(
        attached.matches("<placeholder>true</placeholder>").count(),
        1,
        "{attached}"
    );

    let (status, body) = start(&s, &a).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(up_on(&s, &a).await, "gpu-1");
    let detail = refused(s.post(&format!("/vms/{a}/hostdevices"), gpu).await, 409);
    assert_eq!(detail, "[Cannot add Host devices because the VM is in Up status.]");
    let devices = s.get_ok(&format!("/hosts/{gpu_1}/devices")).await;
    assert!(
        devices.contains(&format!("<vm href=\"/ovirt-engine/api/vms/{a}\" id=\"{a}\"/>")),
        "{devices}"
    );
    // Passed through whole, the GPU has no vGPU instances left.
    assert!(
        devices.contains("<available_instances>0</available_instances>"),
        "{devices}"
    );

    // Pinned, the VM's other hosts fall to PinToHost first, and the engine's translator names the first host
    // dropped in every line (its variables' first definitions win).
    let c = down_vm(&s, "gpu-c", pinned).await;
    assert_eq!(s.post(&format!("/vms/{c}/hostdevices"), gpu).await.0, 201);
    let detail = refused(start(&s, &c).await, 409);
    assert_eq!(
        detail,
        "[Cannot run VM. There is no host that satisfies current scheduling constraints. See below for details:, The \
         host gpu-2 did not satisfy internal filter PinToHost because the host is not present in the pinning list.., \
         The host gpu-2 did not satisfy internal filter PinToHost because the host is not present in the pinning \
         list..]"
    );
    // Migratable but with the device's host named, the HostDevice filter drops both hosts.
    let b = down_vm(&s, "gpu-b", &pinned.replace(">pinned<", ">user_migratable<")).await;
    assert_eq!(s.post(&format!("/vms/{b}/hostdevices"), gpu).await.0, 201);
    let detail = refused(start(&s, &b).await, 409);
    assert_eq!(
        detail,
        "[Cannot run VM. There is no host that satisfies current scheduling constraints. See below for details:, The \
         host gpu-1 did not satisfy internal filter HostDevice because some of the required host devices are \
         unavailable., The host gpu-1 did not satisfy internal filter HostDevice because some of the required host \
         devices are unavailable.]"
    );
    // The device freed, the second VM runs; taken by something else, it is unavailable again.
    assert_eq!(s.post(&format!("/vms/{a}/stop"), "<action/>").await.0, 200);
    assert_eq!(start(&s, &b).await.0, 200);
    assert_eq!(up_on(&s, &b).await, "gpu-1");
    assert_eq!(s.post(&format!("/vms/{b}/stop"), "<action/>").await.0, 200);
    control
        .set_host_device_taken("gpu-1", "pci_0000_3b_00_0", true)
        .unwrap();
    refused(start(&s, &b).await, 409);
    control
        .set_host_device_taken("gpu-1", "pci_0000_3b_00_0", false)
        .unwrap();
    assert_eq!(start(&s, &b).await.0, 200);
}

#[tokio::test]
async fn vgpus_run_only_where_a_free_instance_of_their_type_is() {
    let s = session_with(gpu_inventory(), EngineVersion::new(4, 5, 4)).await;
    let control = s.sim.control();
    let vgpu = "<vm_mediated_device><spec_params><property><name>mdevType</name><value>nvidia-222</value></property>\
                </spec_params></vm_mediated_device>";
    let mut ids = Vec::new();
    for n in 0..3 {
        let id = down_vm(&s, &format!("vgpu-{n}"), "").await;
        let (status, body) = s.post(&format!("/vms/{id}/mediateddevices"), vgpu).await;
        assert_eq!(status, 201, "{body}");
        assert!(
            body.contains("<name>mdevType</name><value>nvidia-222</value>"),
            "{body}"
        );
        ids.push(id);
    }
    for id in &ids[..2] {
        assert_eq!(start(&s, id).await.0, 200);
        assert_eq!(up_on(&s, id).await, "gpu-1");
    }
    let detail = refused(start(&s, &ids[2]).await, 409);
    assert_eq!(
        detail,
        "[Cannot run VM. There is no host that satisfies current scheduling constraints. See below for details:, The \
         host gpu-1 did not satisfy internal filter MDevice because some of the required mDev devices are \
         unavailable (nvidia-222)., The host gpu-1 did not satisfy internal filter MDevice because some of the \
         required mDev devices are unavailable (nvidia-222).]"
    );
    assert_eq!(
        control.host_devices("gpu-1").unwrap()[0].mdev_available,
        vec![("nvidia-222".to_string(), 0)]
    );
    assert_eq!(s.post(&format!("/vms/{}/stop", ids[0]), "<action/>").await.0, 200);
    assert_eq!(start(&s, &ids[2]).await.0, 200);
    assert_eq!(up_on(&s, &ids[2]).await, "gpu-1");

    // A type no host offers.
    let other = down_vm(&s, "vgpu-x", "").await;
    let wanted = vgpu.replace("nvidia-222", "nvidia-999");
    assert_eq!(s.post(&format!("/vms/{other}/mediateddevices"), &wanted).await.0, 201);
    let detail = refused(start(&s, &other).await, 409);
    assert!(
        detail.contains(
            "The host gpu-1 did not satisfy internal filter MDevice because some of the required mDev \
                         devices are missing (nvidia-999)."
        ),
        "{detail}"
    );

    // Before 4.5 there are no mediated devices: the `mdev_type` custom property asks for vGPUs.
    control.set_engine_version(EngineVersion::DEFAULT);
    assert_eq!(s.post(&format!("/vms/{other}/mediateddevices"), vgpu).await.0, 404);
    let by_property = down_vm(
        &s,
        "vgpu-prop",
        "<custom_properties><custom_property><name>mdev_type</name><value>nodisplay,nvidia-222</value>\
         </custom_property></custom_properties>",
    )
    .await;
    let detail = refused(start(&s, &by_property).await, 409);
    assert!(detail.contains("mDev devices are unavailable (nvidia-222)"), "{detail}");
}

#[tokio::test]
async fn an_instance_type_sets_what_it_sets_whatever_the_request_says() {
    let s = Session::new().await;
    let list = s.get_ok("/instancetypes").await;
    for name in ["Tiny", "Small", "Medium", "Large", "XLarge"] {
        assert!(list.contains(&format!("<name>{name}</name>")), "{name} in {list}");
    }
    let large = "00000009-0009-0009-0009-0000000000f1";
    let id = down_vm(
        &s,
        "sized",
        &format!(
            "<instance_type id=\"{large}\"/><memory>1073741824</memory><cpu><topology><sockets>8</sockets><cores>1\
             </cores><threads>1</threads></topology></cpu><high_availability><enabled>true</enabled>\
             </high_availability>"
        ),
    )
    .await;
    let vm = s.get_ok(&format!("/vms/{id}")).await;
    assert!(vm.contains("<memory>8589934592</memory>"), "{vm}");
    assert!(vm.contains("<sockets>2</sockets>"), "{vm}");
    assert!(
        vm.contains("<enabled>false</enabled>"),
        "the instance type's high availability: {vm}"
    );
    assert!(
        vm.contains(&format!(
            "<instance_type href=\"/ovirt-engine/api/instancetypes/{large}\" id=\"{large}\"/>"
        )),
        "{vm}"
    );
    let (status, body) = s
        .post(
            "/vms",
            &vm_body(
                "unsized",
                "<instance_type id=\"00000000-0000-4000-8000-0000000000ff\"/>",
            ),
        )
        .await;
    assert_eq!((status, body.as_str()), (404, ""));
    // By id only: a name alone fails inside the engine, an id that is no UUID is the parser's 400.
    assert_eq!(
        s.post(
            "/vms",
            &vm_body("named", "<instance_type><name>Large</name></instance_type>")
        )
        .await
        .0,
        500
    );
    let detail = refused(
        s.post("/vms", &vm_body("named", "<instance_type id=\"large\"/>")).await,
        400,
    );
    assert_eq!(detail, "Invalid UUID string: large");
}

#[tokio::test]
async fn template_versions_are_chosen_by_id_and_by_name_the_newest() {
    let mut inventory = default_inventory();
    let version = |number: u32, name: Option<&str>| TemplateSeed {
        name: "base-os".into(),
        cluster: Some("Default".into()),
        version_number: number,
        version_name: name.map(str::to_string),
        disks: vec![TemplateDiskSeed {
            alias: format!("base-os-v{number}_Disk1"),
            storage_domains: vec!["data1".into()],
            ..Default::default()
        }],
        ..Default::default()
    };
    inventory.templates.push(version(1, Some("initial")));
    inventory.templates.push(version(2, Some("hardened")));
    let s = session_with(inventory, EngineVersion::DEFAULT).await;
    let list = s.get_ok("/templates?search=name%3Dbase-os").await;
    assert_eq!(list.matches("<template ").count(), 2, "{list}");
    let control = s.sim.control();
    let state_ids: Vec<(String, u32)> = {
        let mut found = Vec::new();
        for chunk in list.split("<template href=").skip(1) {
            let id = chunk
                .split("id=\"")
                .nth(1)
                .unwrap()
                .split('"')
                .next()
                .unwrap()
                .to_string();
            let number: u32 = chunk
                .split("<version_number>")
                .nth(1)
                .unwrap()
                .split('<')
                .next()
                .unwrap()
                .parse()
                .unwrap();
            found.push((id, number));
        }
        found
    };
    let v1 = state_ids.iter().find(|(_, n)| *n == 1).unwrap().0.clone();
    let v2 = state_ids.iter().find(|(_, n)| *n == 2).unwrap().0.clone();
    // Every version names the first as its base.
    assert_eq!(
        list.matches(&format!(
            "<base_template href=\"/ovirt-engine/api/templates/{v1}\" id=\"{v1}\"/>"
        ))
        .count(),
        2,
        "{list}"
    );
    assert!(list.contains("<version_name>hardened</version_name>"), "{list}");

    let body = |name: &str, template: &str| {
        format!("<vm><name>{name}</name><cluster><name>Default</name></cluster>{template}</vm>")
    };
    assert_eq!(
        s.post("/vms", &body("pinned-v1", &format!("<template id=\"{v1}\"/>")))
            .await
            .0,
        202
    );
    assert_eq!(control.vm_by_name("pinned-v1").unwrap().template_id, v1);
    assert_eq!(
        s.post("/vms", &body("by-name", "<template><name>base-os</name></template>"))
            .await
            .0,
        202
    );
    assert_eq!(
        control.vm_by_name("by-name").unwrap().template_id,
        v2,
        "by name the newest version"
    );
}
