//! Benchmark (not a test): client throughput and latency against the simulator at 1, 10 and 100
//! concurrent operations, and the simulator's capacity with 10,000 VMs in inventory.
//!
//! Run: `cargo run --release -p capov-ovirt-sim --example bench` (add `-- --plain-http` to
//! leave TLS out of the figures).

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use capov_ovirt::{Client, ClientConfig, TlsMode};
use capov_ovirt_sim::{Simulator, SimulatorHandle};

const VMS: usize = 10_000;

struct Figures {
    ops: usize,
    elapsed: Duration,
    latencies: Vec<Duration>,
}

impl Figures {
    fn percentile(&self, p: f64) -> Duration {
        let index = ((self.latencies.len() as f64 - 1.0) * p).round() as usize;
        self.latencies[index]
    }

    fn print(&self, label: &str, concurrency: usize) {
        println!(
            "{label:<34} c={concurrency:<3} ops={:<6} {:>8.0} ops/s  p50={:>7.2} ms  p99={:>7.2} ms",
            self.ops,
            self.ops as f64 / self.elapsed.as_secs_f64(),
            self.percentile(0.50).as_secs_f64() * 1000.0,
            self.percentile(0.99).as_secs_f64() * 1000.0,
        );
    }
}

/// Runs `total` operations with `concurrency` workers; `op(i)` is one logical operation.
async fn run<F, Fut>(concurrency: usize, total: usize, op: F) -> Figures
where
    F: Fn(usize) -> Fut + Send + Sync + 'static,
    Fut: std::future::Future<Output = ()> + Send,
{
    let op = Arc::new(op);
    let next = Arc::new(AtomicUsize::new(0));
    let started = Instant::now();
    let mut workers = Vec::new();
    for _ in 0..concurrency {
        let (op, next) = (op.clone(), next.clone());
        workers.push(tokio::spawn(async move {
            let mut latencies = Vec::new();
            loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= total {
                    break;
                }
                let t = Instant::now();
                op(i).await;
                latencies.push(t.elapsed());
            }
            latencies
        }));
    }
    let mut latencies = Vec::with_capacity(total);
    for worker in workers {
        latencies.extend(worker.await.expect("worker"));
    }
    let elapsed = started.elapsed();
    latencies.sort();
    Figures {
        ops: total,
        elapsed,
        latencies,
    }
}

fn client_for(sim: &SimulatorHandle) -> Client {
    let mut config = ClientConfig::new(sim.api_url(), "admin@internal", "admin").with_rate_limit(1_000_000, 1_000_000);
    config.tls = match sim.ca_pem() {
        Some(pem) => TlsMode::Verify {
            system_roots: false,
            extra_ca_pem: pem.as_bytes().to_vec(),
        },
        None => TlsMode::Insecure,
    };
    Client::new(config).expect("client")
}

#[tokio::main]
async fn main() {
    let plain = std::env::args().any(|a| a == "--plain-http");
    let mut builder = Simulator::builder();
    if plain {
        builder = builder.plain_http();
    }
    let sim = builder.start().await.expect("simulator");
    let seeding = Instant::now();
    sim.control().seed_vms("vm-", VMS, Some("rhcos-4.14")).expect("seed");
    println!(
        "seeded {VMS} VMs in {:.0} ms ({})",
        seeding.elapsed().as_secs_f64() * 1000.0,
        if plain { "HTTP" } else { "HTTPS" }
    );
    let ids: Arc<Vec<String>> = Arc::new(sim.control().vms().into_iter().map(|vm| vm.id).collect());
    let client = client_for(&sim);
    client.login().await.expect("login");

    for concurrency in [1, 10, 100] {
        let total = 1000 * concurrency.min(10);
        let (c, ids2) = (client.clone(), ids.clone());
        run(concurrency, total, move |i| {
            let (c, id) = (c.clone(), ids2[i * 7919 % ids2.len()].clone());
            async move {
                c.vm(&id).await.expect("get vm");
            }
        })
        .await
        .print("GET /vms/{id}", concurrency);

        let c = client.clone();
        run(concurrency, total, move |i| {
            let c = c.clone();
            async move {
                let name = format!("vm-{}", i * 31 % VMS);
                c.find_vm_by_name(&name).await.expect("search").expect("found");
            }
        })
        .await
        .print("find_vm_by_name (search)", concurrency);

        let (c, ids2) = (client.clone(), ids.clone());
        run(concurrency, total / 10, move |i| {
            let (c, ids2) = (c.clone(), ids2.clone());
            async move {
                let start = i * 50 % (ids2.len() - 50);
                let batch: Vec<&str> = ids2[start..start + 50].iter().map(String::as_str).collect();
                assert_eq!(c.vm_statuses(&batch).await.expect("statuses").len(), 50);
            }
        })
        .await
        .print("vm_statuses (50 ids, 1 request)", concurrency);
    }

    // Capacity with 10,000 VMs: full listing and scans the indexes cannot answer.
    let c = client.clone();
    run(1, 5, move |_| {
        let c = c.clone();
        async move {
            assert!(c.search_vms("").await.expect("list").len() >= VMS);
        }
    })
    .await
    .print("GET /vms (all 10k VMs)", 1);
    let c = client.clone();
    run(10, 100, move |i| {
        let c = c.clone();
        async move {
            let found = c.search_vms(&format!("name=vm-{}*", i % 10)).await.expect("wildcard");
            assert!(!found.is_empty());
        }
    })
    .await
    .print("wildcard search (scan of 10k)", 10);

    let template = client
        .find_templates_by_name("rhcos-4.14", None)
        .await
        .expect("template")
        .remove(0);
    let cluster = client
        .find_cluster_by_name("Default")
        .await
        .expect("cluster")
        .expect("Default");
    let c = client.clone();
    run(10, 500, move |i| {
        let (c, template, cluster) = (c.clone(), template.id.clone(), cluster.id.clone());
        async move {
            let vm = capov_ovirt::model::Vm {
                name: Some(format!("bench-add-{i}")),
                cluster: Some(capov_ovirt::model::Ref::id(cluster.expect("id"))),
                template: Some(capov_ovirt::model::Ref::id(template.expect("id"))),
                ..Default::default()
            };
            c.add_vm(&vm, false).await.expect("add");
        }
    })
    .await
    .print("POST /vms (add, 10k+ inventory)", 10);
    println!(
        "simulator now holds {} VMs; counters: {} requests",
        sim.control().vm_count(),
        sim.control().counter("total")
    );
}
