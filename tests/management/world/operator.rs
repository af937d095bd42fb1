//! The real `manager` binary as the tests run it: a child process writing its text log to a file, stopped when its
//! guard is dropped (a failed assertion included), so no operator outlives its test.

use std::path::Path;
use std::process::{Child, Command, Stdio};

use capov_harness::ControlPlane;

/// Where CAPOV runs and reads engine credentials when `clusterctl init` installs it.
pub const CAPOV_NAMESPACE: &str = "capov-system";

/// A running operator; dropping it kills the process.
pub struct Operator {
    child: Child,
}

impl Operator {
    /// The operator of one test namespace on `plane`: it watches that namespace only and reads its engine
    /// credentials there, so tests that share the management cluster do not see each other's objects. `extra` goes
    /// after the common flags. Its log is `capov-<namespace>.log` in the temporary directory.
    pub fn for_namespace(plane: &ControlPlane, namespace: &str, extra: &[&str]) -> Operator {
        let log = std::env::temp_dir().join(format!("capov-{namespace}.log"));
        let _ = std::fs::remove_file(&log);
        let mut command = Self::command(plane.kubeconfig_path(), &log);
        command
            .arg(format!("--namespace={namespace}"))
            .arg(format!("--credentials-namespace={namespace}"))
            .args(extra);
        Self::spawn(command, &log)
    }

    /// The operator as clusterctl's Deployment runs it: every namespace, credentials in [`CAPOV_NAMESPACE`], and
    /// `POD_NAME` set to `pod`, which its engine requests carry in their User-Agent. Appends to `log`, so the
    /// operators that follow one another on a cluster (an upgrade) write one log.
    pub fn as_installed(kubeconfig: &Path, pod: &str, log: &Path) -> Operator {
        let mut command = Self::command(kubeconfig, log);
        command
            .arg(format!("--credentials-namespace={CAPOV_NAMESPACE}"))
            .env("POD_NAME", pod);
        Self::spawn(command, log)
    }

    /// The flags every test's operator has: no metrics listener, a free health port, text logs, and loopback
    /// workload apiservers allowed (the tests' workload clusters listen there).
    fn command(kubeconfig: &Path, log: &Path) -> Command {
        eprintln!("operator log: {}", log.display());
        let mut command = Command::new(env!("CARGO_BIN_EXE_manager"));
        command
            .arg(format!("--kubeconfig={}", kubeconfig.display()))
            .arg("--metrics-bind-address=0")
            .arg(format!(
                "--health-probe-bind-address=127.0.0.1:{}",
                capov_harness::free_port()
            ))
            .arg("--log-format=text")
            .arg("--allow-internal-workload-servers");
        command
    }

    fn spawn(mut command: Command, log: &Path) -> Operator {
        let file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(log)
            .unwrap_or_else(|err| panic!("operator log {}: {err}", log.display()));
        let child = command
            .stdin(Stdio::null())
            .stdout(file.try_clone().expect("operator log"))
            .stderr(file)
            .spawn()
            .expect("start the manager");
        Operator { child }
    }
}

impl Drop for Operator {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
