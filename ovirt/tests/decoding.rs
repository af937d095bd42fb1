//! Decoding of engine bodies shaped like real engine responses (the project's own fixtures,
//! modelled on captured 4.4 answers), and a fuzz-style loop: no byte sequence may panic.

use capov_ovirt::model::*;
use capov_ovirt::xml::{Root, from_xml, root_element, to_xml};
use capov_testkit::{fixture, reference_sample};

#[test]
fn api_root() {
    let api: Api = from_xml(&fixture("api.xml")).unwrap();
    let version = api.product_info.as_ref().unwrap().version.as_ref().unwrap();
    assert_eq!(version.full_version.as_deref(), Some("4.5.4.1-1.el9"));
    assert_eq!(
        (version.major, version.minor, version.build),
        (Some(4), Some(5), Some(7))
    );
    assert_eq!(api.summary.as_ref().unwrap().vms.as_ref().unwrap().total, Some(40));
    assert_eq!(api.links.len(), 5);
    assert_eq!(api.engine_version().as_deref(), Some("4.5.4.1-1.el9"));
    assert_eq!(
        api.special_objects.unwrap().blank_template.unwrap().id.as_deref(),
        Some(BLANK_TEMPLATE_ID)
    );
}

#[test]
fn vm_with_inlined_collections_and_interleaved_links() {
    let vm: Vm = from_xml(&fixture("vm.xml")).unwrap();
    assert_eq!(vm.name.as_deref(), Some("prod-worker-7"));
    assert_eq!(vm.status, Some(VmStatus::Up));
    assert_eq!(vm.kind, Some(VmType::HighPerformance));
    assert_eq!(vm.memory, Some(17_179_869_184));
    assert_eq!(vm.memory_policy.as_ref().unwrap().guaranteed, Some(8_589_934_592));
    assert_eq!(vm.cpu.as_ref().unwrap().topology.as_ref().unwrap().sockets, Some(2));
    assert_eq!(vm.links.len(), 3);
    assert_eq!(vm.actions.as_ref().unwrap().links.len(), 3);
    assert_eq!(vm.template.as_ref().unwrap().id.as_deref(), Some(BLANK_TEMPLATE_ID));
    assert_eq!(vm.disk_attachments.as_ref().unwrap().items[0].bootable, Some(true));
    let nic = &vm.nics.as_ref().unwrap().items[0];
    assert_eq!(nic.mac.as_ref().unwrap().address.as_deref(), Some("56:6f:00:00:00:07"));
    let device = &vm.reported_devices.as_ref().unwrap().items[0];
    assert_eq!(device.mac, nic.mac);
    assert_eq!(
        device.ips.as_ref().unwrap().items[0].address.as_deref(),
        Some("192.0.2.17")
    );
    assert_eq!(vm.description.as_deref(), Some("capov:prod/prod-worker-7"));
    assert_eq!(vm.comment.as_deref(), Some(""));
}

#[test]
fn disk_attachments_ids_equal_disk_ids() {
    let list: DiskAttachments = from_xml(&fixture("vm_diskattachments.xml")).unwrap();
    assert_eq!(list.items.len(), 2);
    for attachment in &list.items {
        assert_eq!(attachment.id, attachment.disk.as_ref().unwrap().id);
    }
    assert_eq!(list.items[0].logical_name.as_deref(), Some("/dev/sda"));
    assert_eq!(list.items[1].bootable, Some(false));
}

#[test]
fn nics() {
    let list: Nics = from_xml(&fixture("vm_nics.xml")).unwrap();
    let nic = &list.items[0];
    assert_eq!(nic.synced, Some(false));
    assert_eq!(nic.links.len(), 2);
    assert_eq!(
        nic.vnic_profile.as_ref().unwrap().id.as_deref(),
        Some("ff000000-0000-4000-8000-000000000001")
    );
}

#[test]
fn disk() {
    let disk: Disk = from_xml(&fixture("disk.xml")).unwrap();
    assert_eq!(disk.status, Some(DiskStatus::Locked));
    assert_eq!(disk.provisioned_size, Some(128_849_018_880));
    assert_eq!(disk.storage_domains.unwrap().items.len(), 2);
    assert_eq!(disk.alias, disk.name);
}

#[test]
fn storage_domains_status_only_when_unattached() {
    let list: StorageDomains = from_xml(&fixture("storagedomains.xml")).unwrap();
    assert_eq!(list.items[0].status, Some(StorageDomainStatus::Unattached));
    assert_eq!(list.items[0].available, None);
    assert_eq!(list.items[1].status, None);
    assert_eq!(list.items[1].available, Some(2_199_023_255_552));
    assert_eq!(list.items[1].data_centers.as_ref().unwrap().items.len(), 1);
    assert_eq!(list.items[1].kind.as_deref(), Some("data"));
}

