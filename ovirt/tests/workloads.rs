//! The workload settings on the wire: high availability and leases, CPU mode and pinning, custom properties, NUMA
//! nodes, host and mediated devices, instance types and template versions. Bodies shaped like the engine's (fixtures
//! modelled on the API model's types and documentation examples) decode; requests serialise to the engine's element
//! names and pass the simulator's model check; the operations work against the simulator.

use capov_ovirt::model::*;
use capov_ovirt::xml::{from_xml, to_xml};
use capov_ovirt::{AddVmOptions, TemplateVersionSelector, host_device_id};
use capov_ovirt_sim::{
    EngineVersion, HostDeviceSeed, HostSeed, MdevTypeSeed, Simulator, TemplateDiskSeed, TemplateSeed, default_inventory,
};
use capov_testkit::fixture;

mod common;

#[test]
fn host_devices_decode_with_their_mdev_types_and_holder() {
    let devices: HostDevices = from_xml(&fixture("host_devices.xml")).unwrap();
    let gpu = &devices.items[0];
    assert_eq!(gpu.name.as_deref(), Some("pci_0000_3b_00_0"));
    assert_eq!(gpu.id.as_deref(), Some(host_device_id("pci_0000_3b_00_0").as_str()));
    assert_eq!(gpu.iommu_group, Some(30));
    assert_eq!(
        gpu.product.as_ref().unwrap().name.as_deref(),
        Some("TU104GL [Tesla T4]")
    );
    assert_eq!(gpu.vendor.as_ref().unwrap().id.as_deref(), Some("0x10de"));
    let types = gpu.mdev_types();
    assert_eq!(types.len(), 2);
    assert_eq!(
        (types[0].name.as_deref(), types[0].available_instances),
        (Some("nvidia-222"), Some(15))
    );
    assert_eq!(
        gpu.vm.as_ref().unwrap().id.as_deref(),
        Some("aa000000-0000-4000-8000-000000000001")
    );
    let usb = &devices.items[1];
    assert_eq!(usb.capability.as_deref(), Some("usb"));
    assert!(usb.mdev_types().is_empty() && usb.vm.is_none());
}

#[test]
fn mediated_devices_instance_types_and_template_versions_decode() {
    let mdevs: VmMediatedDevices = from_xml(&fixture("vm_mediated_devices.xml")).unwrap();
    assert_eq!(mdevs.items[0].mdev_type(), Some("nvidia-222"));
    let types: InstanceTypes = from_xml(&fixture("instance_types.xml")).unwrap();
    let large = &types.items[0];
    assert_eq!(large.name.as_deref(), Some("Large"));
    assert_eq!(large.memory, Some(8 << 30));
    assert_eq!(large.cpu.as_ref().unwrap().topology.as_ref().unwrap().sockets, Some(2));
    let templates: Templates = from_xml(&fixture("templates_versions.xml")).unwrap();
    let hardened = templates
        .items
        .iter()
        .find(|t| TemplateVersionSelector::Name("hardened".into()).matches_template(t))
        .unwrap();
    assert_eq!(hardened.version.as_ref().unwrap().version_number, Some(2));
    assert_eq!(
        hardened.version.as_ref().unwrap().base_template.as_ref().unwrap().id,
        templates.items[0].id
    );
}

#[test]
fn a_vm_with_every_workload_setting_decodes() {
    let vm: Vm = from_xml(&fixture("vm_workload.xml")).unwrap();
    assert_eq!(
        vm.high_availability,
        Some(HighAvailability {
            enabled: Some(true),
            priority: Some(50)
        })
    );
    assert_eq!(
        vm.lease.unwrap().storage_domain.unwrap().id.as_deref(),
        Some("5d000000-0000-4000-8000-000000000001")
    );
    let cpu = vm.cpu.unwrap();
    assert_eq!(CpuMode::parse(cpu.mode.as_deref().unwrap()), CpuMode::HostPassthrough);
    assert_eq!(cpu.cpu_tune.unwrap().to_pinning_string(), "0#2_1#3-4");
    assert_eq!(vm.custom_cpu_model.as_deref(), Some("Skylake-Server"));
    assert_eq!(vm.custom_properties.unwrap().get("hugepages"), Some("1048576"));
    assert_eq!(vm.memory_policy.unwrap().ballooning, Some(false));
    let placement = vm.placement_policy.unwrap();
    assert_eq!(placement.affinity.as_deref(), Some("pinned"));
    assert_eq!(placement.hosts.unwrap().items.len(), 1);
    assert_eq!(vm.auto_pinning_policy, Some(AutoPinningPolicy::Existing));
    assert_eq!(vm.numa_tune_mode, Some(NumaTuneMode::Strict));
    assert_eq!(
        vm.instance_type.unwrap().id.as_deref(),
        Some("00000009-0009-0009-0009-0000000000f1")
    );
}

