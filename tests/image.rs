//! The operator image as `tools/image/build.sh` builds it on this machine, offline (the Dockerfile's final stage
//! with `SOURCE=machine`), run by the Docker engine the script installs and starts: it runs `/manager` as a non-root
//! user; the product documents' troubleshooting command (`wget -qO- https://ENGINE/ovirt-engine/api
//! --no-check-certificate`) runs in it (`wget` is the manager, by a link) and tells a closed port and the engine's
//! own answer over HTTPS and HTTP apart; and the manager in it
//! trusts the engine through the image's CA bundle (`spec.tls.cert: true`) exactly when that bundle holds the
//! engine's CA. Prints the image's size.

use std::path::Path;
use std::process::Command;
use std::sync::OnceLock;

use capov_harness::{ProviderSpec, free_port};
use capov_ovirt_sim::{Simulator, SimulatorHandle};
use capov_testkit::{TextOutput, without_cargo_env};
use serde_json::{Value, json};

/// The Docker client of Debian's docker.io, which the build script installs.
const DOCKER: &str = "/usr/bin/docker";
const USER: &str = "capov@internal";
const PASSWORD: &str = "Im4ge-Pw-0f-Test";
/// The image's user (the Dockerfile's `USER`).
const IMAGE_UID: u32 = 65532;
const BUNDLE: &str = "/etc/ssl/certs/ca-certificates.crt";
/// An upper bound that catches a base image or a debug binary slipping in.
const MAX_IMAGE_BYTES: u64 = 40 * 1024 * 1024;

/// Builds the image once per test process; every test gets its reference.
fn image() -> &'static str {
    static IMAGE: OnceLock<String> = OnceLock::new();
    IMAGE.get_or_init(|| {
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tools/image/build.sh");
        let mut command = Command::new(&script);
        command.arg("capov-manager:image-test");
        let output = without_cargo_env(&mut command)
            .output()
            .expect("run tools/image/build.sh");
        let stdout = String::from_utf8_lossy(&output.stdout);
        assert!(
            output.status.success(),
            "tools/image/build.sh failed:\n{}",
            String::from_utf8_lossy(&output.stderr)
        );
        let image = stdout
            .lines()
            .last()
            .expect("the script prints the image")
            .trim()
            .to_string();
        let size: u64 = docker(&["image", "inspect", "--format", "{{.Size}}", &image])
            .stdout
            .trim()
            .parse()
            .expect("image size");
        println!("image {image}: {size} bytes ({:.1} MiB)", size as f64 / 1048576.0);
        image
    })
}

fn docker(args: &[&str]) -> TextOutput {
    Command::new(DOCKER).args(args).output().expect("run docker").into()
}

/// `docker` off the test's runtime thread: an in-process simulator runs on it and must keep answering meanwhile.
async fn docker_async(args: Vec<String>) -> TextOutput {
    tokio::task::spawn_blocking(move || {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        docker(&args)
    })
    .await
    .expect("join")
}

/// `docker run --rm --network host [extra] IMAGE [args]`, the host network so 127.0.0.1 is the simulator's and
/// the apiserver's address.
async fn run_in_image(extra: &[&str], entrypoint: Option<&str>, args: &[&str]) -> TextOutput {
    let mut all: Vec<String> = ["run", "--rm", "--network", "host"].map(String::from).to_vec();
    all.extend(extra.iter().map(|s| s.to_string()));
    if let Some(entrypoint) = entrypoint {
        all.extend(["--entrypoint".to_string(), entrypoint.to_string()]);
    }
    all.push(image().to_string());
    all.extend(args.iter().map(|s| s.to_string()));
    docker_async(all).await
}

/// A directory the image's user can read and write, mounted into the container.
fn shared_dir() -> tempfile::TempDir {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o777)).expect("chmod");
    dir
}

fn write_readable(path: &Path, contents: &[u8]) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::write(path, contents).expect("write");
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o644)).expect("chmod");
}

async fn simulator() -> SimulatorHandle {
    Simulator::builder()
        .user(USER, PASSWORD)
        .start()
        .await
        .expect("simulator")
}

