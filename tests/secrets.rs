//! Secrets sweep: the real `manager` process, run with `--debug=true --log-format=json`, takes one machine through
//! its whole life — a wrong engine password first (AuthenticationFailed, a critical failure with the engine's error
//! text in the status), then the right one, the VM up with its bootstrap data, the workload Node linked, Ready, and
//! deletion after the engine expired its SSO session — and afterwards none of the secrets it handled appears anywhere
//! an operator's output goes: its stdout and stderr, the Kubernetes Events of the test namespace and of `default`
//! (where events of cluster-scoped objects go), every status version of the OVirtProvider, OVirtCluster and
//! OVirtMachine seen by a watch, and `/metrics` (scraped through the secure endpoint with a reader's token, as in
//! production).
//!
//! The secrets: the engine password (and the wrong one tried first), every SSO access token the engine issued, the
//! bootstrap data, the workload cluster's token from the `<cluster>-kubeconfig` Secret (a service-account token of
//! the workload cluster, so that it is distinctive), the operator's own API token, and the tokens presented to
//! `/metrics` (the reader's, and a bogus one that is refused). Each is searched raw, percent-encoded, in base64 at
//! every alignment (as inside a serialized Secret) and as a Rust `Debug` byte list (as `ByteString` prints).
//!
//! So that an empty sweep cannot pass by accident, the test also shows that every place searched holds data (DEBUG
//! log lines, events, status versions carrying the engine's error text, metric families), that each secret really
//! was used (the bootstrap data reached the VM's custom script, the engine issued tokens, the workload token linked
//! the Node) and that the search finds each secret where it must be (its Secret, the VM).

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use base64::Engine as _;
use capov_crds::{ConditionStatus, OVirtCluster, OVirtMachine, OVirtProvider};
use capov_harness::{ADMIN_USER, CREDENTIALS_SECRET, ControlPlane, Engine, Options, free_port, objects, rbac, shared};
use capov_ovirt_sim::{Simulator, Timings};
use capov_testkit::{WithLog, eventually, http};
use futures::StreamExt as _;
use k8s_openapi::api::core::v1::{Event, Node, Secret};
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams};
use kube::runtime::watcher;
use serde_json::{Value, json};

