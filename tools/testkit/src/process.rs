//! Processes the tests start: what one printed, waiting for one to exit, and its log in a failed wait's message.

use std::fmt::{self, Display};
use std::path::PathBuf;
use std::process::{Child, Command, ExitStatus, Output};
use std::sync::Mutex;
use std::time::Duration;

use crate::{TimedOut, until};

/// Removes from `command`'s environment the variables cargo sets for a test, for a script that runs a cargo or go
/// build: they would change what that build rebuilds (ring's build script watches several of them, so the release
/// tree would be rebuilt on every switch between a test and a shell). Cargo's home and target directory stay.
pub fn without_cargo_env(command: &mut Command) -> &mut Command {
    for (name, _) in std::env::vars_os() {
        let name = name.to_string_lossy();
        let set_by_cargo = name == "CARGO" || name == "OUT_DIR" || name.starts_with("CARGO_");
        if set_by_cargo && name != "CARGO_HOME" && name != "CARGO_TARGET_DIR" {
            command.env_remove(name.as_ref());
        }
    }
    command
}

/// Runs `command`: what it printed to stdout, or, when it fails, its exit status and everything it printed.
pub fn stdout_of(command: &mut Command) -> Result<String, String> {
    let output = command.output().map_err(|err| format!("{command:?}: {err}"))?;
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    if output.status.success() {
        Ok(stdout)
    } else {
        Err(format!(
            "{command:?} failed ({}):\n{stdout}{}",
            output.status,
            String::from_utf8_lossy(&output.stderr)
        ))
    }
}

/// A finished process's exit code and output, as text.
#[derive(Debug)]
pub struct TextOutput {
    /// `None` when a signal ended it.
    pub code: Option<i32>,
    pub stdout: String,
    pub stderr: String,
}

impl From<Output> for TextOutput {
    fn from(output: Output) -> TextOutput {
        TextOutput {
            code: output.status.code(),
            stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
        }
    }
}

/// Waits up to `timeout` for `child` to exit, without blocking the runtime (an in-process server may have to answer
/// the child meanwhile). The child is still the caller's after a timeout, to diagnose or kill.
pub async fn wait_exit(child: &mut Child, timeout: Duration) -> Result<ExitStatus, TimedOut> {
    let child = Mutex::new(child);
    until(timeout, || async {
        let mut child = child.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        child
            .try_wait()
            .unwrap_or_else(|err| panic!("waiting for process {}: {err}", child.id()))
    })
    .await
}

/// What a wait is for, shown with the last lines of a process's log file, read only when the wait fails (as the
/// `what` of [`crate::eventually`]).
pub struct WithLog {
    what: String,
    log: PathBuf,
}

impl WithLog {
    /// Lines of the log a failure shows.
    const TAIL: usize = 100;

    pub fn new(what: impl Into<String>, log: impl Into<PathBuf>) -> WithLog {
        WithLog {
            what: what.into(),
            log: log.into(),
        }
    }
}

impl Display for WithLog {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let text = std::fs::read_to_string(&self.log).unwrap_or_else(|err| format!("(unreadable: {err})"));
        let lines: Vec<&str> = text.lines().collect();
        let tail = lines[lines.len().saturating_sub(Self::TAIL)..].join("\n");
        write!(f, "{}\nthe last lines of {}:\n{tail}\n", self.what, self.log.display())
    }
}

#[cfg(test)]
mod tests {
    use std::process::Command;

    use super::*;

    #[tokio::test]
    async fn waits_for_the_exit_and_leaves_a_running_child_to_the_caller() {
        let mut quick = Command::new("sh").args(["-c", "exit 3"]).spawn().expect("sh");
        let status = wait_exit(&mut quick, Duration::from_secs(10)).await.expect("exited");
        assert_eq!(status.code(), Some(3));

        let mut slow = Command::new("sleep").arg("30").spawn().expect("sleep");
        let timed_out = wait_exit(&mut slow, Duration::from_millis(50)).await;
        assert!(timed_out.is_err(), "{timed_out:?}");
        slow.kill().expect("the child is still the caller's");
        slow.wait().expect("reaped");
    }

    #[test]
    fn a_script_gets_no_variable_cargo_set_for_the_test_but_cargo_home() {
        // SAFETY: std's own reads of the environment (a Command's spawn among them) take the lock set_var takes, and
        // nothing in these tests reads it through C.
        unsafe {
            std::env::set_var("CARGO_TESTKIT_PROBE", "1");
            std::env::set_var("CARGO_HOME", "/cargo-home");
        }
        let mut command = Command::new("env");
        let output = without_cargo_env(&mut command).output().expect("env");
        let seen = String::from_utf8_lossy(&output.stdout);
        let names: Vec<&str> = seen.lines().filter_map(|line| line.split('=').next()).collect();
        assert!(!names.contains(&"CARGO_TESTKIT_PROBE"), "{names:?}");
        assert!(names.contains(&"CARGO_HOME"), "{names:?}");
    }

    #[test]
    fn a_command_gives_its_stdout_or_all_it_printed_when_it_fails() {
        assert_eq!(
            stdout_of(Command::new("sh").args(["-c", "echo out; echo err >&2"])),
            Ok("out\n".into())
        );
        let failed = stdout_of(Command::new("sh").args(["-c", "echo out; echo err >&2; exit 2"])).expect_err("exit 2");
        assert!(
            failed.contains("exit status: 2") && failed.ends_with("out\nerr\n"),
            "{failed}"
        );
    }

    #[test]
    fn a_log_shows_its_last_lines_when_displayed() {
        let dir = tempfile_dir();
        let log = dir.join("process.log");
        let lines: Vec<String> = (0..150).map(|n| format!("line {n}")).collect();
        std::fs::write(&log, lines.join("\n")).expect("log");
        let shown = WithLog::new("the process to finish", &log).to_string();
        assert!(shown.starts_with("the process to finish\n"), "{shown}");
        assert!(shown.contains("line 50\n") && shown.ends_with("line 149\n"), "{shown}");
        assert!(!shown.contains("line 49\n"), "{shown}");
        std::fs::remove_dir_all(dir).expect("clean up");
    }

    fn tempfile_dir() -> PathBuf {
        let dir = std::env::temp_dir().join(format!("capov-testkit-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("dir");
        dir
    }
}
