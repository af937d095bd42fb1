//! The simulator refuses what a real engine refuses, with the engine's answer (see docs/simulator-fidelity.md for the
//! engine source of each rule).

use std::time::Duration;

use capov_ovirt_sim::{EngineVersion, Simulator};
use capov_testkit::{Session, eventually};

fn assert_syntax_fault(status: u16, body: &str, usage: &str) {
    assert_eq!(status, 400, "{body}");
    assert!(
        body.contains("<reason>Request syntactically incorrect.</reason>"),
        "{body}"
    );
    assert!(
        body.contains(&format!("/ovirt-engine/apidoc#services/{usage}</detail>")),
        "usage link for {usage}: {body}"
    );
}

const GOOD_VM: &str = "<vm><name>strict-1</name><cluster><name>Default</name></cluster>\
    <template><name>rhcos-4.14</name></template></vm>";

#[tokio::test]
async fn unknown_or_misplaced_elements_get_the_engines_usage_fault() {
    let s = Session::new().await;
    let (status, body) = s.post("/vms", GOOD_VM).await;
    assert!(
        status == 201 || status == 202,
        "a model-conform add passes: {status} {body}"
    );

    let unknown = GOOD_VM.replace("</vm>", "<bootstrap_data>x</bootstrap_data></vm>");
    let (status, body) = s.post("/vms", &unknown).await;
    assert_syntax_fault(status, &body, "vms/methods/add");

    // `sockets` exists, but under `cpu/topology`, not under `cpu`.
    let misplaced = GOOD_VM.replace("</vm>", "<cpu><sockets>2</sockets></cpu></vm>");
    let (status, body) = s.post("/vms", &misplaced).await;
    assert_syntax_fault(status, &body, "vms/methods/add");

    let id = s.seed_vm("strict-nic-", "rhcos-4.14");
    let (status, body) = s
        .post(&format!("/vms/{id}/nics"), "<nic><name>n</name><vlan>3</vlan></nic>")
        .await;
    assert_syntax_fault(status, &body, "vm_nics/methods/add");
    let (status, body) = s
        .post(
            &format!("/vms/{id}/start"),
            "<action><use_magic>true</use_magic></action>",
        )
        .await;
    assert_syntax_fault(status, &body, "vm/methods/start");

    // A boolean the model's parser refuses.
    let (status, body) = s
        .post(&format!("/vms/{id}/stop"), "<action><force>yes</force></action>")
        .await;
    assert_eq!(status, 400, "{body}");
    assert!(body.contains("<reason>Invalid value</reason>"), "{body}");

    let refused = s.sim.control().rejected_bodies();
    assert_eq!(refused.get("vms/methods/add"), Some(&2), "{refused:?}");
    assert_eq!(refused.get("vm/methods/start"), Some(&1), "{refused:?}");
    assert_eq!(
        s.sim.control().vm_by_name("strict-1").map(|v| v.name),
        Some("strict-1".into())
    );
}

#[tokio::test]
async fn use_ignition_exists_from_engine_4_4_0() {
    let s = Session::new().await;
    let control = s.sim.control();
    let id = s.seed_vm("ign-", "rhcos-4.14");
    let ignition = "<action><use_ignition>true</use_ignition></action>";

    control.set_engine_version("4.3.10".parse().unwrap());
    let (status, body) = s.post(&format!("/vms/{id}/start"), ignition).await;
    assert_syntax_fault(status, &body, "vm/methods/start");
    let (_, api) = s.get("").await;
    assert!(
        api.contains("<major>4</major>") && api.contains("<minor>3</minor>"),
        "{api}"
    );

    control.set_engine_version(EngineVersion::new(4, 4, 0));
    let (status, body) = s.post(&format!("/vms/{id}/start"), ignition).await;
    assert_eq!(status, 200, "{body}");
}

