//! VM operations of the client against the simulator: add (clone and thin), disks, NICs, power
//! actions, reported devices, delete, and the engine's error answers for each.

mod common;

use capov_ovirt::model::*;
use capov_ovirt::{Client, DiskPlacement, Error, StartOptions};
use capov_testkit::{eventually, wait_vm_status};
use common::{WAIT, setup, setup_observable};

const GIB: u64 = 1 << 30;

struct Inventory {
    cluster_id: String,
    template_id: String,
    template_disk_id: String,
    data1: String,
    data2: String,
    profile_id: String,
}

async fn inventory(client: &Client) -> Inventory {
    let cluster = client
        .find_cluster_by_name("Default")
        .await
        .unwrap()
        .expect("cluster Default");
    let template = client
        .find_templates_by_name("rhcos-4.14", Some("Default"))
        .await
        .unwrap()
        .remove(0);
    let attachments = client
        .template_disk_attachments(template.id.as_deref().unwrap())
        .await
        .unwrap();
    let sd = |name: &'static str| async move {
        client
            .find_storage_domains_by_name(name)
            .await
            .unwrap()
            .remove(0)
            .id
            .unwrap()
    };
    Inventory {
        cluster_id: cluster.id.unwrap(),
        template_id: template.id.unwrap(),
        template_disk_id: attachments[0].id.clone().unwrap(),
        data1: sd("data1").await,
        data2: sd("data2").await,
        profile_id: client.vnic_profiles().await.unwrap()[0].id.clone().unwrap(),
    }
}

fn new_vm(name: &str, inv: &Inventory, target_sd: Option<&str>, clone: bool) -> Vm {
    let placement = target_sd.map(|sd| DiskPlacement {
        template_disk_id: inv.template_disk_id.clone(),
        storage_domain_id: Some(sd.to_string()),
        format: (!clone).then(|| "cow".to_string()),
        ..DiskPlacement::default()
    });
    Vm {
        name: Some(name.to_string()),
        description: Some("capov:default/machine".into()),
        cluster: Some(Ref::id(&inv.cluster_id)),
        template: Some(Ref::id(&inv.template_id)),
        kind: Some(VmType::Server),
        memory: Some(4 * GIB),
        memory_policy: Some(MemoryPolicy {
            guaranteed: Some(2 * GIB),
            ..MemoryPolicy::default()
        }),
        cpu: Some(Cpu {
            topology: Some(CpuTopology {
                sockets: Some(1),
                cores: Some(2),
                threads: Some(1),
            }),
            ..Cpu::default()
        }),
        initialization: Some(Initialization {
            custom_script: Some("#cloud-config\n".into()),
            host_name: Some(name.to_string()),
        }),
        disk_attachments: placement.map(|p| DiskAttachments {
            items: vec![p.to_attachment()],
        }),
        ..Vm::default()
    }
}

async fn created_down(client: &Client, inv: &Inventory, name: &str) -> String {
    let vm = client
        .add_vm(&new_vm(name, inv, Some(&inv.data1), false), false)
        .await
        .unwrap();
    let id = vm.id.unwrap();
    wait_vm_status(client, &id, VmStatus::Down, WAIT).await;
    id
}

#[tokio::test]
async fn thin_vm_on_template_domain_is_image_locked_then_down_and_inherits_alias() {
    let (_sim, client) = setup().await;
    let inv = inventory(&client).await;
    let vm = client
        .add_vm(&new_vm("worker-0", &inv, Some(&inv.data1), false), false)
        .await
        .unwrap();
    assert_eq!(vm.status, Some(VmStatus::ImageLocked));
    assert_eq!(
        vm.template.as_ref().and_then(|t| t.id.as_deref()),
        Some(inv.template_id.as_str())
    );
    assert_eq!(vm.description.as_deref(), Some("capov:default/machine"));
    let id = vm.id.unwrap();
    wait_vm_status(&client, &id, VmStatus::Down, WAIT).await;

    let attachments = client.disk_attachments(&id).await.unwrap();
    assert_eq!(attachments.len(), 1);
    assert_eq!(attachments[0].bootable, Some(true));
    let disk = client.disk(attachments[0].id.as_deref().unwrap()).await.unwrap();
    assert_eq!(disk.alias.as_deref(), Some("rhcos-4.14_Disk1"));
    assert_eq!(disk.format.as_deref(), Some("cow"));
    assert_eq!(disk.status, Some(DiskStatus::Ok));
    assert_eq!(
        disk.storage_domains.unwrap().items[0].id.as_deref(),
        Some(inv.data1.as_str())
    );
}

