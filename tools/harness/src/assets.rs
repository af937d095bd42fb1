use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use crate::HarnessError;

const NEEDED: [&str; 4] = ["etcd", "kube-apiserver", "kube-controller-manager", "kubectl"];

/// The directory holding etcd, kube-apiserver, kube-controller-manager and kubectl: `KUBEBUILDER_ASSETS` when it
/// holds them, else the cache that `tools/build-go-tools.sh` fills (building the binaries on first use).
pub fn binaries_dir() -> Result<PathBuf, HarnessError> {
    static DIR: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    DIR.get_or_init(locate).clone().map_err(HarnessError::Assets)
}

fn locate() -> Result<PathBuf, String> {
    if let Some(dir) = std::env::var_os("KUBEBUILDER_ASSETS").map(PathBuf::from)
        && has_all(&dir, &NEEDED)
    {
        return Ok(dir);
    }
    built_by_script(None, &NEEDED)
}

/// Runs `tools/build-go-tools.sh [argument]` (which builds on a cache miss) and checks that the directory it prints
/// holds `needed`.
pub(crate) fn built_by_script(argument: Option<&str>, needed: &[&str]) -> Result<PathBuf, String> {
    let script = repo_root().join("tools/build-go-tools.sh");
    let output = Command::new("bash")
        .arg(&script)
        .args(argument)
        .output()
        .map_err(|err| format!("cannot run {}: {err}", script.display()))?;
    if !output.status.success() {
        return Err(format!(
            "{} failed ({}):\n{}",
            script.display(),
            output.status,
            String::from_utf8_lossy(&output.stderr)
        ));
    }
    let dir = PathBuf::from(String::from_utf8_lossy(&output.stdout).trim());
    if has_all(&dir, needed) {
        Ok(dir)
    } else {
        Err(format!(
            "{} printed {}, which lacks some of {needed:?}",
            script.display(),
            dir.display()
        ))
    }
}

pub(crate) fn has_all(dir: &Path, needed: &[&str]) -> bool {
    needed.iter().all(|name| dir.join(name).exists())
}

/// The workspace root (this crate lives in `tools/harness`).
pub(crate) fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

const NODE_NEEDED: [&str; 3] = ["kubelet", "kube-proxy", "kube-scheduler"];

/// The directory holding kubelet, kube-proxy and kube-scheduler: `CAPOV_NODE_DIR` when it holds them, else the cache
/// that `tools/build-go-tools.sh --node` fills (building them on first use).
pub fn node_binaries_dir() -> Result<PathBuf, HarnessError> {
    static DIR: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    DIR.get_or_init(|| {
        if let Some(dir) = std::env::var_os("CAPOV_NODE_DIR").map(PathBuf::from)
            && has_all(&dir, &NODE_NEEDED)
        {
            return Ok(dir);
        }
        built_by_script(Some("--node"), &NODE_NEEDED)
    })
    .clone()
    .map_err(HarnessError::Assets)
}
