//! The metrics endpoint served in-process on a loopback port, its bearer tokens checked by the real API server
//! (TokenReview + SubjectAccessReview): no token or a bad token → 401, a service account without the
//! `capov-metrics-reader` rule → 403, with it → 200 and the `capov_` families; API errors → 500. And the real
//! `manager` bringing machines up serves every metric the chart's alerting rules and dashboard panels read.

mod support;

use std::collections::BTreeSet;
use std::net::{IpAddr, Ipv4Addr};
use std::time::Duration;

use base64::Engine as _;
use capov::Metrics;
use capov::cli::ListenAddress;
use capov::metrics::{self, MetricsServerOptions};
use capov_harness::{ControlPlane, objects, rbac};
use capov_testkit::{eventually, http, manifests, promql, stdout_of};
use k8s_openapi::api::rbac::v1::PolicyRule;
use kube::config::{KubeConfigOptions, Kubeconfig};
use serde_json::{Value, json};

fn loopback() -> ListenAddress {
    ListenAddress {
        host: Some(IpAddr::V4(Ipv4Addr::LOCALHOST)),
        port: 0,
    }
}

fn options(secure: bool, cert_dir: Option<std::path::PathBuf>) -> MetricsServerOptions {
    MetricsServerOptions::new(loopback(), secure, cert_dir, "capov-system")
}

fn https_insecure() -> reqwest::Client {
    let _ = rustls::crypto::ring::default_provider().install_default();
    reqwest::Client::builder()
        .danger_accept_invalid_certs(true)
        .timeout(Duration::from_secs(20))
        .build()
        .expect("HTTPS client")
}

/// A kube client that authenticates with `token` against `plane`.
async fn client_with_token(plane: &ControlPlane, server: &str, token: &str) -> kube::Client {
    let ca = base64::engine::general_purpose::STANDARD.encode(plane.ca_pem());
    let yaml = format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: {server}\n    \
         certificate-authority-data: {ca}\nusers:\n- name: u\n  user:\n    token: {token}\ncontexts:\n- name: c\n  \
         context:\n    cluster: c\n    user: u\ncurrent-context: c\n"
    );
    let kubeconfig = Kubeconfig::from_yaml(&yaml).expect("kubeconfig");
    let config = kube::Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
        .await
        .expect("config");
    kube::Client::try_from(config).expect("client")
}

#[tokio::test]
async fn scrapes_need_an_authenticated_and_authorized_token() {
    let plane = capov_harness::shared().await;
    let admin = plane.client().await.expect("client");
    let namespace = plane.create_namespace(&admin, "metrics").await.expect("namespace");
    let reader_token = rbac::metrics_reader_token(&admin, &namespace, "scraper")
        .await
        .expect("reader token");
    let nobody_token = rbac::service_account_token(&admin, &namespace, "nobody")
        .await
        .expect("token");

    let metrics = Metrics::new();
    metrics.init_kind("machine");
    metrics
        .reconciles_total
        .with_label_values(&["machine", "success"])
        .inc();
    let server = metrics::serve(options(true, None), metrics.clone(), admin.clone())
        .await
        .expect("serve");
    let url = format!("https://127.0.0.1:{}/metrics", server.local_addr().port());
    let client = https_insecure();

    let response = client.get(&url).send().await.expect("request");
    assert_eq!(response.status().as_u16(), 401);
    assert_eq!(response.headers()["www-authenticate"], "Bearer");
    assert_eq!(http::get(&client, &url, Some("not-a-token")).await.0, 401);
    assert_eq!(http::get(&client, &url, Some(&nobody_token)).await.0, 403);

    let response = client
        .get(&url)
        .bearer_auth(&reader_token)
        .send()
        .await
        .expect("request");
    assert_eq!(response.status().as_u16(), 200);
    assert_eq!(response.version(), reqwest::Version::HTTP_2, "ALPN h2");
    assert!(
        response.headers()["content-type"]
            .to_str()
            .unwrap()
            .starts_with("text/plain; version=0.0.4")
    );
    let body = response.text().await.expect("body");
    for family in [
        "capov_build_info",
        "capov_actors_live{kind=\"machine\"} 0",
        "capov_reconciles_total{kind=\"machine\",result=\"success\"} 1",
        "capov_max_concurrent_reconciles",
        "capov_process_resident_memory_bytes",
        "capov_process_cpu_seconds_total",
        "capov_process_open_fds",
    ] {
        assert!(body.contains(family), "missing {family}");
    }
    for line in body.lines().filter(|line| !line.starts_with('#')) {
        assert!(line.starts_with("capov_"), "unprefixed series {line}");
    }

    // The rule names /metrics only: another path is forbidden even for the reader.
    let other = format!("https://127.0.0.1:{}/debug", server.local_addr().port());
    assert_eq!(http::get(&client, &other, Some(&reader_token)).await.0, 403);
    // A second scrape is answered from the decision cache and still sees fresh values.
    metrics
        .reconciles_total
        .with_label_values(&["machine", "success"])
        .inc();
    let (status, body) = http::get(&client, &url, Some(&reader_token)).await;
    assert_eq!(status, 200);
    assert!(body.contains("capov_reconciles_total{kind=\"machine\",result=\"success\"} 2"));
    server.shutdown().await;
}

