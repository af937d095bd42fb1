//! Bootstrap data reaches the guest intact (docs/decisions.md, "Bootstrap data through oVirt's cloud-init and
//! Ignition"), judged by the guests' own tools on the payload the simulator says the engine delivers:
//!
//! * Debian's cloud-init (`CAPOV_CLOUD_INIT_DIR`, from `tools/cloud-init/fetch.sh`): its schema check, and its own
//!   ConfigDrive datasource, jinja rendering and YAML loading (`guest-view`);
//! * Ignition's validator (`CAPOV_IGNITION_DIR`, from `tools/build-go-tools.sh --ignition`).
//!
//! `tools/test.sh` provides both; without them these tests fail and say how to get them.

mod support;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use capov_ovirt_sim::Delivered;
use capov_testkit::eventually;
use serde_json::{Value, json};
use support::{World, condition};

/// CAPI kubeadm bootstrap data for a worker, shaped as CABPK writes it: the jinja header, the host name variables
/// (preKubeadmCommands land in runcmd before the join), write_files with the join configuration, and runcmd.
const KUBEADM_WORKER: &str = r#"## template: jinja
#cloud-config

write_files:
-   path: /run/kubeadm/kubeadm-join-config.yaml
    owner: root:root
    permissions: '0640'
    content: |
      ---
      apiVersion: kubeadm.k8s.io/v1beta4
      discovery:
        bootstrapToken:
          apiServerEndpoint: 10.0.0.10:6443
          caCertHashes:
          - sha256:0c8aa2bbd6d8e1ac7a5b0bf8b4dbd4b8bb5d0e4f1c1f0c6e8a1a4e0d6c9b8a7f
          token: abcdef.0123456789abcdef
          unsafeSkipCAVerification: false
      kind: JoinConfiguration
      nodeRegistration:
        imagePullPolicy: IfNotPresent
        name: '{{ ds.meta_data.local_hostname }}'
-   path: /run/cluster-api/placeholder
    owner: root:root
    permissions: '0640'
    content: "This placeholder file is used to create the /run/cluster-api sub directory"
runcmd:
  - 'hostnamectl set-hostname "{{ ds.meta_data.local_hostname }}"'
  - 'echo "127.0.0.1 {{ v1.local_hostname }}" >> /etc/hosts'
  - 'kubeadm join --config /run/kubeadm/kubeadm-join-config.yaml  && echo success > /run/cluster-api/bootstrap-success.complete'
"#;

/// An Ignition spec 3 config (what RHCOS 4.6+ and Fedora CoreOS boot with), trimmed to a unit and a file. (CABPK's
/// `format: ignition` emits spec 2.3.0 through the Container Linux Config transpiler; the upstream validator reads
/// spec 3 only, so spec 2 is not validated here.)
const IGNITION_WORKER: &str = r#"{"ignition":{"version":"3.4.0"},"storage":{"files":[{"path":"/etc/kubeadm.sh","mode":448,"contents":{"source":"data:,kubeadm%20join%20--config%20%2Fetc%2Fkubeadm.yml"}}]},"systemd":{"units":[{"name":"kubeadm.service","enabled":true,"contents":"[Unit]\nDescription=kubeadm\n[Service]\nType=oneshot\nExecStart=/etc/kubeadm.sh\n[Install]\nWantedBy=multi-user.target\n"}]}}"#;

/// A tool directory from the environment; panics with how to get it when it is missing.
fn tool(var: &str, binary: &str, how: &str) -> PathBuf {
    let dir = std::env::var_os(var).unwrap_or_else(|| panic!("{var} is not set: run {how} and export {var}"));
    let path = Path::new(&dir).join(binary);
    assert!(path.is_file(), "{} does not exist: run {how}", path.display());
    path
}

fn cloud_init_dir() -> PathBuf {
    let how = "`tools/cloud-init/fetch.sh` (tools/test.sh does)";
    let cli = tool("CAPOV_CLOUD_INIT_DIR", "cloud-init", how);
    tool("CAPOV_CLOUD_INIT_DIR", "guest-view", how);
    cli.parent().map(Path::to_path_buf).unwrap_or_default()
}

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("capov-payload-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("scratch directory");
    dir
}