#[tokio::test]
async fn thin_vm_on_domain_without_template_disk_is_rejected_with_engine_text() {
    let (sim, client) = setup().await;
    let inv = inventory(&client).await;
    let err = client
        .add_vm(&new_vm("worker-0", &inv, Some(&inv.data2), false), false)
        .await
        .unwrap_err();
    match &err {
        Error::BadRequest { reason, detail } => {
            assert_eq!(reason, "Operation Failed");
            assert_eq!(
                detail,
                "Cannot add VM. The selected Storage Domain does not contain the VM Template."
            );
        }
        other => panic!("expected BadRequest, got {other:?}"),
    }
    assert_eq!(sim.control().vm_count(), 0);
}

#[tokio::test]
async fn cloned_vm_goes_anywhere_and_its_template_is_blank() {
    let (_sim, client) = setup().await;
    let inv = inventory(&client).await;
    let vm = client
        .add_vm(&new_vm("worker-c", &inv, Some(&inv.data2), true), true)
        .await
        .unwrap();
    assert_eq!(
        vm.template.as_ref().and_then(|t| t.id.as_deref()),
        Some(BLANK_TEMPLATE_ID)
    );
    assert_eq!(
        vm.original_template.as_ref().and_then(|t| t.id.as_deref()),
        Some(inv.template_id.as_str())
    );
    let id = vm.id.unwrap();
    wait_vm_status(&client, &id, VmStatus::Down, WAIT).await;
    let attachments = client.disk_attachments_with_disks(&id).await.unwrap();
    let disk = attachments[0].disk.clone().unwrap();
    assert_eq!(disk.alias.as_deref(), Some("rhcos-4.14_Disk1"));
    // `follow=disk_attachments.disk` inlines the same attachments, whole disks included.
    let followed = client.vm_with_devices(&id, true).await.unwrap();
    assert_eq!(followed.disk_attachments.map(|a| a.items), Some(attachments));
    assert_eq!(
        disk.storage_domains.unwrap().items[0].id.as_deref(),
        Some(inv.data2.as_str())
    );
}

#[tokio::test]
async fn add_errors_name_in_use_missing_name_unknown_template_disk() {
    let (_sim, client) = setup().await;
    let inv = inventory(&client).await;
    created_down(&client, &inv, "dup").await;
    let err = client
        .add_vm(&new_vm("dup", &inv, None, false), false)
        .await
        .unwrap_err();
    assert!(err.is_name_in_use(), "{err:?}");
    assert_eq!(err.reason(), "Conflict");

    let mut nameless = new_vm("x", &inv, None, false);
    nameless.name = None;
    let err = client.add_vm(&nameless, false).await.unwrap_err();
    assert!(
        matches!(&err, Error::BadRequest { reason, detail } if reason == "Incomplete parameters" && detail.contains("[name]")),
        "{err:?}"
    );

    let mut bad_disk = new_vm("y", &inv, Some(&inv.data1), false);
    bad_disk.disk_attachments.as_mut().unwrap().items[0]
        .disk
        .as_mut()
        .unwrap()
        .id = Some("no-such-disk".into());
    assert!(client.add_vm(&bad_disk, false).await.unwrap_err().is_not_found());

    let mut greedy = new_vm("z", &inv, None, false);
    greedy.memory_policy = Some(MemoryPolicy {
        guaranteed: Some(8 * GIB),
        ..MemoryPolicy::default()
    });
    let err = client.add_vm(&greedy, false).await.unwrap_err();
    assert_eq!(
        err.detail(),
        Some("Cannot add VM. Physical Memory Guaranteed cannot exceed Memory Size.")
    );
}

