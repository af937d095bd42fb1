//! Issue #14 item 6, "costs and noise": the simulator behaves as a real engine does where it costs CAPOV time,
//! memory or correctness — status rules for stop/remove, the SSO error shape, guest agents and their noisy
//! interfaces, real-size documents and clone times. docs/simulator-fidelity.md names the engine source of each rule.

use std::time::Duration;

use capov_ovirt_sim::{Simulator, SimulatorHandle};
use capov_testkit::{Session, eventually};

const SAVING_RESTORING: &str = "VM is in saving/restoring state.\n-Please try again when the VM is either up or down.]";

#[tokio::test]
async fn stop_and_remove_are_refused_while_unknown_saving_or_restoring() {
    let s = Session::new().await;
    let id = s.seed_vm("state-rules-", "rhcos-4.14");
    let control = s.sim.control();
    let force = "<action><force>true</force></action>";

    control.set_vm_status(&id, "unknown").unwrap();
    let (status, body) = s.post(&format!("/vms/{id}/stop"), force).await;
    assert_eq!(status, 409, "{body}");
    assert!(body.contains("<status>failed</status>"), "{body}");
    assert!(body.contains("[Cannot stop VM. VM is not running.]"), "{body}");
    let (status, body) = s.delete(&format!("/vms/{id}")).await;
    assert_eq!(status, 409, "{body}");
    assert!(body.contains("[Cannot remove VM. VM is running.]"), "{body}");

    for state in ["saving_state", "restoring_state"] {
        control.set_vm_status(&id, state).unwrap();
        let (status, body) = s.post(&format!("/vms/{id}/stop"), force).await;
        assert_eq!(status, 409, "{state}: {body}");
        assert!(
            body.contains(&format!("[Cannot stop VM. {SAVING_RESTORING}")),
            "{state}: {body}"
        );
        let (status, body) = s.post(&format!("/vms/{id}/shutdown"), "<action/>").await;
        assert_eq!(status, 409, "{state}: {body}");
        assert!(
            body.contains(&format!("[Cannot shutdown VM. {SAVING_RESTORING}")),
            "{state}: {body}"
        );
        let (status, body) = s.delete(&format!("/vms/{id}")).await;
        assert_eq!(status, 409, "{state}: {body}");
        assert!(body.contains("[Cannot remove VM. VM is running.]"), "{state}: {body}");
    }
    let (_, body) = s.get(&format!("/vms/{id}")).await;
    assert!(
        body.contains("<status>restoring_state</status>"),
        "refusals change nothing: {body}"
    );

    // Suspended and not-responding VMs can be stopped; once down the VM can be removed.
    control.set_vm_status(&id, "not_responding").unwrap();
    let (status, body) = s.post(&format!("/vms/{id}/stop"), force).await;
    assert_eq!(status, 200, "{body}");
    control.set_vm_status(&id, "suspended").unwrap();
    let (status, body) = s.delete(&format!("/vms/{id}")).await;
    assert_eq!(status, 409, "{body}");
    assert!(body.contains("[Cannot remove VM that its state is not down."), "{body}");
    let (status, body) = s.post(&format!("/vms/{id}/stop"), force).await;
    assert_eq!(status, 200, "{body}");
    let (status, body) = s.delete(&format!("/vms/{id}")).await;
    assert_eq!(status, 200, "{body}");
}

async fn token_answer(sim: &SimulatorHandle, form: &[(&str, &str)]) -> (u16, serde_json::Value) {
    let response = reqwest::Client::new()
        .post(format!("{}/ovirt-engine/sso/oauth/token", sim.base_url()))
        .header("Accept", "application/json")
        .form(form)
        .send()
        .await
        .unwrap();
    let status = response.status().as_u16();
    (status, response.json().await.unwrap())
}

