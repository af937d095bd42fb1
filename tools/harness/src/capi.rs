//! Cluster API's own CRDs (Cluster, Machine, MachineDeployment, …) from the `sigs.k8s.io/cluster-api` module that
//! `tools/capi` pins, so tests create real CAPI objects on the test apiserver.

use std::path::PathBuf;
use std::process::Command;
use std::sync::OnceLock;

use crate::{HarnessError, assets, crds};

/// The directory of CAPI core's CRD manifests in the Go module cache (downloaded on first use).
pub fn capi_crd_dir() -> Result<PathBuf, HarnessError> {
    static DIR: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    DIR.get_or_init(|| {
        let module_dir = assets::repo_root().join("tools/capi");
        let output = Command::new("go")
            .args(["mod", "download", "-json", "sigs.k8s.io/cluster-api"])
            .current_dir(&module_dir)
            .env("GOWORK", "off")
            .env("GOTOOLCHAIN", "local")
            .env("GOFLAGS", "-modcacherw")
            .env(
                "GOPROXY",
                std::env::var("GOPROXY_OVERRIDE").unwrap_or_else(|_| "https://proxy.golang.org,off".into()),
            )
            .output()
            .map_err(|err| format!("cannot run go in {}: {err}", module_dir.display()))?;
        if !output.status.success() {
            return Err(format!(
                "go mod download failed: {}",
                String::from_utf8_lossy(&output.stderr)
            ));
        }
        let info: serde_json::Value = serde_json::from_slice(&output.stdout).map_err(|err| err.to_string())?;
        let dir = info["Dir"].as_str().ok_or("go mod download printed no Dir")?;
        Ok(PathBuf::from(dir).join("core/config/crd/bases"))
    })
    .clone()
    .map_err(HarnessError::Assets)
}

/// Installs CAPI core's CRDs and waits until they are Established.
pub async fn install_capi_crds(client: &kube::Client) -> Result<Vec<String>, HarnessError> {
    crds::apply_manifests(client, &capi_crd_dir()?).await
}
