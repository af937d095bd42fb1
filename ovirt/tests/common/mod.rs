//! Helpers shared by the client ↔ simulator tests.
#![allow(dead_code)]

use std::time::Duration;

use capov_ovirt::{Client, ClientConfig, TlsMode};
use capov_ovirt_sim::{Simulator, SimulatorHandle, Timings};

pub const USER: &str = "admin@internal";
pub const PASSWORD: &str = "s3cret-Pa55";

/// An HTTPS simulator with the default inventory and one user.
pub async fn simulator() -> SimulatorHandle {
    Simulator::builder()
        .user(USER, PASSWORD)
        .start()
        .await
        .expect("simulator starts")
}

/// A config trusting exactly the simulator's CA, with a limiter loose enough not to slow tests.
pub fn config(sim: &SimulatorHandle) -> ClientConfig {
    ClientConfig::new(sim.api_url(), USER, PASSWORD)
        .with_tls(TlsMode::Verify {
            system_roots: false,
            extra_ca_pem: sim.ca_pem().expect("HTTPS simulator").as_bytes().to_vec(),
        })
        .with_rate_limit(10_000, 10_000)
        .with_timeouts(Duration::from_secs(5), Duration::from_secs(10))
}

pub async fn setup() -> (SimulatorHandle, Client) {
    let sim = simulator().await;
    let client = Client::new(config(&sim)).expect("client builds");
    (sim, client)
}

/// Timings long enough that a test can observe intermediate states (`image_locked`, `locked`,
/// `wait_for_launch`, `powering_down`) right after an action even on a loaded machine.
pub fn observable_timings() -> Timings {
    Timings {
        image_locked_ms: 1000,
        boot_ms: 1500,
        ip_report_delay_ms: 200,
        disk_operation_ms: 1000,
        shutdown_ms: 1000,
        migration_ms: 1000,
        ha_restart_ms: 1000,
        storage_mib_per_second: 0,
    }
}

pub async fn setup_observable() -> (SimulatorHandle, Client) {
    let sim = Simulator::builder()
        .user(USER, PASSWORD)
        .timings(observable_timings())
        .start()
        .await
        .expect("simulator starts");
    let client = Client::new(config(&sim)).expect("client builds");
    (sim, client)
}

/// How long a test waits for the simulator to reach a state: its timings are a few seconds at most.
pub const WAIT: Duration = Duration::from_secs(10);

/// The process's peak resident set (VmHWM), in bytes. Linux only, as the project is; a missing figure fails the test
/// rather than skipping the memory assertion.
pub fn peak_rss() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").expect("/proc/self/status (Linux)");
    let line = status
        .lines()
        .find(|line| line.starts_with("VmHWM:"))
        .expect("VmHWM in /proc/self/status");
    let kib: u64 = line
        .split_whitespace()
        .nth(1)
        .and_then(|value| value.parse().ok())
        .expect("VmHWM value in kB");
    kib * 1024
}
