//! Every script in tools/ answers `--help` at once: it prints what it does and its options and exits 0 before it
//! builds, installs or starts anything. The scripts run with a PATH that holds neither cargo nor go, so one that
//! started building would fail here instead of taking minutes.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Every shell and Python script under `dir`, build output aside.
fn scripts(dir: &Path) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap_or_else(|err| panic!("{}: {err}", dir.display()))
        .map(|entry| entry.expect("directory entry").path())
        .collect();
    entries.sort();
    for path in entries {
        if path.is_dir() {
            if path.file_name().is_some_and(|name| name != "target") {
                found.extend(scripts(&path));
            }
        } else if path.extension().is_some_and(|ext| ext == "sh" || ext == "py") {
            found.push(path);
        }
    }
    found
}

#[tokio::test]
async fn every_script_in_tools_answers_help_at_once() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let scripts = scripts(&root.join("tools"));
    assert!(scripts.len() >= 10, "only {} scripts found: {scripts:?}", scripts.len());
    let temp = tempfile::tempdir().expect("temp dir");
    for script in scripts {
        let interpreter = if script.extension().is_some_and(|ext| ext == "py") {
            "python3"
        } else {
            "bash"
        };
        let (stdout, stderr) = (temp.path().join("stdout"), temp.path().join("stderr"));
        let mut child = Command::new(interpreter)
            .arg(&script)
            .arg("--help")
            .current_dir(root)
            .env("PATH", "/usr/bin:/bin")
            .env("CAPOV_TOOLS_CACHE", temp.path().join("cache"))
            .stdin(Stdio::null())
            .stdout(std::fs::File::create(&stdout).expect("stdout file"))
            .stderr(std::fs::File::create(&stderr).expect("stderr file"))
            .spawn()
            .unwrap_or_else(|err| panic!("{}: {err}", script.display()));
        let started = Instant::now();
        let status = capov_testkit::wait_exit(&mut child, Duration::from_secs(10))
            .await
            .unwrap_or_else(|timed_out| {
                let _ = child.kill();
                panic!("{} --help still runs: {timed_out}", script.display())
            });
        let (stdout, stderr) = (
            std::fs::read_to_string(stdout).expect("stdout"),
            std::fs::read_to_string(stderr).expect("stderr"),
        );
        let what = format!(
            "{} --help ({:?}): {stdout}{stderr}",
            script.display(),
            started.elapsed()
        );
        assert!(status.success(), "{what}");
        assert!(stderr.is_empty(), "{what}");
        assert!(stdout.lines().count() >= 3, "{what}");
        assert!(!temp.path().join("cache").exists(), "{what} touched the tools cache");
    }
}
