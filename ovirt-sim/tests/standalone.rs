//! The `ovirt-sim` binary as users run it: HTTPS with a CA written to `--ca-out`, one
//! `listening on URL` line, and the full machine flow driven by hand through the client.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use capov_ovirt::model::*;
use capov_ovirt::{Client, ClientConfig, DiskPlacement, Error, StartOptions, TlsMode};
use capov_testkit::{eventually, wait_vm_status};

const GIB: u64 = 1 << 30;

/// The child process, killed when the test ends however it ends.
struct Running {
    child: Child,
    url: String,
    ca_pem: Vec<u8>,
    _dir: tempfile::TempDir,
}

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn spawn(extra: &[&str]) -> Running {
    let dir = tempfile::tempdir().unwrap();
    let ca_path = dir.path().join("ca.pem");
    let mut child = Command::new(env!("CARGO_BIN_EXE_ovirt-sim"))
        .args(["--listen", "127.0.0.1:0", "--ca-out"])
        .arg(&ca_path)
        .args([
            "--user",
            "capi@internal=pa55word",
            "--image-locked-ms",
            "150",
            "--boot-ms",
            "200",
        ])
        .args(["--ip-delay-ms", "150", "--disk-op-ms", "100", "--shutdown-ms", "100"])
        .args(extra)
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take();
    // Owned from here on, so the process is killed even if an assertion below fails.
    let mut running = Running {
        child,
        url: String::new(),
        ca_pem: Vec::new(),
        _dir: dir,
    };
    let mut line = String::new();
    BufReader::new(stdout.unwrap()).read_line(&mut line).unwrap();
    running.url = line
        .trim()
        .strip_prefix("listening on ")
        .unwrap_or_else(|| panic!("unexpected first line {line:?}"))
        .to_string();
    // No CA in plain-HTTP mode.
    running.ca_pem = std::fs::read(&ca_path).unwrap_or_default();
    running
}

/// How long the binary's VMs may take for what a test waits on (its timings are a few hundred ms).
const WAIT: Duration = Duration::from_secs(15);