#[test]
#[ignore = "needs the image: CAPOV_IMAGE_TESTS=1 ./tools/test.sh, or tools/image/build.sh then --ignored"]
fn the_image_runs_the_static_manager_as_a_non_root_user() {
    let image = image();
    let config: Value =
        serde_json::from_str(&docker(&["image", "inspect", "--format", "{{json .Config}}", image]).stdout)
            .expect("image config");
    assert_eq!(config["User"], json!(format!("{IMAGE_UID}:{IMAGE_UID}")), "{config}");
    assert_eq!(config["Entrypoint"], json!(["/manager"]), "{config}");
    let env = config["Env"].as_array().expect("Env");
    assert!(env.contains(&json!(format!("SSL_CERT_FILE={BUNDLE}"))), "{config}");

    let size: u64 = docker(&["image", "inspect", "--format", "{{.Size}}", image])
        .stdout
        .trim()
        .parse()
        .expect("size");
    assert!(size < MAX_IMAGE_BYTES, "the image grew to {size} bytes");

    // No network, no file system but the image's: the binary is static and answers.
    let version = docker(&["run", "--rm", "--network", "none", image, "--version"]);
    assert_eq!(version.code, Some(0), "{}", version.stderr);
    assert_eq!(version.stdout.trim(), format!("manager {}", env!("CARGO_PKG_VERSION")));
    let help = docker(&["run", "--rm", "--network", "none", image, "--help"]);
    assert_eq!(help.code, Some(0), "{}", help.stderr);
    assert!(help.stdout.contains("check-engine"), "{}", help.stdout);

    // The bundle is Debian's Mozilla set, not a stub.
    let dir = shared_dir();
    let copy = dir.path().join("bundle.crt");
    let created = docker(&["create", image]);
    assert_eq!(created.code, Some(0), "{}", created.stderr);
    let container = created.stdout.trim().to_string();
    let copied = docker(&["cp", &format!("{container}:{BUNDLE}"), &copy.display().to_string()]);
    docker(&["rm", &container]);
    assert_eq!(copied.code, Some(0), "{}", copied.stderr);
    let bundle = std::fs::read_to_string(&copy).expect("bundle");
    let certificates = bundle.matches("-----BEGIN CERTIFICATE-----").count();
    assert!(certificates > 100, "{certificates} certificates in {BUNDLE}");
}