/// The payload the simulator says the VM's start delivered, waiting up to two minutes for the start.
async fn delivered(world: &World, vm_id: &str) -> Delivered {
    eventually(Duration::from_secs(120), "the VM's start and its payload", || async {
        world.sim.control().delivered_payload(vm_id)
    })
    .await
}

/// What cloud-init 22.4 in the guest makes of a config drive holding `user_data` and `meta_data`, and its schema
/// check's verdict on the user-data: (`guest-view` output, schema exit success, schema output).
fn cloud_init_view(dir: &Path, user_data: &str, meta_data: &Value) -> (Value, bool, String) {
    let tools = cloud_init_dir();
    let latest = dir.join("drive/openstack/latest");
    std::fs::create_dir_all(&latest).expect("drive");
    std::fs::write(latest.join("user_data"), user_data).expect("user_data");
    std::fs::write(latest.join("meta_data.json"), meta_data.to_string()).expect("meta_data");
    let schema = Command::new(tools.join("cloud-init"))
        .args(["schema", "--config-file"])
        .arg(latest.join("user_data"))
        .output()
        .expect("cloud-init schema runs");
    let schema_out = format!(
        "{}{}",
        String::from_utf8_lossy(&schema.stdout),
        String::from_utf8_lossy(&schema.stderr)
    );
    let view = Command::new(tools.join("guest-view"))
        .arg(dir.join("drive"))
        .arg(dir.join("work"))
        .output()
        .expect("guest-view runs");
    assert!(
        view.status.success(),
        "guest-view failed: {}",
        String::from_utf8_lossy(&view.stderr)
    );
    let view: Value = serde_json::from_slice(&view.stdout).expect("guest-view prints JSON");
    (view, schema.status.success(), schema_out)
}

/// The join configuration file of a loaded cloud-config.
fn join_config(config: &Value) -> String {
    config["write_files"]
        .as_array()
        .and_then(|files| {
            files
                .iter()
                .find(|f| f["path"] == "/run/kubeadm/kubeadm-join-config.yaml")
        })
        .and_then(|f| f["content"].as_str())
        .unwrap_or_default()
        .to_string()
}

