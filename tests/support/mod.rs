//! What the tests that run real `manager` processes share: the process with its ports and JSON log, and an engine
//! simulator with a workload cluster and the objects of one namespace.

#![allow(dead_code)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use base64::Engine as _;
use capov_crds::{ConditionStatus, OVirtMachine};
use capov_harness::{ControlPlane, Options, objects};
use capov_ovirt_sim::{Simulator, SimulatorHandle, Timings};
use k8s_openapi::api::coordination::v1::Lease;
use kube::api::Api;
use serde_json::{Value, json};

pub const LEASE_NAME: &str = "capov-leader-test";

/// One `manager` process with leader election, its ports and its log file.
pub struct Manager {
    pub name: &'static str,
    pub child: Child,
    pub health_port: u16,
    pub metrics_port: u16,
    pub log: PathBuf,
}

impl Manager {
    /// `name` becomes `POD_NAME`, so the Lease's holder identity starts with it.
    pub fn start(kubeconfig: &Path, namespace: &str, name: &'static str, dir: &Path) -> Manager {
        Self::start_with(kubeconfig, namespace, name, dir, &[])
    }

    pub fn start_with(kubeconfig: &Path, namespace: &str, name: &'static str, dir: &Path, args: &[&str]) -> Manager {
        let (health_port, metrics_port) = (capov_harness::free_port(), capov_harness::free_port());
        let log = dir.join(format!("{name}.log"));
        let file = std::fs::File::create(&log).expect("log file");
        let child = Command::new(env!("CARGO_BIN_EXE_manager"))
            .arg(format!("--kubeconfig={}", kubeconfig.display()))
            .arg("--leader-elect")
            .arg(format!("--leader-election-id={LEASE_NAME}"))
            .arg(format!("--credentials-namespace={namespace}"))
            .arg(format!("--namespace={namespace}"))
            .arg(format!("--watch-filter={namespace}"))
            .arg(format!("--health-probe-bind-address=127.0.0.1:{health_port}"))
            .arg(format!("--metrics-bind-address=127.0.0.1:{metrics_port}"))
            .arg("--metrics-secure=false")
            .args(args)
            .env_remove("HOSTNAME")
            .env("POD_NAME", name)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(file)
            .spawn()
            .expect("start manager");
        Manager {
            name,
            child,
            health_port,
            metrics_port,
            log,
        }
    }

    pub fn is_holder(&self, holder: Option<&str>) -> bool {
        holder.is_some_and(|holder| holder.starts_with(&format!("{}_", self.name)))
    }

    /// The `capov_leader` gauge, once the metrics endpoint answers.
    pub async fn leader_gauge(&self, http: &reqwest::Client) -> Option<i64> {
        let url = format!("http://127.0.0.1:{}/metrics", self.metrics_port);
        let text = http.get(url).send().await.ok()?.text().await.ok()?;
        text.lines()
            .find_map(|line| line.strip_prefix("capov_leader "))
            .and_then(|value| value.trim().parse().ok())
    }

    pub async fn readyz(&self, http: &reqwest::Client) -> Option<u16> {
        let url = format!("http://127.0.0.1:{}/readyz", self.health_port);
        Some(http.get(url).send().await.ok()?.status().as_u16())
    }

    /// The JSON log lines written so far.
    pub fn logs(&self) -> Vec<Value> {
        std::fs::read_to_string(&self.log)
            .unwrap_or_default()
            .lines()
            .filter_map(|line| serde_json::from_str(line).ok())
            .collect()
    }

    pub fn messages(&self) -> Vec<String> {
        self.logs()
            .iter()
            .filter_map(|line| line["message"].as_str().map(String::from))
            .collect()
    }

    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    pub fn sigterm(&self) {
        let status = Command::new("kill")
            .arg("-TERM")
            .arg(self.child.id().to_string())
            .status()
            .expect("kill");
        assert!(status.success());
    }

    pub fn sigkill(&mut self) {
        self.child.kill().expect("SIGKILL");
        let _ = self.child.wait();
    }

    pub async fn wait_exit(&mut self, timeout: Duration) -> ExitStatus {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(status) = self.child.try_wait().expect("try_wait") {
                return status;
            }
            assert!(
                Instant::now() < deadline,
                "{} still runs {timeout:?} later; log:\n{}",
                self.name,
                self.log_text()
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}

impl Drop for Manager {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub fn http() -> reqwest::Client {
    let _ = rustls::crypto::ring::default_provider().install_default();
    reqwest::Client::builder()
        .timeout(Duration::from_secs(5))
        .build()
        .expect("HTTP client")
}

pub async fn holder(leases: &Api<Lease>) -> Option<String> {
    let lease = leases.get_opt(LEASE_NAME).await.expect("read Lease")?;
    lease.spec?.holder_identity.filter(|holder| !holder.is_empty())
}

/// Polls `check` until it returns Some, failing with `what` after `timeout`.
pub async fn eventually<T, F, Fut>(timeout: Duration, what: &str, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(value) = check().await {
            return value;
        }
        assert!(
            Instant::now() < deadline,
            "timed out after {timeout:?} waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

pub struct Engine {
    pub sim: SimulatorHandle,
    pub workload: ControlPlane,
    pub provider: String,
}

/// An engine simulator whose VMs take seconds to create and boot (so that machines are caught half-done), a
/// workload cluster, and the provider, Secret and CAPI Cluster of the namespace, as a user and CAPI core would
/// create them.
pub async fn engine(client: &kube::Client, namespace: &str) -> Engine {
    let sim = Simulator::builder()
        .timings(Timings {
            image_locked_ms: 3000,
            boot_ms: 3000,
            ..Timings::fast()
        })
        .start()
        .await
        .expect("simulator");
    let workload = ControlPlane::start(Options::default()).await.expect("workload cluster");
    let provider = format!("{namespace}-engine");
    objects::apply_secret(
        client,
        namespace,
        "engine-credentials",
        &[("username", "admin@internal"), ("password", "admin")],
    )
    .await
    .expect("credentials");
    let ca = base64::engine::general_purpose::STANDARD.encode(sim.ca_pem().expect("https simulator"));
    let spec = json!({"engine": sim.api_url(), "credentialsSecretName": "engine-credentials", "tls": {"certs": ca}});
    objects::apply_provider(
        client,
        &provider,
        json!({"cluster.x-k8s.io/watch-filter": namespace}),
        spec,
    )
    .await
    .expect("provider");
    let kubeconfig = workload.kubeconfig_yaml().expect("kubeconfig");
    objects::apply_secret(client, namespace, "workload-kubeconfig", &[("value", &kubeconfig)])
        .await
        .expect("kubeconfig Secret");
    objects::create_provisioned_cluster(client, namespace, "workload", labels(namespace))
        .await
        .expect("cluster");
    Engine {
        sim,
        workload,
        provider,
    }
}

pub fn labels(namespace: &str) -> Value {
    json!({"cluster.x-k8s.io/watch-filter": namespace, "cluster.x-k8s.io/cluster-name": "workload"})
}

pub fn is_ready(machine: &OVirtMachine) -> bool {
    machine.status.as_ref().is_some_and(|status| {
        status
            .conditions
            .iter()
            .any(|c| c.type_ == "Ready" && c.status == ConditionStatus::True)
    })
}

/// How many VMs of each of `names` the engine has.
pub fn vms_per_name(sim: &SimulatorHandle, names: &[String]) -> BTreeMap<String, usize> {
    let vms = sim.control().vms();
    names
        .iter()
        .map(|name| (name.clone(), vms.iter().filter(|vm| &vm.name == name).count()))
        .collect()
}
