//! Helm as the tests and the demo run it: the binary `tools/build-go-tools.sh --helm` builds (or the one in
//! `CAPOV_HELM_DIR`), kept away from the user's own Helm configuration and caches, started in the repository so
//! that chart paths like `chart/capov` resolve.

use std::path::PathBuf;
use std::process::Command;
use std::sync::OnceLock;

use crate::HarnessError;
use crate::assets::{built_by_script, has_all, repo_root};

/// The directory holding `helm`.
fn helm_dir() -> Result<PathBuf, HarnessError> {
    static DIR: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    DIR.get_or_init(|| {
        if let Some(dir) = std::env::var_os("CAPOV_HELM_DIR").map(PathBuf::from)
            && has_all(&dir, &["helm"])
        {
            return Ok(dir);
        }
        built_by_script(Some("--helm"), &["helm"])
    })
    .clone()
    .map_err(HarnessError::Assets)
}

/// A `helm` command with its own configuration, cache and data directories (one set per process), run from the
/// repository's root.
pub fn helm() -> Result<Command, HarnessError> {
    let mut command = Command::new(helm_dir()?.join("helm"));
    let home = std::env::temp_dir().join(format!("capov-helm-home-{}", std::process::id()));
    command
        .env("HELM_CONFIG_HOME", home.join("config"))
        .env("HELM_CACHE_HOME", home.join("cache"))
        .env("HELM_DATA_HOME", home.join("data"))
        .current_dir(repo_root());
    Ok(command)
}
