//! What the tests that run real `manager` processes share: the process with its ports and JSON log, and an engine
//! simulator with a workload cluster and the objects of one namespace.

#![allow(dead_code)]

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::Mutex;
use std::time::Duration;

use capov_crds::{ConditionStatus, OVirtMachine};
use capov_harness::{ControlPlane, Options, objects};
use capov_ovirt_sim::{Simulator, SimulatorHandle, Timings};
use capov_testkit::{WithLog, eventually};
use k8s_openapi::api::coordination::v1::Lease;
use kube::api::Api;
use serde_json::Value;

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
            // The workload clusters of the tests run on loopback.
            .arg("--allow-internal-workload-servers")
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

    /// `what` a failure message says, with the end of this process's log (read only when shown).
    pub fn with_log(&self, what: &str) -> WithLog {
        WithLog::new(what, &self.log)
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
        match capov_testkit::wait_exit(&mut self.child, timeout).await {
            Ok(status) => status,
            Err(timed_out) => panic!("{} still runs: {timed_out}; log:\n{}", self.name, self.log_text()),
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

pub struct Engine {
    pub sim: SimulatorHandle,
    pub workload: ControlPlane,
    pub provider: String,
}

/// An engine simulator whose VMs take seconds to create and boot (so that machines are caught half-done), a
/// workload cluster, and the provider, Secret and CAPI Cluster of the namespace, as a user and CAPI core would
/// create them.
pub async fn engine(client: &kube::Client, namespace: &str) -> Engine {
    let simulator = Simulator::builder().timings(Timings {
        image_locked_ms: 3000,
        boot_ms: 3000,
        ..Timings::fast()
    });
    let engine = capov_harness::Engine::start(client, namespace, simulator)
        .await
        .expect("engine");
    let workload = ControlPlane::start(Options::default()).await.expect("workload cluster");
    let kubeconfig = workload.kubeconfig_yaml().expect("kubeconfig");
    objects::create_workload_cluster(client, namespace, "workload", labels(namespace), &kubeconfig)
        .await
        .expect("cluster");
    Engine {
        sim: engine.sim,
        workload,
        provider: engine.provider,
    }
}

pub fn labels(namespace: &str) -> Value {
    objects::cluster_labels(namespace, "workload")
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

/// Plays each VM's kubelet: registers the Node of every machine whose VM is up, named like the machine, once
/// (`registered` remembers which, over the looks of a wait). The machines as listed; None while the apiserver is
/// away (the kubelet would retry too).
pub async fn register_up_nodes(
    machines: &Api<OVirtMachine>,
    workload: &kube::Client,
    sim: &capov_ovirt_sim::SimulatorHandle,
    registered: &Mutex<BTreeSet<String>>,
) -> Option<Vec<OVirtMachine>> {
    let list = machines.list(&Default::default()).await.ok()?;
    for machine in &list.items {
        let name = machine.metadata.name.clone().unwrap_or_default();
        let vm_id = machine
            .spec
            .provider_id
            .as_deref()
            .and_then(|id| id.strip_prefix("ovirt://"));
        let up = vm_id
            .and_then(|id| sim.control().vm(id))
            .is_some_and(|vm| vm.status == "up");
        let known = registered.lock().expect("registered Nodes").contains(&name);
        if let (Some(vm_id), true, false) = (vm_id, up, known) {
            objects::register_node(workload, &name, vm_id).await.expect("node");
            registered.lock().expect("registered Nodes").insert(name);
        }
    }
    Some(list.items)
}

/// Waits until no machine of `machines` is left and the engine holds no VM.
pub async fn wait_all_deleted(machines: &Api<OVirtMachine>, sim: &SimulatorHandle, timeout: Duration) {
    eventually(timeout, "every machine deleted and every VM removed", || async {
        let left = machines
            .list(&Default::default())
            .await
            .map_err(|err| err.to_string())?;
        let vms = sim.control().vm_count();
        if left.items.is_empty() && vms == 0 {
            Ok(())
        } else {
            Err(format!("{} machines and {vms} VMs left", left.items.len()))
        }
    })
    .await
}
