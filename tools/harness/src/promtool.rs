//! promtool, Prometheus' own rule checker and rule unit-test runner, as the chart's tests run it: the binary
//! `tools/build-go-tools.sh --promtool` builds (or the one in `CAPOV_PROMTOOL_DIR`).

use std::path::PathBuf;
use std::process::Command;
use std::sync::OnceLock;

use crate::HarnessError;
use crate::assets::{built_by_script, has_all};

fn promtool_dir() -> Result<PathBuf, HarnessError> {
    static DIR: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    DIR.get_or_init(|| {
        if let Some(dir) = std::env::var_os("CAPOV_PROMTOOL_DIR").map(PathBuf::from)
            && has_all(&dir, &["promtool"])
        {
            return Ok(dir);
        }
        built_by_script(Some("--promtool"), &["promtool"])
    })
    .clone()
    .map_err(HarnessError::Assets)
}

/// A `promtool` command.
pub fn promtool() -> Result<Command, HarnessError> {
    Ok(Command::new(promtool_dir()?.join("promtool")))
}