const CLUSTER: &str = "sweep";
const MACHINE: &str = "worker-0";
const MINUTE: Duration = Duration::from_secs(60);
/// What the engine's SSO says about a wrong password; it must reach the status for error texts to be swept.
const ENGINE_REFUSAL: &str = "Unable to log in. Verify your login information";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_secret_reaches_logs_events_statuses_or_metrics() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let nonce = nonce();
    let engine_password = format!("Sw33p-engine-pw-{nonce}");
    let wrong_password = format!("Sw33p-wrong-pw-{nonce}");
    let bootstrap_marker = format!("Sw33p-bootstrap-{nonce}");
    let bootstrap_data = format!(
        "#cloud-config\nhostname: {MACHINE}\nwrite_files:\n- path: /etc/sweep\n  content: {bootstrap_marker}\n"
    );
    let bogus_scrape_token = format!("Sw33p-bogus-scrape-token-{nonce}");

    let plane = shared().await;
    let client = plane.client().await.expect("client");
    let namespace = plane.create_namespace(&client, "sweep").await.expect("namespace");
    // The engine knows the right password; the provider's Secret holds a wrong one first.
    let simulator = Simulator::builder().timings(Timings::fast());
    let engine = Engine::start_as(&client, &namespace, simulator, ADMIN_USER, &wrong_password)
        .await
        .expect("engine");
    let (control, provider) = (engine.sim.control().clone(), engine.provider.clone());
    control.set_user(ADMIN_USER, &engine_password);

    // The workload cluster, reached with a token of its own: a service account bound to cluster-admin.
    let workload = ControlPlane::start(Options::default()).await.expect("workload cluster");
    let workload_admin = workload.client().await.expect("workload client");
    let workload_token = rbac::service_account_token(&workload_admin, "default", "capov-sweep")
        .await
        .expect("workload token");
    rbac::bind_cluster_role(
        &workload_admin,
        "capov-sweep",
        "cluster-admin",
        "default",
        "capov-sweep",
    )
    .await
    .expect("cluster-admin binding");
    let workload_kubeconfig = kubeconfig_with_token(workload.url(), workload.ca_pem(), &workload_token);
    let labels = objects::cluster_labels(&namespace, CLUSTER);
    objects::create_workload_cluster(&client, &namespace, CLUSTER, labels.clone(), &workload_kubeconfig)
        .await
        .expect("cluster");
    let kubeconfig_secret = format!("{CLUSTER}-kubeconfig");

    // Every status version the operator writes, watched from before it starts.
    let statuses = StatusRecorder::start(&client, &namespace, &provider);
    // A reader of /metrics, as the chart's capov-metrics-reader ClusterRole grants it.
    let scraper_token = rbac::metrics_reader_token(&client, &namespace, "scraper")
        .await
        .expect("the scraper's token");

    let metrics_port = free_port();
    let mut operator = Operator::start(plane.kubeconfig_path(), &namespace, metrics_port);

    // 1. The wrong password: a critical AuthenticationFailed whose message carries the engine's words.
    objects::create_machine_with_bootstrap(
        &client,
        &namespace,
        CLUSTER,
        MACHINE,
        labels.clone(),
        json!({"provider": provider, "ovirtcluster": "Default", "template": "ubuntu-22.04"}),
        &bootstrap_data,
    )
    .await
    .expect("machine");
    let machines: Api<OVirtMachine> = Api::namespaced(client.clone(), &namespace);
    let refused = eventually(
        MINUTE,
        operator.with_log("AuthenticationFailed with failureReason"),
        || async {
            let machine = machines.get(MACHINE).await.ok()?;
            let status = machine.status.clone()?;
            let connect = status.conditions.iter().find(|c| c.type_ == "CanConnectToOVirt")?;
            (connect.reason == "AuthenticationFailed" && status.failure_reason.is_some()).then_some(status)
        },
    )
    .await;
    let refusal = refused
        .conditions
        .iter()
        .find(|c| c.type_ == "CanConnectToOVirt")
        .map(|c| c.message.clone())
        .unwrap_or_default();
    assert!(
        refusal.contains(ENGINE_REFUSAL),
        "the engine's error text is not in the condition, so error texts would not be swept: {refusal:?}"
    );

    // 2. The right password; clearing the critical failure (as the README shows) lets the machine go on.
    let credentials = [("username", "admin@internal"), ("password", engine_password.as_str())];
    objects::apply_secret(&client, &namespace, CREDENTIALS_SECRET, &credentials)
        .await
        .expect("credentials");
    let providers: Api<OVirtProvider> = Api::all(client.clone());
    eventually(MINUTE, operator.with_log("the provider to log in"), || async {
        providers
            .get(&provider)
            .await
            .ok()?
            .status
            .filter(|s| s.ready)
            .map(|_| ())
    })
    .await;
    let clear = json!({"status": {"failureReason": null, "failureMessage": null}});
    machines
        .patch_status(MACHINE, &PatchParams::default(), &Patch::Merge(&clear))
        .await
        .expect("clear failureReason");
    let vm_id = eventually(MINUTE, operator.with_log("spec.providerID"), || async {
        let provider_id = machines.get(MACHINE).await.ok()?.spec.provider_id?;
        provider_id.strip_prefix("ovirt://").map(String::from)
    })
    .await;
    let vm = eventually(MINUTE, operator.with_log("the VM up"), || async {
        control.vm(&vm_id).filter(|vm| vm.status == "up")
    })
    .await;
    let custom_script = vm.custom_script.clone().unwrap_or_default();
    assert!(
        custom_script.contains(&bootstrap_marker),
        "the bootstrap data did not reach the VM: {custom_script:?}"
    );
    let node = format!("{MACHINE}-node");
    objects::register_node(&workload_admin, &node, &vm_id)
        .await
        .expect("node");
    eventually(MINUTE, operator.with_log("Ready with an InternalIP"), || async {
        let status = machines.get(MACHINE).await.ok()?.status?;
        let ready = status
            .conditions
            .iter()
            .any(|c| c.type_ == "Ready" && c.status == ConditionStatus::True);
        let has_ip = status.addresses.iter().any(|a| a.type_ == "InternalIP");
        (ready && has_ip).then_some(())
    })
    .await;
    // The operator reached the workload cluster with the swept token: it wrote the Node's providerID.
    let node_provider_id = Api::<Node>::all(workload_admin.clone())
        .get(&node)
        .await
        .expect("node")
        .spec
        .and_then(|spec| spec.provider_id);
    assert_eq!(node_provider_id, Some(format!("ovirt://{vm_id}")));

    // 3. /metrics: refused without a token and with a bogus one (DEBUG lines about both), served to the reader.
    let https = reqwest::Client::builder()
        .danger_accept_invalid_certs(true)
        .timeout(Duration::from_secs(20))
        .build()
        .expect("HTTPS client");
    let metrics_url = format!("https://127.0.0.1:{metrics_port}/metrics");
    assert_eq!(http::get(&https, &metrics_url, None).await.0, 401);
    assert_eq!(http::get(&https, &metrics_url, Some(&bogus_scrape_token)).await.0, 401);
    let mut metrics_text = scrape_as_reader(&https, &metrics_url, &scraper_token, &operator).await;

    // 4. Deletion, after the engine forgot the session: the first request with the old token gets 401 and the
    // operator logs in again, so a rejected token and a second one go through its error handling too. The
    // OVirtMachine goes, and its VM with it.
    let issued_before = control.issued_tokens().len();
    control.expire_tokens();
    machines
        .delete(MACHINE, &DeleteParams::default())
        .await
        .expect("delete the OVirtMachine");
    eventually(
        MINUTE,
        operator.with_log("the OVirtMachine and its VM gone"),
        || async {
            let gone = machines.get_opt(MACHINE).await.ok()?.is_none();
            (gone && control.vm(&vm_id).is_none()).then_some(())
        },
    )
    .await;
    assert!(
        control.issued_tokens().len() > issued_before,
        "the VM was deleted without a new login after the tokens expired"
    );
    metrics_text.push_str(&scrape_as_reader(&https, &metrics_url, &scraper_token, &operator).await);

    // Collect everything: the logs once the process has stopped, every status version seen, the events.
    let logs = operator.stop().await;
    let mut status_versions = statuses.stop();
    // The last writes, in case their watch events were still on the way (the machine is gone by now).
    let clusters: Api<OVirtCluster> = Api::namespaced(client.clone(), &namespace);
    status_versions.extend(status_version(&providers.get(&provider).await.expect("provider")));
    status_versions.extend(status_version(&clusters.get(CLUSTER).await.expect("cluster")));
    let mut events = Vec::new();
    for events_namespace in [namespace.as_str(), "default"] {
        let listed = Api::<Event>::namespaced(client.clone(), events_namespace)
            .list(&ListParams::default())
            .await
            .expect("events");
        events.extend(listed.items);
    }
    let events_text = serde_json::to_string(&events).expect("events as JSON");
    let status_text = status_versions.join("\n");

    // Every place searched holds data, of the kinds a leak would hide in.
    let log_lines: Vec<Value> = logs
        .lines()
        .filter_map(|line| serde_json::from_str(line).ok())
        .collect();
    let debug_lines = log_lines.iter().filter(|line| line["level"] == "DEBUG").count();
    assert!(debug_lines > 0, "no DEBUG line: was --debug=true honoured?\n{logs}");
    assert!(logs.contains(&vm_id), "the logs do not cover the VM's life");
    assert!(!events.is_empty(), "no Kubernetes Event recorded");
    let machine_events = events
        .iter()
        .filter(|event| event.involved_object.name.as_deref() == Some(MACHINE))
        .count();
    assert!(machine_events > 0, "no Event about the machine");
    for expected in ["AuthenticationFailed", ENGINE_REFUSAL, "InternalIP"] {
        assert!(status_text.contains(expected), "no status version has {expected:?}");
    }
    for kind in ["OVirtProvider", "OVirtCluster", "OVirtMachine"] {
        assert!(
            status_versions.iter().any(|version| version.starts_with(kind)),
            "no status of an {kind} seen"
        );
    }
    for family in ["capov_reconciles_total", "capov_actors_live", "capov_build_info"] {
        assert!(metrics_text.contains(family), "no {family} in /metrics");
    }

    // The secrets were all in play.
    let sso_tokens = control.issued_tokens();
    assert!(!sso_tokens.is_empty(), "the engine issued no token");
    assert!(control.counter("POST /vms") >= 1, "no VM was created with a token");
    let operator_token = bearer_token(&std::fs::read_to_string(plane.kubeconfig_path()).expect("kubeconfig"));
    let mut secrets = vec![
        ("the engine password", engine_password.clone()),
        ("the wrong engine password", wrong_password.clone()),
        ("the bootstrap data", bootstrap_marker.clone()),
        ("the workload cluster's token", workload_token.clone()),
        ("the operator's own API token", operator_token),
        ("the /metrics reader's token", scraper_token.clone()),
        ("the refused /metrics token", bogus_scrape_token.clone()),
    ];
    // Without the trailing `=` padding, so that a token shown cut or re-encoded is still found.
    secrets.extend(
        sso_tokens
            .iter()
            .map(|token| ("an SSO access token", token.trim_end_matches('=').to_string())),
    );

    // The search finds each kind of secret where it must be: raw in the VM's custom script, base64 inside the
    // Secrets as the API serves them (the workload token sits at an arbitrary offset of the kubeconfig's base64).
    let secrets_api: Api<Secret> = Api::namespaced(client.clone(), &namespace);
    let bootstrap_secret = format!("{MACHINE}-bootstrap");
    for (name, secret) in [
        (CREDENTIALS_SECRET, &engine_password),
        (kubeconfig_secret.as_str(), &workload_token),
        (bootstrap_secret.as_str(), &bootstrap_marker),
    ] {
        let served = serde_json::to_string(&secrets_api.get(name).await.expect("secret")).expect("JSON");
        assert!(
            occurrences(&served, secret) > 0,
            "the search does not find {secret} in Secret {name}"
        );
    }
    assert!(occurrences(&custom_script, &bootstrap_marker) > 0);

    // The sweep.
    let places = [
        ("the operator's stdout and stderr", logs.as_str()),
        ("the Kubernetes Events", events_text.as_str()),
        ("the statuses", status_text.as_str()),
        ("/metrics", metrics_text.as_str()),
    ];
    let mut leaks = Vec::new();
    for (what, secret) in &secrets {
        for (place, text) in places {
            let found = occurrences(text, secret);
            if found > 0 {
                leaks.push(format!("{what} ({secret}) appears {found} times in {place}"));
            }
        }
    }
    assert!(leaks.is_empty(), "secrets leaked:\n{}", leaks.join("\n"));
    println!(
        "secrets sweep: {} secrets ({} SSO tokens) in {} forms over {} log lines ({} bytes, {debug_lines} DEBUG), \
         {} events ({machine_events} about the machine; {} bytes), {} status versions ({} bytes) and 2 /metrics \
         scrapes ({} bytes): 0 occurrences",
        secrets.len(),
        sso_tokens.len(),
        secrets.iter().map(|(_, secret)| forms(secret).len()).sum::<usize>(),
        log_lines.len(),
        logs.len(),
        events.len(),
        events_text.len(),
        status_versions.len(),
        status_text.len(),
        metrics_text.len(),
    );
    operator.remove_logs();
}