/// `SsoService.sendJsonDataWithMessage`: for the REST API scope, errors are HTTP 400 `{"error_code", "error"}`.
/// Codes and texts from `SsoConstants` and `AppMessages.properties`.
#[tokio::test]
async fn sso_errors_have_the_rest_api_shape_and_the_engines_texts() {
    let sim = Simulator::builder().plain_http().start().await.unwrap();
    let login = |user: &'static str, password: &'static str| {
        [
            ("grant_type", "password"),
            ("scope", "ovirt-app-api"),
            ("username", user),
            ("password", password),
        ]
    };
    let failed = "Unable to log in. Verify your login information or contact the system administrator..";
    // A wrong password and an unknown user get the same answer (the internal profile does not tell them apart).
    for (user, password) in [("admin@internal", "wrong"), ("nobody@internal", "admin")] {
        let (status, body) = token_answer(&sim, &login(user, password)).await;
        assert_eq!(status, 400, "{body}");
        let name = user.trim_end_matches("@internal");
        let expected = format!("Cannot authenticate user '{name}@internal': {failed}");
        assert_eq!(
            body,
            serde_json::json!({"error_code": "access_denied", "error": expected})
        );
    }
    // A user name without a profile, or with one the engine does not have.
    let (_, body) = token_answer(&sim, &login("admin", "admin")).await;
    assert_eq!(
        body,
        serde_json::json!({"error_code": "access_denied",
            "error": "Cannot authenticate user 'admin@N/A': No valid profile found in credentials.."})
    );
    let (_, body) = token_answer(&sim, &login("admin@corp.example", "admin")).await;
    assert_eq!(body["error_code"], "access_denied", "{body}");
    assert!(
        body["error"]
            .as_str()
            .unwrap()
            .ends_with("No valid profile found in credentials..")
    );

    let (status, body) = token_answer(
        &sim,
        &[("grant_type", "client_credentials"), ("scope", "ovirt-app-api")],
    )
    .await;
    assert_eq!(status, 400);
    assert_eq!(
        body,
        serde_json::json!({"error_code": "unsupported_grant_type",
            "error": "The authorization grant type is not supported by the authorization server."})
    );
    let (_, body) = token_answer(&sim, &[("grant_type", "password"), ("scope", "ovirt-app-api")]).await;
    assert_eq!(
        body,
        serde_json::json!({"error_code": "invalid_request", "error": "Missing parameter: 'username'"})
    );
    assert!(sim.control().issued_tokens().is_empty());
}

/// A template whose image runs no guest agent, and a VM of it that is up.
fn seed_agentless(sim: &SimulatorHandle) -> String {
    use capov_ovirt_sim::{Inventory, TemplateDiskSeed, TemplateNicSeed, TemplateSeed, VmSeed};
    let control = sim.control();
    control
        .seed(&Inventory {
            templates: vec![TemplateSeed {
                name: "no-agent".into(),
                cluster: Some("Default".into()),
                guest_agent: false,
                disks: vec![TemplateDiskSeed {
                    alias: "no-agent_Disk1".into(),
                    storage_domains: vec!["data1".into()],
                    ..Default::default()
                }],
                nics: vec![TemplateNicSeed {
                    name: "nic1".into(),
                    vnic_profile: Some("ovirtmgmt".into()),
                }],
                ..Default::default()
            }],
            vms: vec![VmSeed {
                name: "agentless".into(),
                template: Some("no-agent".into()),
                status: "up".into(),
                ..Default::default()
            }],
            ..Inventory::default()
        })
        .unwrap();
    control.id_of("vm", "agentless").unwrap()
}

fn device_names(body: &str) -> Vec<String> {
    body.split("<reported_device ")
        .skip(1)
        .filter_map(|device| {
            let start = device.find("<name>")? + "<name>".len();
            let end = device[start..].find("</name>")?;
            Some(device[start..start + end].to_string())
        })
        .collect()
}