#[test]
fn vnic_profiles_share_names_across_networks() {
    let list: VnicProfiles = from_xml(&fixture("vnicprofiles.xml")).unwrap();
    assert_eq!(list.items.len(), 2);
    assert_eq!(list.items[0].name, list.items[1].name);
    assert_ne!(list.items[0].network, list.items[1].network);
}

#[test]
fn faults_and_failed_actions() {
    let fault: Fault = from_xml(&fixture("fault.xml")).unwrap();
    assert_eq!(fault.reason.as_deref(), Some("Operation Failed"));
    let action: Action = from_xml(&fixture("action_failed.xml")).unwrap();
    assert_eq!(action.status.as_deref(), Some("failed"));
    assert_eq!(
        action.fault.unwrap().detail.as_deref(),
        Some("[Cannot run VM. VM is running.]")
    );
}

#[test]
fn reported_devices_v4_element_form() {
    let list: ReportedDevices = from_xml(&fixture("reporteddevices.xml")).unwrap();
    let ips = &list.items[0].ips.as_ref().unwrap().items;
    assert_eq!(ips[0].address.as_deref(), Some("192.0.2.17"));
    assert_eq!(ips[1].version.as_deref(), Some("v6"));
}

#[test]
fn unknown_enum_values_survive() {
    let vm: Vm = from_xml(b"<vm><status>hibernating</status></vm>").unwrap();
    assert_eq!(vm.status, Some(VmStatus::Other("hibernating".into())));
}

#[test]
fn empty_collection() {
    let vms: Vms = from_xml(b"<vms/>").unwrap();
    assert!(vms.items.is_empty());
}

#[test]
fn requests_never_carry_empty_elements_for_unset_fields() {
    let body = to_xml(&Vm {
        name: Some("a".into()),
        cluster: Some(Ref::name("Default")),
        ..Vm::default()
    })
    .unwrap();
    assert_eq!(body, "<vm><name>a</name><cluster><name>Default</name></cluster></vm>");
    let action = to_xml(&Action {
        use_ignition: Some(true),
        ..Action::default()
    })
    .unwrap();
    assert_eq!(action, "<action><use_ignition>true</use_ignition></action>");
}

fn decode_all(bytes: &[u8]) {
    let _ = from_xml::<Api>(bytes);
    let _ = from_xml::<Vm>(bytes);
    let _ = from_xml::<Vms>(bytes);
    let _ = from_xml::<Disk>(bytes);
    let _ = from_xml::<DiskAttachments>(bytes);
    let _ = from_xml::<Nics>(bytes);
    let _ = from_xml::<StorageDomains>(bytes);
    let _ = from_xml::<VnicProfiles>(bytes);
    let _ = from_xml::<ReportedDevices>(bytes);
    let _ = from_xml::<Fault>(bytes);
    let _ = from_xml::<Action>(bytes);
    let _ = from_xml::<Templates>(bytes);
    let _ = from_xml::<Clusters>(bytes);
    let _ = from_xml::<HostDevices>(bytes);
    let _ = from_xml::<VmMediatedDevices>(bytes);
    let _ = from_xml::<InstanceTypes>(bytes);
    let _ = from_xml::<VirtualNumaNodes>(bytes);
}

/// Truncations, byte flips, splices and random bytes of every fixture: decoding returns
/// errors, never panics. (Bounded so it runs in well under a second.)
#[test]
fn fuzz_decoders_never_panic() {
    let names = [
        "api.xml",
        "vm.xml",
        "vm_diskattachments.xml",
        "vm_nics.xml",
        "disk.xml",
        "storagedomains.xml",
        "vnicprofiles.xml",
        "fault.xml",
        "action_failed.xml",
        "reporteddevices.xml",
        "host_devices.xml",
        "vm_mediated_devices.xml",
        "instance_types.xml",
        "vm_workload.xml",
        "templates_versions.xml",
    ];
    let mut rng = fastrand::Rng::with_seed(0x0f1c_a7e5);
    let corpus: Vec<Vec<u8>> = names.iter().map(|n| fixture(n)).collect();
    for input in &corpus {
        for cut in (0..input.len()).step_by(131) {
            decode_all(&input[..cut]);
        }
    }
    for _ in 0..600 {
        let mut bytes = corpus[rng.usize(..corpus.len())].clone();
        for _ in 0..rng.usize(1..8) {
            let at = rng.usize(..bytes.len());
            match rng.u8(..4) {
                0 => bytes[at] = rng.u8(..),
                1 => bytes.insert(at, b"<>/=\"&;"[rng.usize(..7)]),
                2 => {
                    bytes.remove(at);
                }
                _ => {
                    let other = &corpus[rng.usize(..corpus.len())];
                    let from = rng.usize(..other.len());
                    let len = rng.usize(..64).min(other.len() - from);
                    bytes.splice(at..at, other[from..from + len].iter().copied());
                }
            }
            if bytes.is_empty() {
                break;
            }
        }
        decode_all(&bytes);
    }
    for len in 0..300 {
        let random: Vec<u8> = (0..len).map(|_| rng.u8(..)).collect();
        decode_all(&random);
    }
    decode_all(&b"<vm>".repeat(5000));
}