/// A value no other test or run uses, so that an occurrence can only come from this run.
fn nonce() -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    format!("{:016x}", (nanos as u64) ^ (u64::from(std::process::id()) << 40))
}

/// The forms a leaked `secret` would take in text: as is, percent-encoded (in a URL or form), base64 at each of the
/// three alignments it can have inside a longer encoded value (a serialized Secret), and the byte list that `Debug`
/// of a `Vec<u8>` or `ByteString` prints.
fn forms(secret: &str) -> BTreeSet<String> {
    let bytes = secret.as_bytes();
    let mut forms = BTreeSet::from([secret.to_string(), percent_encoded(secret)]);
    for skip in 0..3 {
        // Inside a longer value, the secret's first group may be shared with the bytes before it and its last
        // group with the bytes after it; the whole groups in between encode the same way wherever it sits.
        let whole = bytes.len().saturating_sub(skip) / 3 * 3;
        if whole > 0 {
            forms.insert(base64::engine::general_purpose::STANDARD.encode(&bytes[skip..skip + whole]));
        }
    }
    let listed: Vec<String> = bytes.iter().map(u8::to_string).collect();
    forms.insert(listed.join(", "));
    forms
}

fn percent_encoded(text: &str) -> String {
    text.bytes()
        .map(|byte| match byte {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => char::from(byte).to_string(),
            _ => format!("%{byte:02X}"),
        })
        .collect()
}