#[test]
fn requests_use_the_engines_element_names() {
    let vm = Vm {
        name: Some("w".into()),
        high_availability: Some(HighAvailability {
            enabled: Some(true),
            priority: Some(50),
        }),
        lease: Some(StorageDomainLease {
            storage_domain: Some(Ref::id("sd")),
        }),
        custom_properties: Some(CustomProperties {
            items: vec![CustomProperty::new("hugepages", "2048")],
        }),
        cpu: Some(Cpu {
            mode: Some(CpuMode::HostPassthrough.to_string()),
            cpu_tune: Some(CpuTune {
                vcpu_pins: Some(VcpuPins {
                    items: vec![VcpuPin {
                        vcpu: Some(0),
                        cpu_set: Some("2".into()),
                    }],
                }),
            }),
            ..Cpu::default()
        }),
        placement_policy: Some(PlacementPolicy {
            affinity: Some("pinned".into()),
            hosts: Some(HostRefs {
                items: vec![Ref::id("h")],
            }),
        }),
        instance_type: Some(Ref::id("it")),
        ..Vm::default()
    };
    assert_eq!(
        to_xml(&vm).unwrap(),
        "<vm><name>w</name><cpu><mode>host_passthrough</mode><cpu_tune><vcpu_pins><vcpu_pin><vcpu>0</vcpu>\
         <cpu_set>2</cpu_set></vcpu_pin></vcpu_pins></cpu_tune></cpu><custom_properties><custom_property><name>\
         hugepages</name><value>2048</value></custom_property></custom_properties><high_availability><enabled>true\
         </enabled><priority>50</priority></high_availability><lease><storage_domain id=\"sd\"/></lease>\
         <placement_policy><affinity>pinned</affinity><hosts><host id=\"h\"/></hosts></placement_policy>\
         <instance_type id=\"it\"/></vm>"
    );
    assert_eq!(
        to_xml(&VmMediatedDevice::of_type("nvidia-222")).unwrap(),
        "<vm_mediated_device><spec_params><property><name>mdevType</name><value>nvidia-222</value></property>\
         </spec_params></vm_mediated_device>"
    );
    assert_eq!(
        to_xml(&VirtualNumaNode::new(0, 1024, [0, 1])).unwrap(),
        "<vm_numa_node><index>0</index><memory>1024</memory><cpu><cores><core><index>0</index></core><core><index>1\
         </index></core></cores></cpu></vm_numa_node>"
    );
}

