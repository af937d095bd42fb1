//! Deletion with the gate `disk-detach-when-node-gone` (issue 27): does the workload cluster still have the machine's
//! Node, or VolumeAttachments naming it? The answer decides whether the disks CAPOV did not create may be detached,
//! so anything short of a clear answer counts as not released. The workload apiserver is the tenant's: the client is
//! `workload`'s (kubeconfig checked, every answer capped at 1 MiB and decoded slim, requests taking turns), listings
//! go by bounded pages (`slim_requests::list`), and the whole read has one deadline.

use std::time::Duration;

use super::observe::owner_machine;
use super::state::MachineState;
use super::workload::{self, NODES, NoClient, find_by_system_uuid};
use crate::runtime::capi;
use crate::runtime::kube::slim_requests::{self, Listing, failed};
use crate::runtime::workload::clients::Wanted;
use capov_core::machine_steps::NodeRelease;
use capov_core::trust::bounded_text;
use capov_core::trust::workload_answers::{SlimNode, SlimVolumeAttachment};

/// The whole read (the Node by name, the Node list by systemUUID, the VolumeAttachment list) takes at most this long.
pub const RELEASE_READ_TIMEOUT: Duration = Duration::from_secs(90);
/// VolumeAttachments asked for per page: one is about a kilobyte, so 64 leave the 1 MiB answer cap room to spare. A
/// page that does not fit is asked for again at half the size, down to one; a page with more than asked for is
/// refused.
pub const ATTACHMENT_PAGE: u32 = 64;
/// Pages one listing reads at most: 25,600 VolumeAttachments (5,000 Nodes with 5 volumes each fit). A server whose
/// list never ends stops here, and the disks stay attached.
pub const MAX_ATTACHMENT_PAGES: u32 = 400;
/// VolumeAttachments a condition names (the rest are counted).
const NAMED_ATTACHMENTS: usize = 3;
/// A name from the workload apiserver is kept to the length Kubernetes allows a name.
const NAME: usize = 253;

const ATTACHMENT_LISTING: Listing = Listing {
    what: "VolumeAttachments",
    kind: "VolumeAttachment",
    url_path: "/apis/storage.k8s.io/v1/volumeattachments",
    page: ATTACHMENT_PAGE,
    max_pages: MAX_ATTACHMENT_PAGES,
};

/// What the workload cluster says about the machine's Node; `vm_id` is the VM's, which kubelets report as systemUUID,
/// and `vm_name` its name in the engine (which kubelets take as their host name).
/// Err: every place at the Node step was taken (`workload::clients::NoTurn::Busy`), nothing is known; the places to
/// wait for.
pub async fn observe_node_release(
    state: &mut MachineState,
    cluster: Option<&capi::Cluster>,
    vm_id: &str,
    vm_name: &str,
) -> Result<NodeRelease, Wanted> {
    let Some(cluster) = cluster else {
        return Ok(NodeRelease::Unreachable {
            message: "the machine's CAPI Cluster is not found, so neither is its workload kubeconfig".into(),
        });
    };
    let (client, _turn) = match workload::connect(state, cluster).await {
        Ok(connected) => connected,
        Err(NoClient::Rejected(message)) => return Ok(NodeRelease::Rejected { message }),
        Err(NoClient::Busy(wanted)) => return Err(wanted),
        Err(no_client @ (NoClient::Unreachable(_) | NoClient::ManagementCluster(_))) => {
            return Ok(NodeRelease::Unreachable {
                message: no_client.into_message(),
            });
        }
    };
    let names = node_names(state, vm_name);
    Ok(released(client, &names, vm_id).await)
}

/// The read of [`observe_node_release`], within [`RELEASE_READ_TIMEOUT`].
async fn released(client: kube::Client, names: &[String], vm_id: &str) -> NodeRelease {
    match tokio::time::timeout(RELEASE_READ_TIMEOUT, read(client, names, vm_id)).await {
        Ok(Ok(release)) => release,
        Ok(Err(message)) => NodeRelease::Unreachable { message },
        Err(_) => NodeRelease::Unreachable {
            message: format!(
                "reading the workload cluster's Nodes and VolumeAttachments took longer than \
                 {RELEASE_READ_TIMEOUT:?}; retrying with backoff"
            ),
        },
    }
}

