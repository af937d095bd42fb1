//! Waiting on the engine through CAPOV's own client, as the client's and the simulator binary's tests do.

use std::time::Duration;

use capov_ovirt::Client;
use capov_ovirt::model::VmStatus;

use crate::eventually;

/// Waits until the engine reports VM `id` in `status`; the failure names the status seen last.
pub async fn wait_vm_status(client: &Client, id: &str, status: VmStatus, timeout: Duration) {
    eventually(timeout, format!("VM {id} {status}"), || async {
        let seen = client.vm(id).await.map_err(|err| err.to_string())?.status;
        if seen.as_ref() == Some(&status) {
            Ok(())
        } else {
            Err(format!("{seen:?}"))
        }
    })
    .await
}