/// A certificate from `--metrics-cert-dir`, verified by the client and reloaded when rotated, and an authorizer whose own service account
/// has only the two rules the chart gives it for this purpose (create tokenreviews and subjectaccessreviews).
#[tokio::test]
async fn certificate_from_cert_dir_and_least_privilege_reviews() {
    let plane = capov_harness::shared().await;
    let admin = plane.client().await.expect("client");
    let namespace = plane.create_namespace(&admin, "metrics-tls").await.expect("namespace");
    let operator_token = rbac::service_account_token(&admin, &namespace, "operator")
        .await
        .expect("token");
    let reader_token = rbac::metrics_reader_token(&admin, &namespace, "scraper")
        .await
        .expect("reader token");
    let review_rules = vec![
        PolicyRule {
            api_groups: Some(vec!["authentication.k8s.io".into()]),
            resources: Some(vec!["tokenreviews".into()]),
            verbs: vec!["create".into()],
            ..Default::default()
        },
        PolicyRule {
            api_groups: Some(vec!["authorization.k8s.io".into()]),
            resources: Some(vec!["subjectaccessreviews".into()]),
            verbs: vec!["create".into()],
            ..Default::default()
        },
    ];
    rbac::grant(
        &admin,
        &format!("{namespace}-operator"),
        &namespace,
        "operator",
        review_rules,
    )
    .await
    .expect("grant");
    let operator = client_with_token(plane, plane.url(), &operator_token).await;

    let dir = tempfile::tempdir().expect("temp dir");
    let certified = rcgen::generate_simple_self_signed(vec!["localhost".to_string()]).expect("certificate");
    std::fs::write(dir.path().join("tls.crt"), certified.cert.pem()).expect("tls.crt");
    std::fs::write(dir.path().join("tls.key"), certified.signing_key.serialize_pem()).expect("tls.key");
    let server = metrics::serve(options(true, Some(dir.path().to_path_buf())), Metrics::new(), operator)
        .await
        .expect("serve");

    let _ = rustls::crypto::ring::default_provider().install_default();
    let root = reqwest::Certificate::from_pem(certified.cert.pem().as_bytes()).expect("root");
    let client = reqwest::Client::builder()
        .add_root_certificate(root)
        .resolve("localhost", server.local_addr())
        .timeout(Duration::from_secs(20))
        .build()
        .expect("client");
    let url = format!("https://localhost:{}/metrics", server.local_addr().port());
    let (status, body) = http::get(&client, &url, Some(&reader_token)).await;
    assert_eq!(status, 200, "{body}");
    assert!(body.contains("capov_build_info"));
    assert_eq!(http::get(&client, &url, None).await.0, 401);

    // Rotation (as cert-manager does it): new files, picked up at the next handshake.
    let rotated = rcgen::generate_simple_self_signed(vec!["localhost".to_string()]).expect("certificate");
    let later = std::time::SystemTime::now() + Duration::from_secs(10);
    for (name, pem) in [
        ("tls.crt", rotated.cert.pem()),
        ("tls.key", rotated.signing_key.serialize_pem()),
    ] {
        let path = dir.path().join(name);
        std::fs::write(&path, pem).expect("write rotated file");
        std::fs::File::options()
            .write(true)
            .open(&path)
            .and_then(|f| f.set_modified(later))
            .expect("mtime");
    }
    let trusting_rotated = reqwest::Client::builder()
        .add_root_certificate(reqwest::Certificate::from_pem(rotated.cert.pem().as_bytes()).expect("root"))
        .resolve("localhost", server.local_addr())
        .timeout(Duration::from_secs(20))
        .build()
        .expect("client");
    let (status, body) = http::get(&trusting_rotated, &url, Some(&reader_token)).await;
    assert_eq!(status, 200, "{body}");
    let trusting_old = reqwest::Client::builder()
        .add_root_certificate(reqwest::Certificate::from_pem(certified.cert.pem().as_bytes()).expect("root"))
        .resolve("localhost", server.local_addr())
        .timeout(Duration::from_secs(20))
        .build()
        .expect("client");
    assert!(
        trusting_old.get(&url).send().await.is_err(),
        "old certificate still served"
    );
    server.shutdown().await;
}