#[tokio::test]
async fn vm_names_are_at_most_64_characters_and_unique_per_data_center() {
    use capov_ovirt_sim::{ClusterSeed, DataCenterSeed, Inventory};
    let s = Session::new().await;
    let add = |name: &str, cluster: &str| {
        format!(
            "<vm><name>{name}</name><cluster><name>{cluster}</name></cluster><template><name>Blank</name></template></vm>"
        )
    };
    let (status, body) = s.post("/vms", &add(&"n".repeat(65), "Default")).await;
    assert_eq!(status, 400, "{body}");
    assert!(body.contains("[Cannot add VM. The given name is too long.]"), "{body}");
    let (status, body) = s.post("/vms", &add(&"n".repeat(64), "Default")).await;
    assert_eq!(status, 201, "64 characters are allowed: {body}");
    // Java counts UTF-16 units: 33 characters outside the BMP are 66 units.
    let (status, body) = s.post("/vms", &add(&"😀".repeat(33), "Default")).await;
    assert_eq!(status, 400, "{body}");

    s.sim
        .control()
        .seed(&Inventory {
            data_centers: vec![DataCenterSeed {
                id: None,
                name: "Second".into(),
            }],
            clusters: vec![ClusterSeed {
                id: None,
                name: "Other".into(),
                data_center: "Second".into(),
            }],
            ..Inventory::default()
        })
        .unwrap();
    let (status, body) = s.post("/vms", &add("twin", "Default")).await;
    assert_eq!(status, 201, "{body}");
    let (status, body) = s.post("/vms", &add("twin", "Default")).await;
    assert_eq!(status, 409, "{body}");
    assert!(body.contains("name is already in use"), "{body}");
    let (status, body) = s.post("/vms", &add("twin", "Other")).await;
    assert_eq!(status, 201, "the same name in another data center: {body}");

    let description = "d".repeat(256);
    let (status, body) = s
        .post(
            "/vms",
            &add("described", "Default").replace("</vm>", &format!("<description>{description}</description></vm>")),
        )
        .await;
    assert_eq!(status, 400, "{body}");
    assert!(body.contains("description is too long"), "{body}");
}

#[tokio::test]
async fn searches_refuse_quotes_and_semicolons_and_have_no_escapes() {
    let s = Session::new().await;
    s.seed_vm("plain-", "rhcos-4.14");
    for search in ["name=o'brien", "name=a;", "name=\"a\\\"b\""] {
        let path = format!("/vms?search={}", form_urlencoded_byte_serialize(search));
        let (status, body) = s.get(&path).await;
        assert_eq!(status, 400, "{search}: {body}");
    }
    let (status, body) = s.get("/vms?search=name%3D%22plain-0%22").await;
    assert_eq!(status, 200);
    assert!(body.contains("<name>plain-0</name>"), "{body}");
}