/// A CAPI kubeadm worker (cloud-config with the jinja header) on a cloud-init template: the user-data the engine
/// hands the guest passes cloud-init's schema check, and cloud-init's own processing of the config drive gives
/// kubeadm the VM's host name as node name, keeps password SSH off and root login closed, and runs CAPI's runcmd.
/// The same checks on the engine's rewrite of the raw data (what CAPOV sent before) show the breakage they catch.
#[tokio::test]
async fn kubeadm_cloud_config_reaches_the_guest_as_cloud_init_reads_it() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let _ = cloud_init_dir();
    let mut world = World::new("payload-ci").await;
    world.start_operator().await;
    let name = "worker-ci-0";
    world
        .create_machine_with_bootstrap(
            name,
            json!({"ovirtcluster": "Default", "template": "ubuntu-22.04"}),
            KUBEADM_WORKER,
            "cloud-config",
        )
        .await;
    let vm_id = world.vm_id(name).await;
    let payload = delivered(&world, &vm_id).await;
    assert_eq!(payload.kind, "cloud-init");
    let host_name = capov_core::naming::vm_name::for_object(name);

    let dir = scratch("ci");
    let (view, schema_ok, schema_out) = cloud_init_view(&dir, &payload.user_data, &payload.meta_data);
    assert!(
        schema_ok,
        "cloud-init's schema check refused the delivered user-data: {schema_out}"
    );
    assert!(schema_out.contains("Valid cloud-config"), "{schema_out}");
    // Debian 12's is 22.4.2; the checks hold for whichever version the machine's apt offers.
    let version = view["cloud_init_version"].as_str().unwrap_or_default();
    assert!(!version.is_empty(), "guest-view names cloud-init's version");
    eprintln!("checked with cloud-init {version}");
    assert_eq!(
        view["local_hostname"],
        host_name.as_str(),
        "the engine's meta-data names the VM"
    );
    assert_eq!(view["type"], "text/cloud-config");
    let config = &view["config"];
    let join = join_config(config);
    assert!(
        join.contains(&format!("name: '{host_name}'\n")),
        "kubeadm's node name is the VM's host name: {join}"
    );
    assert!(
        !view["user_data"].as_str().unwrap_or_default().contains("{{"),
        "no jinja left"
    );
    assert_eq!(config["ssh_pwauth"], false, "password SSH stays off");
    assert_eq!(config["disable_root"], true, "root login stays closed");
    assert_eq!(
        config["runcmd"],
        json!([
            format!("hostnamectl set-hostname \"{host_name}\""),
            format!("echo \"127.0.0.1 {host_name}\" >> /etc/hosts"),
            "kubeadm join --config /run/kubeadm/kubeadm-join-config.yaml  && echo success > \
             /run/cluster-api/bootstrap-success.complete",
        ]),
        "CAPI's runcmd, rendered, is the one that runs"
    );

    // The checks catch the breakage: the engine's rewrite (the same prefix) of the raw data, as sent before.
    let sent = world
        .sim
        .control()
        .vm(&vm_id)
        .and_then(|vm| vm.custom_script)
        .expect("the VM's custom script");
    let engine_prefix = payload
        .user_data
        .strip_suffix(&sent)
        .expect("the engine appends the custom script as is");
    let raw = format!("{engine_prefix}{KUBEADM_WORKER}");
    let (view, _, _) = cloud_init_view(&scratch("ci-raw"), &raw, &payload.meta_data);
    assert_eq!(
        view["jinja_rendered"], false,
        "behind the engine's lines the jinja header is not rendered"
    );
    assert!(join_config(&view["config"]).contains("name: '{{ ds.meta_data.local_hostname }}'"));
    assert_eq!(
        view["config"]["ssh_pwauth"], true,
        "the engine switches password SSH on"
    );

    world.delete_machine_and_wait(name).await;
    world.stop_operator().await;
    let _ = std::fs::remove_dir_all(&dir);
}

/// An Ignition worker on the Ignition template: the config the engine hands the guest passes Ignition's own
/// validator without a warning, and names the VM's host name.
#[tokio::test]
async fn ignition_on_an_ignition_template_passes_ignitions_validator() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let validator = tool(
        "CAPOV_IGNITION_DIR",
        "ignition-validate",
        "`tools/build-go-tools.sh --ignition` (tools/test.sh does)",
    );
    let mut world = World::new("payload-ign").await;
    world.start_operator().await;
    let name = "worker-ign-0";
    world
        .create_machine_with_bootstrap(
            name,
            json!({"ovirtcluster": "Default", "template": "rhcos-4.14"}),
            IGNITION_WORKER,
            "ignition",
        )
        .await;
    let vm_id = world.vm_id(name).await;
    let payload = delivered(&world, &vm_id).await;
    assert_eq!(payload.kind, "ignition");

    let dir = scratch("ign");
    let file = dir.join("config.ign");
    std::fs::write(&file, &payload.user_data).expect("config");
    let output = Command::new(&validator)
        .arg(&file)
        .output()
        .expect("ignition-validate runs");
    let report = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(
        output.status.success(),
        "Ignition refused the delivered config: {report}"
    );
    assert!(
        report.trim().is_empty(),
        "Ignition warned about the delivered config: {report}"
    );
    let config: Value = serde_json::from_str(&payload.user_data).expect("JSON");
    let host_name = capov_core::naming::vm_name::for_object(name);
    let files = config["storage"]["files"].as_array().cloned().unwrap_or_default();
    let host_files: Vec<_> = files.iter().filter(|f| f["path"] == "/etc/hostname").collect();
    assert_eq!(host_files.len(), 1, "one host name file: {files:?}");
    assert_eq!(host_files[0]["contents"]["source"], format!("data:,{host_name}"));
    assert!(
        files.iter().any(|f| f["path"] == "/etc/kubeadm.sh"),
        "the data's own file is kept"
    );

    // The engine's own host name file (spec 2 form) is what Ignition warned about before.
    let engine_form = json!({"ignition": {"version": "3.4.0"}, "storage": {"files": [
        {"filesystem": "root", "path": "/etc/hostname", "mode": 420, "contents": {"source": "data:,x"}}]}});
    std::fs::write(&file, engine_form.to_string()).expect("config");
    let output = Command::new(&validator)
        .arg(&file)
        .output()
        .expect("ignition-validate runs");
    assert!(
        String::from_utf8_lossy(&output.stdout).contains("unused key filesystem")
            || String::from_utf8_lossy(&output.stderr).contains("unused key filesystem"),
        "the validator reports the engine's spec-2 key"
    );

    world.delete_machine_and_wait(name).await;
    world.stop_operator().await;
    let _ = std::fs::remove_dir_all(&dir);
}