#[tokio::test]
async fn disk_resize_locks_then_grows_and_shrinking_is_refused() {
    let (_sim, client) = setup_observable().await;
    let inv = inventory(&client).await;
    let id = created_down(&client, &inv, "resize").await;
    let disk_id = client.disk_attachments(&id).await.unwrap()[0].id.clone().unwrap();

    client.resize_disk_attachment(&id, &disk_id, 40 * GIB).await.unwrap();
    assert_eq!(client.disk(&disk_id).await.unwrap().status, Some(DiskStatus::Locked));
    let err = client
        .resize_disk_attachment(&id, &disk_id, 50 * GIB)
        .await
        .unwrap_err();
    assert!(err.is_locked(), "second resize while locked: {err:?}");
    let disk = eventually(WAIT, "disk ok", || async {
        let disk = client.disk(&disk_id).await.ok()?;
        (disk.status == Some(DiskStatus::Ok)).then_some(disk)
    })
    .await;
    assert_eq!(disk.provisioned_size, Some(40 * GIB));

    let err = client
        .resize_disk_attachment(&id, &disk_id, 10 * GIB)
        .await
        .unwrap_err();
    assert_eq!(
        err.detail(),
        Some("Cannot edit Virtual Disk. New disk size must be larger than the current disk size.")
    );
    assert_eq!(err.reason(), "BadRequest");

    // Resize through /disks too (engines ≥ 4.4).
    client.resize_disk(&disk_id, 41 * GIB).await.unwrap();
    eventually(WAIT, "second resize", || async {
        (client.disk(&disk_id).await.ok()?.provisioned_size == Some(41 * GIB)).then_some(())
    })
    .await;
}

#[tokio::test]
async fn disk_alias_update() {
    let (_sim, client) = setup().await;
    let inv = inventory(&client).await;
    let id = created_down(&client, &inv, "alias").await;
    let disk_id = client.disk_attachments(&id).await.unwrap()[0].id.clone().unwrap();
    let disk = client
        .update_disk_alias(&disk_id, "rhcos-4.14_alias_Disk1")
        .await
        .unwrap();
    assert_eq!(disk.alias.as_deref(), Some("rhcos-4.14_alias_Disk1"));
    assert_eq!(
        client.disk(&disk_id).await.unwrap().alias.as_deref(),
        Some("rhcos-4.14_alias_Disk1")
    );
    assert!(
        client
            .disk("00000000-1111-2222-3333-444444444444")
            .await
            .unwrap_err()
            .is_not_found()
    );
}

#[tokio::test]
async fn nics_list_add_update_remove() {
    let (_sim, client) = setup().await;
    let inv = inventory(&client).await;
    let id = created_down(&client, &inv, "nics").await;
    let nics = client.nics(&id).await.unwrap();
    assert_eq!(nics.len(), 1, "template NIC copied");
    let nic1 = nics[0].id.clone().unwrap();
    assert!(
        nics[0]
            .mac
            .as_ref()
            .and_then(|m| m.address.as_deref())
            .is_some_and(|m| m.starts_with("56:6f:"))
    );

    let added = client
        .add_nic(
            &id,
            &Nic {
                name: Some("nic2".into()),
                vnic_profile: Some(Ref::id(&inv.profile_id)),
                ..Nic::default()
            },
        )
        .await
        .unwrap();
    assert_eq!(added.interface.as_deref(), Some("virtio"));
    let err = client
        .add_nic(
            &id,
            &Nic {
                name: Some("nic2".into()),
                ..Nic::default()
            },
        )
        .await
        .unwrap_err();
    assert_eq!(err.reason(), "Conflict");
    let err = client.add_nic(&id, &Nic::default()).await.unwrap_err();
    assert_eq!(err.reason(), "BadRequest");

    let updated = client
        .update_nic(
            &id,
            &nic1,
            &Nic {
                name: Some("eth-main".into()),
                interface: Some("e1000".into()),
                ..Nic::default()
            },
        )
        .await
        .unwrap();
    assert_eq!(updated.name.as_deref(), Some("eth-main"));
    assert_eq!(updated.interface.as_deref(), Some("e1000"));

    client.remove_nic(&id, &nic1).await.unwrap();
    let names: Vec<_> = client
        .nics(&id)
        .await
        .unwrap()
        .into_iter()
        .filter_map(|n| n.name)
        .collect();
    assert_eq!(names, vec!["nic2".to_string()]);
    assert!(client.remove_nic(&id, &nic1).await.unwrap_err().is_not_found());
}