/// How often `secret`, in any of its forms, occurs in `text`.
fn occurrences(text: &str, secret: &str) -> usize {
    forms(secret)
        .iter()
        .map(|form| text.matches(form.as_str()).count())
        .sum()
}

#[test]
fn the_search_finds_secrets_in_every_form() {
    let secret = "Sw33p-example+/secret";
    for prefix in ["", "a", "ab", "abc"] {
        let encoded = base64::engine::general_purpose::STANDARD.encode(format!("{prefix}{secret}!?"));
        assert_eq!(occurrences(&encoded, secret), 1, "base64 after {prefix:?}");
    }
    assert_eq!(occurrences("?password=Sw33p-example%2B%2Fsecret&x", secret), 1);
    assert_eq!(occurrences(&format!("{:?}", secret.as_bytes()), secret), 1);
    assert_eq!(occurrences(&format!("..{secret}.."), secret), 1);
    assert_eq!(occurrences("Sw33p-example+/secre", secret), 0);
}

/// The token in the `users` entry of a kubeconfig written by the harness.
fn bearer_token(kubeconfig: &str) -> String {
    kubeconfig
        .lines()
        .find_map(|line| line.trim().strip_prefix("token: "))
        .map(str::to_string)
        .expect("a token in the kubeconfig")
}