/// Bootstrap data the template's OS type does not take is refused before any VM is created, naming the template,
/// its OS type, the format and what to change.
#[tokio::test]
async fn a_format_the_templates_os_type_does_not_take_is_refused_before_a_vm_is_created() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let mut world = World::new("payload-mismatch").await;
    world.start_operator().await;
    world
        .create_machine_with_bootstrap(
            "cc-on-rhcos",
            json!({"ovirtcluster": "Default", "template": "rhcos-4.14"}),
            KUBEADM_WORKER,
            "cloud-config",
        )
        .await;
    world
        .create_machine_with_bootstrap(
            "ign-on-ubuntu",
            json!({"ovirtcluster": "Default", "template": "ubuntu-22.04"}),
            IGNITION_WORKER,
            "ignition",
        )
        .await;
    for (name, parts) in [
        (
            "cc-on-rhcos",
            ["cloud-config", "\"rhcos-4.14\"", "\"rhcos_x64\"", "only Ignition"],
        ),
        (
            "ign-on-ubuntu",
            ["ignition", "\"ubuntu-22.04\"", "\"other_linux\"", "only cloud-init"],
        ),
    ] {
        let machine = world
            .wait_reason(
                Duration::from_secs(60),
                name,
                "MachineCreated",
                "BootstrapFormatMismatch",
            )
            .await;
        let created = condition(&machine, "MachineCreated").expect("MachineCreated");
        for part in parts.iter().chain(&["No VM was created", "spec.template"]) {
            assert!(created.message.contains(part), "{name}: {part}: {}", created.message);
        }
        assert!(!created.message.contains("abcdef"), "no bootstrap data in the message");
        assert!(
            world.sim.control().vm_by_name(name).is_none(),
            "{name}: no VM may be created"
        );
    }
    world.stop_operator().await;
}

/// Stands in for an IPAM provider (none runs here): answers the machine's IPAddressClaim `claim` with an IPAddress
/// owned by it, as cluster-api-ipam-provider-in-cluster does, and sets the claim's `status.addressRef`.
async fn fulfil_claim(world: &World, claim: &str, address: &str, prefix: u8, gateway: &str) {
    use kube::api::{ApiResource, DynamicObject, GroupVersionKind, Patch, PatchParams, PostParams};
    let resource = |kind: &str, plural: &str| {
        ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk("ipam.cluster.x-k8s.io", "v1beta2", kind), plural)
    };
    let claims: kube::Api<DynamicObject> = kube::Api::namespaced_with(
        world.client.clone(),
        &world.namespace,
        &resource("IPAddressClaim", "ipaddressclaims"),
    );
    let addresses: kube::Api<DynamicObject> = kube::Api::namespaced_with(
        world.client.clone(),
        &world.namespace,
        &resource("IPAddress", "ipaddresses"),
    );
    let found = eventually(Duration::from_secs(60), "CAPOV's IPAddressClaim", || async {
        claims.get_opt(claim).await.ok().flatten()
    })
    .await;
    let body: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "ipam.cluster.x-k8s.io/v1beta2", "kind": "IPAddress",
        "metadata": {"name": claim, "ownerReferences": [{
            "apiVersion": "ipam.cluster.x-k8s.io/v1beta2", "kind": "IPAddressClaim", "name": claim,
            "uid": found.metadata.uid, "controller": true}]},
        "spec": {"claimRef": {"name": claim}, "poolRef": found.data["spec"]["poolRef"], "address": address,
                 "prefix": prefix, "gateway": gateway},
    }))
    .expect("IPAddress");
    addresses
        .create(&PostParams::default(), &body)
        .await
        .expect("IPAddress");
    let status = json!({"status": {"addressRef": {"name": claim}}});
    claims
        .patch_status(claim, &PatchParams::default(), &Patch::Merge(&status))
        .await
        .expect("claim status");
}