#[tokio::test]
async fn power_actions_follow_engine_status_rules() {
    let (sim, client) = setup_observable().await;
    let inv = inventory(&client).await;
    let vm = client
        .add_vm(&new_vm("power", &inv, Some(&inv.data1), false), false)
        .await
        .unwrap();
    let id = vm.id.unwrap();

    let err = client.start_vm(&id, StartOptions::default()).await.unwrap_err();
    assert!(err.is_locked(), "start while image_locked: {err:?}");
    wait_vm_status(&client, &id, VmStatus::Down, WAIT).await;

    let err = client.stop_vm(&id, true).await.unwrap_err();
    assert!(err.is_vm_not_running(), "{err:?}");
    assert_eq!(err.detail(), Some("Cannot stop VM. VM is not running."));
    assert!(client.shutdown_vm(&id, false).await.unwrap_err().is_vm_not_running());

    client
        .start_vm(
            &id,
            StartOptions {
                use_ignition: true,
                ..StartOptions::default()
            },
        )
        .await
        .unwrap();
    assert_eq!(
        sim.control().vm(&id).unwrap().last_start_init.as_deref(),
        Some("ignition")
    );
    let early = client.vm(&id).await.unwrap().status.unwrap();
    assert!(
        matches!(early, VmStatus::WaitForLaunch | VmStatus::PoweringUp),
        "{early}"
    );
    let err = client.start_vm(&id, StartOptions::default()).await.unwrap_err();
    assert!(err.is_vm_running(), "{err:?}");
    assert_eq!(err.detail(), Some("Cannot run VM. VM is running."));
    let err = client.remove_vm(&id).await.unwrap_err();
    assert_eq!(err.detail(), Some("Cannot remove VM. VM is running."));

    wait_vm_status(&client, &id, VmStatus::Up, WAIT).await;
    let devices = eventually(WAIT, "reported IPs", || async {
        let devices = client.reported_devices(&id).await.ok()?;
        (!devices.is_empty()).then_some(devices)
    })
    .await;
    let ips = devices[0].ips.clone().unwrap().items;
    assert!(ips.iter().any(|ip| ip.version.as_deref() == Some("v4")));
    assert!(
        ips.iter()
            .any(|ip| { ip.address.as_deref().is_some_and(|a| a.starts_with("fe80:")) })
    );
    let nic_mac = client.nics(&id).await.unwrap()[0].mac.clone();
    assert_eq!(devices[0].mac, nic_mac);
    // One request with both inlined carries what the two separate reads return.
    let inlined = client.vm_with_devices(&id, false).await.unwrap();
    assert_eq!(inlined.disk_attachments, None);
    assert_eq!(inlined.status, Some(VmStatus::Up));
    assert_eq!(inlined.reported_devices.unwrap().items, devices);
    assert_eq!(inlined.nics.unwrap().items, client.nics(&id).await.unwrap());

    client.shutdown_vm(&id, false).await.unwrap();
    assert_eq!(client.vm(&id).await.unwrap().status, Some(VmStatus::PoweringDown));
    wait_vm_status(&client, &id, VmStatus::Down, WAIT).await;
    assert!(client.reported_devices(&id).await.unwrap().is_empty());

    client
        .start_vm(
            &id,
            StartOptions {
                use_cloud_init: true,
                ..StartOptions::default()
            },
        )
        .await
        .unwrap();
    client.stop_vm(&id, true).await.unwrap();
    assert_eq!(client.vm(&id).await.unwrap().status, Some(VmStatus::Down));

    client.remove_vm(&id).await.unwrap();
    eventually(WAIT, "VM gone", || async {
        client.vm(&id).await.err().filter(Error::is_not_found)
    })
    .await;
    assert!(
        client
            .start_vm(&id, StartOptions::default())
            .await
            .unwrap_err()
            .is_not_found()
    );
}

