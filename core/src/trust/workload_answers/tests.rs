//! The slim decoders: what they keep, what they skip, and what they refuse.

use serde_json::json;

use super::*;
use crate::placement::node_topology::{OVIRT_CLUSTER_LABEL, OVIRT_HOST_LABEL, ZONE_LABEL};

/// `{"items":[{},{},…]}` with `count` items, and a continue token.
fn empty_items(count: usize) -> Vec<u8> {
    let items = vec!["{}"; count].join(",");
    format!(r#"{{"kind":"NodeList","metadata":{{"continue":"next"}},"items":[{items}]}}"#).into_bytes()
}

#[test]
fn a_page_with_no_more_items_than_asked_is_read_whole() {
    let page: Page<SlimNode> = decode_page(&empty_items(16), 16).expect("page");
    assert_eq!(page.items.len(), 16);
    assert_eq!(page.continue_token.as_deref(), Some("next"));
}

#[test]
fn a_page_with_more_items_than_asked_is_refused_and_says_so() {
    let err = decode_page::<SlimNode>(&empty_items(17), 16).expect_err("17 of 16");
    assert_eq!(err, AnswerError::TooManyItems { limit: 16 });
    assert!(err.to_string().contains("more items than the 16 asked for"), "{err}");
    // The refusal comes at the first item past the limit, whatever follows.
    let err = decode_page::<SlimVolumeAttachment>(&empty_items(350_000), 64).expect_err("350,000 of 64");
    assert_eq!(err, AnswerError::TooManyItems { limit: 64 });
}

#[test]
fn a_node_keeps_its_name_ids_and_topology_labels_only() {
    let node = json!({
        "apiVersion": "v1", "kind": "Node",
        "metadata": {
            "name": "worker-1",
            "labels": {
                "kubernetes.io/hostname": "worker-1",
                ZONE_LABEL: "rack-a",
                OVIRT_HOST_LABEL: "host-2",
                "team": "x",
            },
            "annotations": {"big": "y".repeat(10_000)},
            "managedFields": vec![json!({}); 1000],
        },
        "spec": {"providerID": "ovirt://1234", "taints": [{"key": "k", "effect": "NoSchedule"}]},
        "status": {"nodeInfo": {"systemUUID": "ABCD-1234", "kernelVersion": "6.6"}, "images": [{"names": ["a"]}]},
        "unknown": {"nested": [[[{}]]]},
    });
    let slim: SlimNode = decode(node.to_string().as_bytes()).expect("node");
    assert_eq!(
        slim,
        SlimNode {
            name: "worker-1".into(),
            provider_id: Some("ovirt://1234".into()),
            system_uuid: Some("ABCD-1234".into()),
            labels: [(ZONE_LABEL, "rack-a"), (OVIRT_HOST_LABEL, "host-2")]
                .into_iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        }
    );
    assert!(!slim.labels.contains_key(OVIRT_CLUSTER_LABEL));
}

#[test]
fn an_empty_node_decodes_to_nothing() {
    let slim: SlimNode = decode(b"{}").expect("node");
    assert_eq!(slim, SlimNode::default());
    let slim: SlimNode = decode(br#"{"metadata":{"labels":null},"spec":{"providerID":null}}"#).expect("node");
    assert_eq!(slim, SlimNode::default());
}

#[test]
fn strings_are_cut_as_they_are_decoded() {
    let node = json!({
        "metadata": {"name": "n".repeat(100_000), "labels": {ZONE_LABEL: "z".repeat(100_000)}},
        "spec": {"providerID": "p".repeat(100_000)},
        "status": {"nodeInfo": {"systemUUID": "u".repeat(100_000)}},
    });
    let slim: SlimNode = decode(node.to_string().as_bytes()).expect("node");
    assert!(slim.name.len() <= NAME, "{}", slim.name.len());
    assert!(slim.provider_id.is_some_and(|id| id.len() <= PROVIDER_ID));
    assert!(slim.system_uuid.is_some_and(|uuid| uuid.len() <= SYSTEM_UUID));
    let zone = &slim.labels[ZONE_LABEL];
    assert!(zone.len() <= LABEL_VALUE && !node_topology::valid_value(zone), "{zone}");
}

#[test]
fn a_volume_attachment_keeps_its_name_and_node() {
    let attachment = json!({
        "metadata": {"name": "csi-va-1", "managedFields": vec![json!({}); 100]},
        "spec": {"attacher": "csi.ovirt.org", "nodeName": "worker-1", "source": {"persistentVolumeName": "pvc-1"}},
        "status": {"attached": true},
    });
    let page = json!({"metadata": {"continue": ""}, "items": [attachment, {}]});
    let page: Page<SlimVolumeAttachment> = decode_page(page.to_string().as_bytes(), 64).expect("page");
    assert_eq!(page.continue_token, None, "an empty token ends the list");
    assert_eq!(
        page.items,
        vec![
            SlimVolumeAttachment {
                name: "csi-va-1".into(),
                node_name: "worker-1".into()
            },
            SlimVolumeAttachment::default()
        ]
    );
}

#[test]
fn a_page_without_items_or_with_null_items_is_empty() {
    for body in [r#"{"kind":"NodeList"}"#, r#"{"items":null,"metadata":{}}"#] {
        let page: Page<SlimNode> = decode_page(body.as_bytes(), 16).expect(body);
        assert_eq!(
            page,
            Page {
                items: vec![],
                continue_token: None
            },
            "{body}"
        );
    }
}

#[test]
fn a_continue_token_past_its_bound_is_refused() {
    let body = json!({"metadata": {"continue": "t".repeat(CONTINUE_TOKEN + 1)}, "items": []});
    let err = decode_page::<SlimNode>(body.to_string().as_bytes(), 16).expect_err("long token");
    assert_eq!(err, AnswerError::LongToken);
}

#[test]
fn a_malformed_answer_is_refused_with_a_short_message() {
    let body = format!(
        r#"{{"items":[{{"metadata":{{"name":{{"x":"{}"}}}}}}]}}"#,
        "v".repeat(100_000)
    );
    let err = decode_page::<SlimNode>(body.as_bytes(), 16).expect_err("a name that is a map");
    assert!(matches!(err, AnswerError::Malformed(_)), "{err}");
    assert!(err.to_string().len() < 500, "{err}");
    assert!(decode_page::<SlimNode>(b"[1,2,3]", 16).is_err());
    assert!(decode_page::<SlimNode>(br#"{"items":[]} trailing"#, 16).is_err());
}

#[test]
fn an_error_answer_keeps_its_reason_and_message_cut_and_skips_its_causes() {
    let causes = vec![json!({}); 100_000];
    let body = json!({
        "kind": "Status", "status": "Failure", "code": 404, "reason": "NotFound",
        "message": "m".repeat(100_000), "details": {"causes": causes},
    });
    let status = SlimStatus::of(body.to_string().as_bytes());
    assert_eq!(status.reason.as_deref(), Some("NotFound"));
    assert!(
        status
            .message
            .is_some_and(|m| m.len() <= ERROR_TEXT && m.starts_with("mmm"))
    );
    // Not JSON: the start of the text.
    let status = SlimStatus::of("<html>bad gateway</html>".repeat(10_000).as_bytes());
    assert_eq!(status.reason, None);
    assert!(
        status
            .message
            .is_some_and(|m| m.len() <= ERROR_TEXT && m.starts_with("<html>"))
    );
}

fn secret(data: serde_json::Value) -> Vec<u8> {
    json!({
        "apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": "c-kubeconfig", "uid": "u-1", "resourceVersion": "42", "managedFields": [{}, {}]},
        "data": data, "type": "cluster.x-k8s.io/secret",
    })
    .to_string()
    .into_bytes()
}

fn b64(bytes: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

#[test]
fn a_kubeconfig_secret_keeps_only_its_value_and_version() {
    let mut data = serde_json::Map::new();
    for index in 0..10_000 {
        data.insert(format!("k{index}"), json!(b64(b"x")));
    }
    data.insert("value".into(), json!(b64(b"apiVersion: v1")));
    let decoded = decode_kubeconfig_secret(&secret(data.into()), 64 * 1024).expect("secret");
    assert_eq!(
        decoded,
        KubeconfigSecret {
            uid: "u-1".into(),
            resource_version: "42".into(),
            value: Some(SecretValue::Kept(b"apiVersion: v1".to_vec())),
        }
    );
    let without = decode_kubeconfig_secret(&secret(json!({"other": b64(b"x")})), 1024).expect("secret");
    assert_eq!(without.value, None);
    let no_data = decode_kubeconfig_secret(&secret(json!(null)), 1024).expect("secret");
    assert_eq!(no_data.value, None);
}

#[test]
fn a_kubeconfig_secret_value_past_the_bound_keeps_only_its_size() {
    let big = vec![b'a'; 100_000];
    let decoded = decode_kubeconfig_secret(&secret(json!({"value": b64(&big)})), 64 * 1024).expect("secret");
    let Some(SecretValue::TooLarge { bytes }) = decoded.value else {
        panic!("{:?}", decoded.value);
    };
    assert!((100_000..=100_002).contains(&bytes), "{bytes}");
    // Right at the bound it is kept; one byte over, refused.
    let at = vec![b'a'; 1000];
    let kept = decode_kubeconfig_secret(&secret(json!({"value": b64(&at)})), 1000).expect("secret");
    assert_eq!(kept.value, Some(SecretValue::Kept(at)));
    let over = decode_kubeconfig_secret(&secret(json!({"value": b64(&[b'a'; 1001])})), 1000).expect("secret");
    assert_eq!(over.value, Some(SecretValue::TooLarge { bytes: 1001 }));
}
