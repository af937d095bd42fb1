//! Benchmark (not a test): how long the test control plane takes to start and stop.
//!
//!   cargo run --release -p capov-harness --example startup [ROUNDS]
//!
//! Prints per-round figures and the median for etcd + kube-apiserver, and for the full shared setup
//! (+ kube-controller-manager + CAPOV's CRDs).

use std::time::Instant;

use capov_harness::{ControlPlane, Options};

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let rounds: usize = std::env::args().nth(1).map(|n| n.parse()).transpose()?.unwrap_or(5);
    for (label, options) in [
        ("etcd + kube-apiserver", Options::default()),
        (
            "+ controller-manager + CRDs",
            Options {
                controller_manager: true,
                crds: true,
                capi_crds: true,
                capi_manager: false,
            },
        ),
    ] {
        let mut starts = Vec::new();
        let mut stops = Vec::new();
        for _ in 0..rounds {
            let began = Instant::now();
            let plane = ControlPlane::start(options).await?;
            starts.push(began.elapsed().as_secs_f64());
            let began = Instant::now();
            drop(plane);
            stops.push(began.elapsed().as_secs_f64());
        }
        println!(
            "{label}: start median {:.2}s (min {:.2}s, max {:.2}s), stop median {:.3}s over {rounds} rounds",
            median(&mut starts),
            starts.iter().cloned().fold(f64::MAX, f64::min),
            starts.iter().cloned().fold(0.0, f64::max),
            median(&mut stops)
        );
    }
    Ok(())
}

fn median(values: &mut [f64]) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}