#[tokio::test]
async fn full_machine_flow_against_the_binary_over_https() {
    let sim = spawn(&[]);
    assert!(
        sim.url.starts_with("https://127.0.0.1:") && sim.url.ends_with("/ovirt-engine/api"),
        "{}",
        sim.url
    );
    let config = ClientConfig::new(&sim.url, "capi@internal", "pa55word")
        .with_tls(TlsMode::Verify {
            system_roots: false,
            extra_ca_pem: sim.ca_pem.clone(),
        })
        .with_rate_limit(1000, 100);
    let client = Client::new(config).unwrap().with_correlation_id("flow-worker-0");
    // The default inventory of the binary.
    let cluster = client
        .find_cluster_by_name("Default")
        .await
        .unwrap()
        .expect("cluster Default");
    let template = client
        .find_templates_by_name("rhcos-4.14", Some("Default"))
        .await
        .unwrap()
        .remove(0);
    let template_id = template.id.clone().unwrap();
    let template_disk = client
        .template_disk_attachments(&template_id)
        .await
        .unwrap()
        .remove(0)
        .id
        .unwrap();
    let data1 = client
        .find_storage_domains_by_name("data1")
        .await
        .unwrap()
        .remove(0)
        .id
        .unwrap();
    assert_eq!(client.find_storage_domains_by_name("data2").await.unwrap().len(), 1);
    let profile = client
        .vnic_profiles()
        .await
        .unwrap()
        .into_iter()
        .find(|p| p.name.as_deref() == Some("ovirtmgmt"))
        .unwrap();

    // Create with clone=false onto the template's domain.
    let request = Vm {
        name: Some("worker-0".into()),
        description: Some("capov:default/worker-0".into()),
        cluster: Some(Ref::id(cluster.id.unwrap())),
        template: Some(Ref::id(&template_id)),
        memory: Some(8 * GIB),
        memory_policy: Some(MemoryPolicy {
            guaranteed: Some(4 * GIB),
            ..Default::default()
        }),
        initialization: Some(Initialization {
            custom_script: Some("{\"ignition\":{}}".into()),
            host_name: Some("worker-0".into()),
            ..Initialization::default()
        }),
        disk_attachments: Some(DiskAttachments {
            items: vec![
                DiskPlacement {
                    template_disk_id: template_disk.clone(),
                    storage_domain_id: Some(data1),
                    format: Some("cow".into()),
                    ..Default::default()
                }
                .to_attachment(),
            ],
        }),
        ..Vm::default()
    };
    let vm = client.add_vm(&request, false).await.unwrap();
    assert_eq!(vm.status, Some(VmStatus::ImageLocked));
    let id = vm.id.unwrap();
    wait_vm_status(&client, &id, VmStatus::Down, WAIT).await;

    // Resize the bootable disk and rename its alias.
    let attachment = client.disk_attachments(&id).await.unwrap().remove(0);
    let disk_id = attachment.id.unwrap();
    assert_eq!(
        client.disk(&disk_id).await.unwrap().alias.as_deref(),
        Some("rhcos-4.14_Disk1")
    );
    client.resize_disk_attachment(&id, &disk_id, 60 * GIB).await.unwrap();
    eventually(WAIT, "disk resized", || async {
        let disk = client.disk(&disk_id).await.ok()?;
        (disk.status == Some(DiskStatus::Ok) && disk.provisioned_size == Some(60 * GIB)).then_some(())
    })
    .await;
    client
        .update_disk_alias(&disk_id, "rhcos-4.14_worker-0_Disk1")
        .await
        .unwrap();
    assert_eq!(
        client.disk(&disk_id).await.unwrap().alias.as_deref(),
        Some("rhcos-4.14_worker-0_Disk1")
    );

    // NICs: keep nic1 on the wanted profile, add nic2.
    let nic1 = client.nics(&id).await.unwrap().remove(0);
    client
        .update_nic(
            &id,
            nic1.id.as_deref().unwrap(),
            &Nic {
                vnic_profile: Some(Ref::id(profile.id.clone().unwrap())),
                ..Nic::default()
            },
        )
        .await
        .unwrap();
    client
        .add_nic(
            &id,
            &Nic {
                name: Some("nic2".into()),
                vnic_profile: Some(Ref::id(profile.id.unwrap())),
                ..Nic::default()
            },
        )
        .await
        .unwrap();
    assert_eq!(client.nics(&id).await.unwrap().len(), 2);

    // Start with Ignition, wait for up, read IPs.
    client
        .start_vm(
            &id,
            StartOptions {
                use_ignition: true,
                ..Default::default()
            },
        )
        .await
        .unwrap();
    wait_vm_status(&client, &id, VmStatus::Up, WAIT).await;
    // The guest also reports its container and CNI bridges (engine 4.4): only the devices of the VM's NICs count.
    let macs: Vec<String> = client
        .nics(&id)
        .await
        .unwrap()
        .into_iter()
        .filter_map(|nic| nic.mac.and_then(|mac| mac.address))
        .collect();
    let devices = eventually(WAIT, "IPs", || async {
        let devices: Vec<_> = client
            .reported_devices(&id)
            .await
            .ok()?
            .into_iter()
            .filter(|d| {
                d.mac
                    .as_ref()
                    .and_then(|m| m.address.as_ref())
                    .is_some_and(|mac| macs.contains(mac))
            })
            .collect();
        (devices.len() == 2).then_some(devices)
    })
    .await;
    let v4: Vec<_> = devices
        .iter()
        .flat_map(|d| d.ips.clone().unwrap_or_default().items)
        .filter(|ip| ip.version.as_deref() == Some("v4"))
        .collect();
    assert_eq!(v4.len(), 2);

    // Batched status read.
    let statuses = client.vm_statuses(&[id.as_str()]).await.unwrap();
    assert_eq!(statuses[&id], VmStatus::Up);

    // Stop, delete, gone.
    client.stop_vm(&id, true).await.unwrap();
    wait_vm_status(&client, &id, VmStatus::Down, WAIT).await;
    client.remove_vm(&id).await.unwrap();
    eventually(WAIT, "VM gone", || async {
        client.vm(&id).await.err().filter(Error::is_not_found)
    })
    .await;
    assert!(client.find_vm_by_name("worker-0").await.unwrap().is_none());
}

fn control_client(ca_pem: &[u8]) -> reqwest::Client {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let ca = reqwest::Certificate::from_pem(ca_pem).unwrap();
    reqwest::Client::builder().tls_certs_only([ca]).build().unwrap()
}