/// Without a guest agent the engine knows nothing of the guest: no devices, no FQDN. With one, a Kubernetes node
/// reports its CNI and container bridges too (engines before 4.5.0 show every interface whose name is not
/// blacklisted; from 4.5.0 only those whose MAC is one of the VM's NICs), link-local IPv6 and VIPs on its own NIC.
#[tokio::test]
async fn guests_without_an_agent_report_nothing_and_nodes_report_noisy_interfaces() {
    let s = Session::new().await;
    let agentless = seed_agentless(&s.sim);
    let (status, body) = s.get(&format!("/vms/{agentless}/reporteddevices")).await;
    assert_eq!(status, 200, "{body}");
    assert!(device_names(&body).is_empty(), "{body}");
    let (_, body) = s.get(&format!("/vms/{agentless}?follow=reported_devices")).await;
    assert!(
        body.contains("<status>up</status>") && !body.contains("<fqdn>"),
        "{body}"
    );

    let control = s.sim.control();
    control
        .seed(&capov_ovirt_sim::Inventory {
            vms: vec![capov_ovirt_sim::VmSeed {
                name: "node-0".into(),
                template: Some("rhcos-4.14".into()),
                status: "up".into(),
                ..Default::default()
            }],
            ..Default::default()
        })
        .unwrap();
    let node = control.id_of("vm", "node-0").unwrap();
    control.add_guest_address(&node, "10.0.1.100").unwrap();
    let (_, body) = s.get(&format!("/vms/{node}/reporteddevices")).await;
    let names = device_names(&body);
    for expected in [
        "eth0",
        "docker0",
        "cni0",
        "flannel.1",
        "vxlan.calico",
        "cali1a2b3c4d5e6",
    ] {
        assert!(names.iter().any(|n| n == expected), "{expected} in {names:?}");
    }
    // The engine's GuestNicNamesBlacklist: lo[0-9]*, Loopback.*, tun[0-9]*, veth[0-9a-f]*.
    assert!(!names.iter().any(|n| n == "lo" || n.starts_with("veth")), "{names:?}");
    let nic_mac = control.vm(&node).unwrap().nics[0].mac.clone();
    let eth0 = body
        .split("<reported_device ")
        .find(|d| d.contains("<name>eth0</name>"))
        .unwrap();
    assert!(eth0.contains(&format!("<address>{nic_mac}</address>")), "{eth0}");
    assert!(
        eth0.contains("<address>10.0.1.100</address>"),
        "the VIP on eth0: {eth0}"
    );
    assert!(eth0.contains("<address>fe80::"), "link-local IPv6: {eth0}");

    control.set_engine_version(capov_ovirt_sim::EngineVersion::new(4, 5, 0));
    let (_, body) = s.get(&format!("/vms/{node}/reporteddevices")).await;
    assert_eq!(
        device_names(&body),
        vec!["eth0".to_string()],
        "4.5 shows only the VM's NICs: {body}"
    );
}

/// A VM document is as large as a real engine's (the 4.4.10 recording is 11 KB with its disks, NICs, CD-ROMs and
/// snapshots inlined), and lists carry every VM's `<initialization>` with its bootstrap data: the engine has no
/// parameter that leaves it out (`BackendVmsResource.mapCollection` loads every VM's VmInit for the `main` detail,
/// and without `main` a list has no VMs at all).
#[tokio::test]
async fn vm_documents_are_real_size_and_lists_carry_the_bootstrap_data() {
    let s = Session::new().await;
    let script = format!(
        "#cloud-config\nwrite_files:\n- path: /etc/x\n  content: {}\n",
        "y".repeat(6000)
    );
    let escaped = script.replace('&', "&amp;").replace('<', "&lt;");
    let add = format!(
        "<vm><name>big-0</name><cluster><name>Default</name></cluster><template><name>rhcos-4.14</name></template>\
         <initialization><custom_script>{escaped}</custom_script></initialization></vm>"
    );
    let (status, body) = s.post("/vms", &add).await;
    assert_eq!(status, 202, "{body}");
    s.seed_vm("plain-", "rhcos-4.14");

    let (status, plain) = s.get("/vms?search=name%3Dplain-0").await;
    assert_eq!(status, 200);
    assert!(plain.len() >= 6_000, "a VM without follows is {} bytes", plain.len());
    for element in [
        "<bios>",
        "<display>",
        "<migration>",
        "<sso>",
        "<cpu_profile ",
        "<actions>",
    ] {
        assert!(plain.contains(element), "{element}");
    }
    let (_, listed) = s.get("/vms?search=name%3Dbig-0").await;
    assert!(
        listed.contains("<custom_script>#cloud-config"),
        "lists carry the bootstrap data"
    );
    assert!(listed.len() >= plain.len() + script.len(), "{} bytes", listed.len());
    for detail in ["all_content=true", "detail=-initialization"] {
        let (_, again) = s.get(&format!("/vms?search=name%3Dbig-0&{detail}")).await;
        assert!(again.contains("<custom_script>"), "{detail} does not leave it out");
    }
    // JSON: the same elements, scalars as strings.
    let response = s
        .http
        .get(format!("{}/vms?search=name%3Dplain-0", s.sim.api_url()))
        .bearer_auth(&s.token)
        .header("Accept", "application/json")
        .send()
        .await
        .unwrap();
    let json: serde_json::Value = response.json().await.unwrap();
    assert_eq!(json["vm"][0]["bios"]["boot_menu"]["enabled"], "false", "{json}");
    assert_eq!(json["vm"][0]["migration_downtime"], "-1");
}