#[tokio::test]
async fn api_errors_answer_500_and_are_not_cached() {
    let plane = capov_harness::shared().await;
    // A client for an API server that is not there.
    let gone = format!("https://127.0.0.1:{}", capov_harness::free_port());
    let client = client_with_token(plane, &gone, "whatever").await;
    let server = metrics::serve(options(true, None), Metrics::new(), client)
        .await
        .expect("serve");
    let url = format!("https://127.0.0.1:{}/metrics", server.local_addr().port());
    let https = https_insecure();
    assert_eq!(http::get(&https, &url, Some("some-token")).await.0, 500);
    assert_eq!(http::get(&https, &url, Some("some-token")).await.0, 500);
    // Without a token there is nothing to ask the API server: 401.
    assert_eq!(http::get(&https, &url, None).await.0, 401);
    server.shutdown().await;
}

#[tokio::test]
async fn insecure_mode_serves_plain_http_without_authentication() {
    let plane = capov_harness::shared().await;
    let admin = plane.client().await.expect("client");
    let server = metrics::serve(options(false, None), Metrics::new(), admin)
        .await
        .expect("serve");
    let _ = rustls::crypto::ring::default_provider().install_default();
    let client = reqwest::Client::new();
    let base = format!("http://127.0.0.1:{}", server.local_addr().port());
    let (status, body) = http::get(&client, &format!("{base}/metrics"), None).await;
    assert_eq!(status, 200);
    assert!(body.contains("capov_build_info"));
    assert_eq!(http::get(&client, &format!("{base}/other"), None).await.0, 404);
    server.shutdown().await;
}

/// The names of the samples a scrape holds (`capov_x_bucket`, `capov_x_count` … for a histogram).
fn served_names(scrape: &str) -> BTreeSet<String> {
    scrape
        .lines()
        .filter(|line| !line.starts_with('#') && !line.is_empty())
        .filter_map(|line| line.split(['{', ' ']).next())
        .map(String::from)
        .collect()
}

/// Each expression of the chart's alerting rules, named by its alert.
fn rule_expressions() -> Vec<(String, String)> {
    let mut helm = capov_harness::helm().unwrap_or_else(|err| panic!("{err}"));
    helm.args([
        "template",
        "capov",
        "chart/capov",
        "--set",
        "prometheusRule.enabled=true",
    ]);
    let documents = manifests::documents(&stdout_of(&mut helm).unwrap_or_else(|err| panic!("{err}")));
    let rule = manifests::find(&documents, "PrometheusRule", "capov-alerts");
    rule["spec"]["groups"]
        .as_array()
        .expect("groups")
        .iter()
        .flat_map(|group| group["rules"].as_array().expect("rules"))
        .map(|rule| {
            let alert = rule["alert"].as_str().expect("alert");
            (
                format!("alert {alert}"),
                rule["expr"].as_str().expect("expr").to_string(),
            )
        })
        .collect()
}

/// Each query of the dashboard: its panels' targets and its variables, named by panel or variable.
fn dashboard_queries() -> Vec<(String, String)> {
    let text = std::fs::read_to_string("chart/capov/files/capov-dashboard.json").expect("dashboard");
    let dashboard: Value = serde_json::from_str(&text).expect("dashboard JSON");
    let mut queries = Vec::new();
    for panel in dashboard["panels"].as_array().expect("panels") {
        for target in panel["targets"].as_array().into_iter().flatten() {
            let expr = target["expr"].as_str().expect("a target's expr");
            queries.push((format!("panel {}", panel["title"]), expr.to_string()));
        }
    }
    for variable in dashboard["templating"]["list"].as_array().expect("variables") {
        if let Some(query) = variable["query"]["query"].as_str() {
            queries.push((format!("variable {}", variable["name"]), query.to_string()));
        }
    }
    queries
}

