//! The slim requests against a plain-http stand-in for a workload apiserver on loopback (the e2e form, over TLS with
//! the real runtime, is `actors/tests/hostile_workload.rs`).

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

use super::*;
use crate::runtime::kube::clients;
use capov_core::trust::workload_answers::{SlimNode, SlimVolumeAttachment};

/// A request as the stand-in sees it.
pub(crate) struct Seen {
    pub method: String,
    pub target: String,
    /// The `limit` asked for, if any.
    pub limit: u32,
}

impl Seen {
    pub fn continued(&self) -> bool {
        self.target.contains("continue=")
    }
}

/// A plain-http stand-in for a workload apiserver: every request is answered by `answer` (status, body); a body over
/// 1 MiB is sent in chunks, its length not announced, as a server streaming it would. Returns its URL and the count
/// of requests.
pub(crate) async fn apiserver(
    answer: impl Fn(&Seen) -> (u16, String) + Send + Sync + 'static,
) -> (String, Arc<AtomicUsize>) {
    let answer = Arc::new(answer);
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let url = format!("http://{}", listener.local_addr().expect("addr"));
    let requests = Arc::new(AtomicUsize::new(0));
    let counted = requests.clone();
    tokio::spawn(async move {
        while let Ok((mut socket, _)) = listener.accept().await {
            let (counted, answer) = (counted.clone(), answer.clone());
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
                    let length: usize = head
                        .lines()
                        .filter_map(|line| line.split_once(':'))
                        .find(|(name, _)| name.eq_ignore_ascii_case("content-length"))
                        .and_then(|(_, value)| value.trim().parse().ok())
                        .unwrap_or(0);
                    if buffer.len() < end + 4 + length {
                        continue;
                    }
                    buffer.drain(..end + 4 + length);
                    counted.fetch_add(1, Ordering::SeqCst);
                    let mut first = head.split(' ');
                    let method = first.next().unwrap_or_default().to_string();
                    let target = first.next().unwrap_or_default().to_string();
                    let limit = target
                        .split(['?', '&'])
                        .find_map(|p| p.strip_prefix("limit="))
                        .and_then(|l| l.parse().ok())
                        .unwrap_or(0);
                    let (status, body) = answer(&Seen { method, target, limit });
                    let reply = match body.len() > 1 << 20 {
                        false => format!(
                            "HTTP/1.1 {status} X\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{body}",
                            body.len()
                        ),
                        true => {
                            let chunks: String = (body.as_bytes().chunks(64 << 10))
                                .map(|chunk| format!("{:x}\r\n{}\r\n", chunk.len(), String::from_utf8_lossy(chunk)))
                                .collect();
                            format!(
                                "HTTP/1.1 {status} X\r\ncontent-type: application/json\r\ntransfer-encoding: \
                                 chunked\r\n\r\n{chunks}0\r\n\r\n"
                            )
                        }
                    };
                    if socket.write_all(reply.as_bytes()).await.is_err() {
                        return;
                    }
                }
            });
        }
    });
    (url, requests)
}

/// A workload client (its answer cap and deadlines) for the stand-in at `url`.
pub(crate) fn client(url: &str) -> kube::Client {
    clients::workload_client(kube::Config::new(url.parse().expect("url"))).expect("client")
}

/// `{…, "items":[{},{},…]}` with `count` items and, if given, a continue token.
fn empty_items(count: usize, next: Option<&str>) -> String {
    let items = vec!["{}"; count].join(",");
    format!(
        r#"{{"metadata":{{"continue":"{}"}},"items":[{items}]}}"#,
        next.unwrap_or_default()
    )
}

const NODES: Listing = Listing {
    what: "Nodes",
    kind: "Node",
    url_path: "/api/v1/nodes",
    page: 16,
    max_pages: 320,
};

#[tokio::test]
async fn a_page_holding_more_items_than_asked_for_is_refused_and_the_listing_says_so() {
    // Just under the 1 MiB cap: about 350,000 empty Nodes, each a full Node once decoded into k8s-openapi's type.
    let (url, requests) = apiserver(|_| (200, empty_items(349_000, Some("more")))).await;
    let err = list::<SlimNode, ()>(&client(&url), NODES, |_| None)
        .await
        .expect_err("refused");
    assert!(
        err.starts_with("cannot list the workload cluster's Nodes: the answer held more items than the 16 asked for"),
        "{err}"
    );
    assert_eq!(requests.load(Ordering::SeqCst), 1, "refused at the first page");
}

