//! Standalone oVirt Engine simulator for demos and scripts.
//!
//! Prints exactly one line `listening on URL` (the API URL) on stdout once it accepts connections.

use std::io::Write;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use capov_ovirt_sim::{Inventory, Simulator, Timings};
use clap::Parser;

#[derive(Parser, Debug)]
#[command(
    name = "ovirt-sim",
    about = "A stateful oVirt Engine simulator speaking the REST API v4"
)]
struct Args {
    /// Address to listen on.
    #[arg(long, default_value = "127.0.0.1:8444")]
    listen: SocketAddr,
    /// Write the generated CA certificate (PEM) to this file.
    #[arg(long)]
    ca_out: Option<PathBuf>,
    /// Serve plain HTTP instead of HTTPS.
    #[arg(long)]
    plain_http: bool,
    /// A user as NAME=PASSWORD (NAME like admin@internal); repeatable.
    #[arg(long = "user", value_name = "NAME=PASSWORD")]
    users: Vec<String>,
    /// A user without an administrative role as NAME=PASSWORD (filtered requests, admin-only queries refused);
    /// repeatable.
    #[arg(long = "non-admin-user", value_name = "NAME=PASSWORD")]
    non_admin_users: Vec<String>,
    /// JSON inventory file (else the default inventory).
    #[arg(long)]
    inventory: Option<PathBuf>,
    /// Extra DNS name or IP for the server certificate; repeatable.
    #[arg(long = "tls-name")]
    tls_names: Vec<String>,
    /// image_locked → down after a VM add, in milliseconds.
    #[arg(long, default_value_t = 2000)]
    image_locked_ms: u64,
    /// Boot time (wait_for_launch → up), in milliseconds.
    #[arg(long, default_value_t = 3000)]
    boot_ms: u64,
    /// Delay between `up` and the guest agent reporting IPs, in milliseconds.
    #[arg(long, default_value_t = 2000)]
    ip_delay_ms: u64,
    /// Disk operation time (extend, removal), in milliseconds.
    #[arg(long, default_value_t = 1000)]
    disk_op_ms: u64,
    /// Guest shutdown time (powering_down → down), in milliseconds.
    #[arg(long, default_value_t = 1000)]
    shutdown_ms: u64,
    /// Live migration of a VM off a host going into maintenance, in ms.
    #[arg(long, default_value_t = 5000)]
    migration_ms: u64,
    /// From losing a host until its highly available VMs with a lease are restarted elsewhere, in ms.
    #[arg(long, default_value_t = 30000)]
    ha_restart_ms: u64,
    /// Bandwidth of each storage domain for the disk copies of cloned VMs, in MiB/s, shared by the copies running
    /// at once (0 = unlimited: a clone takes twice --image-locked-ms).
    #[arg(long, default_value_t = 1024)]
    storage_mib_per_second: u64,
    /// The engine release to play, e.g. 4.3.10 (request elements such as use_ignition exist from 4.4.0).
    #[arg(long, default_value = "4.4.10")]
    engine_version: capov_ovirt_sim::EngineVersion,
    /// Lifetime of SSO tokens in seconds (default: no expiry).
    #[arg(long)]
    token_ttl_secs: Option<u64>,
}

fn fail(message: String) -> ! {
    eprintln!("ovirt-sim: {message}");
    std::process::exit(2);
}

#[tokio::main]
async fn main() {
    let args = Args::parse();
    let _ = rustls::crypto::ring::default_provider().install_default();

    let mut builder = Simulator::builder().listen(args.listen).timings(Timings {
        image_locked_ms: args.image_locked_ms,
        boot_ms: args.boot_ms,
        ip_report_delay_ms: args.ip_delay_ms,
        disk_operation_ms: args.disk_op_ms,
        shutdown_ms: args.shutdown_ms,
        migration_ms: args.migration_ms,
        ha_restart_ms: args.ha_restart_ms,
        storage_mib_per_second: args.storage_mib_per_second,
    });
    builder = builder.engine_version(args.engine_version);
    if args.plain_http {
        builder = builder.plain_http();
    }
    if let Some(ttl) = args.token_ttl_secs {
        builder = builder.token_ttl(Duration::from_secs(ttl));
    }
    for name in &args.tls_names {
        builder = builder.tls_name(name);
    }
    for user in &args.users {
        let Some((name, password)) = user.split_once('=') else {
            fail(format!("--user {user:?}: expected NAME=PASSWORD"));
        };
        builder = builder.user(name, password);
    }
    for user in &args.non_admin_users {
        let Some((name, password)) = user.split_once('=') else {
            fail(format!("--non-admin-user {user:?}: expected NAME=PASSWORD"));
        };
        builder = builder.non_admin_user(name, password);
    }
    if let Some(path) = &args.inventory {
        let text =
            std::fs::read_to_string(path).unwrap_or_else(|e| fail(format!("cannot read {}: {e}", path.display())));
        let inventory: Inventory =
            serde_json::from_str(&text).unwrap_or_else(|e| fail(format!("invalid inventory {}: {e}", path.display())));
        builder = builder.inventory(inventory);
    }

    let sim = builder
        .start()
        .await
        .unwrap_or_else(|e| fail(format!("cannot start: {e}")));
    if let (Some(path), Some(pem)) = (&args.ca_out, sim.ca_pem()) {
        std::fs::write(path, pem).unwrap_or_else(|e| fail(format!("cannot write {}: {e}", path.display())));
    }
    let mut stdout = std::io::stdout();
    let _ = writeln!(stdout, "listening on {}", sim.api_url());
    let _ = stdout.flush();

    wait_for_termination().await;
    sim.shutdown().await;
}

async fn wait_for_termination() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        match signal(SignalKind::terminate()) {
            Ok(mut term) => {
                tokio::select! {
                    _ = tokio::signal::ctrl_c() => {},
                    _ = term.recv() => {},
                }
            }
            Err(_) => {
                let _ = tokio::signal::ctrl_c().await;
            }
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
    }
}
