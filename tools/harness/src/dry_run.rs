//! What the API server would make of manifests, without keeping anything: a server-side dry run.

use std::io::Write as _;
use std::process::Stdio;

use crate::ControlPlane;

impl ControlPlane {
    /// `kubectl apply --server-side --dry-run=server` of the manifests in `yaml`: kubectl's output, or its output
    /// and error output when the API server refuses any of them (admission, validation, a missing kind).
    /// `--force-conflicts`: the CRDs the harness installed belong to its own field manager; a dry run changes
    /// nothing either way.
    pub fn dry_run_apply(&self, yaml: &str) -> Result<String, String> {
        let mut command = self.kubectl().map_err(|err| err.to_string())?;
        command
            .args([
                "apply",
                "--server-side",
                "--dry-run=server",
                "--force-conflicts",
                "--field-manager=capov-dry-run",
                "-f",
                "-",
            ])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = command.spawn().map_err(|err| format!("kubectl: {err}"))?;
        let written = child
            .stdin
            .take()
            .ok_or_else(|| "kubectl has no stdin".to_string())
            .and_then(|mut stdin| {
                stdin
                    .write_all(yaml.as_bytes())
                    .map_err(|err| format!("kubectl stdin: {err}"))
            });
        let output = child.wait_with_output().map_err(|err| format!("kubectl: {err}"))?;
        let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
        if !output.status.success() {
            return Err(format!("{stdout}{}", String::from_utf8_lossy(&output.stderr)));
        }
        written.map(|()| stdout)
    }
}