#[tokio::test]
async fn pages_are_read_until_the_visitor_finds_what_it_looks_for() {
    let (url, requests) = apiserver(|seen| {
        let node =
            |name: &str, uuid: &str| json!({"metadata": {"name": name}, "status": {"nodeInfo": {"systemUUID": uuid}}});
        let (items, next) = match seen.continued() {
            false => (vec![node("a", "1"), node("b", "2")], "page-2"),
            true => (vec![node("c", "3"), node("d", "4")], ""),
        };
        (200, json!({"metadata": {"continue": next}, "items": items}).to_string())
    })
    .await;
    let found = list(&client(&url), NODES, |nodes: Vec<SlimNode>| {
        nodes.into_iter().find(|node| node.system_uuid.as_deref() == Some("3"))
    })
    .await
    .expect("listed");
    assert_eq!(found.map(|node| node.name), Some("c".to_string()));
    assert_eq!(requests.load(Ordering::SeqCst), 2);
    let none = list(&client(&url), NODES, |_: Vec<SlimNode>| None::<()>).await;
    assert_eq!(none, Ok(None), "the list ended without a match");
}

#[tokio::test]
async fn a_page_over_the_answer_cap_is_asked_for_again_at_half_the_size() {
    let (url, requests) = apiserver(|seen| {
        let pad = "p".repeat(if seen.limit > 4 { 300 * 1024 } else { 10 });
        let items: Vec<Value> = (0..seen.limit.min(5))
            .map(|i| json!({"metadata": {"name": format!("n-{i}"), "annotations": {"pad": pad}}}))
            .collect();
        (200, json!({"items": items}).to_string())
    })
    .await;
    let mut read = 0;
    let listed = list(&client(&url), NODES, |nodes: Vec<SlimNode>| {
        read += nodes.len();
        None::<()>
    })
    .await;
    assert_eq!(listed, Ok(None));
    assert_eq!(read, 4, "read at 4 a page");
    assert_eq!(requests.load(Ordering::SeqCst), 3, "16 and 8 refused, then 4");
}

#[tokio::test]
async fn a_list_that_never_ends_stops_at_its_page_bound() {
    let (url, requests) = apiserver(|_| (200, empty_items(1, Some("more")))).await;
    let listing = Listing { max_pages: 5, ..NODES };
    let err = list::<SlimNode, ()>(&client(&url), listing, |_| None)
        .await
        .expect_err("endless");
    assert!(err.contains("did not end within 5 pages"), "{err}");
    assert_eq!(requests.load(Ordering::SeqCst), 5);
}

/// A Status of about 350,000 empty causes and a long message, just under the answer cap.
fn fat_status(code: u16, reason: &str) -> String {
    let causes = vec!["{}"; 300_000].join(",");
    format!(
        r#"{{"kind":"Status","status":"Failure","code":{code},"reason":"{reason}","message":"{}","details":{{"causes":[{causes}]}}}}"#,
        "m".repeat(100_000)
    )
}