#[tokio::test]
async fn http_control_interface_of_the_binary() {
    let sim = spawn(&[]);
    let base = sim.url.trim_end_matches("/ovirt-engine/api").to_string();
    let http = control_client(&sim.ca_pem);
    let config = ClientConfig::new(&sim.url, "capi@internal", "pa55word")
        .with_tls(TlsMode::Verify {
            system_roots: false,
            extra_ca_pem: sim.ca_pem.clone(),
        })
        .with_rate_limit(1000, 100);
    let client = Client::new(config).unwrap();

    let post = |path: &str, body: serde_json::Value| {
        let request = http.post(format!("{base}/sim/{path}")).json(&body);
        async move {
            let response = request.send().await.unwrap();
            assert!(response.status().is_success(), "{}", response.status());
            response.json::<serde_json::Value>().await.unwrap()
        }
    };
    let get = |path: &str| {
        let request = http.get(format!("{base}/sim/{path}"));
        async move { request.send().await.unwrap().json::<serde_json::Value>().await.unwrap() }
    };

    // Seed inventory over HTTP, then see it through the API.
    post(
        "inventory",
        serde_json::json!({"vms": [{"name": "seeded-1", "template": "rhcos-4.14"}]}),
    )
    .await;
    let vm = client.find_vm_by_name("seeded-1").await.unwrap().unwrap();
    let id = vm.id.unwrap();

    // Attach a non-system disk.
    let disk = post(
        &format!("vms/{id}/disks"),
        serde_json::json!({"alias": "data", "size_bytes": 1073741824u64}),
    )
    .await;
    assert!(disk["id"].is_string());
    assert_eq!(client.disk_attachments(&id).await.unwrap().len(), 2);

    // Counters.
    let counters = get("counters").await;
    assert!(counters["GET /vms"].as_u64().unwrap() >= 1, "{counters}");

    // Token expiry: the client re-logs in transparently.
    post("tokens/expire", serde_json::json!({})).await;
    assert_eq!(get("tokens").await["valid"], 0);
    client.vm(&id).await.unwrap();
    assert_eq!(get("tokens").await["valid"], 1);

    // Password change: the next login fails as an authentication failure.
    post(
        "users",
        serde_json::json!({"name": "capi@internal", "password": "rotated"}),
    )
    .await;
    post("tokens/expire", serde_json::json!({})).await;
    assert_eq!(client.vm(&id).await.unwrap_err().reason(), "AuthenticationFailed");

    // Outage injection.
    post("faults", serde_json::json!({"outage": true})).await;
    let status = http
        .get(format!("{base}/ovirt-engine/api"))
        .send()
        .await
        .unwrap()
        .status();
    assert_eq!(status.as_u16(), 503);
    post("faults", serde_json::json!({})).await;

    // Forced VM status and the VM listing for assertions.
    post(
        &format!("vms/{id}/status"),
        serde_json::json!({"status": "not_responding"}),
    )
    .await;
    let vms = get("vms").await;
    assert_eq!(vms.as_array().unwrap().len(), 1);
    assert_eq!(vms[0]["status"], "not_responding");
}

#[tokio::test]
async fn plain_http_and_inventory_file() {
    let dir = tempfile::tempdir().unwrap();
    let inventory = dir.path().join("inventory.json");
    std::fs::write(
        &inventory,
        r#"{"data_centers":[{"name":"dc"}],"clusters":[{"name":"c1","data_center":"dc"}],
            "storage_domains":[{"name":"sd","data_center":"dc"}],
            "templates":[{"name":"t","cluster":"c1","disks":[{"alias":"t_Disk1","storage_domains":["sd"]}]}]}"#,
    )
    .unwrap();
    let sim = spawn(&["--plain-http", "--inventory", inventory.to_str().unwrap()]);
    assert!(sim.url.starts_with("http://"), "{}", sim.url);
    let client =
        Client::new(ClientConfig::new(&sim.url, "capi@internal", "pa55word").with_rate_limit(1000, 100)).unwrap();
    assert_eq!(
        client
            .find_cluster_by_name("c1")
            .await
            .unwrap()
            .unwrap()
            .name
            .as_deref(),
        Some("c1")
    );
    assert!(client.find_cluster_by_name("Default").await.unwrap().is_none());
    assert_eq!(client.find_templates_by_name("t", None).await.unwrap().len(), 1);
}