/// The captured engine samples themselves (reference data, not part of the project): every one decodes into the
/// client's types and has the root element the client checks for. They live in `shared/reference/ovirt-samples`
/// beside the clone, on developer machines and in CI alike; without them this test fails instead of passing
/// unchecked.
#[test]
fn captured_engine_samples_decode() {
    fn rooted<T: Root>(body: &[u8], name: &str) {
        assert_eq!(root_element(body).as_deref(), Ok(T::ROOT), "{name}");
    }
    let api: Api = from_xml(&reference_sample("api.xml")).unwrap();
    rooted::<Api>(&reference_sample("api.xml"), "api.xml");
    assert!(api.product_info.unwrap().version.unwrap().full_version.is_some());
    let vm: Vm = from_xml(&reference_sample("vm.xml")).unwrap();
    rooted::<Vm>(&reference_sample("vm.xml"), "vm.xml");
    assert_eq!(vm.status, Some(VmStatus::Down));
    // The recorded engine's high availability and placement, as the workload settings read them.
    assert_eq!(
        vm.high_availability,
        Some(HighAvailability {
            enabled: Some(false),
            priority: Some(1)
        })
    );
    assert_eq!(
        vm.placement_policy.as_ref().and_then(|p| p.affinity.as_deref()),
        Some("migratable")
    );
    assert_eq!(vm.memory_policy.as_ref().and_then(|p| p.ballooning), Some(true));
    assert_eq!(vm.lease, None);
    assert!(!vm.disk_attachments.unwrap().items.is_empty());
    assert!(!vm.nics.unwrap().items.is_empty());
    let attachments: DiskAttachments = from_xml(&reference_sample("vm_diskattachments.xml")).unwrap();
    rooted::<DiskAttachments>(&reference_sample("vm_diskattachments.xml"), "vm_diskattachments.xml");
    assert_eq!(attachments.items[0].id, attachments.items[0].disk.as_ref().unwrap().id);
    let nics: Nics = from_xml(&reference_sample("vm_nics.xml")).unwrap();
    rooted::<Nics>(&reference_sample("vm_nics.xml"), "vm_nics.xml");
    assert!(nics.items[0].mac.as_ref().unwrap().address.is_some());
    let disk: Disk = from_xml(&reference_sample("disk.xml")).unwrap();
    rooted::<Disk>(&reference_sample("disk.xml"), "disk.xml");
    assert_eq!(disk.status, Some(DiskStatus::Ok));
    assert!(disk.provisioned_size.is_some());
    let domains: StorageDomains = from_xml(&reference_sample("storagedomains.xml")).unwrap();
    rooted::<StorageDomains>(&reference_sample("storagedomains.xml"), "storagedomains.xml");
    assert_eq!(domains.items.iter().filter(|d| d.status.is_some()).count(), 1);
    let profiles: VnicProfiles = from_xml(&reference_sample("vnicprofiles.xml")).unwrap();
    rooted::<VnicProfiles>(&reference_sample("vnicprofiles.xml"), "vnicprofiles.xml");
    assert!(profiles.items[0].network.is_some());
    let fault: Fault = from_xml(&reference_sample("fault.xml")).unwrap();
    rooted::<Fault>(&reference_sample("fault.xml"), "fault.xml");
    assert!(fault.reason.is_some() && fault.detail.is_some());
}

/// The project's fixtures, modelled on engine answers, carry the root elements the client expects of each call.
#[test]
fn fixtures_have_the_root_elements_the_client_checks() {
    assert_eq!(root_element(&fixture("api.xml")).as_deref(), Ok(Api::ROOT));
    assert_eq!(root_element(&fixture("vm.xml")).as_deref(), Ok(Vm::ROOT));
    assert_eq!(root_element(&fixture("vm_nics.xml")).as_deref(), Ok(Nics::ROOT));
    assert_eq!(
        root_element(&fixture("reporteddevices.xml")).as_deref(),
        Ok(ReportedDevices::ROOT)
    );
    assert_eq!(
        root_element(&fixture("vnicprofiles.xml")).as_deref(),
        Ok(VnicProfiles::ROOT)
    );
}
