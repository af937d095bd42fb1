//! Safe volume release (issue 27, gate `disk-detach-when-node-gone`) on the engine simulator with a real workload
//! apiserver: a machine being deleted whose VM carries a disk CAPOV did not create waits while its Node exists and
//! while a VolumeAttachment names the Node, then detaches the disk (it survives, attached to no VM), deletes the VM
//! with CAPOV's own disks and releases the machine. Without the gate the documents' rule holds
//! (`disks.rs::a_non_system_disk_blocks_deletion_until_it_is_detached`).

mod support;

use std::time::Duration;

use capov_core::policy::feature_gates::FeatureGates;
use capov_crds::labels::RECONCILE_REQUESTED_ANNOTATION;
use capov_crds::{ConditionStatus, OVirtMachine};
use capov_harness::objects;
use capov_testkit::eventually;
use k8s_openapi::api::core::v1::Node;
use k8s_openapi::api::events::v1::Event;
use k8s_openapi::api::storage::v1::{VolumeAttachment, VolumeAttachmentSource, VolumeAttachmentSpec};
use kube::api::{Api, DeleteParams, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use serde_json::json;
use support::{World, condition};

const MINUTE: Duration = Duration::from_secs(60);
const NODE: &str = "worker-node";

/// The MachineDeleted condition once its message holds `needle` (the machine is woken after each change in the
/// workload cluster: the retry of a waiting deletion comes every minute).
async fn deleted_once(world: &World, needle: &str) -> capov_crds::Condition {
    eventually(MINUTE, format!("MachineDeleted naming {needle:?}"), || async {
        let machine = world.machine("worker").await;
        match condition(&machine, "MachineDeleted") {
            Some(c) if c.message.contains(needle) => Ok(c.clone()),
            Some(c) => Err(format!("{:?} {}: {}", c.status, c.reason, c.message)),
            None => Err("no MachineDeleted".to_string()),
        }
    })
    .await
}

/// Wakes the machine: a change of the object starts a pass at once.
async fn touch(world: &World, round: u32) {
    let machines = Api::<OVirtMachine>::namespaced(world.client.clone(), &world.namespace);
    let touch = json!({"metadata": {"annotations": {RECONCILE_REQUESTED_ANNOTATION: round.to_string()}}});
    machines
        .patch("worker", &PatchParams::default(), &Patch::Merge(&touch))
        .await
        .expect("touch");
}

#[tokio::test]
async fn a_deleted_machine_detaches_foreign_disks_only_once_its_node_and_attachments_are_gone() {
    let started = std::time::Instant::now();
    let mut world = World::new("volumes").await;
    let gates = FeatureGates {
        disk_detach_when_node_gone: true,
        ..FeatureGates::default()
    };
    world.start_operator_with_gates(gates).await;
    let vm_id = world.bring_to_ready("worker").await;
    // CAPI links the Machine to its Node in status.nodeRef; no CAPI core runs here, so the test writes it. The Node is
    // named unlike the VM: CAPOV knows it by nodeRef and by the VM id as its systemUUID.
    let machines = Api::<DynamicObject>::namespaced_with(
        world.client.clone(),
        &world.namespace,
        &objects::capi("Machine", "machines"),
    );
    machines
        .patch_status(
            "worker",
            &PatchParams::default(),
            &Patch::Merge(&json!({"status": {"nodeRef": {"name": NODE}}})),
        )
        .await
        .expect("nodeRef");
    let control = world.sim.control().clone();
    let own_disks: Vec<String> = control
        .vm(&vm_id)
        .expect("vm")
        .disks
        .iter()
        .map(|d| d.id.clone())
        .collect();
    let csi = control
        .attach_disk(&vm_id, "pvc-0001", 1 << 30)
        .expect("attach a CSI disk");
    let csi_before = control
        .vm(&vm_id)
        .and_then(|vm| vm.disks.into_iter().find(|d| d.id == csi))
        .expect("attached");

    Api::<OVirtMachine>::namespaced(world.client.clone(), &world.namespace)
        .delete("worker", &DeleteParams::default())
        .await
        .expect("delete");
    let waiting = deleted_once(&world, &format!("while the Node \"{NODE}\" exists")).await;
    assert_eq!(
        (waiting.status, waiting.reason.as_ref()),
        (ConditionStatus::False, "VMHasNonSystemDisk")
    );
    assert!(waiting.message.contains(&csi), "{}", waiting.message);
    let vm = control.vm(&vm_id).expect("the VM stays while the Node exists");
    assert_eq!(vm.status, "up", "not even stopped");
    assert!(vm.disks.iter().any(|d| d.id == csi));

    // The Node goes, but the CSI driver has not released the volume: a VolumeAttachment still names the Node.
    let workload = world.workload.client().await.expect("workload client");
    let attachments = Api::<VolumeAttachment>::all(workload.clone());
    let attachment = VolumeAttachment {
        metadata: kube::api::ObjectMeta {
            name: Some("csi-va-0001".into()),
            ..Default::default()
        },
        spec: VolumeAttachmentSpec {
            attacher: "csi.ovirt.org".into(),
            node_name: NODE.into(),
            source: VolumeAttachmentSource {
                persistent_volume_name: Some("pvc-0001".into()),
                ..Default::default()
            },
        },
        status: None,
    };
    attachments
        .create(&PostParams::default(), &attachment)
        .await
        .expect("VolumeAttachment");
    Api::<Node>::all(workload.clone())
        .delete(NODE, &DeleteParams::default())
        .await
        .expect("delete the Node");
    touch(&world, 1).await;
    let waiting = deleted_once(&world, "the VolumeAttachment \"csi-va-0001\"").await;
    assert_eq!(waiting.reason, "VMHasNonSystemDisk");
    let vm = control
        .vm(&vm_id)
        .expect("the VM stays while a VolumeAttachment names the Node");
    assert!(vm.disks.iter().any(|d| d.id == csi) && vm.status == "up");

    // Released: the VM is powered off, the disk detached (not deleted), the VM deleted, the machine released.
    attachments
        .delete("csi-va-0001", &DeleteParams::default())
        .await
        .expect("delete the VolumeAttachment");
    touch(&world, 2).await;
    let ovirt_machines = Api::<OVirtMachine>::namespaced(world.client.clone(), &world.namespace);
    eventually(MINUTE, "the machine to be gone", || async {
        match ovirt_machines.get_opt("worker").await {
            Ok(None) => Ok(()),
            Ok(Some(machine)) => Err(format!("{:?}", condition(&machine, "MachineDeleted"))),
            Err(err) => Err(err.to_string()),
        }
    })
    .await;
    assert!(control.vm(&vm_id).is_none(), "the VM is deleted");
    let kept = control
        .floating_disk(&csi)
        .expect("the CSI disk survives, attached to no VM");
    assert_eq!(
        (&kept.storage_domain_ids, kept.provisioned_size, &kept.alias),
        (
            &csi_before.storage_domain_ids,
            csi_before.provisioned_size,
            &csi_before.alias
        ),
        "whole, on its storage domain"
    );
    for own in &own_disks {
        assert!(
            control.floating_disk(own).is_none(),
            "CAPOV's own disk {own} went with the VM"
        );
    }
    let writes: Vec<(String, String)> = control
        .writes()
        .into_iter()
        .filter(|w| w.path.contains(&vm_id))
        .map(|w| (w.method, w.path))
        .collect();
    let at = |method: &str, tail: &str| {
        writes
            .iter()
            .position(|(m, p)| m == method && p.ends_with(tail))
            .unwrap_or_else(|| panic!("no {method} …{tail} in {writes:?}"))
    };
    let (stop, detach, delete) = (
        at("POST", "/stop"),
        at("DELETE", &format!("/diskattachments/{csi}")),
        at("DELETE", &format!("/vms/{vm_id}")),
    );
    assert!(stop < detach && detach < delete, "stop, detach, delete: {writes:?}");

    let events = Api::<Event>::namespaced(world.client.clone(), &world.namespace);
    let detached = eventually(MINUTE, "the VolumeDetached Event", || async {
        let listed = events.list(&ListParams::default()).await.ok()?;
        let notes: Vec<String> = listed
            .items
            .into_iter()
            .filter(|e| e.reason.as_deref() == Some("VolumeDetached"))
            .filter_map(|e| e.note)
            .collect();
        (!notes.is_empty()).then_some(notes)
    })
    .await;
    assert_eq!(detached.len(), 1, "{detached:?}");
    let note = &detached[0];
    assert!(
        note.contains(&csi) && note.contains("not deleted") && note.contains(&kept.storage_domain_ids[0]),
        "{note}"
    );
    world.stop_operator().await;
    println!("volume release: {:.1} s", started.elapsed().as_secs_f64());
}

/// Issue 35: with spec.vmnametemplate the kubelet names its Node after the VM's name, not the OVirtMachine's. With
/// no status.nodeRef (CAPI had not linked the Node yet) and a Node whose systemUUID does not show the VM id, the
/// deletion used to look for a Node named like the OVirtMachine, find none, and detach the disks while CSI still
/// had them. The Node named by the template now holds them.
#[tokio::test]
async fn the_node_named_by_the_vm_name_template_holds_the_disks_without_a_node_ref() {
    let mut world = World::new("volumes-tmpl").await;
    let gates = FeatureGates {
        disk_detach_when_node_gone: true,
        ..FeatureGates::default()
    };
    world.start_operator_with_gates(gates).await;
    let name = "tmpl";
    world
        .create_machine(
            name,
            json!({"ovirtcluster": "Default", "template": "ubuntu-22.04", "vmnametemplate": "{namespace}-{name}"}),
        )
        .await;
    let vm_id = world.vm_id(name).await;
    let node = format!("{}-{name}", world.namespace);
    // The guest's SMBIOS reports another UUID than the VM id (as some guests do): only the name ties it to the VM.
    world.register_node(&node, "00000000-0000-4000-8000-00000000cafe").await;
    let control = world.sim.control().clone();
    eventually(MINUTE, "the VM up", || async {
        (control.vm(&vm_id)?.status == "up").then_some(())
    })
    .await;
    let csi = control
        .attach_disk(&vm_id, "pvc-0002", 1 << 30)
        .expect("attach a CSI disk");
    let machines = Api::<OVirtMachine>::namespaced(world.client.clone(), &world.namespace);
    machines.delete(name, &DeleteParams::default()).await.expect("delete");
    let needle = format!("while the Node \"{node}\" exists");
    eventually(MINUTE, format!("MachineDeleted naming {needle:?}"), || async {
        let machine = world.machine(name).await;
        match condition(&machine, "MachineDeleted") {
            Some(c) if c.message.contains(&needle) => Ok(()),
            Some(c) => Err(format!("{:?} {}: {}", c.status, c.reason, c.message)),
            None => Err("no MachineDeleted".to_string()),
        }
    })
    .await;
    let vm = control.vm(&vm_id).expect("the VM stays while its Node exists");
    assert!(vm.disks.iter().any(|d| d.id == csi) && vm.status == "up", "{vm:?}");

    let workload = world.workload.client().await.expect("workload client");
    Api::<Node>::all(workload)
        .delete(&node, &DeleteParams::default())
        .await
        .expect("delete the Node");
    let touch = json!({"metadata": {"annotations": {RECONCILE_REQUESTED_ANNOTATION: "1"}}});
    machines
        .patch(name, &PatchParams::default(), &Patch::Merge(&touch))
        .await
        .expect("touch");
    eventually(MINUTE, "the machine gone", || async {
        machines.get_opt(name).await.ok()?.is_none().then_some(())
    })
    .await;
    assert!(control.floating_disk(&csi).is_some(), "the CSI disk survives");
    world.stop_operator().await;
    println!("volume release by the templated Node name {node}: held while the Node existed, released after");
}