fn form_urlencoded_byte_serialize(text: &str) -> String {
    text.bytes()
        .map(|b| match b {
            b'a'..=b'z' | b'A'..=b'Z' | b'0'..=b'9' | b'-' | b'_' | b'.' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

#[tokio::test]
async fn an_accepted_create_can_vanish_or_end_image_illegal_without_status() {
    let s = Session::new().await;
    let control = s.sim.control();
    control.fail_next_copies(1, 1);
    let add = |name: &str| GOOD_VM.replace("strict-1", name);
    let id_of = |body: &str| {
        let start = body.find("<vm href=").expect("a vm");
        let id_at = body[start..].find(" id=\"").expect("an id") + start + 5;
        body[id_at..id_at + 36].to_string()
    };
    let (status, body) = s.post("/vms", &add("vanishing")).await;
    assert_eq!(status, 202, "{body}");
    let vanishing = id_of(&body);
    let (status, body) = s.post("/vms", &add("illegal")).await;
    assert_eq!(status, 202, "{body}");
    let illegal = id_of(&body);
    let (status, body) = s.post("/vms", &add("fine")).await;
    assert_eq!(status, 202, "{body}");

    // Until the copy ends each is image_locked; then the first is gone, the second has no <status>.
    let doc = eventually(Duration::from_secs(10), "the copies to end", || async {
        let (gone, _) = s.get(&format!("/vms/{vanishing}")).await;
        let (_, doc) = s.get(&format!("/vms/{illegal}")).await;
        if gone == 404 && !doc.contains("image_locked") {
            Ok(doc)
        } else {
            Err(format!("GET /vms/{vanishing}: {gone}; /vms/{illegal}: {doc}"))
        }
    })
    .await;
    assert!(!doc.contains("<status>"), "ImageIllegal has no status element: {doc}");
    assert!(doc.contains("<name>illegal</name>"));
    let fine = control.vm_by_name("fine").expect("the third create is unaffected");
    assert!(
        fine.status == "image_locked" || fine.status == "down",
        "{}",
        fine.status
    );
}

#[tokio::test]
async fn a_non_admin_user_is_filtered_and_refused_admin_only_queries() {
    let sim = Simulator::builder()
        .plain_http()
        .user("admin@internal", "admin")
        .non_admin_user("capov@internal", "secret")
        .start()
        .await
        .unwrap();
    let admin_vm = {
        let control = sim.control();
        control.seed_vms("admins-", 1, Some("rhcos-4.14")).unwrap();
        control.id_of("vm", "admins-0").unwrap()
    };
    let dc = sim.control().id_of("datacenter", "Default").unwrap();
    let sd = sim.control().id_of("storagedomain", "data1").unwrap();
    let user = Session::login(sim, "capov@internal", "secret").await;

    // Admin-only query: refused even though the domain exists; the list (a user query) answers.
    let (status, body) = user.get(&format!("/datacenters/{dc}/storagedomains/{sd}")).await;
    assert_eq!(status, 400, "{body}");
    assert!(
        body.contains("[Query execution failed due to insufficient permissions.]"),
        "{body}"
    );
    let (status, body) = user.get(&format!("/datacenters/{dc}/storagedomains")).await;
    assert_eq!(status, 200, "{body}");
    assert!(body.contains(&format!("id=\"{sd}\"")), "{body}");

    // Lists trimmed: another user's VM is invisible (404 by id, absent from searches), its own VM is there.
    let (status, body) = user.post("/vms", &GOOD_VM.replace("strict-1", "users-vm")).await;
    assert!(status == 201 || status == 202, "{body}");
    let (_, list) = user.get("/vms").await;
    assert!(list.contains("<name>users-vm</name>"), "{list}");
    assert!(!list.contains("admins-0"), "{list}");
    let (status, _) = user.get(&format!("/vms/{admin_vm}")).await;
    assert_eq!(status, 404);
    let (status, _) = user
        .post(&format!("/vms/{admin_vm}/stop"), "<action><force>true</force></action>")
        .await;
    assert_eq!(status, 404, "an invisible VM cannot be acted on");

    // An admin asking with filter=true gets the same refusal for the admin-only query.
    let admin = Session::login(user.sim, "admin@internal", "admin").await;
    let (status, _) = admin.get(&format!("/datacenters/{dc}/storagedomains/{sd}")).await;
    assert_eq!(status, 200);
    let (status, _) = admin
        .get(&format!("/datacenters/{dc}/storagedomains/{sd}?filter=true"))
        .await;
    assert_eq!(status, 400);
    let (_, list) = admin.get("/vms").await;
    assert!(
        list.contains("admins-0") && list.contains("users-vm"),
        "an admin sees every VM"
    );

    // Without a role to create VMs: 403.
    admin.sim.control().set_user_may_create_vms("admin@internal", false);
    let (status, body) = admin.post("/vms", &GOOD_VM.replace("strict-1", "refused")).await;
    assert_eq!(status, 403, "{body}");
    assert!(
        body.contains("[User is not authorized to perform this action.]"),
        "{body}"
    );
}

#[tokio::test]
async fn a_start_delivers_only_what_the_os_type_uses_rewritten_as_the_engine_does() {
    use capov_ovirt_sim::{Inventory, TemplateSeed};
    let s = Session::new().await;
    let control = s.sim.control();
    control
        .seed(&Inventory {
            templates: vec![TemplateSeed {
                name: "ubuntu-24.04".into(),
                cluster: Some("Default".into()),
                os_type: "ubuntu_22_04".into(),
                disks: vec![capov_ovirt_sim::TemplateDiskSeed {
                    alias: "ubuntu_Disk1".into(),
                    size_bytes: capov_ovirt_sim::GIB,
                    storage_domains: vec!["data1".into()],
                    ..Default::default()
                }],
                ..TemplateSeed::default()
            }],
            ..Inventory::default()
        })
        .unwrap();
    let script = "## template: jinja\n#cloud-config\nhostname: {{ ds.meta_data.local_hostname }}\n";
    let add = |name: &str, template: &str| {
        format!(
            "<vm><name>{name}</name><cluster><name>Default</name></cluster><template><name>{template}</name></template>\
             <initialization><custom_script>{script}</custom_script><host_name>{name}</host_name></initialization></vm>"
        )
    };
    let mut started = Vec::new();
    for (name, template, action) in [
        (
            "ci-on-ubuntu",
            "ubuntu-24.04",
            "<action><use_cloud_init>true</use_cloud_init></action>",
        ),
        (
            "ci-on-rhcos",
            "rhcos-4.14",
            "<action><use_cloud_init>true</use_cloud_init></action>",
        ),
    ] {
        let (status, body) = s.post("/vms", &add(name, template)).await;
        assert!(status == 201 || status == 202, "{body}");
        let id = control.id_of("vm", name).unwrap();
        eventually(
            Duration::from_secs(10),
            format!("{name} to leave image_locked"),
            || async {
                let status = control.vm(&id).expect("the VM").status;
                if status == "down" { Ok(()) } else { Err(status) }
            },
        )
        .await;
        let (status, body) = s.post(&format!("/vms/{id}/start"), action).await;
        assert_eq!(status, 200, "the start succeeds whatever is delivered: {body}");
        started.push(id);
    }
    let http = reqwest::Client::new();
    let payload = |id: String| {
        let http = http.clone();
        let url = format!("{}/sim/vms/{id}/payload", s.sim.base_url());
        async move {
            http.get(url)
                .send()
                .await
                .unwrap()
                .json::<serde_json::Value>()
                .await
                .unwrap()
        }
    };
    let ubuntu = payload(started[0].clone()).await;
    assert_eq!(ubuntu["delivered"]["kind"], "cloud-init");
    let user_data = ubuntu["delivered"]["user_data"].as_str().unwrap();
    assert!(user_data.starts_with("#cloud-config\n"), "{user_data}");
    assert!(user_data.contains("ssh_pwauth: true"), "{user_data}");
    assert!(user_data.ends_with(script), "{user_data}");
    // The config drive's meta-data names the host (cloud-init's `local-hostname`).
    assert_eq!(ubuntu["delivered"]["meta_data"]["hostname"], "ci-on-ubuntu");
    assert_eq!(ubuntu["delivered"]["meta_data"]["availability_zone"], "nova");
    let rhcos = payload(started[1].clone()).await;
    assert_eq!(
        rhcos["delivered"],
        serde_json::Value::Null,
        "cloud-init to an Ignition OS delivers nothing"
    );
    let (_, doc) = s.get(&format!("/vms/{}", started[1])).await;
    assert!(doc.contains("<type>rhcos_x64</type>"), "{doc}");
    // Templates show their OS type too (TemplateMapper), which is what a client can check before a create.
    let (_, doc) = s.get("/templates?search=name%3Drhcos-4.14").await;
    assert!(doc.contains("<os><type>rhcos_x64</type></os>"), "{doc}");
    let (_, doc) = s.get("/templates?search=name%3Dubuntu-22.04").await;
    assert!(doc.contains("<os><type>other_linux</type></os>"), "{doc}");
}