#[tokio::test]
#[ignore = "needs the image: CAPOV_IMAGE_TESTS=1 ./tools/test.sh, or tools/image/build.sh then --ignored"]
async fn the_troubleshooting_wget_command_tells_where_the_path_to_the_engine_breaks() {
    image();
    let sim = simulator().await;
    let api = sim.api_url();
    assert!(api.starts_with("https://"), "{api}");

    // As the documents write it, against an HTTPS engine: TLS works, and the engine answers for itself (401
    // without a login).
    let run = run_in_image(&[], Some("wget"), &["-qO-", &api, "--no-check-certificate"]).await;
    assert_eq!(run.code, Some(1), "{}\n{}", run.stdout, run.stderr);
    assert!(run.stderr.contains("401 Unauthorized"), "{}", run.stderr);

    // Over plain HTTP the same command gets the engine's own answer: 401 without a login.
    let plain = Simulator::builder()
        .user(USER, PASSWORD)
        .plain_http()
        .start()
        .await
        .expect("plain simulator");
    let plain_api = plain.api_url();
    assert!(plain_api.starts_with("http://"), "{plain_api}");
    let run = run_in_image(&[], Some("wget"), &["-qO-", &plain_api, "--no-check-certificate"]).await;
    assert_eq!(run.code, Some(1), "{}\n{}", run.stdout, run.stderr);
    assert!(run.stderr.contains("401 Unauthorized"), "{}", run.stderr);

    // Nothing listening: wget says so, which is what the command is for.
    let closed = format!("https://127.0.0.1:{}/ovirt-engine/api", free_port());
    let run = run_in_image(&[], Some("wget"), &["-qO-", &closed, "--no-check-certificate"]).await;
    assert_eq!(run.code, Some(1), "{}", run.stderr);
    assert!(
        run.stderr.to_lowercase().contains("connection refused"),
        "{}",
        run.stderr
    );

    // With a token (over HTTP) the same wget fetches the API root; the file it writes belongs to the image's user.
    let engine = plain_api.trim_end_matches("/api");
    let form = format!("grant_type=password&scope=ovirt-app-api&username={USER}&password={PASSWORD}");
    let token_url = format!("{engine}/sso/oauth/token");
    let run = run_in_image(
        &[],
        Some("wget"),
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
    assert_eq!(run.code, Some(0), "{}", run.stderr);
    let answer: Value = serde_json::from_str(&run.stdout).expect("token JSON");
    let token = answer["access_token"].as_str().expect("access_token");
    let dir = shared_dir();
    let mount = format!("{}:/out", dir.path().display());
    let bearer = format!("Authorization: Bearer {token}");
    let run = run_in_image(
        &["-v", &mount],
        Some("wget"),
        &[
            "-q",
            "-O",
            "/out/api.xml",
            "--header",
            &bearer,
            &plain_api,
            "--no-check-certificate",
        ],
    )
    .await;
    assert_eq!(run.code, Some(0), "{}", run.stderr);
    let written = dir.path().join("api.xml");
    let xml = std::fs::read_to_string(&written).expect("api.xml");
    assert!(xml.contains("<api") && xml.contains("<product_info>"), "{xml}");
    use std::os::unix::fs::MetadataExt;
    let owner = std::fs::metadata(&written).expect("metadata").uid();
    assert_eq!(owner, IMAGE_UID, "the container ran as uid {owner}");
}

#[tokio::test]
#[ignore = "needs the image: CAPOV_IMAGE_TESTS=1 ./tools/test.sh, or tools/image/build.sh then --ignored"]
async fn the_manager_in_the_image_trusts_the_engine_through_the_system_ca_bundle() {
    let image = image();
    let plane = capov_harness::shared().await;
    let client = plane.client().await.expect("client");
    let namespace = plane.create_namespace(&client, "image").await.expect("namespace");
    let sim = simulator().await;
    let sim_ca = sim.ca_pem().expect("the simulator serves HTTPS");
    // Trusting the system's CAs (`spec.tls.cert: true`), not the simulator's own.
    let provider = ProviderSpec {
        user: USER,
        password: PASSWORD,
        tls: Some(json!({"cert": true})),
        ..ProviderSpec::for_simulator(&namespace, &sim)
    };
    provider.apply(&client).await.expect("provider");

    let dir = shared_dir();
    let kubeconfig = dir.path().join("kubeconfig");
    write_readable(
        &kubeconfig,
        &std::fs::read(plane.kubeconfig_path()).expect("kubeconfig"),
    );
    let kube_mount = format!("{}:/kube/config:ro", kubeconfig.display());
    let args = [
        "--kubeconfig=/kube/config".to_string(),
        format!("--credentials-namespace={namespace}"),
        "check-engine".to_string(),
        provider.name.clone(),
    ];
    let args: Vec<&str> = args.iter().map(String::as_str).collect();

    // The image's own bundle does not hold the simulator's CA: the manager refuses the engine at TLS.
    let run = run_in_image(&["-v", &kube_mount], None, &args).await;
    assert_eq!(run.code, Some(1), "{}\n{}", run.stdout, run.stderr);
    let tls = line(&run.stdout, "tls");
    assert!(tls.starts_with("FAIL"), "{}", run.stdout);
    assert!(!run.stdout.contains(PASSWORD) && !run.stderr.contains(PASSWORD));

    // The same bundle plus the simulator's CA, mounted where the image keeps it: every step passes.
    let created = docker_async(vec!["create".into(), image.into()]).await;
    assert_eq!(created.code, Some(0), "{}", created.stderr);
    let container = created.stdout.trim().to_string();
    let stock = dir.path().join("stock.crt");
    let copied = docker_async(vec![
        "cp".into(),
        format!("{container}:{BUNDLE}"),
        stock.display().to_string(),
    ])
    .await;
    docker_async(vec!["rm".into(), container]).await;
    assert_eq!(copied.code, Some(0), "{}", copied.stderr);
    let mut bundle = std::fs::read(&stock).expect("stock bundle");
    bundle.extend_from_slice(b"\n");
    bundle.extend_from_slice(sim_ca.as_bytes());
    let extended = dir.path().join("with-engine-ca.crt");
    write_readable(&extended, &bundle);
    let bundle_mount = format!("{}:{BUNDLE}:ro", extended.display());
    let run = run_in_image(&["-v", &kube_mount, "-v", &bundle_mount], None, &args).await;
    assert_eq!(run.code, Some(0), "{}\n{}", run.stdout, run.stderr);
    for step in ["provider", "settings", "dns", "connect", "tls", "auth", "api"] {
        assert!(line(&run.stdout, step).starts_with("OK"), "{step}:\n{}", run.stdout);
    }
    assert!(line(&run.stdout, "tls").contains("system CAs"), "{}", run.stdout);
    assert!(!run.stdout.contains(PASSWORD) && !run.stderr.contains(PASSWORD));
}

/// The report line of `step` (`VERDICT step …`).
fn line<'a>(report: &'a str, step: &str) -> &'a str {
    report
        .lines()
        .find(|line| line.split_whitespace().nth(1) == Some(step))
        .unwrap_or_else(|| panic!("no {step} line in:\n{report}"))
}