/// Static addresses on an Ignition guest (issue 25): the NetworkManager keyfile and networkd unit CAPOV adds pass
/// Ignition's validator and carry the addresses, gateway and DNS, the machine reports the addresses, and the claims
/// go with the machine. The claims carry the machine's watch-filter label (this World runs with --watch-filter), or
/// CAPOV would never see them.
#[tokio::test]
async fn static_addresses_on_an_ignition_guest_pass_ignitions_validator() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let validator = tool(
        "CAPOV_IGNITION_DIR",
        "ignition-validate",
        "`tools/build-go-tools.sh --ignition` (tools/test.sh does)",
    );
    let mut world = World::new("payload-ipam").await;
    world.start_operator().await;
    let name = "worker-ipam-0";
    let pool = |name: &str| json!({"apiGroup": "ipam.cluster.x-k8s.io", "kind": "InClusterIPPool", "name": name});
    world
        .create_machine_with_bootstrap(
            name,
            json!({"ovirtcluster": "Default", "template": "rhcos-4.14",
                   "nics": [{"vnicprofile": "ovirtmgmt", "addressesFromPools": [pool("v4"), pool("v6")]}],
                   "dns": {"servers": ["192.0.2.53"], "searchDomains": ["example.com"]}}),
            IGNITION_WORKER,
            "ignition",
        )
        .await;
    fulfil_claim(&world, &format!("{name}-0-0"), "192.0.2.20", 24, "192.0.2.1").await;
    fulfil_claim(&world, &format!("{name}-0-1"), "2001:db8::20", 64, "2001:db8::1").await;
    let vm_id = world.vm_id(name).await;
    let payload = delivered(&world, &vm_id).await;
    assert_eq!(payload.kind, "ignition");

    let dir = scratch("ipam");
    let file = dir.join("config.ign");
    std::fs::write(&file, &payload.user_data).expect("config");
    let output = Command::new(&validator)
        .arg(&file)
        .output()
        .expect("ignition-validate runs");
    let report = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(
        output.status.success() && report.trim().is_empty(),
        "Ignition: {report}"
    );
    let config: Value = serde_json::from_str(&payload.user_data).expect("JSON");
    let files = config["storage"]["files"].as_array().cloned().unwrap_or_default();
    let keyfile = files
        .iter()
        .find(|f| f["path"] == "/etc/NetworkManager/system-connections/capov-eth0.nmconnection")
        .unwrap_or_else(|| panic!("no keyfile in {files:?}"));
    assert_eq!(
        keyfile["mode"], 0o600,
        "NetworkManager ignores a keyfile others can read"
    );
    let source = keyfile["contents"]["source"].as_str().unwrap_or_default();
    for expected in [
        "192.0.2.20%2F24%2C192.0.2.1",
        "2001%3Adb8%3A%3A20%2F64",
        "192.0.2.53",
        "example.com",
    ] {
        assert!(source.contains(expected), "{expected} not in {source}");
    }

    // The machine reports both addresses.
    eventually(Duration::from_secs(60), "the static addresses in status", || async {
        let machine = world.machine(name).await;
        let addresses: Vec<String> = machine
            .status
            .map(|status| status.addresses)
            .unwrap_or_default()
            .into_iter()
            .map(|a| a.address)
            .collect();
        (addresses.contains(&"192.0.2.20".to_string()) && addresses.contains(&"2001:db8::20".to_string())).then_some(())
    })
    .await;

    world.delete_machine_and_wait(name).await;
    let claims = world
        .client
        .request::<Value>(
            http::Request::get(format!(
                "/apis/ipam.cluster.x-k8s.io/v1beta2/namespaces/{}/ipaddressclaims",
                world.namespace
            ))
            .body(Vec::new())
            .expect("request"),
        )
        .await
        .expect("list claims");
    assert_eq!(claims["items"], json!([]), "claims left after the machine");
    world.stop_operator().await;
    let _ = std::fs::remove_dir_all(&dir);
}