/// The names the machine's Node has or had: the one CAPI recorded on the Machine (`status.nodeRef`), then the VM's
/// name (spec.vmnametemplate's, as recorded with the VM), which kubelets take from the host name CAPOV sets. Never
/// empty.
fn node_names(state: &MachineState, vm_name: &str) -> Vec<String> {
    let mut names: Vec<String> = owner_machine(state)
        .and_then(|machine| capi::machine_node_name(&machine))
        .into_iter()
        .collect();
    if !names.iter().any(|name| name == vm_name) {
        names.push(vm_name.to_string());
    }
    names
}

/// The Node by each of its names, then by the VM id as systemUUID; without one, the VolumeAttachments naming it.
async fn read(client: kube::Client, names: &[String], vm_id: &str) -> Result<NodeRelease, String> {
    for name in names {
        let node = slim_requests::get::<SlimNode>(&client, NODES, name)
            .await
            .map_err(|err| failed("cannot read the workload cluster's Nodes", &err))?;
        if node.is_some() {
            return Ok(NodeRelease::NodeExists { name: name.clone() });
        }
    }
    let vm_name = names.last().map(String::as_str).unwrap_or_default();
    if let Some(node) = find_by_system_uuid(&client, vm_id, vm_name).await? {
        return Ok(NodeRelease::NodeExists {
            name: bounded_text::cut(&node.name, NAME),
        });
    }
    let (attachments, total) = attachments_naming(&client, names).await?;
    let node = names.first().cloned().unwrap_or_default();
    Ok(if total == 0 {
        NodeRelease::Released { node }
    } else {
        NodeRelease::VolumeAttachments {
            node,
            names: attachments,
            total,
        }
    })
}

