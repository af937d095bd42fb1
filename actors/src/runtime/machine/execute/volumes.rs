//! Deletion with the gate `disk-detach-when-node-gone`: detaching the disks CAPOV did not create from the VM, each
//! recorded in an Event and in the MachineDeleted conditions that follow. `detach_only=true` is the engine's detach:
//! the disk stays on its storage domain, attached to no VM; it is read back to say where.

use capov_ovirt::Client;
use kube::Resource;

use crate::runtime::machine::outcome::{Executed, Failure};
use crate::runtime::machine::state::MachineState;
use crate::runtime::mailbox;
use crate::runtime::status::events::NoteKind;
use crate::runtime::status::writer::StatusWriterMsg;
use capov_core::conditions::reasons;
use capov_core::machine_steps::VmDisk;
use capov_core::trust::bounded_text;

/// How much of a disk alias or an engine error an Event keeps.
const TEXT: usize = 300;

/// Detaches each disk from the VM in turn; the first refusal stops there (the disks detached before it are recorded)
/// and is reported on MachineDeleted.
pub async fn detach(
    state: &mut MachineState,
    client: &Client,
    vm_id: &str,
    vm_name: &str,
    disks: &[VmDisk],
) -> Result<Executed, Failure> {
    for disk in disks {
        client.detach_disk(vm_id, &disk.attachment_id).await?;
        state.detached_disks.push(disk.disk_id.clone());
        let kept = where_kept(client, &disk.disk_id).await;
        tracing::info!(
            object = %state.key, vm = %vm_id, disk = %disk.disk_id,
            "detached a disk CAPOV did not create from the VM being deleted; it is not deleted ({kept})"
        );
        let note = format!(
            "detached disk {} ({}) from VM {} ({vm_id}): CAPOV did not create it, so it is not deleted with the VM; \
             {kept}",
            disk.disk_id,
            bounded_text::cut(&disk.alias, TEXT),
            vm_name,
        );
        let event = StatusWriterMsg::Event {
            reference: state.object.object_ref(&()),
            kind: NoteKind::Record,
            reason: reasons::VOLUME_DETACHED.into(),
            note,
        };
        let _ = mailbox::cast(&state.shared.metrics, &state.shared.status_writer, event);
    }
    Ok(Executed::Continue)
}

/// Where the engine keeps the detached disk, read back.
async fn where_kept(client: &Client, disk_id: &str) -> String {
    match client.disk(disk_id).await {
        Ok(disk) => {
            let domains: Vec<&str> = disk
                .storage_domains
                .iter()
                .flat_map(|domains| domains.items.iter())
                .filter_map(|domain| domain.id.as_deref())
                .collect();
            let status = disk.status.as_ref().map(|s| s.as_str()).unwrap_or("not shown");
            format!(
                "it stays on storage domain {} (disk status {status})",
                bounded_text::cut(&domains.join(", "), TEXT)
            )
        }
        Err(err) => format!("reading it back failed: {}", bounded_text::cut(&err.to_string(), TEXT)),
    }
}
