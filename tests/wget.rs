//! The documents' troubleshooting command, `wget -qO- https://ENGINE/ovirt-engine/api --no-check-certificate`, as
//! the image runs it: `manager` called through a link named `wget`, against the engine simulator over HTTPS (the
//! engine's own 401 without a login), with certificate checking (refused: the simulator's CA is not trusted), against
//! a closed port, and through a login to a full answer written to a file.

use std::path::{Path, PathBuf};
use std::process::Output;

use capov_ovirt_sim::Simulator;
use serde_json::Value;

const USER: &str = "admin@internal";
const PASSWORD: &str = "wget-Pa55";

/// A `wget` link to the manager binary in `dir`.
fn wget_link(dir: &Path) -> PathBuf {
    let link = dir.join("wget");
    std::os::unix::fs::symlink(env!("CARGO_BIN_EXE_manager"), &link).expect("symlink");
    link
}

async fn wget(link: &Path, args: &[&str]) -> Output {
    let mut command = tokio::process::Command::new(link);
    command.env_clear().args(args);
    command.output().await.expect("run wget")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

#[tokio::test]
async fn the_troubleshooting_wget_command_tells_where_the_path_to_the_engine_breaks() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let sim = Simulator::builder()
        .user(USER, PASSWORD)
        .start()
        .await
        .expect("simulator");
    let api = sim.api_url();
    assert!(api.starts_with("https://"), "{api}");
    let dir = tempfile::tempdir().expect("dir");
    let link = wget_link(dir.path());

    // As the documents write it: TLS works and the engine answers for itself, 401 without a login.
    let run = wget(&link, &["-qO-", &api, "--no-check-certificate"]).await;
    assert_eq!(run.status.code(), Some(1), "{}", text(&run.stderr));
    assert_eq!(
        text(&run.stderr).trim(),
        "wget: server returned error: HTTP/1.1 401 Unauthorized"
    );

    // With the certificate checked: the simulator's CA is in no bundle, and wget says that this is where it broke.
    let run = wget(&link, &["-qO-", &api]).await;
    assert_eq!(run.status.code(), Some(1));
    let stderr = text(&run.stderr);
    assert!(stderr.starts_with("wget: TLS error: "), "{stderr}");
    assert!(stderr.contains("--no-check-certificate skips the check"), "{stderr}");

    // Nothing listening.
    let closed = format!("https://127.0.0.1:{}/ovirt-engine/api", capov_harness::free_port());
    let run = wget(&link, &["-qO-", &closed, "--no-check-certificate"]).await;
    assert_eq!(run.status.code(), Some(1));
    let stderr = text(&run.stderr);
    assert!(stderr.contains("can't connect to remote host (127.0.0.1:"), "{stderr}");
    assert!(stderr.to_lowercase().contains("connection refused"), "{stderr}");

    // A login, then the API root written to a file: the whole path works.
    let engine = api.trim_end_matches("/api");
    let form = format!("grant_type=password&scope=ovirt-app-api&username={USER}&password={PASSWORD}");
    let token_url = format!("{engine}/sso/oauth/token");
    let run = wget(
        &link,
        &[
            "-qO-",
            "--header",
            "Accept: application/json",
            "--post-data",
            &form,
            &token_url,
            "--no-check-certificate",
        ],
    )
    .await;
    assert_eq!(run.status.code(), Some(0), "{}", text(&run.stderr));
    let answer: Value = serde_json::from_slice(&run.stdout).expect("token JSON");
    let token = answer["access_token"].as_str().expect("access_token");
    let out = dir.path().join("api.xml");
    let out_arg = out.display().to_string();
    let bearer = format!("Authorization: Bearer {token}");
    let run = wget(
        &link,
        &[
            "-q",
            "-O",
            &out_arg,
            "--header",
            &bearer,
            &api,
            "--no-check-certificate",
        ],
    )
    .await;
    assert_eq!(run.status.code(), Some(0), "{}", text(&run.stderr));
    let written = std::fs::read_to_string(&out).expect("api.xml");
    assert!(written.contains("<api"), "{written}");
    assert!(run.stdout.is_empty() && run.stderr.is_empty(), "-q prints nothing");
}