/// Issue 35: a restarted operator whose first pass of a deleting machine came before the IPAddressClaims were listed
/// saw none, removed the finalizer, and left the claim holding CAPOV's finalizer and its address for ever. Here the
/// claims cannot be listed after the restart (the apiserver answers 503 for them): the VM goes, the finalizer waits
/// with WaitingForIPAddressClaims, and once the claims are listed they are released and the machine goes.
#[tokio::test]
async fn a_restarted_operator_releases_a_deleting_machines_claims_only_once_they_are_listed() {
    use capov_harness::Trouble;
    use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind};

    let _ = rustls::crypto::ring::default_provider().install_default();
    let mut world = World::new("claims-restart").await;
    world.start_operator().await;
    let name = "worker-static";
    let pool = json!({"apiGroup": "ipam.cluster.x-k8s.io", "kind": "InClusterIPPool", "name": "v4"});
    world
        .create_machine(
            name,
            json!({"ovirtcluster": "Default", "template": "ubuntu-22.04",
                   "nics": [{"vnicprofile": "ovirtmgmt", "addressesFromPools": [pool]}]}),
        )
        .await;
    let claim = format!("{name}-0-0");
    fulfil_claim(&world, &claim, "192.0.2.30", 24, "192.0.2.1").await;
    let vm_id = world.vm_id(name).await;
    world.stop_operator().await;

    let machines: Api<capov_crds::OVirtMachine> = Api::namespaced(world.client.clone(), &world.namespace);
    machines.delete(name, &Default::default()).await.expect("delete");
    let proxy = support::apiserver_proxy().await;
    proxy.set(Trouble {
        unavailable: Some("ipaddressclaims"),
        ..Trouble::NONE
    });
    let config = proxy.kube_config().await.expect("the proxy's kubeconfig");
    let clients = capov_actors::runtime::KubeClients::new(config).expect("clients");
    world.start_operator_with_clients(clients, world.settings()).await;

    let waiting = world
        .wait_reason(
            Duration::from_secs(90),
            name,
            "MachineDeleted",
            "WaitingForIPAddressClaims",
        )
        .await;
    assert!(waiting.metadata.deletion_timestamp.is_some());
    eventually(Duration::from_secs(60), "the VM deleted meanwhile", || async {
        world.sim.control().vm(&vm_id).is_none().then_some(())
    })
    .await;

    proxy.set(Trouble::NONE);
    let claims: Api<DynamicObject> = Api::namespaced_with(
        world.client.clone(),
        &world.namespace,
        &ApiResource::from_gvk_with_plural(
            &GroupVersionKind::gvk("ipam.cluster.x-k8s.io", "v1beta2", "IPAddressClaim"),
            "ipaddressclaims",
        ),
    );
    eventually(
        Duration::from_secs(90),
        "the claim released and the machine gone",
        || async {
            let claim_gone = claims.get_opt(&claim).await.expect("get claim").is_none();
            let machine_gone = machines.get_opt(name).await.expect("get machine").is_none();
            (claim_gone && machine_gone).then_some(())
        },
    )
    .await;
    world.stop_operator().await;
    println!(
        "claims after a restart: while the claims could not be listed the deleting machine kept its finalizer \
         (WaitingForIPAddressClaims, its VM deleted); once listed, claim {claim} was released and the machine went"
    );
}
