//! The simulator's answers have the shapes of real engine answers: every element or attribute it
//! emits exists at the same place in the corresponding engine sample (the project's fixtures, and
//! the captured reference samples, which must be there: `shared/` beside the workspace), and the
//! fields CAPOV reads are present. JSON follows the engine's scalars-as-strings convention.

use std::collections::BTreeSet;

use capov_testkit::{Session, fixture, reference_sample};
use quick_xml::events::Event;

/// Element paths (`vm/cpu/topology/cores`) and attribute paths (`vm/link@rel`) of a document.
fn xml_shape(xml: impl AsRef<[u8]>) -> BTreeSet<String> {
    let mut reader = quick_xml::Reader::from_reader(xml.as_ref());
    let mut stack: Vec<String> = Vec::new();
    let mut shape = BTreeSet::new();
    loop {
        let (element, opens) = match reader.read_event() {
            Ok(Event::Start(e)) => (e.into_owned(), true),
            Ok(Event::Empty(e)) => (e.into_owned(), false),
            Ok(Event::End(_)) => {
                stack.pop();
                continue;
            }
            Ok(Event::Eof) => break,
            Ok(_) => continue,
            Err(e) => panic!("not XML: {e}"),
        };
        let name = AsRef::<str>::as_ref(&element.name()).to_string();
        let path = if stack.is_empty() {
            name.clone()
        } else {
            format!("{}/{name}", stack.join("/"))
        };
        for attr in element.attributes().flatten() {
            shape.insert(format!("{path}@{}", AsRef::<str>::as_ref(&attr.key)));
        }
        shape.insert(path);
        if opens {
            stack.push(name);
        }
    }
    shape
}

/// Samples to compare with: the project's fixture and the captured engine sample.
fn samples(name: &str) -> Vec<(String, BTreeSet<String>)> {
    vec![
        (format!("fixture {name}"), xml_shape(fixture(name))),
        (format!("reference {name}"), xml_shape(reference_sample(name))),
    ]
}

/// Elements the simulator emits that the samples happen not to show (fields of other states or
/// of requests CAPOV makes), each a real engine field.
const KNOWN_EXTRAS: &[&str] = &[
    "vm/initialization",
    "vm/initialization/custom_script",
    "vm/initialization/host_name",
    "vm/fqdn",
    "vm/start_time",
    "vm/stop_reason",
    "vm/stop_time",
    "vm/os/type",
    "vm/original_template",
    "vm/original_template@href",
    "vm/original_template@id",
    "vm/comment",
    "vm/status",
    "vm/memory_policy/max",
    "vm/actions",
    "vm/actions/link",
    "vm/actions/link@href",
    "vm/actions/link@rel",
    "api/product_info/vendor",
    "disk_attachments/disk_attachment/logical_name",
    // The host of a running VM (`VmMapper`: `run_on_vds`); the samples are of a VM that is down.
    "vm/host",
    "vm/host@href",
    "vm/host@id",
    // In the reference sample, not in the older fixture.
    "storage_domains/storage_domain/critical_space_action_blocker",
];

fn assert_shape_within(what: &str, actual: &BTreeSet<String>, required: &[&str], sample_name: &str) {
    for (label, sample) in samples(sample_name) {
        let unexpected: Vec<_> = actual
            .iter()
            .filter(|p| !sample.contains(*p) && !KNOWN_EXTRAS.contains(&p.as_str()))
            .collect();
        assert!(unexpected.is_empty(), "{what}: not in {label}: {unexpected:?}");
    }
    let missing: Vec<_> = required.iter().filter(|p| !actual.contains(**p)).collect();
    assert!(missing.is_empty(), "{what}: missing {missing:?}");
}

#[tokio::test]
async fn api_root_shape() {
    let s = Session::new().await;
    let shape = xml_shape(s.get_ok("").await);
    assert_shape_within(
        "api",
        &shape,
        &[
            "api/product_info/version/full_version",
            "api/product_info/version/major",
            "api/special_objects/blank_template@id",
            "api/link@rel",
        ],
        "api.xml",
    );
}