#[tokio::test]
async fn non_system_disk_shows_as_extra_attachment() {
    let (sim, client) = setup().await;
    let inv = inventory(&client).await;
    let id = created_down(&client, &inv, "data-disk").await;
    let disk_id = sim.control().attach_disk(&id, "data", 5 * GIB).unwrap();
    let attachments = client.disk_attachments(&id).await.unwrap();
    assert_eq!(attachments.len(), 2);
    let extra = attachments
        .iter()
        .find(|a| a.id.as_deref() == Some(disk_id.as_str()))
        .unwrap();
    assert_eq!(extra.bootable, Some(false));

    client.detach_disk(&id, &disk_id).await.unwrap();
    assert_eq!(client.disk_attachments(&id).await.unwrap().len(), 1);
    assert_eq!(
        client.disk(&disk_id).await.unwrap().alias.as_deref(),
        Some("data"),
        "detached, not deleted"
    );
    // The engine's `DetachDiskFromVmCommand`: a disk no longer attached is a bad request that names the VM.
    let again = client.detach_disk(&id, &disk_id).await.unwrap_err();
    assert_eq!(
        again.detail(),
        Some("Cannot detach Virtual Disk. The specified disk is not attached to the VM data-disk."),
        "{again:?}"
    );
}

#[tokio::test]
async fn exact_name_lookup_never_matches_a_prefix() {
    let (sim, client) = setup().await;
    sim.control().seed_vms("worker-", 3, Some("rhcos-4.14")).unwrap();
    assert!(client.find_vm_by_name("worker").await.unwrap().is_none());
    let found = client.find_vm_by_name("worker-1").await.unwrap().unwrap();
    assert_eq!(found.name.as_deref(), Some("worker-1"));
    // The engine matches case-insensitively; the client insists on the exact name.
    assert!(client.find_vm_by_name("WORKER-1").await.unwrap().is_none());
    // Search-language characters inside a name stay literal.
    assert!(
        client
            .find_vm_by_name("worker-1 or name=worker-2")
            .await
            .unwrap()
            .is_none()
    );
    assert_eq!(client.search_vms("name=worker-*").await.unwrap().len(), 3);
    assert_eq!(client.vms().await.unwrap().len(), 3);
}

/// Lists carry each VM's bootstrap data (the engine cannot leave it out): a batch whose answer exceeds the
/// client's body limit is read again in halves instead of failing, and only ids and statuses are decoded.
#[tokio::test]
async fn a_status_batch_too_large_for_one_answer_is_read_in_halves() {
    let (sim, client) = setup().await;
    let script = format!("#cloud-config\n# {}\n", "x".repeat(6 << 20));
    let mut ids = Vec::new();
    for n in 0..3 {
        let vm = Vm {
            name: Some(format!("large-{n}")),
            cluster: Some(Ref::name("Default")),
            template: Some(Ref::name("rhcos-4.14")),
            initialization: Some(Initialization {
                custom_script: Some(script.clone()),
                host_name: None,
            }),
            ..Vm::default()
        };
        ids.push(client.add_vm(&vm, false).await.unwrap().id.unwrap());
    }
    sim.control().reset_counters();
    let id_refs: Vec<&str> = ids.iter().map(String::as_str).collect();
    let statuses = client.vm_statuses(&id_refs).await.unwrap();
    assert_eq!(statuses.len(), 3, "{statuses:?}");
    // 3 × 6 MiB exceeds the 16 MiB limit; then one VM, then the other two.
    assert_eq!(sim.control().counter("GET /vms"), 3);
}