/// Clones copy their template's allocated bytes, sharing the storage domain's bandwidth; a thin VM copies nothing.
/// (The sharing arithmetic is unit-tested in `engine::copies`.)
#[tokio::test]
async fn clones_copy_whole_images_sharing_the_storage_bandwidth() {
    use capov_ovirt_sim::{Inventory, TemplateDiskSeed, TemplateNicSeed, TemplateSeed, Timings};
    let sim = Simulator::builder()
        .plain_http()
        .timings(Timings {
            // 64 MiB template disk, 8 MiB allocated: one copy alone takes 1 s, three at once 3 s.
            storage_mib_per_second: 8,
            ..Timings::fast()
        })
        .start()
        .await
        .unwrap();
    sim.control()
        .seed(&Inventory {
            templates: vec![TemplateSeed {
                name: "small".into(),
                cluster: Some("Default".into()),
                disks: vec![TemplateDiskSeed {
                    alias: "small_Disk1".into(),
                    size_bytes: 64 << 20,
                    storage_domains: vec!["data1".into()],
                    ..Default::default()
                }],
                nics: vec![TemplateNicSeed {
                    name: "nic1".into(),
                    vnic_profile: Some("ovirtmgmt".into()),
                }],
                ..Default::default()
            }],
            ..Inventory::default()
        })
        .unwrap();
    let s = Session::login(sim, "admin@internal", "admin").await;
    let add = |name: &str| {
        format!(
            "<vm><name>{name}</name><cluster><name>Default</name></cluster><template><name>small</name></template></vm>"
        )
    };
    for n in 0..3 {
        let (status, body) = s.post("/vms?clone=true", &add(&format!("clone-{n}"))).await;
        assert_eq!(status, 202, "{body}");
    }
    let (status, body) = s.post("/vms", &add("thin-0")).await;
    assert_eq!(status, 202, "{body}");
    let control = s.sim.control();
    let status_of = |name: &str| {
        let id = control.id_of("vm", name).unwrap();
        control.vm(&id).map(|vm| vm.status).unwrap_or_default()
    };
    let down = |name: &str| {
        let status = status_of(name);
        if status == "down" {
            Ok(())
        } else {
            Err(format!("{name} {status}"))
        }
    };
    // The thin VM is ready while the three copies still run.
    eventually(Duration::from_secs(30), "the thin VM ready", || async {
        down("thin-0")
    })
    .await;
    assert_eq!(control.disk_copies(), 3);
    for n in 0..3 {
        assert_eq!(status_of(&format!("clone-{n}")), "image_locked");
    }
    eventually(Duration::from_secs(30), "the copies to end", || async {
        (0..3).try_for_each(|n| down(&format!("clone-{n}")))
    })
    .await;
    assert_eq!(control.disk_copies(), 0);
}