#[tokio::test]
async fn vm_shapes() {
    let s = Session::new().await;
    let id = s.seed_vm("shape-", "rhcos-4.14");
    let vm = xml_shape(s.get_ok(&format!("/vms/{id}?follow=disk_attachments,nics")).await);
    assert_shape_within(
        "vm",
        &vm,
        &[
            "vm@id",
            "vm/name",
            "vm/status",
            "vm/cluster@id",
            "vm/template@id",
            "vm/memory",
            "vm/cpu/topology/sockets",
            "vm/disk_attachments/disk_attachment/disk@id",
            "vm/nics/nic/mac/address",
            "vm/description",
        ],
        "vm.xml",
    );
    let attachments = xml_shape(s.get_ok(&format!("/vms/{id}/diskattachments")).await);
    assert_shape_within(
        "disk attachments",
        &attachments,
        &[
            "disk_attachments/disk_attachment@id",
            "disk_attachments/disk_attachment/bootable",
            "disk_attachments/disk_attachment/disk@id",
        ],
        "vm_diskattachments.xml",
    );
    let nics = xml_shape(s.get_ok(&format!("/vms/{id}/nics")).await);
    assert_shape_within(
        "nics",
        &nics,
        &[
            "nics/nic@id",
            "nics/nic/name",
            "nics/nic/vnic_profile@id",
            "nics/nic/mac/address",
        ],
        "vm_nics.xml",
    );
    let disk_id = s.sim.control().vm(&id).unwrap().disks[0].id.clone();
    let disk = xml_shape(s.get_ok(&format!("/disks/{disk_id}")).await);
    assert_shape_within(
        "disk",
        &disk,
        &[
            "disk/alias",
            "disk/provisioned_size",
            "disk/status",
            "disk/storage_domains/storage_domain@id",
        ],
        "disk.xml",
    );
}

#[tokio::test]
async fn storage_domain_and_vnic_profile_shapes() {
    let s = Session::new().await;
    s.sim
        .control()
        .seed(&capov_ovirt_sim::Inventory {
            storage_domains: vec![capov_ovirt_sim::StorageDomainSeed {
                name: "loose".into(),
                kind: "image".into(),
                ..Default::default()
            }],
            ..Default::default()
        })
        .unwrap();
    let body = s.get_ok("/storagedomains").await;
    let shape = xml_shape(&body);
    assert_shape_within(
        "storage domains",
        &shape,
        &[
            "storage_domains/storage_domain/name",
            "storage_domains/storage_domain/available",
            "storage_domains/storage_domain/external_status",
            "storage_domains/storage_domain/status",
            "storage_domains/storage_domain/data_centers/data_center@id",
        ],
        "storagedomains.xml",
    );
    // Attached domains carry no status in /storagedomains; the unattached one says so.
    assert_eq!(body.matches("<status>").count(), 1);
    assert!(body.contains("<status>unattached</status>"));

    let profiles = xml_shape(s.get_ok("/vnicprofiles").await);
    assert_shape_within(
        "vnic profiles",
        &profiles,
        &[
            "vnic_profiles/vnic_profile/name",
            "vnic_profiles/vnic_profile/network@id",
        ],
        "vnicprofiles.xml",
    );
}

#[tokio::test]
async fn fault_shapes() {
    let s = Session::new().await;
    let (status, body) = s.post("/vms", "<vm><cluster><name>Default</name></cluster></vm>").await;
    assert_eq!(status, 400);
    assert_shape_within(
        "fault",
        &xml_shape(&body),
        &["fault/reason", "fault/detail"],
        "fault.xml",
    );
    assert!(body.contains("<reason>Incomplete parameters</reason>"));

    let id = s.seed_vm("shape-", "rhcos-4.14");
    let (status, body) = s.post(&format!("/vms/{id}/stop"), "<action/>").await;
    assert_eq!(status, 409);
    assert_eq!(
        xml_shape(&body),
        xml_shape(fixture("action_failed.xml")),
        "a failed action nests the fault: {body}"
    );
    assert!(body.contains("[Cannot stop VM. VM is not running.]"));

    let (status, body) = s.get("/vms/00000000-dead-4000-8000-000000000000").await;
    assert_eq!((status, body.as_str()), (404, ""));
}

fn json_leaves(value: &serde_json::Value, key: &str, out: &mut Vec<(String, serde_json::Value)>) {
    match value {
        serde_json::Value::Object(map) => map.iter().for_each(|(k, v)| json_leaves(v, k, out)),
        serde_json::Value::Array(items) => items.iter().for_each(|v| json_leaves(v, key, out)),
        leaf => out.push((key.to_string(), leaf.clone())),
    }
}

