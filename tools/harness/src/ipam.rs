//! The real IPAM provider cluster-api-ipam-provider-in-cluster, opt-in: the Go module proxy does not serve it here,
//! so CI cannot build it, and fetched code is neither committed nor built by a recipe in this repository.
//! `CAPOV_IPAM_PROVIDER_DIR` names a directory holding its `manager` binary and its CRD manifests under `crds/`
//! (user book, configuration/addresses.md, "Tested with cluster-api-ipam-provider-in-cluster"). Without the variable the tests fall back to their
//! stand-in allocator.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use kube::api::{ApiResource, GroupVersionKind};
use serde_json::json;

use crate::{ControlPlane, HarnessError, crds, free_port, launcher, objects};

/// The variable naming the directory with the provider's `manager` binary and its `crds/`.
pub const IPAM_PROVIDER_DIR_ENV: &str = "CAPOV_IPAM_PROVIDER_DIR";

/// The directory of `CAPOV_IPAM_PROVIDER_DIR`, when it is set and not empty.
pub fn ipam_provider_dir() -> Option<PathBuf> {
    std::env::var_os(IPAM_PROVIDER_DIR_ENV)
        .filter(|dir| !dir.is_empty())
        .map(PathBuf::from)
}

/// The provider's namespaced pool kind at the version it stores.
pub fn in_cluster_ip_pool() -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("ipam.cluster.x-k8s.io", "v1alpha2", "InClusterIPPool"),
        "inclusterippools",
    )
}

/// An `InClusterIPPool` named `name` in `namespace` handing out `range` (e.g. `192.0.2.10-192.0.2.99`) with its
/// `prefix` and `gateway`.
pub async fn apply_in_cluster_pool(
    client: &kube::Client,
    namespace: &str,
    name: &str,
    range: &str,
    prefix: u8,
    gateway: &str,
) -> Result<(), HarnessError> {
    let body = json!({
        "apiVersion": "ipam.cluster.x-k8s.io/v1alpha2", "kind": "InClusterIPPool",
        "metadata": {"name": name},
        "spec": {"addresses": [range], "prefix": prefix, "gateway": gateway},
    });
    objects::apply(client, &in_cluster_ip_pool(), Some(namespace), body).await
}

/// The provider's manager, watching one namespace; killed when dropped.
pub struct IpamProvider {
    child: Child,
    log: PathBuf,
}

impl IpamProvider {
    /// Installs the CRDs of `dir/crds` on `plane` (which must hold CAPI core's CRDs) and runs `dir/manager` against
    /// it for `namespace`: no leader election, no webhooks (their certificates would need a Service), metrics off,
    /// the health probe on a free loopback port; ready once it answers `/readyz`.
    pub async fn start(plane: &ControlPlane, dir: &Path, namespace: &str) -> Result<IpamProvider, HarnessError> {
        let client = plane.client().await?;
        crds::apply_manifests(&client, &dir.join("crds")).await?;
        let log = std::env::temp_dir().join(format!("capov-ipam-provider-{namespace}.log"));
        let file = std::fs::File::create(&log).map_err(|err| HarnessError::io(&log, err))?;
        let stderr = file.try_clone().map_err(|err| HarnessError::io(&log, err))?;
        let health = free_port();
        let mut command = Command::new(dir.join("manager"));
        command
            .arg(format!("--kubeconfig={}", plane.kubeconfig_path().display()))
            .arg(format!("--namespace={namespace}"))
            .arg("--leader-elect=false")
            .arg("--webhook-port=0")
            .arg("--diagnostics-address=0")
            .arg(format!("--health-probe-bind-address=127.0.0.1:{health}"))
            .stdin(Stdio::null())
            .stdout(file)
            .stderr(stderr);
        let child = launcher::spawn(command).map_err(|err| HarnessError::io(dir.join("manager"), err))?;
        let mut provider = IpamProvider { child, log };
        provider.wait_ready(health).await?;
        Ok(provider)
    }

    /// Where its log goes.
    pub fn log_path(&self) -> &Path {
        &self.log
    }

    async fn wait_ready(&mut self, port: u16) -> Result<(), HarnessError> {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            if crate::capi::http_ok(port, "/readyz").await {
                return Ok(());
            }
            if let Ok(Some(status)) = self.child.try_wait() {
                return Err(HarnessError::Exited {
                    process: "ipam-provider",
                    status: status.to_string(),
                    log_tail: self.log_tail(),
                });
            }
            if Instant::now() > deadline {
                return Err(HarnessError::NotReady {
                    process: "ipam-provider",
                    seconds: 60,
                    log_tail: self.log_tail(),
                });
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    fn log_tail(&self) -> String {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(20)..].join("\n")
    }
}

impl Drop for IpamProvider {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
