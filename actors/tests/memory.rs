//! Memory per machine, counted in bytes: 1,000 OVirtMachines brought to Ready by the runtime on a real apiserver and
//! the engine simulator, and the heap the operator holds for them afterwards, divided by 1,000. It fails when that
//! figure passes [`BOUND_BYTES_PER_MACHINE`] (docs/benchmarks.md, "Where the memory goes").
//!
//! The figure is a count, not a time: a global allocator in this test binary counts the bytes currently allocated
//! by the operator's threads. The simulator, the workload cluster's client, the kubelets played here and the
//! objects this test creates run on a second async runtime whose threads are not counted, so the count is the
//! operator's alone (a block is counted or not when it is allocated; its free subtracts it on whatever thread).

mod support;

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::collections::HashSet;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::{Duration, Instant};

use capov_actors::metrics::Metrics;
use capov_actors::runtime::{self, RuntimeSettings};
use capov_crds::{ConditionStatus, OVirtMachine};
use futures::StreamExt;
use kube::api::{Api, ListParams};
use serde_json::json;
use support::World;

/// How many machines the run brings to Ready.
const MACHINES: usize = 1000;

/// The bound on the operator's heap per Ready machine, in bytes. Measured on this run (debug build, 2026-12-03):
/// 9,6xx bytes per machine (the machine actor with its object and status, the supervisor's entry, ractor's channels,
/// the provider's subscription and VM watch, the status writer's and the Event recorder's entries, the CAPI
/// Machine in its store, and the operator's fixed overhead spread over 1,000). The bound is 1.5 times that, rounded
/// up: room for the run-to-run spread (a few percent: how many Events are still in their 6-minute series window,
/// connection buffers) and small additions, while the regressions the profile found (keeping `managedFields`,
/// whole CAPI objects, a status copy per machine, an 18 KB future per idle actor, kube's Event cache) each add
/// more than half the figure again. Before those fixes the same run measured about 100 KB per machine.
const BOUND_BYTES_PER_MACHINE: i64 = 15_000;

/// Bytes currently allocated by counted threads.
static LIVE: AtomicI64 = AtomicI64::new(0);

thread_local! {
    /// Set on the threads of the runtime that plays the world around the operator.
    static UNCOUNTED: Cell<bool> = const { Cell::new(false) };
}

/// The system allocator, with a header before each block that records whether the block was counted.
struct Counting;

/// Room for the counted flag in front of each block; at least the block's alignment, so the block stays aligned.
fn header(layout: Layout) -> usize {
    layout.align().max(16)
}

fn with_header(layout: Layout) -> Option<Layout> {
    Layout::from_size_align(layout.size().checked_add(header(layout))?, header(layout)).ok()
}

