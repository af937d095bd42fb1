//! Health probes served in-process on a loopback port against a real API server: `/healthz` always 200, `/readyz`
//! 503 until the caches are marked synced, 200 afterwards, and 503 again once the API server is gone.

use std::net::{IpAddr, Ipv4Addr};
use std::time::Duration;

use capov::cli::ListenAddress;
use capov::{Readiness, health};
use capov_harness::{ControlPlane, Options};
use capov_testkit::{eventually, http};

fn loopback() -> ListenAddress {
    ListenAddress {
        host: Some(IpAddr::V4(Ipv4Addr::LOCALHOST)),
        port: 0,
    }
}

fn http() -> reqwest::Client {
    let _ = rustls::crypto::ring::default_provider().install_default();
    reqwest::Client::builder()
        .timeout(Duration::from_secs(10))
        .build()
        .expect("HTTP client")
}

#[tokio::test]
async fn healthz_is_ok_and_readyz_follows_sync_and_the_api_server() {
    let plane = ControlPlane::start(Options::default()).await.expect("control plane");
    let readiness = Readiness::new(plane.client().await.expect("client"));
    let server = health::serve(loopback(), readiness.clone()).await.expect("serve");
    let base = format!("http://{}", server.local_addr());
    let client = http();

    assert_eq!(
        http::get(&client, &format!("{base}/healthz"), None).await,
        (200, "ok".into())
    );
    let (status, body) = http::get(&client, &format!("{base}/readyz"), None).await;
    assert_eq!(status, 503);
    assert!(body.contains("caches not synced"), "{body}");
    assert_eq!(http::get(&client, &format!("{base}/nothing"), None).await.0, 404);

    readiness.mark_synced();
    assert_eq!(
        http::get(&client, &format!("{base}/readyz"), None).await,
        (200, "ok".into())
    );

    // The API server goes away: /readyz turns 503 (after its few seconds of caching); /healthz stays 200.
    drop(plane);
    let body = eventually(
        Duration::from_secs(30),
        "/readyz 503 with the API server gone",
        || async {
            match http::get(&client, &format!("{base}/readyz"), None).await {
                (503, body) => Ok(body),
                (status, _) => Err(status),
            }
        },
    )
    .await;
    assert!(body.contains("API server"), "{body}");
    assert_eq!(http::get(&client, &format!("{base}/healthz"), None).await.0, 200);

    readiness.set_synced(false);
    assert_eq!(http::get(&client, &format!("{base}/readyz"), None).await.0, 503);
    server.shutdown().await;
}

#[tokio::test]
async fn readiness_without_api_check_and_shutdown_releases_the_port() {
    let readiness = Readiness::without_api_check();
    let server = health::serve(loopback(), readiness.clone()).await.expect("serve");
    let address = server.local_addr();
    let client = http();
    assert_eq!(
        http::get(&client, &format!("http://{address}/readyz"), None).await.0,
        503
    );
    readiness.mark_synced();
    assert_eq!(
        http::get(&client, &format!("http://{address}/readyz"), None).await.0,
        200
    );
    server.shutdown().await;
    assert!(client.get(format!("http://{address}/healthz")).send().await.is_err());
    assert!(
        std::net::TcpListener::bind(address).is_ok(),
        "port still taken after shutdown"
    );
}

/// Opens more silent connections to `port` than the server takes: those past its cap (64) are closed at once, all of
/// them within the first-byte deadline (10 s) and a margin.
async fn silent_clients_are_closed_and_the_server_goes_on(port: u16) {
    use tokio::io::AsyncReadExt;
    const CAP: usize = 64;
    let mut silent = Vec::new();
    for _ in 0..CAP + 16 {
        silent.push(
            tokio::net::TcpStream::connect(("127.0.0.1", port))
                .await
                .expect("connect"),
        );
    }
    let opened = std::time::Instant::now();
    let closes = silent.into_iter().map(|mut stream| async move {
        let mut buf = [0u8; 64];
        let read = tokio::time::timeout(Duration::from_secs(20), async {
            loop {
                match stream.read(&mut buf).await {
                    Ok(0) | Err(_) => return,
                    Ok(_) => {}
                }
            }
        })
        .await;
        assert!(read.is_ok(), "port {port}: a silent connection still open after 20 s");
        opened.elapsed()
    });
    let mut closed_at = futures::future::join_all(closes).await;
    closed_at.sort();
    let (first, last) = (closed_at[15], closed_at[closed_at.len() - 1]);
    assert!(
        first < Duration::from_secs(2),
        "port {port}: over the cap closed after {first:?}"
    );
    assert!(
        last < Duration::from_secs(15),
        "port {port}: the last closed after {last:?}"
    );
    println!(
        "port {port}: {} silent connections, 16 over the cap closed by {first:?}, all by {last:?}",
        CAP + 16
    );
}