#[tokio::test]
async fn batched_status_read_uses_one_request_per_fifty_vms() {
    let (sim, client) = setup().await;
    sim.control().seed_vms("batch-", 120, None).unwrap();
    let all = sim.control().vms();
    let ids: Vec<&str> = all.iter().map(|vm| vm.id.as_str()).collect();
    sim.control().set_vm_status(ids[7], "up").unwrap();
    sim.control().reset_counters();

    let statuses = client.vm_statuses(&ids).await.unwrap();
    assert_eq!(statuses.len(), 120);
    assert_eq!(statuses[ids[7]], VmStatus::Up);
    assert_eq!(statuses[ids[8]], VmStatus::Down);
    assert_eq!(sim.control().counter("GET /vms"), 3);

    let names: Vec<String> = (0..60).map(|n| format!("batch-{n}")).collect();
    let name_refs: Vec<&str> = names.iter().map(String::as_str).collect();
    let by_name = client.vms_by_names(&name_refs).await.unwrap();
    assert_eq!(by_name.len(), 60);
    let unknown = client
        .vm_statuses(&["00000000-0000-4000-8000-000000000000"])
        .await
        .unwrap();
    assert!(unknown.is_empty());
}

#[tokio::test]
async fn unknown_vm_is_not_found() {
    let (_sim, client) = setup().await;
    let err = client.vm("6b0c6c1e-0000-4000-8000-000000000000").await.unwrap_err();
    assert!(err.is_not_found());
    assert_eq!(err.reason(), "NotFound");
    assert!(
        client
            .remove_vm("6b0c6c1e-0000-4000-8000-000000000000")
            .await
            .unwrap_err()
            .is_not_found()
    );
}

#[tokio::test]
async fn injected_conflicts_are_classified_and_then_clear() {
    let (sim, client) = setup().await;
    let inv = inventory(&client).await;
    let id = created_down(&client, &inv, "flaky").await;
    sim.control().fail_next(
        2,
        409,
        Some("Cannot run VM. Related operation is currently in progress. Please try again later."),
        Some("POST"),
        Some("/start"),
    );
    // Other requests are not affected.
    client.vm(&id).await.unwrap();
    for _ in 0..2 {
        let err = client.start_vm(&id, StartOptions::default()).await.unwrap_err();
        assert!(err.is_locked(), "{err:?}");
        assert!(err.is_transient());
    }
    client.start_vm(&id, StartOptions::default()).await.unwrap();
}

/// A gate that is open until the test closes it.
struct Switch(std::sync::atomic::AtomicBool);

impl capov_ovirt::WriteGate for Switch {
    fn check(&self) -> Result<(), String> {
        if self.0.load(std::sync::atomic::Ordering::SeqCst) {
            Ok(())
        } else {
            Err("the leader-election Lease was not renewed in time".into())
        }
    }
}

#[tokio::test]
async fn a_closed_write_gate_stops_writes_before_they_are_sent_and_reads_go_on() {
    let sim = common::simulator().await;
    let gate = std::sync::Arc::new(Switch(true.into()));
    let client = Client::new(
        common::config(&sim)
            .with_write_gate(gate.clone())
            .with_instance("replica-a"),
    )
    .expect("client builds");
    let inv = inventory(&client).await;
    let id = created_down(&client, &inv, "gated").await;
    let before = sim.control().writes();
    let added = before.iter().find(|w| w.method == "POST" && w.path.ends_with("/vms"));
    let added = added.expect("the add reached the engine");
    assert!(added.user_agent.ends_with("(replica-a)"), "{added:?}");

    gate.0.store(false, std::sync::atomic::Ordering::SeqCst);
    let refused = client.remove_vm(&id).await.expect_err("a write through a closed gate");
    assert!(
        matches!(&refused, capov_ovirt::Error::WritesStopped(why) if why.contains("Lease")),
        "{refused:?}"
    );
    assert_eq!(refused.reason(), "EngineWritesStopped");
    // Reads still pass, nothing more reached the engine, and the VM is still there.
    assert_eq!(client.vm(&id).await.expect("read").id.as_deref(), Some(id.as_str()));
    assert_eq!(sim.control().writes(), before);
}