// SAFETY: every block is allocated and freed through `System` with the same enlarged layout; the returned pointer is
// `header` bytes into the block, which keeps the caller's alignment, and the flag byte lies inside the header.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let Some(full) = with_header(layout) else {
            return std::ptr::null_mut();
        };
        // SAFETY: `full` has a non-zero size (it includes the header).
        let base = unsafe { System.alloc(full) };
        if base.is_null() {
            return base;
        }
        // Thread-local access never allocates here (const initialiser); during thread teardown it counts.
        let counted = !UNCOUNTED.try_with(Cell::get).unwrap_or(false);
        if counted {
            LIVE.fetch_add(layout.size() as i64, Ordering::Relaxed);
        }
        // SAFETY: the header is at least 16 bytes of the block just allocated.
        unsafe {
            let block = base.add(header(layout));
            block.sub(1).write(u8::from(counted));
            block
        }
    }

    unsafe fn dealloc(&self, block: *mut u8, layout: Layout) {
        // SAFETY: `block` came from `alloc` above with this layout, so the header precedes it.
        unsafe {
            if block.sub(1).read() == 1 {
                LIVE.fetch_sub(layout.size() as i64, Ordering::Relaxed);
            }
            if let Some(full) = with_header(layout) {
                System.dealloc(block.sub(header(layout)), full);
            }
        }
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

fn live() -> i64 {
    LIVE.load(Ordering::Relaxed)
}

#[test]
fn the_operator_holds_less_than_its_bound_per_ready_machine() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let world_runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .on_thread_start(|| UNCOUNTED.with(|uncounted| uncounted.set(true)))
        .build()
        .expect("runtime for the world");
    let operator_runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime for the operator");

    let started = Instant::now();
    let (world, workload) = world_runtime
        .block_on(world_runtime.spawn(async {
            let world = World::new("memory").await;
            let workload = world.workload.client().await.expect("workload client");
            futures::stream::iter(0..MACHINES)
                .for_each_concurrent(16, |index| {
                    let world = &world;
                    async move {
                        let spec = json!({"ovirtcluster": "Default", "template": "rhcos-4.14"});
                        world.create_machine(&format!("worker-{index}"), spec).await;
                    }
                })
                .await;
            (world, workload)
        }))
        .expect("world");
    println!(
        "{MACHINES} machines created in {:.1} s",
        started.elapsed().as_secs_f64()
    );

    // The operator: its own API client (a clone of the world's would share its connections), on the counted runtime.
    let before = live();
    let settings = RuntimeSettings {
        ovirt_qps: 1000,
        ovirt_burst: 1000,
        ..world.settings()
    };
    let operator = operator_runtime
        .block_on(async {
            let client = capov_harness::shared().await.client().await.expect("client");
            runtime::start(client, settings, Metrics::new()).await
        })
        .expect("runtime");

    let ready = Instant::now();
    world_runtime
        .block_on(world_runtime.spawn(until_all_ready(
            world.client.clone(),
            world.namespace.clone(),
            workload,
            world.sim.control().clone(),
        )))
        .expect("machines");
    println!("all {MACHINES} Ready in {:.1} s", ready.elapsed().as_secs_f64());

    // What the operator holds once nothing is in flight: the lowest count over a few seconds of a quiet operator
    // (a measurement window, not a wait for a condition: the figure is the floor, whatever moment it comes).
    let mut floor = i64::MAX;
    for _ in 0..20 {
        std::thread::sleep(Duration::from_millis(250));
        floor = floor.min(live());
    }
    let per_machine = (floor - before) / MACHINES as i64;
    println!(
        "operator heap: {:.1} MiB for {MACHINES} Ready machines, {per_machine} bytes per machine (bound \
         {BOUND_BYTES_PER_MACHINE})",
        (floor - before) as f64 / f64::from(1 << 20)
    );

    operator_runtime.block_on(async {
        let _ = operator.stop_and_wait(None, Some(Duration::from_secs(10))).await;
    });
    assert!(
        per_machine <= BOUND_BYTES_PER_MACHINE,
        "the operator holds {per_machine} bytes per Ready machine, more than the bound of {BOUND_BYTES_PER_MACHINE}: \
         profile it (docs/benchmarks.md, \"Where the memory goes\") before raising the bound"
    );
    drop(world);
}

/// Plays each VM's kubelet (a Node named like the VM, systemUUID = VM id, once the VM is up) until every machine
/// is Ready with an InternalIP.
async fn until_all_ready(
    client: kube::Client,
    namespace: String,
    workload: kube::Client,
    control: capov_ovirt_sim::Control,
) {
    let machines: Api<OVirtMachine> = Api::namespaced(client, &namespace);
    let mut registered: HashSet<String> = HashSet::new();
    let deadline = Instant::now() + Duration::from_secs(600);
    loop {
        let up: Vec<(String, String)> = control
            .vms()
            .into_iter()
            .filter(|vm| vm.status == "up" && !registered.contains(&vm.id))
            .map(|vm| (vm.name, vm.id))
            .collect();
        let done: Vec<String> = futures::stream::iter(up)
            .map(|(name, id)| {
                let workload = workload.clone();
                async move {
                    capov_harness::objects::register_node(&workload, &name, &id)
                        .await
                        .ok()
                        .map(|()| id)
                }
            })
            .buffer_unordered(16)
            .filter_map(|id| async move { id })
            .collect()
            .await;
        registered.extend(done);
        let listed = machines.list(&ListParams::default()).await.expect("list machines");
        let ready = listed.items.iter().filter(|machine| ready_with_ip(machine)).count();
        if ready == MACHINES {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "only {ready} of {MACHINES} machines Ready after 10 minutes"
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

fn ready_with_ip(machine: &OVirtMachine) -> bool {
    machine.status.as_ref().is_some_and(|status| {
        status
            .conditions
            .iter()
            .any(|c| c.type_ == "Ready" && c.status == ConditionStatus::True)
            && status.addresses.iter().any(|a| a.type_ == "InternalIP")
    })
}
