//! A real Kubernetes node on this machine, joined to a [`ControlPlane`] started with
//! [`ControlPlane::start_for_node`]: containerd, kubelet and kube-proxy as `tools/node/up.sh` starts them (root
//! only), stopped by `tools/node/down.sh` when the [`Node`] is dropped. Images reach it by import, never by pull.

use std::net::{IpAddr, UdpSocket};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Node as NodeObject;
use kube::api::Api;
use tempfile::TempDir;

use crate::assets::repo_root;
use crate::{ControlPlane, HarnessError};

/// How long a node may take from `up.sh` to `Ready` (containerd, the pause image, kubelet's registration).
const READY_TIMEOUT: Duration = Duration::from_secs(240);

/// A node joined to a control plane. Dropping it stops its processes and pods (`tools/node/down.sh`).
pub struct Node {
    name: String,
    socket: PathBuf,
    state: TempDir,
}

impl Node {
    /// Starts containerd, kubelet and kube-proxy against `plane` (which must come from
    /// [`ControlPlane::start_for_node`]) and waits until the node reports `Ready`.
    pub async fn start(plane: &ControlPlane, name: &str) -> Result<Node, HarnessError> {
        let state = tempfile::Builder::new()
            .prefix("capov-node-")
            .tempdir()
            .map_err(|err| HarnessError::io(std::env::temp_dir(), err))?;
        let script = repo_root().join("tools/node/up.sh");
        let output = run_script(
            Command::new("bash")
                .arg(&script)
                .arg(plane.kubeconfig_path())
                .arg(state.path())
                .arg(name),
        )?;
        if !output.status.success() {
            return Err(HarnessError::Assets(format!(
                "{} failed ({}):\n{}",
                script.display(),
                output.status,
                String::from_utf8_lossy(&output.stderr)
            )));
        }
        let socket = PathBuf::from(
            String::from_utf8_lossy(&output.stdout)
                .lines()
                .last()
                .unwrap_or("")
                .trim(),
        );
        let node = Node {
            name: name.to_string(),
            socket,
            state,
        };
        node.wait_ready(plane).await?;
        Ok(node)
    }

    async fn wait_ready(&self, plane: &ControlPlane) -> Result<(), HarnessError> {
        let nodes: Api<NodeObject> = Api::all(plane.client().await?);
        let deadline = Instant::now() + READY_TIMEOUT;
        loop {
            if let Ok(Some(node)) = nodes.get_opt(&self.name).await
                && node_ready(&node)
            {
                return Ok(());
            }
            for process in ["containerd", "kubelet", "kube-proxy"] {
                if !self.runs(process) {
                    return Err(HarnessError::Exited {
                        process: "node",
                        status: format!("{process} is not running"),
                        log_tail: self.log_tail(process),
                    });
                }
            }
            if Instant::now() > deadline {
                return Err(HarnessError::NotReady {
                    process: "kubelet",
                    seconds: READY_TIMEOUT.as_secs(),
                    log_tail: self.log_tail("kubelet"),
                });
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    }

    /// Whether the process `up.sh` recorded as `STATE/<process>.pid` still runs.
    fn runs(&self, process: &str) -> bool {
        let pid = std::fs::read_to_string(self.state.path().join(format!("{process}.pid"))).unwrap_or_default();
        let Ok(pid) = pid.trim().parse::<libc::pid_t>() else {
            return false;
        };
        // SAFETY: signal 0 only checks that the process exists.
        unsafe { libc::kill(pid, 0) == 0 }
    }

    /// The node's name (`--hostname-override`).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Where `up.sh` keeps the node's configuration, state and logs (`containerd.log`, `kubelet.log`,
    /// `kube-proxy.log`).
    pub fn state_dir(&self) -> &Path {
        self.state.path()
    }

    /// The last lines of one of the node's logs.
    pub fn log_tail(&self, process: &str) -> String {
        let text = std::fs::read_to_string(self.state.path().join(format!("{process}.log"))).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(40)..].join("\n")
    }

    /// Imports an image of the local Docker engine into the node's containerd (namespace `k8s.io`, where kubelet
    /// looks): `docker save IMAGE | ctr images import -`. Pods then use it with `imagePullPolicy: IfNotPresent`
    /// or `Never`. An image named `capov-manager:0.1.0` is known to the node as `docker.io/library/capov-manager:0.1.0`.
    pub fn import_image(&self, image: &str) -> Result<(), HarnessError> {
        let ctr = crate::assets::built_by_script(Some("--containerd"), &["ctr"])
            .map_err(HarnessError::Assets)?
            .join("ctr");
        let mut save = Command::new("/usr/bin/docker")
            .args(["save", image])
            .stdout(Stdio::piped())
            .spawn()
            .map_err(|err| HarnessError::io("/usr/bin/docker", err))?;
        let stdout = save
            .stdout
            .take()
            .ok_or_else(|| HarnessError::Assets("docker save has no stdout".into()))?;
        let import = Command::new(&ctr)
            .arg(format!("--address={}", self.socket.display()))
            .args(["-n", "k8s.io", "images", "import", "-"])
            .stdin(stdout)
            .output()
            .map_err(|err| HarnessError::io(&ctr, err))?;
        let saved = save.wait().map_err(|err| HarnessError::io("/usr/bin/docker", err))?;
        if !saved.success() || !import.status.success() {
            return Err(HarnessError::Assets(format!(
                "importing {image} into the node failed (docker save: {saved}, ctr import: {}):\n{}",
                import.status,
                String::from_utf8_lossy(&import.stderr)
            )));
        }
        Ok(())
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        let script = repo_root().join("tools/node/down.sh");
        match Command::new("bash").arg(&script).arg(self.state.path()).output() {
            Ok(output) if output.status.success() => {}
            Ok(output) => eprintln!(
                "{} failed ({}):\n{}",
                script.display(),
                output.status,
                String::from_utf8_lossy(&output.stderr)
            ),
            Err(err) => eprintln!("cannot run {}: {err}", script.display()),
        }
    }
}

fn node_ready(node: &NodeObject) -> bool {
    node.status
        .as_ref()
        .and_then(|status| status.conditions.as_ref())
        .is_some_and(|conditions| {
            conditions
                .iter()
                .any(|condition| condition.type_ == "Ready" && condition.status == "True")
        })
}

/// Runs a script with the variables cargo sets for a test removed: they would reach a cargo or go build the script
/// starts and change what it rebuilds.
fn run_script(command: &mut Command) -> Result<std::process::Output, HarnessError> {
    capov_testkit::without_cargo_env(command)
        .stdin(Stdio::null())
        .output()
        .map_err(|err| HarnessError::io("bash", err))
}

/// This machine's address that its default route leaves from: routable from a pod on the node's bridge, unlike
/// 127.0.0.1. (A UDP `connect` picks the source address without sending anything.)
pub fn routable_address() -> Result<IpAddr, HarnessError> {
    let socket = UdpSocket::bind("0.0.0.0:0").map_err(|err| HarnessError::io("udp socket", err))?;
    // TEST-NET-3: any address the default route covers would do.
    socket
        .connect("203.0.113.1:9")
        .map_err(|err| HarnessError::io("udp connect (no default route?)", err))?;
    let address = socket
        .local_addr()
        .map_err(|err| HarnessError::io("udp socket", err))?
        .ip();
    if address.is_loopback() || address.is_unspecified() {
        return Err(HarnessError::Assets(format!(
            "this machine has no routable address (its default route leaves from {address})"
        )));
    }
    Ok(address)
}
