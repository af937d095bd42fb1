//! The `manager` binary's command line as a user meets it: environment variables `CAPOV_*` and `POD_NAMESPACE`
//! (each run gets a clean environment), flags winning over them, exit codes and one-line errors.

use std::process::{Command, Output};

use serde_json::Value;

fn manager(args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut command = Command::new(env!("CARGO_BIN_EXE_manager"));
    command.env_clear().args(args);
    for (name, value) in env {
        command.env(name, value);
    }
    command.output().expect("run manager")
}

fn config(args: &[&str], env: &[(&str, &str)]) -> Value {
    let mut all = vec!["--print-config"];
    all.extend_from_slice(args);
    let output = manager(&all, env);
    assert!(
        output.status.success(),
        "{all:?} {env:?}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_slice(&output.stdout).expect("JSON configuration")
}

#[test]
fn defaults_without_environment() {
    let config = config(&[], &[]);
    assert_eq!(config["metrics_bind_address"], ":8443");
    assert_eq!(config["metrics_secure"], true);
    assert_eq!(config["metrics_cert_dir"], Value::Null);
    assert_eq!(config["health_probe_bind_address"], ":8081");
    assert_eq!(config["leader_elect"], false);
    assert_eq!(config["leader_election_id"], "capov-controller-manager");
    assert_eq!(config["feature_gates"], "");
    assert_eq!(config["debug"], false);
    assert_eq!(config["max_concurrent_reconciles"], 10);
    assert_eq!(config["namespace"], Value::Null);
    assert_eq!(config["credentials_namespace"], "capov-system");
    assert_eq!(config["watch_filter"], Value::Null);
    assert_eq!(config["sync_period"], "10m0s");
    assert_eq!(config["ovirt_qps"], 10.0);
    assert_eq!(config["ovirt_burst"], 20);
    assert_eq!(config["kubeconfig"], Value::Null);
    assert_eq!(config["log_format"], "json");
}

/// Every flag read from its `CAPOV_<FLAG>` variable.
#[test]
fn every_flag_from_the_environment() {
    let env = [
        ("CAPOV_METRICS_BIND_ADDRESS", "127.0.0.1:9443"),
        ("CAPOV_METRICS_SECURE", "false"),
        ("CAPOV_METRICS_CERT_DIR", "/certs"),
        ("CAPOV_HEALTH_PROBE_BIND_ADDRESS", "0"),
        ("CAPOV_LEADER_ELECT", "true"),
        ("CAPOV_LEADER_ELECTION_ID", "capov-test"),
        ("CAPOV_FEATURE_GATES", "disk-clone=true"),
        ("CAPOV_DEBUG", "true"),
        ("CAPOV_MAX_CONCURRENT_RECONCILES", "3"),
        ("CAPOV_NAMESPACE", "team-a"),
        ("CAPOV_CREDENTIALS_NAMESPACE", "creds"),
        ("CAPOV_WATCH_FILTER", "blue"),
        ("CAPOV_SYNC_PERIOD", "90s"),
        ("CAPOV_OVIRT_QPS", "2.5"),
        ("CAPOV_OVIRT_BURST", "4"),
        ("CAPOV_KUBECONFIG", "/kube/config"),
        ("CAPOV_LOG_FORMAT", "text"),
    ];
    let config = config(&[], &env);
    assert_eq!(config["metrics_bind_address"], "127.0.0.1:9443");
    assert_eq!(config["metrics_secure"], false);
    assert_eq!(config["metrics_cert_dir"], "/certs");
    assert_eq!(config["health_probe_bind_address"], Value::Null);
    assert_eq!(config["leader_elect"], true);
    assert_eq!(config["leader_election_id"], "capov-test");
    assert_eq!(config["feature_gates"], "disk-clone=true");
    assert_eq!(config["debug"], true);
    assert_eq!(config["max_concurrent_reconciles"], 3);
    assert_eq!(config["namespace"], "team-a");
    assert_eq!(config["credentials_namespace"], "creds");
    assert_eq!(config["watch_filter"], "blue");
    assert_eq!(config["sync_period"], "1m30s");
    assert_eq!(config["ovirt_qps"], 2.5);
    assert_eq!(config["ovirt_burst"], 4);
    assert_eq!(config["kubeconfig"], "/kube/config");
    assert_eq!(config["log_format"], "text");
}

/// Manifests often carry `value: ""`: an empty variable means the default.
#[test]
fn empty_variables_mean_the_default() {
    let names = [
        "CAPOV_METRICS_BIND_ADDRESS",
        "CAPOV_METRICS_SECURE",
        "CAPOV_METRICS_CERT_DIR",
        "CAPOV_HEALTH_PROBE_BIND_ADDRESS",
        "CAPOV_LEADER_ELECT",
        "CAPOV_LEADER_ELECTION_ID",
        "CAPOV_FEATURE_GATES",
        "CAPOV_DEBUG",
        "CAPOV_MAX_CONCURRENT_RECONCILES",
        "CAPOV_NAMESPACE",
        "CAPOV_CREDENTIALS_NAMESPACE",
        "CAPOV_WATCH_FILTER",
        "CAPOV_SYNC_PERIOD",
        "CAPOV_OVIRT_QPS",
        "CAPOV_OVIRT_BURST",
        "CAPOV_KUBECONFIG",
        "CAPOV_LOG_FORMAT",
        "POD_NAMESPACE",
    ];
    let env: Vec<(&str, &str)> = names.iter().map(|name| (*name, "")).collect();
    assert_eq!(config(&[], &env), config(&[], &[]));
}

#[test]
fn flags_win_over_the_environment() {
    let env = [
        ("CAPOV_DEBUG", "true"),
        ("CAPOV_SYNC_PERIOD", "90s"),
        ("CAPOV_NAMESPACE", "team-a"),
        ("CAPOV_METRICS_SECURE", "false"),
    ];
    let config = config(
        &["--debug=false", "--sync-period=1h", "--namespace=", "--metrics-secure"],
        &env,
    );
    assert_eq!(config["debug"], false);
    assert_eq!(config["sync_period"], "1h0m0s");
    assert_eq!(config["namespace"], Value::Null);
    assert_eq!(config["metrics_secure"], true);
}

#[test]
fn credentials_namespace_falls_back_to_pod_namespace() {
    assert_eq!(config(&[], &[("POD_NAMESPACE", "ops")])["credentials_namespace"], "ops");
    let both = [("POD_NAMESPACE", "ops"), ("CAPOV_CREDENTIALS_NAMESPACE", "creds")];
    assert_eq!(config(&[], &both)["credentials_namespace"], "creds");
    assert_eq!(
        config(&["--credentials-namespace=flag"], &both)["credentials_namespace"],
        "flag"
    );
}

#[test]
fn bad_values_exit_non_zero_with_one_line() {
    for (args, env, expected) in [
        (&["--sync-period=soon"][..], &[][..], "--sync-period"),
        (&["--debug=maybe"], &[], "--debug"),
        (&["--no-such-flag"], &[], "--no-such-flag"),
        (&[], &[("CAPOV_OVIRT_BURST", "lots")], "--ovirt-burst"),
        (
            &[],
            &[("CAPOV_METRICS_BIND_ADDRESS", "everywhere")],
            "--metrics-bind-address",
        ),
        (&[], &[("POD_NAMESPACE", "Not A Namespace")], "POD_NAMESPACE"),
    ] {
        let output = manager(args, env);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{args:?} {env:?}: {stderr}");
        assert_eq!(stderr.trim_end().lines().count(), 1, "{args:?} {env:?}: {stderr}");
        assert!(stderr.starts_with("manager: ") && stderr.contains(expected), "{stderr}");
    }
}

#[test]
fn help_names_every_flag_and_its_variable() {
    let output = manager(&["--help"], &[]);
    assert!(output.status.success());
    let help = String::from_utf8_lossy(&output.stdout);
    for flag in [
        "metrics-bind-address",
        "metrics-secure",
        "metrics-cert-dir",
        "health-probe-bind-address",
        "leader-elect",
        "leader-election-id",
        "feature-gates",
        "debug",
        "max-concurrent-reconciles",
        "namespace",
        "credentials-namespace",
        "watch-filter",
        "sync-period",
        "ovirt-qps",
        "ovirt-burst",
        "kubeconfig",
        "log-format",
    ] {
        assert!(help.contains(&format!("--{flag}")), "help lacks --{flag}");
        let variable = format!("CAPOV_{}", flag.to_uppercase().replace('-', "_"));
        assert!(help.contains(&variable), "help lacks {variable}");
    }
    let version = manager(&["--version"], &[]);
    assert!(version.status.success());
    assert!(String::from_utf8_lossy(&version.stdout).contains(env!("CARGO_PKG_VERSION")));
}

/// Without a reachable cluster, `check-engine` still answers one line per step: the first fails with a hint.
#[test]
fn check_engine_without_a_cluster_fails_at_the_first_step() {
    let output = manager(
        &["--kubeconfig=/nonexistent/kubeconfig", "check-engine", "ovirt-prod"],
        &[],
    );
    assert_eq!(output.status.code(), Some(1));
    let stdout = String::from_utf8_lossy(&output.stdout);
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(lines.len(), 7, "{stdout}");
    assert!(
        lines[0].starts_with("FAIL provider") && lines[0].contains("hint: pass --kubeconfig"),
        "{stdout}"
    );
    assert!(lines[1..].iter().all(|line| line.starts_with("SKIP ")), "{stdout}");
}
