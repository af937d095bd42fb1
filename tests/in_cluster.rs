//! The operator as users run it: its image (`tools/image/build.sh`, built offline) imported into a real node
//! (containerd, kubelet and kube-proxy from `tools/node/up.sh`) joined to the harness's kube-apiserver, and installed
//! by Helm from `chart/capov-crds` and `chart/capov`. The pod runs under the chart's ServiceAccount with the token
//! the apiserver's admission mounts (no other credentials), reaches the apiserver through the `kubernetes` Service
//! (kube-proxy's iptables rules), becomes Ready on `/readyz` and takes the leader Lease; `/metrics` answers through
//! `capov-metrics-service` to a token bound to `capov-metrics-reader` only; the documents' kubectl commands work; a
//! machine becomes Ready against an engine simulator on the node's address; `helm upgrade` (new feature gates, two
//! replicas) hands the Lease to a new pod, and on to another when that one is deleted; `helm uninstall` removes it.
//!
//! Needs root (apt installs, containerd, iptables, mounts) and a Docker engine (the script installs and starts one),
//! so it is ignored by plain `cargo test`; `tools/test.sh` runs it with `CAPOV_NODE_TESTS=1`. Prints the image size,
//! the node's start time and the pod's start time.

mod support;

use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use base64::Engine as _;
use capov_crds::OVirtMachine;
use capov_harness::{ControlPlane, Node, Options, objects, routable_address};
use capov_ovirt_sim::Simulator;
use k8s_openapi::api::authentication::v1::TokenRequest;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Event, Pod, Service, ServiceAccount};
use k8s_openapi::api::rbac::v1::ClusterRoleBinding;
use kube::api::{Api, DeleteParams, ListParams, PostParams};
use serde_json::json;
use support::{eventually, is_ready};

const NAMESPACE: &str = "capov-system";
const SERVICE_ACCOUNT: &str = "capov-controller-manager";
/// The chart's default Lease name (`--leader-election-id` is not passed).
const LEASE: &str = "capov-controller-manager";
const POD_SELECTOR: &str = "control-plane=controller-manager";

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// A command with the variables cargo sets for a test removed: they would reach the cargo build a script starts and,
/// as ring's build script watches several of them, rebuild the release tree on every switch between test and shell.
fn without_cargo_env(mut command: Command) -> Command {
    for (name, _) in std::env::vars_os() {
        let name = name.to_string_lossy();
        let set_by_cargo = name == "CARGO" || name == "OUT_DIR" || name.starts_with("CARGO_");
        if set_by_cargo && name != "CARGO_HOME" && name != "CARGO_TARGET_DIR" {
            command.env_remove(name.as_ref());
        }
    }
    command
}

fn run(mut command: Command) -> String {
    let output = command.output().unwrap_or_else(|err| panic!("{command:?}: {err}"));
    assert!(
        output.status.success(),
        "{command:?} failed ({}):\n{}{}",
        output.status,
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout).into_owned()
}

/// The image as `tools/image/build.sh` builds it (its default reference, `capov-manager:<version>`).
fn build_image() -> String {
    let began = Instant::now();
    let stdout = run(without_cargo_env(Command::new(root().join("tools/image/build.sh"))));
    let image = stdout
        .lines()
        .last()
        .expect("the script prints the image")
        .trim()
        .to_string();
    let size: u64 = run({
        let mut command = Command::new("/usr/bin/docker");
        command.args(["image", "inspect", "--format", "{{.Size}}", &image]);
        command
    })
    .trim()
    .parse()
    .expect("image size");
    println!(
        "image {image}: {size} bytes ({:.1} MiB), built in {:.0}s",
        size as f64 / 1048576.0,
        began.elapsed().as_secs_f64()
    );
    image
}