/// Every metric the chart's alerting rules and dashboard panels read is one the real `manager` serves, so that a
/// renamed metric breaks this test instead of the pager. The manager brings one machine to Ready and keeps one at a
/// step (a template the engine lacks), with a rate limit low enough that requests wait; then its /metrics is scraped
/// and the names each rule and panel reads are compared with the names of the samples served. The scrape also shows
/// the new families with what happened: one time to Ready, the machines by phase and step, the provider Connected.
#[tokio::test]
async fn alerts_and_dashboard_read_only_metrics_the_manager_serves() {
    let plane = capov_harness::shared().await;
    let client = plane.client().await.expect("client");
    let namespace = plane.create_namespace(&client, "served").await.expect("namespace");
    let engine = support::engine(&client, &namespace).await;
    let kubelets = capov_harness::play_kubelets(
        engine.sim.control().clone(),
        engine.workload.client().await.expect("workload client"),
    );
    for (name, template) in [("ready-0", "ubuntu-22.04"), ("stuck-0", "no-such-template")] {
        let spec = json!({"provider": engine.provider, "ovirtcluster": "Default", "template": template});
        objects::create_machine(&client, &namespace, "workload", name, support::labels(&namespace), spec)
            .await
            .expect("machine");
    }
    let dir = tempfile::tempdir().expect("log dir");
    let args = ["--ovirt-qps=2", "--ovirt-burst=1"];
    let manager = support::Manager::start_with(plane.kubeconfig_path(), &namespace, "served", dir.path(), &args);
    let url = format!("http://127.0.0.1:{}/metrics", manager.metrics_port);
    let http = support::http();
    let provider = &engine.provider;
    let expected = [
        "capov_machine_time_to_ready_seconds_count 1".to_string(),
        "capov_machines{phase=\"Running\",reason=\"Ready\",step=\"Ready\"} 1".to_string(),
        "capov_machines{phase=\"Provisioning\",reason=\"TemplateNotFound\",step=\"MachineCreated\"} 1".to_string(),
        "capov_machines_longest_in_step_seconds{step=\"MachineCreated\"}".to_string(),
        format!("capov_provider_ready{{provider=\"{provider}\",reason=\"Connected\"}} 1"),
        format!("capov_engine_rate_limit_wait_seconds_count{{provider=\"{provider}\"}}"),
        "capov_engine_rate_limit_qps 2".to_string(),
        "capov_process_memory_limit_bytes".to_string(),
    ];
    let scrape = eventually(
        Duration::from_secs(120),
        manager.with_log("one machine Ready and one at MachineCreated in the scrape"),
        || async {
            // Refused until the manager listens.
            let response = http.get(&url).send().await.map_err(|err| err.to_string())?;
            let status = response.status().as_u16();
            let body = response.text().await.map_err(|err| err.to_string())?;
            let missing: Vec<&String> = expected.iter().filter(|line| !body.contains(line.as_str())).collect();
            if status == 200 && missing.is_empty() {
                Ok(body)
            } else {
                Err(format!("{status}, missing {missing:?}"))
            }
        },
    )
    .await;
    kubelets.abort();

    let served = served_names(&scrape);
    let queries: Vec<(String, String)> = rule_expressions().into_iter().chain(dashboard_queries()).collect();
    assert!(queries.len() > 30, "only {} queries found", queries.len());
    let mut unserved = Vec::new();
    for (what, expr) in &queries {
        let names = promql::metric_names(expr);
        // Grafana's label_values(METRIC, LABEL) names a label too.
        let names: Vec<&String> = names
            .iter()
            .filter(|name| name.starts_with("capov_") || !expr.starts_with("label_values("))
            .collect();
        assert!(!names.is_empty(), "{what} reads no metric: {expr}");
        for name in names.into_iter().filter(|name| !served.contains(*name)) {
            unserved.push(format!("{what}: {name}"));
        }
    }
    assert!(
        unserved.is_empty(),
        "metrics read by the chart but not served by the manager:\n{}",
        unserved.join("\n")
    );
}
