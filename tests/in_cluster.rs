//! The operator as users run it: its image (`tools/image/build.sh`, built offline, with the engine's CA added to
//! its bundle) imported into a real node (containerd, kubelet and kube-proxy from `tools/node/up.sh`) joined to the
//! harness's kube-apiserver, installed by Helm from `chart/capov-crds` and `chart/capov`, or by `clusterctl init`
//! from `release/`. The pod runs under its ServiceAccount with the token the apiserver's admission mounts (no other
//! credentials), reaches the apiserver through the `kubernetes` Service (kube-proxy's iptables rules), becomes Ready
//! on `/readyz` and takes the leader Lease; `/metrics` answers through `capov-metrics-service` to a token bound to
//! `capov-metrics-reader` only; the documents' kubectl and troubleshooting commands work; machines become Ready
//! against an engine simulator on the node's address, trusted through the image's CA bundle (`tls.cert: true`);
//! `helm upgrade` (new feature gates, two replicas) hands the Lease to a new pod, and on to another when that one is
//! deleted; `helm uninstall` with a machine present leaves its VM and nothing stuck; `clusterctl delete` removes
//! the provider.
//!
//! Needs root (apt installs, containerd, iptables, mounts) and a Docker engine (the script installs and starts one),
//! so it is ignored by plain `cargo test`; `tools/test.sh` runs it (as root, unless `CAPOV_NODE_TESTS=0`). Prints
//! the image size, the node's start time and the pod's start time.

mod support;

use std::collections::BTreeSet;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

use capov_crds::OVirtMachine;
use capov_crds::labels::MACHINE_FINALIZER;
use capov_harness::{
    CapiModule, ControlPlane, Node, Options, capi_module, objects, offline_clusterctl, rbac, routable_address,
};
use capov_ovirt_sim::{Simulator, SimulatorHandle};
use capov_testkit::{eventually, stdout_of, until, without_cargo_env};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Event, Namespace, Pod, Service};
use kube::api::{Api, DeleteParams, ListParams, PostParams};
use serde_json::json;
use support::is_ready;

const NAMESPACE: &str = "capov-system";
const SERVICE_ACCOUNT: &str = "capov-controller-manager";
/// The chart's default Lease name (`--leader-election-id` is not passed).
const LEASE: &str = "capov-controller-manager";
const POD_SELECTOR: &str = "control-plane=controller-manager";
/// The tenants' workload cluster here is this very apiserver, by the node's address: the management cluster's own
/// apiserver, which the operator refuses as a workload apiserver unless started with this flag.
const ALLOW_INTERNAL: &str = "--allow-internal-workload-servers";
/// The chart value passing [`ALLOW_INTERNAL`].
const ALLOW_NODE_WORKLOAD: &str = "extraArgs={--allow-internal-workload-servers}";
/// Where the image keeps its CA bundle (the Dockerfile's `SSL_CERT_FILE`).
const IMAGE_CA_BUNDLE: &str = "/etc/ssl/certs/ca-certificates.crt";

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn run(mut command: Command) -> String {
    stdout_of(&mut command).unwrap_or_else(|err| panic!("{err}"))
}

