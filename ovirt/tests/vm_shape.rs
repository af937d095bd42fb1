//! The client's requests for data disks, disk profiles and tags against the simulator, and the engine's answers:
//! a new disk attached locked then ok, a refused configuration, tags unique by name and assigned by name.

mod common;

use capov_ovirt::Client;
use capov_ovirt::model::*;
use capov_testkit::{eventually, wait_vm_status};
use common::{WAIT, setup};

async fn down_vm(client: &Client, name: &str) -> String {
    let cluster = client.find_cluster_by_name("Default").await.unwrap().expect("Default");
    let template = client
        .find_templates_by_name("rhcos-4.14", Some("Default"))
        .await
        .unwrap()
        .remove(0);
    let vm = Vm {
        name: Some(name.to_string()),
        cluster: Some(Ref::id(cluster.id.unwrap())),
        template: Some(Ref::id(template.id.unwrap())),
        ..Vm::default()
    };
    let id = client.add_vm(&vm, false).await.unwrap().id.unwrap();
    wait_vm_status(client, &id, VmStatus::Down, WAIT).await;
    id
}

fn new_disk(domain_id: &str, format: &str, sparse: bool, profile: Option<String>) -> DiskAttachment {
    DiskAttachment {
        bootable: Some(false),
        active: Some(true),
        interface: Some("virtio_scsi".into()),
        disk: Some(Disk {
            alias: Some("vm_data".into()),
            provisioned_size: Some(1 << 30),
            format: Some(format.into()),
            sparse: Some(sparse),
            storage_domains: Some(StorageDomainRefs {
                items: vec![Ref::id(domain_id)],
            }),
            disk_profile: profile.map(Ref::id),
            ..Disk::default()
        }),
        ..DiskAttachment::default()
    }
}

#[tokio::test]
async fn a_data_disk_is_created_on_the_vm_with_its_profile_and_bad_configurations_are_refused() {
    let (sim, client) = setup().await;
    let vm = down_vm(&client, "shape-1").await;
    let data1 = client
        .find_storage_domains_by_name("data1")
        .await
        .unwrap()
        .remove(0)
        .id
        .unwrap();
    let profiles = client.storage_domain_disk_profiles(&data1).await.unwrap();
    assert_eq!(
        profiles.iter().map(|p| p.name.as_deref()).collect::<Vec<_>>(),
        [Some("data1")],
        "every data domain has a profile of its name"
    );
    let profile = profiles[0].id.clone();

    let created = client
        .add_vm_disk(&vm, &new_disk(&data1, "cow", true, profile.clone()))
        .await
        .expect("a thin cow disk");
    let disk_id = created.disk.and_then(|d| d.id).expect("the new disk's id");
    eventually(WAIT, "the new disk to be ok", || async {
        let attachments = client.disk_attachments_with_disks(&vm).await.ok()?;
        attachments
            .into_iter()
            .find(|a| a.disk.as_ref().and_then(|d| d.id.as_deref()) == Some(disk_id.as_str()))
            .and_then(|a| a.disk)
            .filter(|d| d.status == Some(DiskStatus::Ok))
            .map(|_| ())
    })
    .await;
    let snapshot = sim.control().vm(&vm).expect("vm");
    let disk = snapshot.disks.iter().find(|d| d.id == disk_id).expect("attached");
    assert_eq!(
        (disk.alias.as_str(), disk.interface.as_str()),
        ("vm_data", "virtio_scsi")
    );
    assert_eq!(disk.disk_profile_id, profile);

    let err = client
        .add_vm_disk(&vm, &new_disk(&data1, "cow", false, None))
        .await
        .expect_err("preallocated cow");
    assert_eq!(
        err.detail(),
        Some(
            "Cannot add Virtual Disk. Disk configuration (COW Preallocated backup-None) is incompatible with the \
             storage domain type."
        )
    );
    assert_eq!(sim.control().rejected_bodies(), Default::default());
}

#[tokio::test]
async fn tags_are_created_once_and_assigned_by_name() {
    let (sim, client) = setup().await;
    let vm = down_vm(&client, "shape-2").await;
    let err = client.assign_vm_tag(&vm, "capov-test").await.expect_err("no such tag");
    assert!(err.is_not_found(), "{err:?}");
    client.add_tag("capov-test", "made by a test").await.expect("add");
    let taken = client.add_tag("capov-test", "again").await.expect_err("taken");
    assert!(taken.is_tag_name_taken(), "{taken:?}");
    client.assign_vm_tag(&vm, "capov-test").await.expect("assign");
    client
        .assign_vm_tag(&vm, "capov-test")
        .await
        .expect("assigning twice changes nothing");
    let names: Vec<_> = client
        .vm_tags(&vm)
        .await
        .unwrap()
        .into_iter()
        .filter_map(|t| t.name)
        .collect();
    assert_eq!(names, ["capov-test"]);
    assert!(
        sim.control()
            .tags()
            .contains(&("capov-test".into(), "made by a test".into()))
    );
    assert_eq!(sim.control().rejected_bodies(), Default::default());
}