fn kubeconfig_with_token(server: &str, ca_pem: &str, token: &str) -> String {
    let ca = base64::engine::general_purpose::STANDARD.encode(ca_pem);
    format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: workload\n  cluster:\n    server: {server}\n    \
         certificate-authority-data: {ca}\nusers:\n- name: capov\n  user:\n    token: {token}\ncontexts:\n- name: \
         workload\n  context:\n    cluster: workload\n    user: capov\ncurrent-context: workload\n"
    )
}

async fn scrape_as_reader(client: &reqwest::Client, url: &str, token: &str, operator: &Operator) -> String {
    let (status, body) = http::get(client, url, Some(token)).await;
    assert_eq!(status, 200, "{}", operator.with_log(&body));
    body
}

/// Every distinct status of the test's OVirtProvider, OVirtCluster and OVirtMachine that a watch delivered, each as
/// `<kind> <name>: <status JSON>`.
struct StatusRecorder {
    seen: Arc<Mutex<BTreeSet<String>>>,
    watches: Vec<tokio::task::JoinHandle<()>>,
}

impl StatusRecorder {
    fn start(client: &kube::Client, namespace: &str, provider: &str) -> StatusRecorder {
        let seen = Arc::new(Mutex::new(BTreeSet::new()));
        let by_name = watcher::Config::default().fields(&format!("metadata.name={provider}"));
        let watches = vec![
            record::<OVirtProvider>(Api::all(client.clone()), by_name, seen.clone()),
            record::<OVirtCluster>(
                Api::namespaced(client.clone(), namespace),
                watcher::Config::default(),
                seen.clone(),
            ),
            record::<OVirtMachine>(
                Api::namespaced(client.clone(), namespace),
                watcher::Config::default(),
                seen.clone(),
            ),
        ];
        StatusRecorder { seen, watches }
    }