/// The VolumeAttachments whose `spec.nodeName` is one of `nodes` (the first few by name) and how many there are, page
/// by page: a VolumeAttachment has no field selector for its node.
async fn attachments_naming(client: &kube::Client, nodes: &[String]) -> Result<(Vec<String>, usize), String> {
    let (mut named, mut total) = (Vec::new(), 0);
    slim_requests::list(client, ATTACHMENT_LISTING, |page: Vec<SlimVolumeAttachment>| {
        for attachment in page.into_iter().filter(|a| nodes.contains(&a.node_name)) {
            total += 1;
            if named.len() < NAMED_ATTACHMENTS {
                named.push(bounded_text::cut(&attachment.name, NAME));
            }
        }
        None::<()>
    })
    .await?;
    Ok((named, total))
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    use serde_json::{Value, json};
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::TcpListener;

    use super::*;

    /// A plain-http stand-in for a workload apiserver: every VolumeAttachment list request (its `limit`, whether it
    /// carries a continue token) is answered by `page`. Returns the URL and the count of requests.
    async fn apiserver(page: fn(u32, bool) -> Value) -> (String, Arc<AtomicUsize>) {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let url = format!("http://{}", listener.local_addr().expect("addr"));
        let requests = Arc::new(AtomicUsize::new(0));
        let counted = requests.clone();
        tokio::spawn(async move {
            while let Ok((mut socket, _)) = listener.accept().await {
                let counted = counted.clone();
                tokio::spawn(async move {
                    let mut buffer = Vec::new();
                    let mut chunk = [0u8; 4096];
                    while let Ok(read) = socket.read(&mut chunk).await {
                        if read == 0 {
                            return;
                        }
                        buffer.extend_from_slice(&chunk[..read]);
                        let Some(end) = buffer.windows(4).position(|w| w == b"\r\n\r\n") else {
                            continue;
                        };
                        let head = String::from_utf8_lossy(&buffer[..end]).into_owned();
                        buffer.drain(..end + 4);
                        counted.fetch_add(1, Ordering::SeqCst);
                        let target = head.split(' ').nth(1).unwrap_or_default();
                        let limit = target
                            .split(['?', '&'])
                            .find_map(|p| p.strip_prefix("limit="))
                            .and_then(|l| l.parse().ok())
                            .unwrap_or(0);
                        let body = page(limit, target.contains("continue=")).to_string();
                        let answer = format!(
                            "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{body}",
                            body.len()
                        );
                        if socket.write_all(answer.as_bytes()).await.is_err() {
                            return;
                        }
                    }
                });
            }
        });
        (url, requests)
    }

    fn attachments(url: &str) -> kube::Client {
        crate::runtime::kube::clients::workload_client(kube::Config::new(url.parse().expect("url"))).expect("client")
    }

    fn attachment(name: &str, node: &str) -> Value {
        json!({
            "metadata": {"name": name},
            "spec": {"attacher": "csi.ovirt.org", "nodeName": node, "source": {"persistentVolumeName": name}}
        })
    }

    fn list(items: Vec<Value>, next: Option<&str>) -> Value {
        json!({
            "apiVersion": "storage.k8s.io/v1", "kind": "VolumeAttachmentList",
            "metadata": {"continue": next.unwrap_or_default()},
            "items": items
        })
    }

    fn nodes() -> Vec<String> {
        vec!["worker-node".into(), "worker".into()]
    }

    #[tokio::test]
    async fn the_attachments_naming_the_node_are_counted_over_every_page_and_the_first_named() {
        let (url, requests) = apiserver(|_, later| {
            if later {
                let mut items: Vec<Value> = (2..6).map(|i| attachment(&format!("va-{i}"), "worker")).collect();
                items.push(attachment("elsewhere", "other-node"));
                list(items, None)
            } else {
                list(
                    vec![attachment("va-1", "worker-node"), attachment("x", "other-node")],
                    Some("page-2"),
                )
            }
        })
        .await;
        let (named, total) = attachments_naming(&attachments(&url), &nodes()).await.expect("read");
        assert_eq!((named, total), (vec!["va-1".into(), "va-2".into(), "va-3".into()], 5));
        assert_eq!(requests.load(Ordering::SeqCst), 2);
        let (url, _) = apiserver(|_, _| list(vec![attachment("x", "other-node")], None)).await;
        assert_eq!(attachments_naming(&attachments(&url), &nodes()).await, Ok((vec![], 0)));
    }

    #[tokio::test]
    async fn a_list_that_never_ends_stops_at_the_page_bound_and_counts_as_unknown() {
        let (url, requests) = apiserver(|_, _| list(vec![attachment("x", "other-node")], Some("more"))).await;
        let err = attachments_naming(&attachments(&url), &nodes())
            .await
            .expect_err("endless");
        assert!(err.contains("did not end within 400 pages"), "{err}");
        assert_eq!(requests.load(Ordering::SeqCst), MAX_ATTACHMENT_PAGES as usize);
    }

    #[tokio::test]
    async fn a_page_over_the_answer_cap_is_asked_for_again_at_half_the_size() {
        // Pages of more than 8 VolumeAttachments come back at over 1 MiB (a padded annotation each).
        let (url, requests) = apiserver(|limit, _| {
            let pad = "p".repeat(if limit > 8 { 200 * 1024 } else { 10 });
            let items = (0..limit.min(9))
                .map(|i| {
                    let mut a = attachment(&format!("va-{i}"), "worker");
                    a["metadata"]["annotations"] = json!({"pad": pad});
                    a
                })
                .collect();
            list(items, None)
        })
        .await;
        let (_, total) = attachments_naming(&attachments(&url), &nodes()).await.expect("read");
        assert_eq!(total, 8, "read at 8 a page");
        assert_eq!(requests.load(Ordering::SeqCst), 4, "64, 32, 16 refused, then 8");
    }
}
