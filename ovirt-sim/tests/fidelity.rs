//! The simulator refuses what a real engine refuses, with the engine's answer (see docs/simulator-fidelity.md for the
//! engine source of each rule).

use capov_ovirt_sim::{EngineVersion, Simulator, SimulatorHandle};

struct Session {
    sim: SimulatorHandle,
    http: reqwest::Client,
    token: String,
}

impl Session {
    async fn new() -> Self {
        let sim = Simulator::builder().plain_http().start().await.unwrap();
        Self::login(sim, "admin@internal", "admin").await
    }

    async fn login(sim: SimulatorHandle, user: &str, password: &str) -> Self {
        let http = reqwest::Client::new();
        let answer: serde_json::Value = http
            .post(format!("{}/ovirt-engine/sso/oauth/token", sim.base_url()))
            .header("Accept", "application/json")
            .form(&[
                ("grant_type", "password"),
                ("scope", "ovirt-app-api"),
                ("username", user),
                ("password", password),
            ])
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        let token = answer["access_token"]
            .as_str()
            .unwrap_or_else(|| panic!("no token: {answer}"))
            .to_string();
        Session { sim, http, token }
    }

    async fn send(&self, method: reqwest::Method, path: &str, body: Option<&str>) -> (u16, String) {
        let mut request = self
            .http
            .request(method, format!("{}{path}", self.sim.api_url()))
            .bearer_auth(&self.token)
            .header("Accept", "application/xml");
        if let Some(body) = body {
            request = request.header("Content-Type", "application/xml").body(body.to_string());
        }
        let response = request.send().await.unwrap();
        (response.status().as_u16(), response.text().await.unwrap())
    }

    async fn post(&self, path: &str, body: &str) -> (u16, String) {
        self.send(reqwest::Method::POST, path, Some(body)).await
    }

    fn vm(&self, name: &str) -> String {
        let control = self.sim.control();
        control.seed_vms(name, 1, Some("rhcos-4.14")).unwrap();
        control.id_of("vm", &format!("{name}0")).unwrap()
    }
}

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

    let id = s.vm("strict-nic-");
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
    let id = s.vm("ign-");
    let ignition = "<action><use_ignition>true</use_ignition></action>";

    control.set_engine_version("4.3.10".parse().unwrap());
    let (status, body) = s.post(&format!("/vms/{id}/start"), ignition).await;
    assert_syntax_fault(status, &body, "vm/methods/start");
    let (_, api) = s.send(reqwest::Method::GET, "", None).await;
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
    s.vm("plain-");
    for search in ["name=o'brien", "name=a;", "name=\"a\\\"b\""] {
        let path = format!("/vms?search={}", form_urlencoded_byte_serialize(search));
        let (status, body) = s.send(reqwest::Method::GET, &path, None).await;
        assert_eq!(status, 400, "{search}: {body}");
    }
    let (status, body) = s
        .send(reqwest::Method::GET, "/vms?search=name%3D%22plain-0%22", None)
        .await;
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