    fn stop(self) -> Vec<String> {
        for watch in &self.watches {
            watch.abort();
        }
        let seen = self.seen.lock().unwrap_or_else(|e| e.into_inner());
        seen.iter().cloned().collect()
    }
}

fn record<K>(api: Api<K>, config: watcher::Config, seen: Arc<Mutex<BTreeSet<String>>>) -> tokio::task::JoinHandle<()>
where
    K: kube::Resource<DynamicType = ()>
        + Clone
        + serde::de::DeserializeOwned
        + serde::Serialize
        + std::fmt::Debug
        + Send
        + 'static,
{
    use kube::runtime::WatchStreamExt as _;
    tokio::spawn(async move {
        let mut objects = watcher(api, config).default_backoff().applied_objects().boxed();
        while let Some(object) = objects.next().await {
            if let Some(version) = object.ok().as_ref().and_then(status_version) {
                seen.lock().unwrap_or_else(|e| e.into_inner()).insert(version);
            }
        }
    })
}

/// `<kind> <name>: <status JSON>`, when the object has a status.
fn status_version<K: kube::Resource<DynamicType = ()> + serde::Serialize>(object: &K) -> Option<String> {
    let value = serde_json::to_value(object).ok()?;
    let status = value.get("status")?;
    let name = object.meta().name.clone().unwrap_or_default();
    Some(format!("{} {name}: {status}", K::kind(&())))
}

/// The `manager` process under test: `--debug=true`, JSON logs, the secure metrics endpoint on `metrics_port`;
/// stdout and stderr both go to one file.
struct Operator {
    child: Option<Child>,
    dir: PathBuf,
    log: PathBuf,
}

impl Operator {
    fn start(kubeconfig: &Path, namespace: &str, metrics_port: u16) -> Operator {
        let dir = std::env::temp_dir().join(format!("capov-{namespace}"));
        std::fs::create_dir_all(&dir).expect("log directory");
        let log = dir.join("manager.log");
        let file = std::fs::File::create(&log).expect("log file");
        let child = Command::new(env!("CARGO_BIN_EXE_manager"))
            .arg(format!("--kubeconfig={}", kubeconfig.display()))
            .arg(format!("--namespace={namespace}"))
            .arg(format!("--watch-filter={namespace}"))
            .arg(format!("--credentials-namespace={namespace}"))
            .arg(format!("--metrics-bind-address=127.0.0.1:{metrics_port}"))
            .arg("--metrics-secure=true")
            // The workload cluster runs on loopback.
            .arg("--allow-internal-workload-servers")
            .arg("--health-probe-bind-address=0")
            .arg("--debug=true")
            .arg("--log-format=json")
            // The flags alone decide what is logged.
            .env_remove("RUST_LOG")
            .stdin(Stdio::null())
            .stdout(file.try_clone().expect("log file"))
            .stderr(file)
            .spawn()
            .expect("start the manager");
        Operator {
            child: Some(child),
            dir,
            log,
        }
    }

    /// SIGTERM, as Kubernetes stops the pod; waits for a clean exit and returns everything the process wrote.
    async fn stop(&mut self) -> String {
        let child = self.child.as_mut().expect("a running operator");
        // SAFETY: a plain syscall on the child process this test started and has not reaped yet.
        unsafe {
            libc::kill(child.id() as libc::pid_t, libc::SIGTERM);
        }
        let status = capov_testkit::wait_exit(child, Duration::from_secs(30))
            .await
            .unwrap_or_else(|timed_out| panic!("{}", self.with_log(&format!("the manager to stop: {timed_out}"))));
        self.child = None;
        assert!(
            status.success(),
            "{}",
            self.with_log(&format!("the manager exited with {status}"))
        );
        std::fs::read_to_string(&self.log).expect("the manager's log")
    }

    fn remove_logs(&self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }

    /// `what` a failure message says, with the end of the operator's log (read only when shown).
    fn with_log(&self, what: &str) -> WithLog {
        WithLog::new(what, &self.log)
    }
}

impl Drop for Operator {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}
