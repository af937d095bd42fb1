//! The VM's tags ([`capov_core::naming::vm_tags`]): assigned by name; a tag the engine does not have yet is created first, with
//! CAPOV's description. No tag is ever edited or removed.

use capov_ovirt::Client;

use crate::runtime::machine::outcome::Executed;
use capov_core::naming::vm_tags::TAG_DESCRIPTION;

/// Assigns each tag in order; the first failure stops the rest.
pub async fn tag_vm(client: &Client, vm_id: &str, names: &[String]) -> capov_ovirt::Result<Executed> {
    for name in names {
        match client.assign_vm_tag(vm_id, name).await {
            Ok(_) => continue,
            // The engine has no tag of this name: create it (another machine may just have), then assign.
            Err(err) if err.is_not_found() => {}
            Err(err) => return Err(err),
        }
        match client.add_tag(name, TAG_DESCRIPTION).await {
            Ok(_) => tracing::info!(tag = %name, "tag created"),
            Err(err) if err.is_tag_name_taken() => {}
            Err(err) => return Err(err),
        }
        client.assign_vm_tag(vm_id, name).await?;
    }
    Ok(Executed::Continue)
}
