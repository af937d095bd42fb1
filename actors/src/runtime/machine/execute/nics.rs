//! The VM's NICs: bringing them in line with spec.nics before the first start, one change at a time.

use capov_ovirt::Client;
use capov_ovirt::model::{Nic, Ref};

use crate::runtime::machine::outcome::Executed;
use capov_core::network::nics::NicChange;

/// Applies the changes in order; the first that fails stops the rest.
pub async fn sync(client: &Client, vm_id: &str, changes: Vec<NicChange>) -> capov_ovirt::Result<Executed> {
    for change in changes {
        match change {
            NicChange::Update {
                nic_id,
                vnic_profile_id,
            } => {
                let nic = Nic {
                    vnic_profile: Some(Ref::id(vnic_profile_id)),
                    ..Nic::default()
                };
                client.update_nic(vm_id, &nic_id, &nic).await?;
            }
            NicChange::Add { name, vnic_profile_id } => {
                let nic = Nic {
                    name: Some(name),
                    vnic_profile: Some(Ref::id(vnic_profile_id)),
                    ..Nic::default()
                };
                client.add_nic(vm_id, &nic).await?;
            }
            NicChange::Remove { nic_id } => client.remove_nic(vm_id, &nic_id).await?,
        }
    }
    Ok(Executed::Continue)
}