/// Against the simulator (engine 4.5.4): a pinned VM with every workload setting is created, its GPU attached, a
/// vGPU and NUMA node added, instance types and template versions looked up; no body is refused by the model check.
#[tokio::test]
async fn every_workload_operation_works_against_the_simulator() {
    let mut inventory = default_inventory();
    inventory.hosts.push(HostSeed {
        name: "gpu-1".into(),
        devices: vec![
            HostDeviceSeed::gpu("3b", 30, vec![MdevTypeSeed::new("nvidia-222", "GRID T4-1B", 4)]),
            HostDeviceSeed::gpu("af", 40, vec![MdevTypeSeed::new("nvidia-222", "GRID T4-1B", 4)]),
        ],
        ..Default::default()
    });
    for (number, name) in [(1, "base"), (2, "hardened")] {
        inventory.templates.push(TemplateSeed {
            name: "gpu-os".into(),
            cluster: Some("Default".into()),
            version_number: number,
            version_name: Some(name.into()),
            disks: vec![TemplateDiskSeed {
                alias: "gpu-os_Disk1".into(),
                storage_domains: vec!["data1".into()],
                ..Default::default()
            }],
            ..Default::default()
        });
    }
    let sim = Simulator::builder()
        .user(common::USER, common::PASSWORD)
        .inventory(inventory)
        .engine_version(EngineVersion::new(4, 5, 4))
        .start()
        .await
        .unwrap();
    let client = capov_ovirt::Client::new(common::config(&sim)).unwrap();
    let control = sim.control();

    let hosts = client.hosts().await.unwrap();
    let gpu_host = hosts.iter().find(|h| h.name.as_deref() == Some("gpu-1")).unwrap();
    let gpu_host_id = gpu_host.id.clone().unwrap();
    let devices = client.host_devices(&gpu_host_id).await.unwrap();
    assert_eq!(devices.len(), 2);
    assert_eq!(devices[0].mdev_types()[0].available_instances, Some(4));

    let large = client.find_instance_type_by_name("Large").await.unwrap().unwrap();
    assert_eq!(client.instance_types().await.unwrap().len(), 5);
    let pinned_version = client
        .find_template_version("gpu-os", Some("Default"), &TemplateVersionSelector::Number(1))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        pinned_version.version.as_ref().unwrap().version_name.as_deref(),
        Some("base")
    );
    assert_eq!(client.template_versions("gpu-os", None).await.unwrap().len(), 2);
    let data1 = control.id_of("storagedomain", "data1").unwrap();
    let vm = Vm {
        name: Some("gpu-worker".into()),
        cluster: Some(Ref::name("Default")),
        template: Some(Ref::id(pinned_version.id.clone().unwrap())),
        instance_type: Some(Ref::id(large.id.clone().unwrap())),
        high_availability: Some(HighAvailability {
            enabled: Some(true),
            priority: Some(50),
        }),
        lease: Some(StorageDomainLease {
            storage_domain: Some(Ref::id(data1.clone())),
        }),
        cpu: Some(Cpu {
            mode: Some("host_passthrough".into()),
            ..Cpu::default()
        }),
        custom_properties: Some(CustomProperties {
            items: vec![CustomProperty::new("hugepages", "1048576")],
        }),
        memory_policy: Some(MemoryPolicy {
            ballooning: Some(false),
            ..MemoryPolicy::default()
        }),
        placement_policy: Some(PlacementPolicy {
            affinity: Some("pinned".into()),
            hosts: Some(HostRefs {
                items: vec![Ref::id(gpu_host_id.clone())],
            }),
        }),
        cpu_pinning_policy: Some(CpuPinningPolicy::Dedicated),
        ..Vm::default()
    };
    // The instance type's high availability (off) wins over the request's, and a lease needs it on.
    let refused = client.add_vm_with(&vm, &AddVmOptions::default()).await.unwrap_err();
    assert!(
        refused
            .to_string()
            .contains("A VM lease was defined but high availability option is set to false."),
        "{refused}"
    );
    let vm = Vm {
        instance_type: None,
        memory: Some(8 << 30),
        ..vm
    };
    let created = client
        .add_vm_with(
            &vm,
            &AddVmOptions {
                clone: false,
                auto_pinning_policy: None,
            },
        )
        .await
        .unwrap();
    let id = created.id.clone().unwrap();
    assert_eq!(created.memory, Some(8 << 30));
    assert_eq!(created.high_availability.as_ref().unwrap().enabled, Some(true));
    assert_eq!(
        created.lease.as_ref().unwrap().storage_domain.as_ref().unwrap().id,
        Some(data1)
    );
    assert_eq!(created.template.as_ref().unwrap().id, pinned_version.id);
    capov_testkit::eventually(std::time::Duration::from_secs(20), "the VM down", || async {
        control.vm(&id).filter(|vm| vm.status == "down")
    })
    .await;

    let attached = client.add_vm_host_device(&id, "pci_0000_3b_00_0").await.unwrap();
    assert_eq!(attached.name.as_deref(), Some("pci_0000_3b_00_0"));
    assert_eq!(client.vm_host_devices(&id).await.unwrap().len(), 1);
    let vgpu = client.add_vm_mediated_device(&id, "nvidia-222").await.unwrap();
    assert_eq!(vgpu.mdev_type(), Some("nvidia-222"));
    assert_eq!(client.vm_mediated_devices(&id).await.unwrap().len(), 1);
    let node = client
        .add_vm_numa_node(&id, &VirtualNumaNode::new(0, 4096, [0, 1]))
        .await
        .unwrap();
    assert_eq!(node.memory, Some(4096));
    assert_eq!(client.vm_numa_nodes(&id).await.unwrap().len(), 1);

    client.start_vm(&id, Default::default()).await.unwrap();
    capov_testkit::eventually(std::time::Duration::from_secs(20), "the VM up", || async {
        control.vm(&id).filter(|vm| vm.status == "up")
    })
    .await;
    let devices = client.host_devices(&gpu_host_id).await.unwrap();
    let held: Vec<_> = devices.iter().filter(|d| d.vm.is_some()).collect();
    // The passed-through GPU and the one that gives the vGPU instance are both held by the VM.
    assert_eq!(held.len(), 2, "{devices:?}");
    assert_eq!(devices[1].mdev_types()[0].available_instances, Some(3));

    client.stop_vm(&id, false).await.unwrap();
    let device_id = host_device_id("pci_0000_3b_00_0");
    client.remove_vm_host_device(&id, &device_id).await.unwrap();
    client
        .remove_vm_mediated_device(&id, vgpu.id.as_deref().unwrap())
        .await
        .unwrap();
    assert!(client.vm_host_devices(&id).await.unwrap().is_empty());
    assert!(client.vm_mediated_devices(&id).await.unwrap().is_empty());
    assert!(control.rejected_bodies().is_empty(), "{:?}", control.rejected_bodies());
}
