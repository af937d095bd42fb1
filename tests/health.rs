//! Health probes served in-process on a loopback port against a real API server: `/healthz` always 200, `/readyz`
//! 503 until the caches are marked synced, 200 afterwards, and 503 again once the API server is gone.
//! The real `manager` process: its probes and metrics, and both answered while hostile clients hold every
//! connection (issue 35).

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

/// The loopback address 127.`b`.`c`.`d`: all of 127/8 reaches the manager on 127.0.0.1, each address standing for
/// another pod.
fn loopback_address(b: u8, c: u8, d: u8) -> std::net::Ipv4Addr {
    std::net::Ipv4Addr::new(127, b, c, d)
}

async fn connect_from(from: std::net::Ipv4Addr, port: u16) -> std::io::Result<tokio::net::TcpStream> {
    let socket = tokio::net::TcpSocket::new_v4()?;
    socket.bind(std::net::SocketAddr::from((from, 0)))?;
    socket
        .connect(std::net::SocketAddr::from((Ipv4Addr::LOCALHOST, port)))
        .await
}

/// A hostile client that is never idle: the HTTP/2 preface, then PING frames sent one byte every `every`, reading
/// whatever comes back; when the server closes the connection it opens another half a second later. Each closed
/// connection's lifetime goes to `lifetimes`.
async fn trickle_pings(
    from: std::net::Ipv4Addr,
    port: u16,
    every: Duration,
    lifetimes: std::sync::Arc<std::sync::Mutex<Vec<Duration>>>,
) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    loop {
        if let Ok(mut stream) = connect_from(from, port).await {
            let opened = std::time::Instant::now();
            let (mut reader, mut writer) = stream.split();
            let read_to_end = async {
                let mut buf = [0u8; 512];
                while let Ok(n) = reader.read(&mut buf).await {
                    if n == 0 {
                        break;
                    }
                }
            };
            let trickle = async {
                let mut preface = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".to_vec();
                preface.extend_from_slice(&[0, 0, 0, 4, 0, 0, 0, 0, 0]);
                if writer.write_all(&preface).await.is_err() {
                    return;
                }
                let ping = [0u8, 0, 8, 6, 0, 0, 0, 0, 0, 1, 2, 3, 4, 5, 6, 7, 8];
                for byte in ping.iter().cycle() {
                    tokio::time::sleep(every).await;
                    if writer.write_all(&[*byte]).await.is_err() {
                        return;
                    }
                }
            };
            tokio::select! {
                () = read_to_end => {}
                () = trickle => {}
            }
            lifetimes.lock().unwrap().push(opened.elapsed());
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// A hostile client that looks like a busy scraper: a request every `every` on one kept-alive connection (opened
/// again whenever it is closed). Counts its answers.
async fn keep_asking(
    from: std::net::Ipv4Addr,
    url: String,
    every: Duration,
    answered: std::sync::Arc<std::sync::atomic::AtomicUsize>,
) {
    let client = reqwest::Client::builder()
        .local_address(std::net::IpAddr::V4(from))
        .http1_only()
        .danger_accept_invalid_certs(true)
        .pool_max_idle_per_host(1)
        .timeout(Duration::from_secs(5))
        .build()
        .expect("client");
    loop {
        if client.get(&url).send().await.is_ok() {
            answered.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        }
        tokio::time::sleep(every).await;
    }
}

/// One keep-alive GET of `/healthz` on `stream`: the answer's head, or `None` once the server closed.
async fn ask_healthz(stream: &mut tokio::net::TcpStream) -> Option<String> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    stream
        .write_all(b"GET /healthz HTTP/1.1\r\nhost: capov\r\n\r\n")
        .await
        .ok()?;
    let mut answer = Vec::new();
    let mut buf = [0u8; 512];
    while !answer.ends_with(b"\r\n\r\nok") {
        match tokio::time::timeout(Duration::from_secs(5), stream.read(&mut buf)).await {
            Ok(Ok(n)) if n > 0 => answer.extend_from_slice(&buf[..n]),
            _ => return None,
        }
    }
    Some(String::from_utf8_lossy(&answer).into_owned())
}

/// Whether the server closes `stream` within 5 s.
async fn closes(stream: &mut tokio::net::TcpStream) -> bool {
    use tokio::io::AsyncReadExt;
    let mut buf = [0u8; 64];
    matches!(
        tokio::time::timeout(Duration::from_secs(5), stream.read(&mut buf)).await,
        Ok(Ok(0) | Err(_))
    )
}

/// The kubelet's probes as it sends them: a fresh connection each, a 1 s timeout (its default), `/healthz` and
/// `/readyz` in turn every half second for `duration`.
struct Probed {
    latencies: Vec<Duration>,
    failures: Vec<String>,
    most_failed_in_a_row: usize,
}

async fn probe_like_the_kubelet(health_port: u16, duration: Duration) -> Probed {
    let client = reqwest::Client::builder()
        .http1_only()
        .pool_max_idle_per_host(0)
        .timeout(Duration::from_secs(1))
        .user_agent("kube-probe/1.36")
        .build()
        .expect("client");
    let started = std::time::Instant::now();
    let mut probed = Probed {
        latencies: Vec::new(),
        failures: Vec::new(),
        most_failed_in_a_row: 0,
    };
    let mut in_a_row = 0;
    for path in ["healthz", "readyz"].iter().cycle() {
        if started.elapsed() >= duration {
            break;
        }
        let sent = std::time::Instant::now();
        let answer = client
            .get(format!("http://127.0.0.1:{health_port}/{path}"))
            .header("connection", "close")
            .send()
            .await;
        match answer {
            Ok(answer) if answer.status() == 200 => {
                probed.latencies.push(sent.elapsed());
                in_a_row = 0;
            }
            other => {
                probed
                    .failures
                    .push(format!("/{path} at {:?}: {other:?}", started.elapsed()));
                in_a_row += 1;
                probed.most_failed_in_a_row = probed.most_failed_in_a_row.max(in_a_row);
            }
        }
        tokio::time::sleep(Duration::from_millis(500).saturating_sub(sent.elapsed())).await;
    }
    probed.latencies.sort();
    probed
}

impl Probed {
    fn summary(&self) -> String {
        let answered = self.latencies.len();
        let at = |q: f64| self.latencies[((answered as f64 - 1.0) * q) as usize];
        format!(
            "{answered} of {} answered 200 within 1 s (median {:?}, 99th percentile {:?}, slowest {:?}), most failed \
             in a row {}",
            answered + self.failures.len(),
            at(0.5),
            at(0.99),
            at(1.0),
            self.most_failed_in_a_row
        )
    }
}

/// Log lines of the manager (`--debug=true`) with `message` about a connection from 127.0.0.1, the address the
/// tests' kubelet and scraper come from.
fn from_the_kubelet(log: &std::path::Path, message: &str) -> usize {
    std::fs::read_to_string(log)
        .unwrap_or_default()
        .lines()
        .filter_map(|line| serde_json::from_str::<serde_json::Value>(line).ok())
        .filter(|line| {
            line["message"] == message && line["peer"].as_str().is_some_and(|peer| peer.starts_with("127.0.0.1:"))
        })
        .count()
}

fn count_lines(log: &std::path::Path, message: &str) -> usize {
    std::fs::read_to_string(log)
        .unwrap_or_default()
        .lines()
        .filter(|line| line.contains(&format!("\"message\":\"{message}\"")))
        .count()
}

/// Issue 35, §4: clients that are never idle do not take the probes or the metrics endpoint away. Against the real
/// `manager`, first 16 addresses take every connection of both servers and want more — 96 connections on the probes
/// port that send the HTTP/2 preface and then a byte every 2 s, 96 kept-alive HTTPS connections asking `/metrics`
/// every 2 s — while the kubelet probes every half second and an authorised scraper scrapes every 5 s; then 66
/// addresses hold one kept-alive connection each, so that nobody holds enough to give one up and the kubelet needs
/// the reserve. Meanwhile a kept-alive client is closed at the maximum age and another at the maximum number of
/// requests.
#[tokio::test]
async fn probes_and_scrapes_are_answered_while_hostile_clients_hold_every_connection() {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};
    const MAX_AGE: Duration = Duration::from_secs(60);
    const MAX_REQUESTS: usize = 100;
    const FIRST_REQUEST: Duration = Duration::from_secs(10);

    let plane = capov_harness::shared().await;
    let admin = plane.client().await.expect("client");
    let namespace = plane.create_namespace(&admin, "probes").await.expect("namespace");
    let token = capov_harness::rbac::metrics_reader_token(&admin, &namespace, "scraper")
        .await
        .expect("reader token");
    let (health_port, metrics_port) = (capov_harness::free_port(), capov_harness::free_port());
    let dir = tempfile::tempdir().expect("log dir");
    let log = dir.path().join("manager.log");
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_manager"))
        .arg(format!("--kubeconfig={}", plane.kubeconfig_path().display()))
        .arg(format!("--health-probe-bind-address=127.0.0.1:{health_port}"))
        .arg(format!("--metrics-bind-address=127.0.0.1:{metrics_port}"))
        .arg("--debug=true")
        .env("POD_NAMESPACE", &namespace)
        .stdout(std::process::Stdio::null())
        .stderr(std::fs::File::create(&log).expect("log file"))
        .spawn()
        .expect("start manager");
    let client = http();
    let readyz = format!("http://127.0.0.1:{health_port}/readyz");
    eventually(Duration::from_secs(60), "the manager ready", || async {
        match client.get(&readyz).send().await {
            Ok(answer) if answer.status() == 200 => Ok(()),
            other => Err(format!("{other:?}")),
        }
    })
    .await;

    // Phase 1: 16 addresses want 6 connections each on both ports (96 > 64).
    let lifetimes = Arc::new(std::sync::Mutex::new(Vec::new()));
    let crowd_answers = Arc::new(AtomicUsize::new(0));
    let mut crowd = Vec::new();
    for address in 0..16u8 {
        for _ in 0..6 {
            crowd.push(tokio::spawn(trickle_pings(
                loopback_address(0, 1, address + 1),
                health_port,
                Duration::from_secs(2),
                lifetimes.clone(),
            )));
            crowd.push(tokio::spawn(keep_asking(
                loopback_address(0, 2, address + 1),
                format!("https://127.0.0.1:{metrics_port}/metrics"),
                Duration::from_secs(2),
                crowd_answers.clone(),
            )));
        }
    }
    // Let them fill both servers.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let started = std::time::Instant::now();

    // A kept-alive client asking every 2 s, closed at the maximum age.
    let aged = tokio::spawn(async move {
        let mut stream = connect_from(loopback_address(0, 3, 1), health_port)
            .await
            .expect("connect");
        let opened = std::time::Instant::now();
        let mut answers = Vec::new();
        while let Some(answer) = ask_healthz(&mut stream).await {
            answers.push(answer);
            tokio::time::sleep(Duration::from_secs(2)).await;
        }
        (opened.elapsed(), answers)
    });
    // A kept-alive client asking as fast as it can, closed at the maximum number of requests.
    let counted = tokio::spawn(async move {
        let mut stream = connect_from(loopback_address(0, 3, 2), health_port)
            .await
            .expect("connect");
        let mut answers = Vec::new();
        while let Some(answer) = ask_healthz(&mut stream).await {
            answers.push(answer);
            if answers.len() > MAX_REQUESTS {
                break;
            }
        }
        let closed = closes(&mut stream).await;
        (answers, closed)
    });
    let scrapes = tokio::spawn(async move {
        let scraper = reqwest::Client::builder()
            .danger_accept_invalid_certs(true)
            .pool_max_idle_per_host(0)
            .timeout(Duration::from_secs(10))
            .build()
            .expect("client");
        let mut scraped = Vec::new();
        while started.elapsed() < MAX_AGE {
            let sent = std::time::Instant::now();
            let answer = scraper
                .get(format!("https://127.0.0.1:{metrics_port}/metrics"))
                .bearer_auth(&token)
                .send()
                .await;
            let status = match answer {
                Ok(answer) => {
                    let status = answer.status().as_u16();
                    let body = answer.text().await.unwrap_or_default();
                    (status == 200 && body.contains("capov_build_info"))
                        .then_some(status)
                        .ok_or(format!("{status}"))
                }
                Err(err) => Err(format!("{err:?}")),
            };
            scraped.push((sent.elapsed(), status));
            tokio::time::sleep(Duration::from_secs(5)).await;
        }
        scraped
    });
    let probed = probe_like_the_kubelet(health_port, MAX_AGE + Duration::from_secs(4)).await;
    let (age, aged_answers) = aged.await.unwrap();
    let (counted_answers, closed_after_the_last) = counted.await.unwrap();
    let scraped = scrapes.await.unwrap();
    let crowd_answered = crowd_answers.load(Ordering::Relaxed);
    for task in crowd.drain(..) {
        task.abort();
    }
    let lifetimes = std::mem::take(&mut *lifetimes.lock().unwrap());
    let evictions_for_the_kubelet = from_the_kubelet(
        &log,
        "server full; the oldest connection of the address holding the most is closed",
    );

    println!("phase 1, 16 addresses wanting 96 connections on each port:");
    println!("  kubelet: {}", probed.summary());
    let scrape_times: Vec<Duration> = scraped.iter().map(|(took, _)| *took).collect();
    println!(
        "  authorised scrapes: {} of {} answered 200, slowest {:?}; the crowd got {crowd_answered} answers on /metrics",
        scraped.iter().filter(|(_, status)| status.is_ok()).count(),
        scraped.len(),
        scrape_times.iter().max()
    );
    // Those closed within a second were refused at once or evicted; the others were served until dropped.
    let (mut served, refused): (Vec<Duration>, Vec<Duration>) = lifetimes
        .iter()
        .partition(|lifetime| **lifetime >= Duration::from_secs(1));
    served.sort();
    println!(
        "  HTTP/2 clients trickling a byte every 2 s: {} connections closed within 1 s (refused or evicted), {} after \
         {:?} (median) to {:?}",
        refused.len(),
        served.len(),
        served.get(served.len() / 2),
        served.last()
    );
    println!(
        "  a kept-alive client asking every 2 s closed after {age:?} ({} answers, the last: {:?}); one asking at once \
         closed after {} answers",
        aged_answers.len(),
        aged_answers.last().map(|answer| answer.contains("connection: close")),
        counted_answers.len()
    );
    println!("  kubelet connections let in by taking a crowd connection: {evictions_for_the_kubelet}");

    assert!(
        probed.failures.len() * 50 <= probed.latencies.len() && probed.most_failed_in_a_row < 2,
        "the kubelet's probes failed: {}\n{:#?}",
        probed.summary(),
        probed.failures
    );
    assert!(
        scraped.iter().all(|(_, status)| status.is_ok()),
        "authorised scrapes failed: {scraped:?}"
    );
    assert!(
        evictions_for_the_kubelet > 0,
        "the kubelet never needed a crowd connection"
    );
    // The trickling clients asked nothing: each is dropped at the first-request deadline, busy as it is.
    assert!(
        served.len() >= 64,
        "only {} served trickling connections were closed",
        served.len()
    );
    assert!(
        served
            .last()
            .is_some_and(|longest| *longest < FIRST_REQUEST + Duration::from_secs(3)),
        "a trickling connection lived {:?}",
        served.last()
    );
    assert!(
        age >= MAX_AGE && age < MAX_AGE + Duration::from_secs(4),
        "the kept-alive client was closed after {age:?}"
    );
    assert_eq!(counted_answers.len(), MAX_REQUESTS, "answers on one connection");
    assert!(
        counted_answers[..MAX_REQUESTS - 1]
            .iter()
            .all(|answer| !answer.contains("connection: close"))
    );
    assert!(counted_answers[MAX_REQUESTS - 1].contains("connection: close"));
    assert!(
        closed_after_the_last,
        "the connection stayed open after its last request"
    );

    // Phase 2: 66 addresses hold one kept-alive connection each. Nobody holds two, so nobody gives one up: the
    // kubelet's connections take reserved places.
    let crowd_answers = Arc::new(AtomicUsize::new(0));
    for address in 0..66u8 {
        crowd.push(tokio::spawn(keep_asking(
            loopback_address(0, 4, address + 1),
            format!("http://127.0.0.1:{health_port}/healthz"),
            Duration::from_secs(2),
            crowd_answers.clone(),
        )));
    }
    tokio::time::sleep(Duration::from_secs(3)).await;
    let reserved_before = from_the_kubelet(&log, "server full; one of the reserved places, for one request");
    let probed = probe_like_the_kubelet(health_port, Duration::from_secs(15)).await;
    let reserved = from_the_kubelet(&log, "server full; one of the reserved places, for one request") - reserved_before;
    for task in crowd.drain(..) {
        task.abort();
    }
    println!("phase 2, 66 addresses holding one connection each:");
    println!("  kubelet: {}", probed.summary());
    println!(
        "  kubelet connections on a reserved place: {reserved}; the crowd got {} answers; connections refused \
         over the whole test: {}",
        crowd_answers.load(Ordering::Relaxed),
        count_lines(&log, "no place for the connection; closed at once")
    );
    assert!(
        probed.failures.len() * 50 <= probed.latencies.len() && probed.most_failed_in_a_row < 2,
        "the kubelet's probes failed: {}\n{:#?}",
        probed.summary(),
        probed.failures
    );
    assert!(reserved > 0, "the kubelet never needed the reserve");

    let _ = child.kill();
    let _ = child.wait();
}