/// The real `manager` process: probes and metrics on the given ports, JSON logs, exit 0 on SIGTERM.
#[tokio::test]
async fn manager_process_serves_probes_and_metrics_and_stops_on_sigterm() {
    let plane = capov_harness::shared().await;
    let (health_port, metrics_port) = (capov_harness::free_port(), capov_harness::free_port());
    let child = std::process::Command::new(env!("CARGO_BIN_EXE_manager"))
        .arg(format!("--kubeconfig={}", plane.kubeconfig_path().display()))
        .arg(format!("--health-probe-bind-address=127.0.0.1:{health_port}"))
        .arg(format!("--metrics-bind-address=127.0.0.1:{metrics_port}"))
        .arg("--debug=true")
        .env("POD_NAMESPACE", "capov-test")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("start manager");
    let pid = child.id();
    let _ = rustls::crypto::ring::default_provider().install_default();
    let client = reqwest::Client::builder()
        .danger_accept_invalid_certs(true)
        .timeout(Duration::from_secs(10))
        .build()
        .expect("client");
    let healthz = format!("http://127.0.0.1:{health_port}/healthz");
    eventually(Duration::from_secs(30), "the manager to serve /healthz", || async {
        client.get(&healthz).send().await.map(drop)
    })
    .await;
    assert_eq!(http::get(&client, &healthz, None).await, (200, "ok".into()));
    // Ready once the controllers' watches have listed everything.
    let readyz = format!("http://127.0.0.1:{health_port}/readyz");
    eventually(Duration::from_secs(30), "the manager ready", || async {
        match http::get(&client, &readyz, None).await {
            (200, _) => Ok(()),
            (status, body) => Err(format!("{status} {body}")),
        }
    })
    .await;
    let metrics = format!("https://127.0.0.1:{metrics_port}/metrics");
    assert_eq!(http::get(&client, &metrics, None).await.0, 401);

    // Issue 23, item 10: clients that connect and send nothing do not hold the servers. Past the cap a connection is
    // closed at once; the others at the first-byte deadline (10 s); the probes and /metrics answer afterwards.
    futures::future::join(
        silent_clients_are_closed_and_the_server_goes_on(health_port),
        silent_clients_are_closed_and_the_server_goes_on(metrics_port),
    )
    .await;
    assert_eq!(http::get(&client, &healthz, None).await, (200, "ok".into()));
    assert_eq!(http::get(&client, &metrics, None).await.0, 401);

    let killed = std::process::Command::new("kill")
        .arg("-TERM")
        .arg(pid.to_string())
        .status();
    assert!(killed.expect("kill").success());
    let output = tokio::task::spawn_blocking(move || child.wait_with_output())
        .await
        .unwrap()
        .expect("wait");
    let logs = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "exit {}: {logs}", output.status);
    let lines: Vec<serde_json::Value> = logs
        .lines()
        .map(|line| serde_json::from_str(line).unwrap_or_else(|_| panic!("not a JSON log line: {line}")))
        .collect();
    let messages: Vec<&str> = lines.iter().filter_map(|line| line["message"].as_str()).collect();
    for expected in [
        "starting capov manager",
        "health probes listening (/healthz, /readyz)",
        "caches synced; ready",
        "shutting down",
    ] {
        assert!(messages.contains(&expected), "no {expected:?} in {messages:?}");
    }
    assert!(
        lines.iter().any(|line| line["level"] == "DEBUG"),
        "--debug=true logs debug lines"
    );
    let gates: Vec<&&str> = messages.iter().filter(|m| m.contains("feature gates")).collect();
    assert_eq!(
        gates,
        [
            &"feature gates: disk-add-vm-name=false, disk-clone=false, disk-detach-when-node-gone=false, \
            disk-keep-template-name=true"
        ],
        "one feature-gates line at start"
    );
}