/// The image as `tools/image/build.sh` builds it (its default reference, `capov-manager:<version>`).
fn build_image() -> String {
    let began = Instant::now();
    let mut build = Command::new(root().join("tools/image/build.sh"));
    without_cargo_env(&mut build);
    let stdout = run(build);
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

/// Helm against `plane`.
fn helm(plane: &ControlPlane) -> Command {
    plane.helm().unwrap_or_else(|err| panic!("{err}"))
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
    let token = rbac::service_account_token(client, NAMESPACE, name)
        .await
        .expect("service account token");
    if let Some(role) = cluster_role {
        rbac::bind_cluster_role(client, &format!("{name}-{role}"), role, NAMESPACE, name)
            .await
            .expect("ClusterRoleBinding");
    }
    token
}

/// Why `/metrics` does not answer through the Service: the same request straight to each endpoint pod (which tells
/// the pod's server from kube-proxy's routing), the EndpointSlices, kube-proxy's NAT rules for the Service and its log.
async fn service_diagnosis<F, Fut>(
    plane: &ControlPlane,
    node: &Node,
    client: &kube::Client,
    status: &F,
    token: &str,
) -> String
where
    F: Fn(String, Option<String>) -> Fut,
    Fut: std::future::Future<Output = Result<(u16, String), String>>,
{
    let pods: Api<Pod> = Api::namespaced(client.clone(), NAMESPACE);
    let mut direct = String::new();
    for pod in pods
        .list(&ListParams::default().labels(POD_SELECTOR))
        .await
        .map(|list| list.items)
        .unwrap_or_default()
    {
        let ip = pod.status.and_then(|status| status.pod_ip).unwrap_or_default();
        let answer = status(format!("https://{ip}:8443/metrics"), Some(token.to_string()))
            .await
            .map(|(code, _)| code);
        direct.push_str(&format!("{:?} at {ip}: {answer:?}\n", pod.metadata.name));
    }
    let kubectl = |args: &[&str]| {
        plane
            .kubectl()
            .map(|mut command| {
                command.args(args);
                command
                    .output()
                    .map(|output| String::from_utf8_lossy(&output.stdout).into_owned())
                    .unwrap_or_else(|err| err.to_string())
            })
            .unwrap_or_else(|err| err.to_string())
    };
    let slices = kubectl(&["get", "endpointslices", "-n", NAMESPACE, "-o", "wide"]);
    let rules = Command::new("iptables-save")
        .args(["-t", "nat"])
        .output()
        .map(|output| {
            String::from_utf8_lossy(&output.stdout)
                .lines()
                .filter(|line| line.contains("capov-metrics"))
                .collect::<Vec<_>>()
                .join("\n")
        })
        .unwrap_or_else(|err| err.to_string());
    format!(
        "straight to the pods:\n{direct}endpoint slices:\n{slices}\nNAT rules:\n{rules}\nkube-proxy:\n{}",
        node.log_tail("kube-proxy")
    )
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
    // The operator's metrics certificate is self-signed (the chart's ServiceMonitor skips verification too). No
    // pooled connections: every attempt opens its own, so one opened before kube-proxy's rules existed (or to an
    // endpoint since gone) cannot stand for the Service.
    let http = reqwest::Client::builder()
        .danger_accept_invalid_certs(true)
        .pool_max_idle_per_host(0)
        .timeout(Duration::from_secs(5))
        .build()
        .expect("HTTP client");
    let status = |url: String, token: Option<String>| {
        let http = http.clone();
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
    let began = Instant::now();
    let attempts = AtomicU32::new(0);
    let answered = until(Duration::from_secs(180), || async {
        attempts.fetch_add(1, Ordering::Relaxed);
        match status(url.clone(), Some(reader.clone())).await {
            Ok((200, body)) => Ok(body),
            other => Err(format!("{other:?}")),
        }
    })
    .await;
    let body = match answered {
        Ok(body) => body,
        Err(timed_out) => panic!(
            "/metrics through the Service never answered 200: {timed_out}\n{}",
            service_diagnosis(plane, node, client, &status, &reader).await
        ),
    };
    println!(
        "/metrics through the Service answered after {} attempt(s), {:.1}s",
        attempts.load(Ordering::Relaxed),
        began.elapsed().as_secs_f64()
    );
    assert!(body.contains("capov_leader"), "no capov_leader in /metrics:\n{body}");
    assert_eq!(status(url.clone(), Some(stranger)).await.map(|(code, _)| code), Ok(403));
    assert_eq!(status(url.clone(), None).await.map(|(code, _)| code), Ok(401));
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

/// The documents' troubleshooting commands in the operator's pod (`kubectl exec`, through the kubelet): `wget` as
/// written reaches the engine, whose own 401 answers without a login; the same without `--no-check-certificate`
/// verifies the engine through the image's CA bundle; `manager check-engine` passes every step with the pod's
/// service account.
fn the_documents_troubleshooting_commands_work_in_the_pod(plane: &ControlPlane, tenant: &Tenant) {
    let exec = |args: &[&str]| {
        let mut command = plane.kubectl().expect("kubectl");
        command
            .args(["exec", "-n", NAMESPACE, "deployment/capov-controller-manager", "--"])
            .args(args);
        let output = command.output().expect("kubectl exec");
        (
            output.status.code(),
            String::from_utf8_lossy(&output.stdout).into_owned(),
            String::from_utf8_lossy(&output.stderr).into_owned(),
        )
    };
    let api = tenant.sim.api_url();
    for args in [
        vec!["wget", "-qO-", api.as_str(), "--no-check-certificate"],
        vec!["wget", "-qO-", api.as_str()],
    ] {
        let (code, _, stderr) = exec(&args);
        assert!(
            stderr.contains("wget: server returned error: HTTP/1.1 401 Unauthorized"),
            "kubectl exec … {args:?} (exit {code:?}):\n{stderr}"
        );
    }
    let provider = tenant.provider();
    let (code, stdout, stderr) = exec(&["/manager", "check-engine", &provider]);
    assert_eq!(code, Some(0), "check-engine {provider}:\n{stdout}{stderr}");
    let verdicts: Vec<&str> = stdout
        .lines()
        .filter_map(|line| line.split_whitespace().next())
        .collect();
    assert!(
        !verdicts.is_empty() && verdicts.iter().all(|verdict| *verdict == "OK"),
        "check-engine {provider}:\n{stdout}"
    );
    println!(
        "in the pod: wget reaches the engine (401 from it, also with the certificate checked); check-engine:\n{}",
        stdout.trim_end()
    );
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
        "--set",
        ALLOW_NODE_WORKLOAD,
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
            let all_new_and_ready = live.len() == 2 && live.iter().all(|pod| is_new(pod) && objects::pod_ready(pod));
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

/// The product image with the engine simulator's CA appended to its own CA bundle: what a user with a private CA
/// builds (`FROM` the image, one file replaced), so that `spec.tls.cert: true` (system-CA trust) verifies the engine.
fn image_trusting(image: &str, ca_pem: &str) -> String {
    let docker = |args: &[&str]| {
        let mut command = Command::new("/usr/bin/docker");
        command.args(args);
        run(command)
    };
    let dir = tempfile::tempdir().expect("build context");
    let container = docker(&["create", image]).trim().to_string();
    let bundle = dir.path().join("ca-certificates.crt");
    let copied = Command::new("/usr/bin/docker")
        .args(["cp", &format!("{container}:{IMAGE_CA_BUNDLE}")])
        .arg(&bundle)
        .output();
    docker(&["rm", &container]);
    let copied = copied.expect("docker cp");
    assert!(
        copied.status.success(),
        "the image has no {IMAGE_CA_BUNDLE}: {copied:?}"
    );
    let mut pem = std::fs::read_to_string(&bundle).expect("the image's bundle");
    let public_cas = pem.matches("BEGIN CERTIFICATE").count();
    assert!(public_cas > 100, "the image's bundle holds {public_cas} CAs");
    pem.push_str(ca_pem);
    std::fs::write(&bundle, pem).expect("bundle");
    std::fs::write(
        dir.path().join("Dockerfile"),
        format!("FROM {image}\nCOPY ca-certificates.crt {IMAGE_CA_BUNDLE}\n"),
    )
    .expect("Dockerfile");
    let trusting = format!("{image}-engine-ca");
    let mut build = Command::new("/usr/bin/docker");
    build
        .env("DOCKER_BUILDKIT", "1")
        .args(["build", "-t", &trusting])
        .arg(dir.path());
    run(build);
    println!("{trusting}: {image} with the engine's CA appended to its {public_cas} CAs in {IMAGE_CA_BUNDLE}");
    trusting
}

/// A tenant's machines built by the pod's operator against the engine simulator on the node's address, through an
/// OVirtProvider that trusts the engine by the system CA bundle only (`tls.cert: true`, no `certs`). The workload
/// cluster is this same apiserver by its routable address (the `<cluster>-kubeconfig` Secret); the test plays each
/// VM's kubelet registering its Node.
struct Tenant {
    sim: SimulatorHandle,
    namespace: String,
    machines: Api<OVirtMachine>,
}

impl Tenant {
    async fn create(plane: &ControlPlane, client: &kube::Client, sim: SimulatorHandle) -> Tenant {
        let namespace = plane.create_namespace(client, "tenant").await.expect("namespace");
        engine_credentials(client).await;
        let provider = format!("{namespace}-engine");
        let spec = json!({"engine": sim.api_url(), "credentialsSecretName": "engine-credentials",
                          "tls": {"cert": true}});
        objects::apply_provider(client, &provider, json!({}), spec)
            .await
            .expect("provider");
        let kubeconfig = plane.kubeconfig_yaml().expect("kubeconfig");
        objects::create_workload_cluster(client, &namespace, "workload", Tenant::labels(), &kubeconfig)
            .await
            .expect("cluster");
        let machines = Api::namespaced(client.clone(), &namespace);
        Tenant {
            sim,
            namespace,
            machines,
        }
    }

    fn provider(&self) -> String {
        format!("{}-engine", self.namespace)
    }

    fn labels() -> serde_json::Value {
        json!({"cluster.x-k8s.io/cluster-name": "workload"})
    }

    async fn create_machines(&self, client: &kube::Client, names: &[&str]) {
        let spec = json!({"provider": self.provider(), "ovirtcluster": "Default", "template": "ubuntu-22.04",
                          "osdisksizegb": 40, "cpu": {"sockets": 1, "cores": 2, "threads": 1},
                          "memory": {"sizemb": 4096}, "nics": [{"vnicprofile": "ovirtmgmt"}]});
        for name in names {
            objects::create_machine(
                client,
                &self.namespace,
                "workload",
                name,
                Tenant::labels(),
                spec.clone(),
            )
            .await
            .expect("machine");
        }
    }

    /// Waits until every one of `names` is Ready, registering each VM's Node once the VM is up.
    async fn wait_ready(&self, client: &kube::Client, names: &[&str]) {
        let registered = Mutex::new(BTreeSet::new());
        eventually(Duration::from_secs(180), format!("{names:?} Ready"), || async {
            let mut not_ready = Vec::new();
            for name in names {
                let machine = self.machines.get(name).await.expect("machine");
                if is_ready(&machine) {
                    continue;
                }
                let vm_id = machine
                    .spec
                    .provider_id
                    .as_deref()
                    .and_then(|id| id.strip_prefix("ovirt://"));
                let vm = self.sim.control().vm_by_name(name);
                let up = vm.as_ref().is_some_and(|vm| vm.status == "up");
                if let (Some(vm_id), true) = (vm_id, up)
                    && registered.lock().expect("registered Nodes").insert(name.to_string())
                {
                    objects::register_node(client, name, vm_id).await.expect("node");
                }
                not_ready.push(format!("{name}: {:?}; VM {vm:?}", machine.status));
            }
            if not_ready.is_empty() {
                Ok(())
            } else {
                Err(not_ready.join("\n"))
            }
        })
        .await;
    }

    /// Deletes `name` and waits until the operator has removed its VM and then its finalizer.
    async fn delete_machine(&self, name: &str) {
        let vms_before = self.sim.control().vm_count();
        self.machines
            .delete(name, &DeleteParams::default())
            .await
            .expect("delete the machine");
        eventually(
            Duration::from_secs(120),
            "the machine and its VM to be gone",
            || async {
                let gone = self.machines.get_opt(name).await.ok()?.is_none();
                let vm_gone = self.sim.control().vm_by_name(name).is_none();
                (gone && vm_gone && self.sim.control().vm_count() + 1 == vms_before).then_some(())
            },
        )
        .await;
    }
}

/// The engine credentials in the operator's namespace (the chart's POD_NAMESPACE, where it reads them).
async fn engine_credentials(client: &kube::Client) {
    objects::apply_secret(
        client,
        NAMESPACE,
        "engine-credentials",
        &[("username", "admin@internal"), ("password", "admin")],
    )
    .await
    .expect("credentials");
}

/// Adds [`ALLOW_INTERNAL`] to the operator's arguments (the release renders the chart's defaults, without it), and
/// waits until the pods without it are gone, so that the Ready pod found next has it.
async fn allow_internal_workload_servers(client: &kube::Client) {
    use k8s_openapi::api::apps::v1::Deployment;
    use kube::api::{Patch, PatchParams};
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), NAMESPACE);
    let deployment = deployments
        .get(SERVICE_ACCOUNT)
        .await
        .expect("the operator's Deployment");
    let container = (deployment.spec.and_then(|spec| spec.template.spec))
        .and_then(|spec| spec.containers.into_iter().next())
        .expect("the manager container");
    let mut args = container.args.unwrap_or_default();
    args.push(ALLOW_INTERNAL.to_string());
    let patch = json!({"spec": {"template": {"spec": {"containers": [{"name": container.name, "args": args}]}}}});
    deployments
        .patch(SERVICE_ACCOUNT, &PatchParams::default(), &Patch::Strategic(&patch))
        .await
        .expect("patch the operator's Deployment");
    let pods: Api<Pod> = Api::namespaced(client.clone(), NAMESPACE);
    eventually(Duration::from_secs(300), "only pods with the flag left", || async {
        let list = pods
            .list(&ListParams::default().labels(POD_SELECTOR))
            .await
            .expect("pods");
        let has_flag = |pod: &Pod| {
            (pod.spec.iter()).any(|spec| {
                spec.containers[0]
                    .args
                    .iter()
                    .flatten()
                    .any(|arg| arg == ALLOW_INTERNAL)
            })
        };
        (!list.items.is_empty() && list.items.iter().all(has_flag)).then_some(())
    })
    .await;
}

/// `helm install` of chart/capov with `image_values`; returns the first Ready operator pod.
async fn install_operator(plane: &ControlPlane, node: &Node, client: &kube::Client, image_values: &str) -> Pod {
    let mut install = helm(plane);
    install.args([
        "install",
        "capov",
        "chart/capov",
        "--namespace",
        NAMESPACE,
        "--create-namespace",
        "--set",
        image_values,
        "--set",
        ALLOW_NODE_WORKLOAD,
    ]);
    let installed = Instant::now();
    run(install);
    wait_for_ready_pod(client, node, installed, "helm install").await
}

/// The first Ready operator pod, waited for since `since` (when `what` installed it).
async fn wait_for_ready_pod(client: &kube::Client, node: &Node, since: Instant, what: &str) -> Pod {
    let pods: Api<Pod> = Api::namespaced(client.clone(), NAMESPACE);
    let selector = ListParams::default().labels(POD_SELECTOR);
    let ready = until(Duration::from_secs(300), || async {
        let list = pods.list(&selector).await.expect("list pods");
        list.items.into_iter().find(objects::pod_ready)
    })
    .await;
    let pod = match ready {
        Ok(pod) => pod,
        Err(timed_out) => panic!(
            "the operator pod was not Ready after {what}: {timed_out}\n{}",
            diagnosis(client, node).await
        ),
    };
    println!(
        "pod {} Ready (readiness probe GET /readyz) {:.1}s after {what}",
        pod.metadata.name.as_deref().unwrap_or_default(),
        since.elapsed().as_secs_f64()
    );
    pod
}

/// The operator pod runs `image` on the node as `capov-controller-manager`, with the projected service-account token
/// as its only credential, Ready without a restart, and takes the leader Lease through the `kubernetes` Service with
/// that token (the pod knows no other way to the apiserver).
async fn runs_under_its_service_account_only_and_leads(client: &kube::Client, node: &Node, pod: &Pod, image: &str) {
    let pod_name = pod.metadata.name.clone().expect("pod name");
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
    assert_eq!(container.image.as_deref(), Some(image));
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

    let leases: Api<Lease> = Api::namespaced(client.clone(), NAMESPACE);
    let holder = eventually(Duration::from_secs(60), "the pod to hold the Lease", || async {
        lease_holder(&leases)
            .await
            .filter(|holder| holder.starts_with(&pod_name))
    })
    .await;
    println!("Lease {NAMESPACE}/{LEASE} held by {holder}");
}

/// `helm uninstall` while a machine still exists: the pods go, the machine keeps its VM and its finalizer without
/// being marked for deletion (removing the operator deletes no VM), and the operator's namespace deletes without
/// anything left stuck in it. Installed again, the operator takes the machine over and finishes its deletion.
async fn uninstall_with_a_machine_present_leaves_nothing_stuck(
    plane: &ControlPlane,
    node: &Node,
    client: &kube::Client,
    tenant: &Tenant,
    machine: &str,
    image_values: &str,
) {
    let mut uninstall = helm(plane);
    uninstall.args([
        "uninstall",
        "capov",
        "--namespace",
        NAMESPACE,
        "--wait",
        "--timeout=120s",
    ]);
    run(uninstall);
    let pods: Api<Pod> = Api::namespaced(client.clone(), NAMESPACE);
    let selector = ListParams::default().labels(POD_SELECTOR);
    eventually(Duration::from_secs(120), "the operator pods to be gone", || async {
        let list = pods.list(&selector).await.ok()?;
        list.items.is_empty().then_some(())
    })
    .await;
    let kept = tenant
        .machines
        .get(machine)
        .await
        .expect("the machine outlives the operator");
    assert!(kept.metadata.deletion_timestamp.is_none(), "{:?}", kept.metadata);
    assert!(
        kept.metadata
            .finalizers
            .iter()
            .flatten()
            .any(|f| f == MACHINE_FINALIZER),
        "the machine lost its finalizer: {:?}",
        kept.metadata.finalizers
    );
    assert!(
        tenant.sim.control().vm_by_name(machine).is_some(),
        "uninstalling the operator deleted the VM"
    );

    let namespaces: Api<Namespace> = Api::all(client.clone());
    namespaces
        .delete(NAMESPACE, &DeleteParams::default())
        .await
        .expect("delete the operator's namespace");
    let deleted = Instant::now();
    eventually(
        Duration::from_secs(120),
        "the operator's namespace to be gone",
        || async { namespaces.get_opt(NAMESPACE).await.ok()?.is_none().then_some(()) },
    )
    .await;
    println!(
        "helm uninstall with {machine} present: pods gone, machine and VM kept with the finalizer, namespace {NAMESPACE} \
         deleted in {:.1}s",
        deleted.elapsed().as_secs_f64()
    );

    // The namespace and the engine credentials first, so the new operator connects at its first attempt.
    let namespace: Namespace = serde_json::from_value(json!({"metadata": {"name": NAMESPACE}})).expect("namespace");
    namespaces
        .create(&PostParams::default(), &namespace)
        .await
        .expect("create the operator's namespace again");
    engine_credentials(client).await;
    install_operator(plane, node, client, image_values).await;
    let began = Instant::now();
    tenant.delete_machine(machine).await;
    println!(
        "installed again: the new operator deleted {machine} (VM, then finalizer) in {:.1}s",
        began.elapsed().as_secs_f64()
    );
}

/// One node per machine (fixed ports, one bridge): the tests of this file take turns.
static NODE_SLOT: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// What both in-cluster tests start from: a control plane with CAPI's CRDs, a node joined to it, an engine simulator
/// on the node's address (a certificate from the simulator's own CA, naming that address), and the product image
/// with that CA in its bundle, imported into the node.
struct Lab {
    plane: ControlPlane,
    node: Node,
    client: kube::Client,
    sim: SimulatorHandle,
    image: String,
}

impl Lab {
    async fn start() -> Lab {
        static PRODUCT_IMAGE: OnceLock<String> = OnceLock::new();
        let image = PRODUCT_IMAGE.get_or_init(build_image).clone();
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
        let client = plane.client().await.expect("client");
        let sim = Simulator::builder()
            .listen(SocketAddr::new(address, 0))
            .tls_name(&address.to_string())
            .start()
            .await
            .expect("simulator on the node address");
        // The pod runs the product image with the engine's CA added to the image's bundle (system-CA trust,
        // `tls.cert: true`).
        let image = image_trusting(&image, sim.ca_pem().expect("https simulator"));
        let began = Instant::now();
        node.import_image(&image).expect("image import");
        println!("image imported into the node in {:.1}s", began.elapsed().as_secs_f64());
        Lab {
            plane,
            node,
            client,
            sim,
            image,
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs root and a Docker engine, starts a real node on this machine: tools/test.sh runs it"]
async fn the_chart_runs_the_image_on_a_real_node_under_its_service_account() {
    let _one_node_at_a_time = NODE_SLOT.lock().await;
    let Lab {
        plane,
        node,
        client,
        sim,
        image,
    } = Lab::start().await;
    let (repository, tag) = image.rsplit_once(':').expect("image reference has a tag");

    let mut install_crds = helm(&plane);
    install_crds.args(["install", "capov-crds", "chart/capov-crds"]);
    run(install_crds);
    // `Never`: the pod can only run the image imported above; nothing is pulled.
    let image_values = format!("manager.image={repository},manager.tag={tag},manager.pullPolicy=Never");
    let pod = install_operator(&plane, &node, &client, &image_values).await;

    runs_under_its_service_account_only_and_leads(&client, &node, &pod, &image).await;

    metrics_answer_through_the_service_to_a_bound_token_only(&plane, &node, &client).await;
    the_documents_kubectl_commands_work(&plane);
    let tenant = Tenant::create(&plane, &client, sim).await;
    let began = Instant::now();
    tenant.create_machines(&client, &["worker-0", "worker-1"]).await;
    tenant.wait_ready(&client, &["worker-0", "worker-1"]).await;
    println!(
        "machines worker-0 and worker-1 in {} Ready against the engine at {} (trusted by the image's CA bundle) in \
         {:.1}s",
        tenant.namespace,
        tenant.sim.api_url(),
        began.elapsed().as_secs_f64()
    );
    assert_eq!(tenant.sim.control().vm_count(), 2, "{:?}", tenant.sim.control().vms());
    the_documents_troubleshooting_commands_work_in_the_pod(&plane, &tenant);
    // Deleted while the operator runs: it removes the VM and then the finalizer.
    tenant.delete_machine("worker-0").await;

    upgrade_hands_over_to_new_pods_and_the_lease_survives_a_deleted_leader(&plane, &client, &image_values).await;
    tenant.wait_ready(&client, &["worker-1"]).await;
    uninstall_with_a_machine_present_leaves_nothing_stuck(&plane, &node, &client, &tenant, "worker-1", &image_values)
        .await;

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
    drop(node);
    drop(plane);
}

/// cert-manager's API as clusterctl probes it before installing a provider (it creates a test Issuer and
/// Certificate and skips installing cert-manager when that works). CAPOV itself needs no cert-manager, so its two
/// kinds stand in for it, with open schemas; nothing here issues certificates.
fn cert_manager_api() -> String {
    ["Issuer", "Certificate"]
        .map(|kind| {
            let singular = kind.to_lowercase();
            format!(
                "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\n\
                 metadata: {{name: {singular}s.cert-manager.io}}\n\
                 spec:\n  group: cert-manager.io\n  scope: Namespaced\n  \
                 names: {{kind: {kind}, listKind: {kind}List, plural: {singular}s, singular: {singular}}}\n  \
                 versions:\n  - name: v1\n    served: true\n    storage: true\n    \
                 schema: {{openAPIV3Schema: {{type: object, x-kubernetes-preserve-unknown-fields: true}}}}\n"
            )
        })
        .join("---\n")
}

/// A management cluster whose Cluster API core clusterctl already knows: the core's CRDs (the harness installs
/// them), clusterctl's inventory CRD from the same module with the core provider recorded in it, and cert-manager's
/// API. Returns a clusterctl configuration naming local repositories: the core's, made from its module (its
/// `metadata.yaml` and the components `kustomize` renders from `core/config/default`, as its release does), and
/// CAPOV's committed `release/`, with the image pointed at `image`.
fn management_cluster_for_clusterctl(plane: &ControlPlane, dir: &Path, image: &str) -> PathBuf {
    let CapiModule { dir: module, version } = capi_module().unwrap_or_else(|err| panic!("{err}"));
    let apply = |manifest: &str| {
        let file = dir.join("manifest.yaml");
        std::fs::write(&file, manifest).expect("manifest");
        let mut command = plane.kubectl().expect("kubectl");
        command.args(["apply", "-f"]).arg(&file);
        run(command);
    };
    let inventory_crd = module.join("cmd/clusterctl/config/manifest/clusterctl-api.yaml");
    apply(&std::fs::read_to_string(&inventory_crd).expect("clusterctl's inventory CRD"));
    apply(&cert_manager_api());
    let mut established = plane.kubectl().expect("kubectl");
    established.args([
        "wait",
        "--for=condition=Established",
        "--timeout=60s",
        "crd/providers.clusterctl.cluster.x-k8s.io",
        "crd/issuers.cert-manager.io",
        "crd/certificates.cert-manager.io",
    ]);
    run(established);
    apply(&format!(
        "apiVersion: v1\nkind: Namespace\nmetadata: {{name: capi-system}}\n---\n\
         apiVersion: clusterctl.cluster.x-k8s.io/v1alpha3\nkind: Provider\n\
         metadata:\n  name: cluster-api\n  namespace: capi-system\n  labels:\n    clusterctl.cluster.x-k8s.io: \"\"\n    \
         cluster.x-k8s.io/provider: cluster-api\n\
         providerName: cluster-api\ntype: CoreProvider\nversion: {version}\n"
    ));

    let core = dir.join("repo/cluster-api").join(&version);
    std::fs::create_dir_all(&core).expect("core repository");
    std::fs::copy(module.join("metadata.yaml"), core.join("metadata.yaml")).expect("core metadata");
    let mut kustomize = plane.kubectl().expect("kubectl");
    kustomize.arg("kustomize").arg(module.join("core/config/default"));
    std::fs::write(core.join("core-components.yaml"), run(kustomize)).expect("core components");

    let (repository, tag) = image.rsplit_once(':').expect("image reference has a tag");
    let release = root().join("release/infrastructure-ovirt/v0.1.0/infrastructure-components.yaml");
    let config = dir.join("clusterctl.yaml");
    std::fs::write(
        &config,
        format!(
            "providers:\n  - name: cluster-api\n    type: CoreProvider\n    url: file://{}\n  \
             - name: ovirt\n    type: InfrastructureProvider\n    url: file://{}\n\
             images:\n  infrastructure-ovirt:\n    repository: {}\n    tag: {tag}\n",
            core.join("core-components.yaml").display(),
            release.display(),
            repository
                .rsplit_once('/')
                .map_or("docker.io/library", |(registry, _)| registry),
        ),
    )
    .expect("clusterctl config");
    config
}

/// clusterctl with `args`, offline ([`offline_clusterctl`]), against `plane` (whose routable address is excepted
/// from the refusing proxy); returns what it printed.
fn clusterctl(plane: &ControlPlane, dir: &Path, config: &Path, args: &[&str]) -> String {
    let home = dir.join("home");
    std::fs::create_dir_all(&home).expect("home");
    let host = plane
        .url()
        .trim_start_matches("https://")
        .rsplit_once(':')
        .map_or("", |(host, _)| host)
        .to_string();
    let mut command = offline_clusterctl(&home).unwrap_or_else(|err| panic!("{err}"));
    command
        .args(args)
        .arg("--config")
        .arg(config)
        .arg("--kubeconfig")
        .arg(plane.kubeconfig_path())
        .env("NO_PROXY", host)
        .current_dir(dir);
    let output = command.output().expect("run clusterctl");
    // clusterctl reports on stderr.
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(
        output.status.success(),
        "clusterctl {args:?} failed ({}):\n{said}",
        output.status
    );
    said
}

/// The providers in clusterctl's inventory, as `namespace/name version` lines.
fn inventory(plane: &ControlPlane) -> String {
    let mut command = plane.kubectl().expect("kubectl");
    command.args([
        "get",
        "providers.clusterctl.cluster.x-k8s.io",
        "-A",
        "-o",
        "custom-columns=NAME:.metadata.namespace,PROVIDER:.metadata.name,VERSION:.version",
        "--no-headers",
    ]);
    run(command)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs root and a Docker engine, starts a real node on this machine: tools/test.sh runs it"]
async fn clusterctl_init_runs_the_release_on_a_real_node() {
    let _one_node_at_a_time = NODE_SLOT.lock().await;
    let Lab {
        plane,
        node,
        client,
        sim,
        image,
    } = Lab::start().await;
    let dir = tempfile::tempdir().expect("clusterctl directory");
    let config = management_cluster_for_clusterctl(&plane, dir.path(), &image);

    let began = Instant::now();
    let output = clusterctl(
        &plane,
        dir.path(),
        &config,
        &["init", "--infrastructure", "ovirt:v0.1.0"],
    );
    println!(
        "clusterctl init --infrastructure ovirt:v0.1.0 in {:.1}s:\n{}",
        began.elapsed().as_secs_f64(),
        output.trim_end()
    );
    assert!(
        output.contains(
            "Installing provider=\"infrastructure-ovirt\" version=\"v0.1.0\" targetNamespace=\"capov-system\""
        ),
        "{output}"
    );
    assert!(!output.contains("Installing provider=\"cluster-api\""), "{output}");
    let installed = inventory(&plane);
    assert!(
        installed
            .lines()
            .any(|line| line.split_whitespace().collect::<Vec<_>>()
                == ["capov-system", "infrastructure-ovirt", "v0.1.0"]),
        "clusterctl's inventory lacks CAPOV:\n{installed}"
    );
    allow_internal_workload_servers(&client).await;
    let pod = wait_for_ready_pod(&client, &node, began, "clusterctl init").await;
    // clusterctl's `images:` setting wrote the full reference of the image imported into the node.
    runs_under_its_service_account_only_and_leads(&client, &node, &pod, &format!("docker.io/library/{image}")).await;

    let tenant = Tenant::create(&plane, &client, sim).await;
    let began = Instant::now();
    tenant.create_machines(&client, &["worker-0"]).await;
    tenant.wait_ready(&client, &["worker-0"]).await;
    println!(
        "machine worker-0 Ready under the clusterctl-installed operator in {:.1}s",
        began.elapsed().as_secs_f64()
    );
    tenant.delete_machine("worker-0").await;

    clusterctl(&plane, dir.path(), &config, &["delete", "--infrastructure", "ovirt"]);
    let pods: Api<Pod> = Api::namespaced(client.clone(), NAMESPACE);
    let selector = ListParams::default().labels(POD_SELECTOR);
    eventually(Duration::from_secs(120), "the operator pods to be gone", || async {
        let list = pods.list(&selector).await.ok()?;
        list.items.is_empty().then_some(())
    })
    .await;
    let left = inventory(&plane);
    assert!(
        !left.contains("infrastructure-ovirt"),
        "still in the inventory:\n{left}"
    );
    println!("clusterctl delete --infrastructure ovirt: pods and inventory entry gone");
    drop(node);
    drop(plane);
}