#[tokio::test]
async fn json_scalars_are_strings_and_dates_numbers() {
    let s = Session::new().await;
    let id = s.seed_vm("shape-", "rhcos-4.14");
    let (status, body) = s.get_json(&format!("/vms/{id}")).await;
    assert_eq!(status, 200);
    let vm: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert!(
        vm.get("href").is_some() && vm.get("@href").is_none(),
        "attributes are plain keys"
    );
    assert!(vm["memory"].is_string());
    assert!(vm["creation_time"].is_number());
    assert!(vm["link"].is_array());
    let mut leaves = Vec::new();
    json_leaves(&vm, "", &mut leaves);
    for (key, leaf) in leaves {
        let date = matches!(
            key.as_str(),
            "creation_time" | "start_time" | "stop_time" | "time" | "date"
        );
        assert!(if date { leaf.is_number() } else { leaf.is_string() }, "{key}: {leaf}");
    }
    let sample: serde_json::Value = serde_json::from_slice(&reference_sample("vm.json")).unwrap();
    assert!(
        sample["memory"].is_string() && sample["stop_time"].is_number(),
        "the convention we copy"
    );
    let (_, list) = s.get_json("/vms").await;
    let list: serde_json::Value = serde_json::from_str(&list).unwrap();
    assert!(list["vm"].is_array(), "lists use the singular key: {list}");
}

#[tokio::test]
async fn unauthenticated_requests_get_an_empty_401_and_correlation_ids_are_echoed() {
    let s = Session::new().await;
    let response = s.http.get(format!("{}/vms", s.sim.api_url())).send().await.unwrap();
    assert_eq!(response.status().as_u16(), 401);
    assert_eq!(
        response.headers().get("www-authenticate").and_then(|v| v.to_str().ok()),
        Some("Basic realm=\"RESTAPI\"")
    );
    assert_eq!(response.text().await.unwrap(), "");

    let response = s
        .http
        .get(format!("{}/clusters", s.sim.api_url()))
        .bearer_auth(&s.token)
        .header("Correlation-Id", "op-42")
        .send()
        .await
        .unwrap();
    assert_eq!(
        response.headers().get("correlation-id").and_then(|v| v.to_str().ok()),
        Some("op-42")
    );
    assert_eq!(s.sim.control().correlation_ids(), vec!["op-42".to_string()]);
}

/// The SSO authenticates first and checks the Accept header after (`OAuthTokenServlet.handleIssueTokenForPasswd`);
/// for the REST API scope its errors are `{"error_code", "error"}`, else the OAuth shape, always HTTP 400.
#[tokio::test]
async fn sso_rejects_a_wrong_accept_header_and_bad_passwords_with_400_json() {
    let s = Session::new().await;
    let token_url = format!("{}/ovirt-engine/sso/oauth/token", s.sim.base_url());
    let login = |accept: &'static str, scope: &'static str, password: &'static str| {
        let http = s.http.clone();
        let token_url = token_url.clone();
        async move {
            let form = [
                ("grant_type", "password"),
                ("scope", scope),
                ("username", "admin@internal"),
                ("password", password),
            ];
            let response = http
                .post(&token_url)
                .header("Accept", accept)
                .form(&form)
                .send()
                .await
                .unwrap();
            let status = response.status().as_u16();
            let body: serde_json::Value = response.json().await.unwrap();
            (status, body)
        }
    };

    let (status, body) = login("application/json, */*", "ovirt-app-api", "admin").await;
    assert_eq!(status, 400);
    assert_eq!(
        body,
        serde_json::json!({"error_code": "invalid_request", "error": "Missing parameter: 'Accept Header'"})
    );

    // A wrong password is refused before the Accept header is looked at.
    let refused = "Cannot authenticate user 'admin@internal': Unable to log in. Verify your login information or \
                   contact the system administrator..";
    let (status, body) = login("application/json, */*", "ovirt-app-api", "nope").await;
    assert_eq!(status, 400);
    assert_eq!(
        body,
        serde_json::json!({"error_code": "access_denied", "error": refused})
    );

    // Another scope: the OAuth shape.
    let (status, body) = login("application/json", "openid", "nope").await;
    assert_eq!(status, 400);
    assert_eq!(
        body,
        serde_json::json!({"error": "access_denied", "error_description": refused})
    );
    // Refused logins issue nothing: the session's own token is the only one handed out, and stays listed.
    assert_eq!(s.sim.control().issued_tokens(), vec![s.token.clone()]);
}