#[tokio::test]
async fn error_answers_are_kept_slim() {
    let (url, _) = apiserver(|seen| match seen.target.as_str() {
        "/api/v1/nodes/missing" => (404, fat_status(404, "NotFound")),
        _ => (500, fat_status(500, "InternalError")),
    })
    .await;
    let client = client(&url);
    let missing = get::<SlimNode>(&client, "/api/v1/nodes", "missing").await.expect("404");
    assert_eq!(missing, None);
    let err = get::<SlimNode>(&client, "/api/v1/nodes", "broken")
        .await
        .expect_err("500");
    let text = err.to_string();
    assert!(
        text.starts_with("the apiserver answered 500 InternalError: mmm"),
        "{text}"
    );
    assert!(text.len() < 400, "{} bytes", text.len());
    // Not JSON at all.
    let (url, _) = apiserver(|_| (502, "<html>".repeat(100_000))).await;
    let err = get::<SlimNode>(&super::tests::client(&url), "/api/v1/nodes", "x")
        .await
        .expect_err("502");
    assert!(err.to_string().len() < 400, "{err}");
    // Past the cap: the status, and why its text was not read.
    let (url, _) = apiserver(|_| (500, format!(r#"{{"message":"{}"}}"#, "x".repeat(2 << 20)))).await;
    let err = get::<SlimNode>(&super::tests::client(&url), "/api/v1/nodes", "x")
        .await
        .expect_err("500");
    assert_eq!(err.code(), Some(500));
    assert!(err.to_string().contains("larger than 1048576 bytes"), "{err}");
}

#[tokio::test]
async fn a_patch_answer_is_decoded_slim_one_past_the_cap_is_still_a_success_and_a_refusal_is_kept_slim() {
    // The patched Node comes back just under the cap with a long managedFields list, which the slim Node skips; a
    // second one past the cap, which is not read to its end.
    let (url, requests) = apiserver(|seen| match seen.method.as_str() {
        "PATCH" if seen.target.starts_with("/api/v1/nodes/ok") => {
            let managed = vec!["{}"; 340_000].join(",");
            (
                200,
                format!(
                    r#"{{"metadata":{{"name":"ok","managedFields":[{managed}]}},"spec":{{"providerID":"ovirt://1"}}}}"#
                ),
            )
        }
        "PATCH" if seen.target.starts_with("/api/v1/nodes/huge") => (
            200,
            format!(r#"{{"metadata":{{"name":"huge","x":"{}"}}}}"#, "x".repeat(2 << 20)),
        ),
        _ => (403, fat_status(403, "Forbidden")),
    })
    .await;
    let client = client(&url);
    let patch = json!({"spec": {"providerID": "ovirt://1"}});
    let node = merge_patch::<SlimNode>(&client, "/api/v1/nodes", "ok", &patch)
        .await
        .expect("patched")
        .expect("the Node after the write");
    assert_eq!(
        (node.name.as_str(), node.provider_id.as_deref()),
        ("ok", Some("ovirt://1"))
    );
    // The connection was read to its end: the next request goes on it.
    let unread = merge_patch::<SlimNode>(&client, "/api/v1/nodes", "huge", &patch)
        .await
        .expect("a write the server took is a success, whatever its answer");
    assert!(unread.is_none(), "an answer past the cap is not decoded");
    let err = merge_patch::<SlimNode>(&client, "/api/v1/nodes", "other", &patch)
        .await
        .expect_err("refused");
    assert_eq!(err.code(), Some(403));
    assert!(err.to_string().len() < 400, "{err}");
    assert_eq!(requests.load(Ordering::SeqCst), 3);
}

#[tokio::test]
async fn volume_attachment_pages_are_refused_past_their_limit_too() {
    let (url, _) = apiserver(|_| (200, empty_items(65, None))).await;
    let listing = Listing {
        what: "VolumeAttachments",
        kind: "VolumeAttachment",
        url_path: "/apis/storage.k8s.io/v1/volumeattachments",
        page: 64,
        max_pages: 400,
    };
    let err = list::<SlimVolumeAttachment, ()>(&client(&url), listing, |_| None)
        .await
        .expect_err("65 of 64");
    assert!(err.contains("more items than the 64 asked for"), "{err}");
}

#[tokio::test]
async fn a_kubeconfig_secret_is_read_slim_and_a_missing_one_is_none() {
    let (url, _) = apiserver(|seen| match seen.target.as_str() {
        "/api/v1/namespaces/tenant/secrets/c-kubeconfig" => {
            let secret = json!({
                "metadata": {"name": "c-kubeconfig", "uid": "u", "resourceVersion": "7"},
                "data": {"value": "YWJj", "other": "eHl6"},
            });
            (200, secret.to_string())
        }
        _ => (404, fat_status(404, "NotFound")),
    })
    .await;
    let client = kube::Client::try_from(kube::Config::new(url.parse().expect("url"))).expect("client");
    let secret = kubeconfig_secret(&client, "tenant", "c-kubeconfig", 1024)
        .await
        .expect("read")
        .expect("found");
    assert_eq!(
        (secret.uid.as_str(), secret.resource_version.as_str(), secret.value),
        ("u", "7", Some(workload_answers::SecretValue::Kept(b"abc".to_vec())))
    );
    let missing = kubeconfig_secret(&client, "tenant", "gone", 1024).await.expect("read");
    assert_eq!(missing, None);
}

#[tokio::test]
async fn a_kubeconfig_secret_answer_past_its_cap_is_not_read() {
    let (url, _) = apiserver(|_| {
        (
            200,
            format!(r#"{{"data":{{"value":"{}"}}}}"#, "A".repeat(SECRET_ANSWER)),
        )
    })
    .await;
    let client = kube::Client::try_from(kube::Config::new(url.parse().expect("url"))).expect("client");
    let err = kubeconfig_secret(&client, "tenant", "c-kubeconfig", 1024)
        .await
        .expect_err("too large");
    assert!(err.too_large(), "{err}");
}