/// Helm (`CAPOV_HELM_DIR/helm`, else built once by the tools script) against `plane`.
fn helm(plane: &ControlPlane) -> Command {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    let dir = DIR.get_or_init(|| {
        if let Some(dir) = std::env::var_os("CAPOV_HELM_DIR").map(PathBuf::from)
            && dir.join("helm").exists()
        {
            return dir;
        }
        let mut command = Command::new("bash");
        command.arg(root().join("tools/build-go-tools.sh")).arg("--helm");
        PathBuf::from(run(command).trim())
    });
    let mut command = Command::new(dir.join("helm"));
    let home = std::env::temp_dir().join(format!("capov-helm-home-{}", std::process::id()));
    command
        .env("HELM_CONFIG_HOME", home.join("config"))
        .env("HELM_CACHE_HOME", home.join("cache"))
        .env("HELM_DATA_HOME", home.join("data"))
        .arg(format!("--kubeconfig={}", plane.kubeconfig_path().display()))
        .current_dir(root());
    command
}

fn pod_ready(pod: &Pod) -> bool {
    pod.status
        .as_ref()
        .and_then(|status| status.conditions.as_ref())
        .is_some_and(|conditions| conditions.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

/// What to look at when the pod does not come up: its status, the namespace's events and the node's logs.
async fn diagnosis(client: &kube::Client, node: &Node) -> String {
    let pods: Api<Pod> = Api::namespaced(client.clone(), NAMESPACE);
    let statuses = match pods.list(&ListParams::default()).await {
        Ok(list) => list
            .items
            .iter()
            .map(|pod| format!("{:?}: {:?}", pod.metadata.name, pod.status))
            .collect::<Vec<_>>()
            .join("\n"),
        Err(err) => format!("cannot list pods: {err}"),
    };
    let events: Api<Event> = Api::namespaced(client.clone(), NAMESPACE);
    let events = match events.list(&ListParams::default()).await {
        Ok(list) => list
            .items
            .iter()
            .map(|event| format!("{:?} {:?}: {:?}", event.type_, event.reason, event.message))
            .collect::<Vec<_>>()
            .join("\n"),
        Err(err) => format!("cannot list events: {err}"),
    };
    format!(
        "pods:\n{statuses}\nevents:\n{events}\nkubelet:\n{}\nkube-proxy:\n{}",
        node.log_tail("kubelet"),
        node.log_tail("kube-proxy")
    )
}

/// A token for a new ServiceAccount `name` in the operator's namespace, bound to `cluster_role` when given.
async fn service_account_token(client: &kube::Client, name: &str, cluster_role: Option<&str>) -> String {
    let accounts: Api<ServiceAccount> = Api::namespaced(client.clone(), NAMESPACE);
    let account: ServiceAccount = serde_json::from_value(json!({"metadata": {"name": name}})).expect("account");
    accounts
        .create(&PostParams::default(), &account)
        .await
        .expect("ServiceAccount");
    if let Some(role) = cluster_role {
        let binding: ClusterRoleBinding = serde_json::from_value(json!({
            "metadata": {"name": format!("{name}-{role}")},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role},
            "subjects": [{"kind": "ServiceAccount", "name": name, "namespace": NAMESPACE}]
        }))
        .expect("binding");
        Api::<ClusterRoleBinding>::all(client.clone())
            .create(&PostParams::default(), &binding)
            .await
            .expect("ClusterRoleBinding");
    }
    let request: TokenRequest =
        serde_json::from_value(json!({"spec": {"audiences": [], "expirationSeconds": 600}})).expect("request");
    let answer: TokenRequest = accounts
        .create_subresource("token", name, &PostParams::default(), &request)
        .await
        .expect("TokenRequest");
    answer
        .status
        .and_then(|status| status.token)
        .expect("token in the TokenRequest's status")
}

/// `/metrics` through `capov-metrics-service` (its ClusterIP, routed by kube-proxy's rules on this machine, which is
/// the node): 200 with the operator's metrics for a token bound to `capov-metrics-reader`, 403 for a token without
/// that role, 401 without a token.
async fn metrics_answer_through_the_service_to_a_bound_token_only(
    plane: &ControlPlane,
    node: &Node,
    client: &kube::Client,
) {
    let services: Api<Service> = Api::namespaced(client.clone(), NAMESPACE);
    let service = services.get("capov-metrics-service").await.expect("metrics Service");
    let cluster_ip = service
        .spec
        .and_then(|spec| spec.cluster_ip)
        .expect("the Service has a ClusterIP");
    let url = format!("https://{cluster_ip}:8443/metrics");
    let reader = service_account_token(client, "scraper", Some("capov-metrics-reader")).await;
    let stranger = service_account_token(client, "stranger", None).await;
    let _ = rustls::crypto::ring::default_provider().install_default();
    // The operator's metrics certificate is self-signed (the chart's ServiceMonitor skips verification too).
    let http = reqwest::Client::builder()
        .danger_accept_invalid_certs(true)
        .timeout(Duration::from_secs(5))
        .build()
        .expect("HTTP client");
    let status = |token: Option<String>| {
        let (http, url) = (http.clone(), url.clone());
        async move {
            let mut request = http.get(&url);
            if let Some(token) = token {
                request = request.bearer_auth(token);
            }
            let response = request.send().await.map_err(|err| format!("{err:?}"))?;
            let code = response.status().as_u16();
            Ok::<_, String>((code, response.text().await.unwrap_or_default()))
        }
    };
    // The endpoints follow the pod's readiness; kube-proxy writes the rules a moment later.
    let deadline = Instant::now() + Duration::from_secs(90);
    let body = loop {
        let outcome = status(Some(reader.clone())).await;
        match outcome {
            Ok((200, body)) => break body,
            _ if Instant::now() > deadline => {
                let slices = plane
                    .kubectl()
                    .map(|mut command| {
                        command.args(["get", "endpointslices", "-n", NAMESPACE, "-o", "wide"]);
                        run(command)
                    })
                    .unwrap_or_default();
                panic!(
                    "/metrics through the Service never answered 200 within 90s; last: {outcome:?}\n\
                     endpoint slices:\n{slices}\nkube-proxy:\n{}",
                    node.log_tail("kube-proxy")
                );
            }
            _ => tokio::time::sleep(Duration::from_millis(500)).await,
        }
    };
    assert!(body.contains("capov_leader"), "no capov_leader in /metrics:\n{body}");
    assert_eq!(status(Some(stranger)).await.map(|(code, _)| code), Ok(403));
    assert_eq!(status(None).await.map(|(code, _)| code), Ok(401));
    println!("/metrics via {url}: 200 for capov-metrics-reader, 403 without the role, 401 without a token");
}

/// The product documents' §4.1 commands, with kubectl against this cluster.
fn the_documents_kubectl_commands_work(plane: &ControlPlane) {
    let kubectl = |args: &[&str]| {
        let mut command = plane.kubectl().expect("kubectl");
        command.args(args);
        run(command)
    };
    let pods = kubectl(&["get", "pods", "-n", NAMESPACE]);
    assert!(
        pods.contains("capov-controller-manager-") && pods.contains("Running"),
        "{pods}"
    );
    let described = kubectl(&["describe", "pod", "-n", NAMESPACE, "-l", POD_SELECTOR]);
    assert!(
        described.contains(&format!("Service Account:  {SERVICE_ACCOUNT}")),
        "{described}"
    );
    // Through the apiserver to the kubelet (its client certificate) and the container's log.
    let logs = kubectl(&["logs", "-n", NAMESPACE, "deployment/capov-controller-manager"]);
    let gates: Vec<&str> = logs.lines().filter(|line| line.contains("feature gates")).collect();
    assert_eq!(gates.len(), 1, "one `feature gates` line expected in the log:\n{logs}");
    println!("kubectl logs … | grep \"feature gates\": {}", gates[0]);
}

/// The Lease's holder identity, when held.
async fn lease_holder(leases: &Api<Lease>) -> Option<String> {
    let lease = leases.get_opt(LEASE).await.ok().flatten()?;
    lease.spec?.holder_identity.filter(|holder| !holder.is_empty())
}

/// `helm upgrade` with a changed `featureGates` and two replicas: the Deployment replaces the pod, a pod of the new
/// template takes the Lease and logs the new gates, the other stands by; when the leader's pod is deleted, another
/// live pod (the standby or the ReplicaSet's replacement) takes the Lease.
async fn upgrade_hands_over_to_new_pods_and_the_lease_survives_a_deleted_leader(
    plane: &ControlPlane,
    client: &kube::Client,
    image_values: &str,
) {
    let mut upgrade = helm(plane);
    upgrade.args([
        "upgrade",
        "capov",
        "chart/capov",
        "--namespace",
        NAMESPACE,
        "--set",
        image_values,
        "--set",
        "replicas=2,featureGates.disk-add-vm-name=true",
    ]);
    let upgraded = Instant::now();
    run(upgrade);
    let pods: Api<Pod> = Api::namespaced(client.clone(), NAMESPACE);
    let leases: Api<Lease> = Api::namespaced(client.clone(), NAMESPACE);
    let selector = ListParams::default().labels(POD_SELECTOR);
    let new_gates = "--feature-gates=disk-add-vm-name=true";
    let is_new = |pod: &Pod| {
        pod.spec
            .as_ref()
            .is_some_and(|spec| spec.containers[0].args.iter().flatten().any(|arg| arg == new_gates))
    };
    // Two Ready pods of the new template and no old one left, one of them holding the Lease.
    let (leader, standby) = eventually(
        Duration::from_secs(180),
        "two new pods Ready, one holding the Lease",
        || async {
            let list = pods.list(&selector).await.ok()?.items;
            let live: Vec<&Pod> = list
                .iter()
                .filter(|pod| pod.metadata.deletion_timestamp.is_none())
                .collect();
            let all_new_and_ready = live.len() == 2 && live.iter().all(|pod| is_new(pod) && pod_ready(pod));
            if !all_new_and_ready || list.len() != 2 {
                return None;
            }
            let holder = lease_holder(&leases).await?;
            let names: Vec<String> = live.iter().filter_map(|pod| pod.metadata.name.clone()).collect();
            let leader = names.iter().find(|name| holder.starts_with(name.as_str()))?.clone();
            let standby = names.into_iter().find(|name| *name != leader)?;
            Some((leader, standby))
        },
    )
    .await;
    println!(
        "helm upgrade: {leader} (new gates) holds the Lease, {standby} stands by, {:.1}s after the upgrade",
        upgraded.elapsed().as_secs_f64()
    );
    let mut logs = plane.kubectl().expect("kubectl");
    logs.args(["logs", "-n", NAMESPACE, &leader]);
    let logs = run(logs);
    assert!(
        logs.contains("feature gates: disk-add-vm-name=true"),
        "the new leader did not log the new gates:\n{logs}"
    );

    pods.delete(&leader, &DeleteParams::default())
        .await
        .expect("delete the leader's pod");
    let deleted = Instant::now();
    // The ReplicaSet replaces the deleted pod at once, so the standby and the replacement race for the Lease the
    // old leader releases: either may win, the deleted pod must not keep it.
    let holder = eventually(Duration::from_secs(90), "another pod to take the Lease", || async {
        let holder = lease_holder(&leases).await?;
        if holder.starts_with(&leader) {
            return None;
        }
        let list = pods.list(&selector).await.ok()?.items;
        list.iter()
            .filter(|pod| pod.metadata.deletion_timestamp.is_none())
            .filter_map(|pod| pod.metadata.name.as_deref())
            .any(|name| holder.starts_with(name))
            .then_some(holder)
    })
    .await;
    let taker = if holder.starts_with(&standby) {
        "the standby"
    } else {
        "the replacement pod"
    };
    println!(
        "leader pod deleted: {taker} took the Lease ({holder}) {:.1}s later",
        deleted.elapsed().as_secs_f64()
    );
}

/// The pod's operator brings a machine to Ready against an engine simulator listening on the node's address (a
/// certificate naming it, its CA in the provider's `tls.certs`), the workload cluster being this same apiserver by
/// its routable address (the `<cluster>-kubeconfig` Secret); the test plays the VM's kubelet registering its Node.
async fn machine_becomes_ready_against_an_engine_on_the_node_address(
    plane: &ControlPlane,
    client: &kube::Client,
    address: IpAddr,
) {
    let sim = Simulator::builder()
        .listen(SocketAddr::new(address, 0))
        .tls_name(&address.to_string())
        .start()
        .await
        .expect("simulator on the node address");
    let namespace = plane.create_namespace(client, "tenant").await.expect("namespace");
    // The operator reads engine credentials from its own namespace (the chart's POD_NAMESPACE).
    objects::apply_secret(
        client,
        NAMESPACE,
        "engine-credentials",
        &[("username", "admin@internal"), ("password", "admin")],
    )
    .await
    .expect("credentials");
    let ca = base64::engine::general_purpose::STANDARD.encode(sim.ca_pem().expect("https simulator"));
    let provider = format!("{namespace}-engine");
    let spec = json!({"engine": sim.api_url(), "credentialsSecretName": "engine-credentials", "tls": {"certs": ca}});
    objects::apply_provider(client, &provider, json!({}), spec)
        .await
        .expect("provider");
    let kubeconfig = plane.kubeconfig_yaml().expect("kubeconfig");
    objects::apply_secret(client, &namespace, "workload-kubeconfig", &[("value", &kubeconfig)])
        .await
        .expect("kubeconfig Secret");
    let labels = json!({"cluster.x-k8s.io/cluster-name": "workload"});
    objects::create_provisioned_cluster(client, &namespace, "workload", labels.clone())
        .await
        .expect("cluster");
    let name = "worker-0";
    let spec = json!({"provider": provider, "ovirtcluster": "Default", "template": "ubuntu-22.04",
                      "osdisksizegb": 40, "cpu": {"sockets": 1, "cores": 2, "threads": 1},
                      "memory": {"sizemb": 4096}, "nics": [{"vnicprofile": "ovirtmgmt"}]});
    let began = Instant::now();
    objects::create_machine(client, &namespace, "workload", name, labels, spec)
        .await
        .expect("machine");

    let machines: Api<OVirtMachine> = Api::namespaced(client.clone(), &namespace);
    let mut registered = false;
    let deadline = Instant::now() + Duration::from_secs(180);
    loop {
        let machine = machines.get(name).await.expect("machine");
        if is_ready(&machine) {
            break;
        }
        let vm_id = machine
            .spec
            .provider_id
            .as_deref()
            .and_then(|id| id.strip_prefix("ovirt://"));
        let up = sim.control().vm_by_name(name).is_some_and(|vm| vm.status == "up");
        if let (Some(vm_id), true, false) = (vm_id, up, registered) {
            objects::register_node(client, name, vm_id).await.expect("node");
            registered = true;
        }
        assert!(
            Instant::now() < deadline,
            "the machine was not Ready within 180s: {:?}\nVMs: {:?}",
            machine.status,
            sim.control().vms()
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    println!(
        "machine {namespace}/{name} Ready against the engine at {} in {:.1}s",
        sim.api_url(),
        began.elapsed().as_secs_f64()
    );
    assert_eq!(sim.control().vm_count(), 1, "{:?}", sim.control().vms());

    // Deleted while the operator runs: it removes the VM and then its finalizer, so nothing is left stuck for the
    // uninstall.
    machines
        .delete(name, &DeleteParams::default())
        .await
        .expect("delete the machine");
    eventually(
        Duration::from_secs(120),
        "the machine and its VM to be gone",
        || async {
            let gone = machines.get_opt(name).await.ok()?.is_none();
            (gone && sim.control().vm_count() == 0).then_some(())
        },
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs root and a Docker engine, starts a real node on this machine: tools/test.sh runs it with \
            CAPOV_NODE_TESTS=1"]
async fn the_chart_runs_the_image_on_a_real_node_under_its_service_account() {
    let image = build_image();
    let (repository, tag) = image.rsplit_once(':').expect("image reference has a tag");

    let began = Instant::now();
    let address = routable_address().expect("routable address");
    let plane = ControlPlane::start_for_node(
        Options {
            capi_crds: true,
            ..Options::default()
        },
        address,
    )
    .await
    .expect("control plane for a node");
    println!(
        "control plane on {} in {:.1}s",
        plane.url(),
        began.elapsed().as_secs_f64()
    );
    let began = Instant::now();
    let node = Node::start(&plane, "capov-node").await.expect("node");
    println!("node {} Ready in {:.1}s", node.name(), began.elapsed().as_secs_f64());
    let began = Instant::now();
    node.import_image(&image).expect("image import");
    println!("image imported into the node in {:.1}s", began.elapsed().as_secs_f64());
    let client = plane.client().await.expect("client");

    let mut install_crds = helm(&plane);
    install_crds.args(["install", "capov-crds", "chart/capov-crds"]);
    run(install_crds);
    let mut install = helm(&plane);
    // `Never`: the pod can only run the image imported above; nothing is pulled.
    let image_values = format!("manager.image={repository},manager.tag={tag},manager.pullPolicy=Never");
    install.args([
        "install",
        "capov",
        "chart/capov",
        "--namespace",
        NAMESPACE,
        "--create-namespace",
        "--set",
        &image_values,
    ]);
    let installed = Instant::now();
    run(install);

    let pods: Api<Pod> = Api::namespaced(client.clone(), NAMESPACE);
    let selector = ListParams::default().labels(POD_SELECTOR);
    let deadline = Instant::now() + Duration::from_secs(300);
    let pod = loop {
        let list = pods.list(&selector).await.expect("list pods");
        if let Some(pod) = list.items.into_iter().find(pod_ready) {
            break pod;
        }
        if Instant::now() > deadline {
            panic!(
                "the operator pod was not Ready within 300s of helm install\n{}",
                diagnosis(&client, &node).await
            );
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    };
    let pod_name = pod.metadata.name.clone().expect("pod name");
    println!(
        "pod {pod_name} Ready (readiness probe GET /readyz) {:.1}s after helm install",
        installed.elapsed().as_secs_f64()
    );

    let spec = pod.spec.as_ref().expect("pod spec");
    assert_eq!(spec.service_account_name.as_deref(), Some(SERVICE_ACCOUNT));
    assert_eq!(
        spec.node_name.as_deref(),
        Some(node.name()),
        "scheduled onto the real node"
    );
    // The only credential in the pod is the service-account token the admission plugin projects.
    let volumes = spec.volumes.as_deref().unwrap_or_default();
    assert!(
        volumes.iter().any(|volume| volume.name.starts_with("kube-api-access-")
            && volume.projected.as_ref().is_some_and(|projected| {
                projected
                    .sources
                    .iter()
                    .flatten()
                    .any(|source| source.service_account_token.is_some())
            })),
        "no projected service-account token in {volumes:?}"
    );
    assert!(
        volumes
            .iter()
            .all(|volume| volume.secret.is_none() && volume.host_path.is_none()),
        "the pod mounts more than its token: {volumes:?}"
    );
    let container = &spec.containers[0];
    assert_eq!(container.image.as_deref(), Some(image.as_str()));
    assert!(
        container
            .env
            .iter()
            .flatten()
            .all(|env| env.value_from.as_ref().is_none_or(|from| from.secret_key_ref.is_none())),
        "the container takes a Secret through its environment: {:?}",
        container.env
    );
    let status = pod.status.as_ref().expect("pod status");
    let container_status = &status.container_statuses.as_ref().expect("container statuses")[0];
    assert!(container_status.ready, "container not ready: {container_status:?}");
    assert_eq!(
        container_status.restart_count, 0,
        "the manager restarted: {container_status:?}"
    );

    // The Lease, taken through the `kubernetes` Service with that token: the pod knows no other way to the apiserver.
    let leases: Api<Lease> = Api::namespaced(client.clone(), NAMESPACE);
    let holder = eventually(Duration::from_secs(60), "the pod to hold the Lease", || async {
        lease_holder(&leases)
            .await
            .filter(|holder| holder.starts_with(&pod_name))
    })
    .await;
    println!("Lease {NAMESPACE}/{LEASE} held by {holder}");

    metrics_answer_through_the_service_to_a_bound_token_only(&plane, &node, &client).await;
    the_documents_kubectl_commands_work(&plane);
    machine_becomes_ready_against_an_engine_on_the_node_address(&plane, &client, address).await;
    upgrade_hands_over_to_new_pods_and_the_lease_survives_a_deleted_leader(&plane, &client, &image_values).await;

    let mut uninstall = helm(&plane);
    uninstall.args([
        "uninstall",
        "capov",
        "--namespace",
        NAMESPACE,
        "--wait",
        "--timeout=120s",
    ]);
    run(uninstall);
    eventually(Duration::from_secs(120), "the operator pods to be gone", || async {
        let list = pods.list(&selector).await.ok()?;
        list.items.is_empty().then_some(())
    })
    .await;
    drop(node);
    drop(plane);
}