/// Key paths of a JSON document with the kind of each leaf (`s` string, `n` number).
fn json_shape(value: &serde_json::Value, prefix: &str, out: &mut BTreeSet<String>) {
    match value {
        serde_json::Value::Object(map) => {
            for (key, child) in map {
                let path = if prefix.is_empty() {
                    key.clone()
                } else {
                    format!("{prefix}/{key}")
                };
                out.insert(path.clone());
                json_shape(child, &path, out);
            }
        }
        serde_json::Value::Array(items) => items.iter().for_each(|item| json_shape(item, prefix, out)),
        serde_json::Value::String(_) => {
            out.insert(format!("{prefix}:s"));
        }
        serde_json::Value::Number(_) => {
            out.insert(format!("{prefix}:n"));
        }
        _ => {
            out.insert(format!("{prefix}:other"));
        }
    }
}

#[tokio::test]
async fn json_shapes_match_captured_engine_json() {
    let s = Session::new().await;
    let id = s.seed_vm("shape-", "rhcos-4.14");
    let extras: BTreeSet<String> = KNOWN_EXTRAS
        .iter()
        .flat_map(|p| {
            let p = p.replace('@', "/");
            let tail = p.split_once('/').map(|(_, rest)| rest.to_string()).unwrap_or_default();
            [tail.clone(), format!("{tail}:s"), format!("{tail}:n")]
        })
        .collect();
    for (sample, path) in [
        ("api.json", String::new()),
        ("vm.json", format!("/vms/{id}?follow=disk_attachments,nics")),
    ] {
        let reference: serde_json::Value = serde_json::from_slice(&reference_sample(sample)).unwrap();
        let mut expected = BTreeSet::new();
        json_shape(&reference, "", &mut expected);
        let (status, body) = s.get_json(&path).await;
        assert_eq!(status, 200);
        let mut actual = BTreeSet::new();
        json_shape(&serde_json::from_str(&body).unwrap(), "", &mut actual);
        let unexpected: Vec<_> = actual
            .iter()
            .filter(|p| !expected.contains(*p) && !extras.contains(*p))
            .collect();
        assert!(
            unexpected.is_empty(),
            "{sample}: not in the engine's JSON: {unexpected:?}"
        );
    }
}

/// Garbage bodies, search expressions and paths get engine-style errors, never a crash or a hang.
#[tokio::test]
async fn hostile_input_gets_errors_not_crashes() {
    let s = Session::new().await;
    let id = s.seed_vm("shape-", "rhcos-4.14");
    let mut rng = fastrand::Rng::with_seed(7);
    let seeds = [
        "<vm><name>x</name></vm>",
        "<action><force>true</force></action>",
        "<nic><name>n</name></nic>",
        "<disk><provisioned_size>1</provisioned_size></disk>",
    ];
    for round in 0..200 {
        let mut body: Vec<u8> = seeds[round % seeds.len()].as_bytes().to_vec();
        for _ in 0..rng.usize(0..6) {
            let at = rng.usize(..body.len().max(1)).min(body.len());
            body.insert(at, rng.u8(..));
        }
        let body = String::from_utf8_lossy(&body).to_string();
        for path in [
            "/vms".to_string(),
            format!("/vms/{id}/start"),
            format!("/vms/{id}/nics"),
            format!("/disks/{id}"),
        ] {
            let method = if path.starts_with("/disks") {
                reqwest::Method::PUT
            } else {
                reqwest::Method::POST
            };
            let (status, _) = s.send(method, &path, Some(&body)).await;
            assert!(status < 500, "{path} with {body:?} gave {status}");
        }
    }
    for query in [
        "name=\"",
        "or",
        "name",
        "name=a or",
        "!",
        "sortby name",
        "name=*",
        "a=b and c!=d or e=f page 2",
    ] {
        let path = format!(
            "/vms?search={}",
            query.replace(' ', "%20").replace('"', "%22").replace('=', "%3D")
        );
        let (status, _) = s.get(&path).await;
        assert!(status == 200 || status == 400, "{query}: {status}");
    }
    for path in [
        "/vms/../../etc/passwd",
        "/%00",
        "/vms/x/y/z/w/v",
        "/templates/x/diskattachments/y",
    ] {
        let (status, _) = s.get(path).await;
        assert!(status == 404 || status == 400, "{path}: {status}");
    }
    // Still serving.
    assert!(!s.get_ok("/vms").await.is_empty());
}
