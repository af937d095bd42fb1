//! CAPOV benchmark: a local etcd + kube-apiserver, the oVirt engine simulator (in-process, HTTPS) and the real
//! `manager` binary bring N machines (default 1000) to Ready while this program plays CAPI core (it creates the
//! Machines before the operator starts) and the VMs' kubelets (it registers a Node once a VM is up).
//!
//! Reported: time until all machines are Ready, to the first Ready, per-machine p50/p90/p99 (from the operator's
//! start); engine requests per machine (the simulator's counters); status writes per machine, counted twice and
//! independently of the operator: status changes seen by a watch, and status write requests in the apiserver's
//! own metrics; the operator's peak RSS (VmHWM) and CPU time from /proc.
//!
//! Progress shows on a terminal as a few lines redrawn in place (`progress.rs`), elsewhere as a line every 15 s; the
//! run is drawn as SVG (`plot.rs`: machines Ready, engine requests/s, operator RSS over time) at `--plot`.
//!
//!   cargo build --release -p capov --bin manager -p capov-bench
//!   target/release/capov-bench --manager target/release/manager [--machines 1000] [--manager-arg=--ovirt-qps=50]

mod plot;
mod progress;

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::process::{Child, ExitCode, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use base64::Engine as _;
use capov_crds::{ConditionStatus, OVirtMachine};
use capov_harness::{ControlPlane, Options, objects};
use capov_ovirt_sim::{Control, Simulator, Timings};
use clap::Parser;
use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::Namespace;
use kube::api::{Api, PostParams};
use kube::runtime::watcher::{self, Event};
use serde_json::{Value, json};

#[derive(Parser)]
struct Args {
    /// The `manager` binary to measure. By default the image's own build, the static musl one that
    /// `tools/image/build.sh` makes: `cargo build --release --target x86_64-unknown-linux-musl --bin manager`.
    #[arg(long, default_value = IMAGE_BUILD)]
    manager: PathBuf,
    /// How many machines to create.
    #[arg(long, default_value_t = 1000)]
    machines: usize,
    /// An extra flag for the manager, e.g. `--manager-arg=--ovirt-qps=50`; repeatable.
    #[arg(long = "manager-arg", allow_hyphen_values = true)]
    manager_args: Vec<String>,
    /// Engine timings: `realistic` (2 s disk creation, 3 s boot, 2 s until IPs, 1 s disk operations, clones
    /// copying at 1 GiB/s per storage domain shared by the copies running at once) or `fast`.
    #[arg(long, default_value = "realistic")]
    timings: String,
    /// Create the machines with `diskclone: true`: every VM copies the template's whole image (2.5 GiB allocated)
    /// while it is image_locked, all of them sharing the storage bandwidth.
    #[arg(long)]
    disk_clone: bool,
    /// Overrides the storage bandwidth of the timings, in MiB/s per storage domain (0 = unlimited).
    #[arg(long)]
    storage_mib_per_second: Option<u64>,
    /// Give up after this many seconds (the report is printed anyway).
    #[arg(long, default_value_t = 7200)]
    timeout: u64,
    /// Once all are Ready, keep the operator running this many seconds and report the engine requests it makes
    /// while nothing changes (0 = skip).
    #[arg(long, default_value_t = 180)]
    steady_seconds: u64,
    /// How many OVirtProviders the machines are spread over (round robin), each with its own connection and rate
    /// limit (`--ovirt-qps` applies to each), all on the one simulated engine.
    #[arg(long, default_value_t = 1)]
    providers: usize,
    /// Once all are Ready (and after the steady window), stop the operator as Kubernetes stops a pod and start a
    /// new one: report how long until every machine's actor is live again, and the engine writes, engine requests
    /// and status writes over `--restart-seconds` from the new start.
    #[arg(long)]
    restart: bool,
    #[arg(long, default_value_t = 120)]
    restart_seconds: u64,
    /// Serve the operator's `/metrics` on 127.0.0.1 at this port (plain HTTP), to look inside a run (the permit
    /// queues, loans, mailboxes) with curl while it goes.
    #[arg(long)]
    metrics_port: Option<u16>,
    /// Where to write the plot of the run (SVG: machines Ready, engine requests/s and operator RSS over time);
    /// default `capov-bench.svg` in the temporary directory.
    #[arg(long)]
    plot: Option<PathBuf>,
    #[command(flatten)]
    trouble: trouble::TroubleArgs,
    /// The several-tenants form (`tenants.rs`): this many CAPI Clusters on one provider; the first scales to
    /// `--machines` workers, the others each create a control-plane machine `--tenant-delay-seconds` later. Reports
    /// how long each control plane took against an idle operator.
    #[arg(long, default_value_t = 1)]
    tenants: usize,
    #[arg(long, default_value_t = 20)]
    tenant_delay_seconds: u64,
}

mod tenants;
mod trouble;

const NAMESPACE: &str = "capov-bench";
const CLUSTER: &str = "bench";
/// The first provider's name; the others get a suffix (`bench-engine-2`, …).
const PROVIDER: &str = "bench-engine";

fn provider_name(index: usize) -> String {
    match index {
        0 => PROVIDER.to_string(),
        n => format!("{PROVIDER}-{}", n + 1),
    }
}
/// The manager the image ships (`tools/image/build.sh`), relative to the workspace root.
const IMAGE_BUILD: &str = "target/x86_64-unknown-linux-musl/release/manager";

/// How many of our own API calls (creating objects, registering Nodes) run at once.
const PARALLEL: usize = 16;

type Error = Box<dyn std::error::Error>;

#[tokio::main]
async fn main() -> ExitCode {
    let args = Args::parse();
    let _ = rustls::crypto::ring::default_provider().install_default();
    match run(args).await {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(err) => {
            eprintln!("capov-bench: {err}");
            ExitCode::FAILURE
        }
    }
}

async fn run(args: Args) -> Result<bool, Error> {
    if !args.manager.is_file() {
        return Err(format!(
            "no manager at {}: build the image's one with `cargo build --release --target \
             x86_64-unknown-linux-musl --bin manager` from the workspace root, or name another with --manager",
            args.manager.display()
        )
        .into());
    }
    let mut timings = match args.timings.as_str() {
        "realistic" => Timings::realistic(),
        "fast" => Timings::fast(),
        other => return Err(format!("--timings {other:?}: use realistic or fast").into()),
    };
    if let Some(bandwidth) = args.storage_mib_per_second {
        timings.storage_mib_per_second = bandwidth;
    }
    if args.tenants > 1 {
        return tenants::run(&args, timings).await;
    }
    let disk_clone = args.disk_clone;
    say("starting the management cluster (etcd + kube-apiserver, CAPOV and CAPI CRDs) and the workload cluster");
    let mut plane = ControlPlane::start(Options {
        controller_manager: false,
        crds: true,
        capi_crds: true,
        capi_manager: false,
    })
    .await?;
    let workload = ControlPlane::start(Options::default()).await?;
    let client = plane.client().await?;
    let sim = Simulator::builder().timings(timings).start().await?;
    let control = sim.control().clone();

    let namespaces: Api<Namespace> = Api::all(client.clone());
    let namespace: Namespace = serde_json::from_value(json!({"metadata": {"name": NAMESPACE}}))?;
    namespaces.create(&PostParams::default(), &namespace).await?;
    objects::apply_secret(
        &client,
        NAMESPACE,
        "engine-credentials",
        &[("username", "admin@internal"), ("password", "admin")],
    )
    .await?;
    let ca = base64::engine::general_purpose::STANDARD.encode(sim.ca_pem().unwrap_or_default());
    let spec = json!({"engine": sim.api_url(), "credentialsSecretName": "engine-credentials", "tls": {"certs": ca}});
    let providers: Vec<String> = (0..args.providers.max(1)).map(provider_name).collect();
    for provider in &providers {
        objects::apply_provider(&client, provider, json!({}), spec.clone()).await?;
    }
    let kubeconfig = workload.kubeconfig_yaml()?;
    objects::apply_secret(
        &client,
        NAMESPACE,
        &format!("{CLUSTER}-kubeconfig"),
        &[("value", &kubeconfig)],
    )
    .await?;
    let labels = json!({"cluster.x-k8s.io/cluster-name": CLUSTER});
    objects::create_provisioned_cluster(&client, NAMESPACE, CLUSTER, labels.clone()).await?;
    say(&format!("creating {} Machines with their OVirtMachines", args.machines));
    let created = Instant::now();
    futures::stream::iter(0..args.machines)
        .map(|index| {
            let (client, labels) = (client.clone(), labels.clone());
            let provider = providers[index % providers.len()].clone();
            async move {
                let spec = json!({"provider": provider, "ovirtcluster": "Default", "template": "ubuntu-22.04",
                                  "osdisksizegb": 40, "cpu": {"sockets": 1, "cores": 2, "threads": 1},
                                  "memory": {"sizemb": 4096}, "nics": [{"vnicprofile": "ovirtmgmt"}],
                                  "diskclone": disk_clone});
                let name = format!("worker-{index}");
                objects::create_machine(&client, NAMESPACE, CLUSTER, &name, labels, spec).await
            }
        })
        .buffer_unordered(PARALLEL)
        .try_collect::<Vec<()>>()
        .await?;
    say(&format!("created in {:.1}s", created.elapsed().as_secs_f64()));

    // The watch is in sync before the operator starts, so that it sees every status change the operator makes.
    let tracker = Arc::new(Mutex::new(Tracker::default()));
    let synced = tokio::sync::oneshot::channel();
    let start = Arc::new(Mutex::new(None::<Instant>));
    let watch = tokio::spawn(track(client.clone(), tracker.clone(), start.clone(), synced.0));
    synced.1.await?;
    let writes_before = status_write_requests(&client).await?;
    control.reset_counters();

    let proxy = args.trouble.proxy(&plane).await?;
    let operator_kubeconfig = match &proxy {
        Some(proxy) => proxy.kubeconfig.clone(),
        None => plane.kubeconfig_path().to_path_buf(),
    };
    let mut apiserver_restart = trouble::ApiserverRestart::default();

    let log_path = std::env::temp_dir().join("capov-bench-manager.log");
    let t0 = Instant::now();
    *lock(&start) = Some(t0);
    let mut manager = Manager(start_manager(
        &args,
        &operator_kubeconfig,
        &log_path,
        args.metrics_port,
    )?);
    let pid = manager.0.id();
    say(&format!("operator started (pid {pid}, log {})", log_path.display()));
    let kubelets = tokio::spawn(play_kubelets(workload.client().await?, control.clone()));

    let deadline = t0 + Duration::from_secs(args.timeout);
    let mut progress = progress::Progress::new(args.machines);
    let rss_path = std::env::temp_dir().join("capov-bench-rss.csv");
    let mut rss = RssSamples::create(&rss_path)?;
    let all_ready = loop {
        let ready = lock(&tracker).ready_at.len();
        rss.sample(pid, t0, ready, control.counter("total"));
        if ready >= args.machines {
            break true;
        }
        if Instant::now() > deadline {
            break false;
        }
        if let Ok(Some(status)) = manager.0.try_wait() {
            return Err(format!("the operator exited ({status}); see {}", log_path.display()).into());
        }
        if apiserver_restart.due(&args.trouble, ready, args.machines) {
            let sample = || rss.sample(pid, t0, lock(&tracker).ready_at.len(), control.counter("total"));
            apiserver_restart
                .run(&args.trouble, &mut plane, &client, t0, sample)
                .await?;
        }
        let requests = control.counter("total");
        let requests_per_second = progress.rate(requests);
        if progress.due() {
            let vms = control.vms();
            progress.show(&progress::Moment {
                elapsed: t0.elapsed(),
                ready,
                vms: vms.len(),
                vms_up: vms.iter().filter(|vm| vm.status == "up").count(),
                requests,
                requests_per_second,
                rss_mib: proc_status_kib(pid, "VmRSS:").unwrap_or(0) / 1024,
            });
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    let elapsed = t0.elapsed();
    if let Some(proxy) = &proxy {
        proxy.set(capov_harness::Trouble::NONE);
    }
    progress.release();
    let counters = control.counters();
    let response_bytes = control.response_bytes();
    let writes_after = status_write_requests(&client).await?;
    let write_requests = match apiserver_restart.writes_before {
        // The restart reset the apiserver's counters: what was counted before it, plus all since.
        Some(at_restart) => at_restart.delta(&writes_before).plus(&writes_after),
        None => writes_after.delta(&writes_before),
    };
    let steady = match (all_ready, args.steady_seconds) {
        (false, _) | (_, 0) => None,
        (true, seconds) => {
            say(&format!("all Ready; measuring the steady state for {seconds} s"));
            lock(&tracker).steady_changes = Some(BTreeMap::new());
            // A measurement window, not a wait for a condition.
            tokio::time::sleep(Duration::from_secs(seconds)).await;
            let after = control.counters();
            let writes = status_write_requests(&client).await?;
            Some(Steady {
                seconds,
                requests: after
                    .iter()
                    .map(|(key, count)| {
                        (
                            key.clone(),
                            count.saturating_sub(counters.get(key).copied().unwrap_or(0)),
                        )
                    })
                    .filter(|(_, delta)| *delta > 0)
                    .collect(),
                status_writes: writes.delta(&writes_after).status,
            })
        }
    };
    let peak_rss_kib = proc_status_kib(pid, "VmHWM:");
    rss.sample(pid, t0, lock(&tracker).ready_at.len(), control.counter("total"));
    say(&format!("RSS every second: {}", rss_path.display()));
    let plot_path = args
        .plot
        .clone()
        .unwrap_or_else(|| std::env::temp_dir().join("capov-bench.svg"));
    plot::write(&plot_path, &rss.points, &plot_title(&args))?;
    say(&format!("plot of the run: {}", plot_path.display()));
    let cpu = proc_cpu_seconds(pid);
    manager.stop();
    let restart = match (all_ready, args.restart) {
        (true, true) => Some(restart_operator(&args, &operator_kubeconfig, &client, &control, &tracker).await?),
        _ => None,
    };
    kubelets.abort();
    watch.abort();

    let tracker = lock(&tracker);
    report(&Report {
        args: &args,
        all_ready,
        elapsed,
        tracker: &tracker,
        counters: &counters,
        response_bytes,
        timings,
        write_requests,
        peak_rss_kib,
        peak_at: rss.peak_at,
        apiserver_down: apiserver_restart.window,
        cpu,
        log_levels: log_levels(&log_path),
        steady: steady.as_ref(),
        restart: restart.as_ref(),
        trouble: proxy
            .as_ref()
            .map(|proxy| (args.trouble.describe(), proxy.counts.summary())),
    });
    Ok(all_ready)
}

/// What the plot's title says of the run.
fn plot_title(args: &Args) -> String {
    let flags = if args.manager_args.is_empty() {
        "default flags".to_string()
    } else {
        args.manager_args.join(" ")
    };
    format!(
        "capov-bench: {} machines, {} timings, {flags}",
        args.machines, args.timings
    )
}

fn say(line: &str) {
    println!("==> {line}");
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// What the watch saw: each machine's first Ready (after the operator's start) and every status change.
#[derive(Default)]
struct Tracker {
    ready_at: HashMap<String, Duration>,
    /// Machines whose latest status lists an InternalIP (addresses are part of the job, not of Ready).
    with_ip: HashSet<String>,
    last_status: HashMap<String, Value>,
    status_changes: u64,
    /// Set for the steady-state window: what each status change in it changed, counted.
    steady_changes: Option<BTreeMap<String, u64>>,
    /// What each status change before that window changed, counted: which steps cost the batch its writes.
    batch_changes: BTreeMap<String, u64>,
}

async fn track(
    client: kube::Client,
    tracker: Arc<Mutex<Tracker>>,
    start: Arc<Mutex<Option<Instant>>>,
    synced: tokio::sync::oneshot::Sender<()>,
) {
    let api: Api<OVirtMachine> = Api::namespaced(client, NAMESPACE);
    let mut stream = std::pin::pin!(watcher::watcher(api, watcher::Config::default()));
    let mut synced = Some(synced);
    while let Some(event) = stream.next().await {
        let machine = match event {
            Ok(Event::Apply(machine) | Event::InitApply(machine)) => machine,
            Ok(Event::InitDone) => {
                if let Some(synced) = synced.take() {
                    let _ = synced.send(());
                }
                continue;
            }
            Ok(_) => continue,
            Err(err) => {
                eprintln!("watch: {err}; restarting");
                tokio::time::sleep(Duration::from_secs(1)).await;
                continue;
            }
        };
        let name = machine.metadata.name.clone().unwrap_or_default();
        let status = serde_json::to_value(&machine.status).unwrap_or_default();
        let mut tracker = lock(&tracker);
        // A relist replays unchanged objects; only a different status counts as a write.
        let changed = tracker.last_status.get(&name).filter(|last| **last != status).cloned();
        if let Some(last) = changed {
            tracker.status_changes += 1;
            let change = match last.is_null() {
                true => format!("first status: {}", status_change(&last, &status)),
                false => status_change(&last, &status),
            };
            match tracker.steady_changes.as_mut() {
                Some(steady) => *steady.entry(change).or_default() += 1,
                None => *tracker.batch_changes.entry(change).or_default() += 1,
            }
        }
        tracker.last_status.insert(name.clone(), status);
        let has_ip = machine
            .status
            .as_ref()
            .is_some_and(|s| s.addresses.iter().any(|a| a.type_ == "InternalIP"));
        if has_ip {
            tracker.with_ip.insert(name.clone());
        } else {
            tracker.with_ip.remove(&name);
        }
        let started = *lock(&start);
        if let Some(started) = started
            && is_ready(&machine)
            && !tracker.ready_at.contains_key(&name)
        {
            tracker.ready_at.insert(name, started.elapsed());
        }
    }
}

/// What differs between two statuses of one machine, as a short key: the top-level fields that changed, and for
/// conditions each one whose status or reason changed (`Ready True/Ready→False/VMDown`) or, if only their messages
/// or times did, its type.
fn status_change(old: &Value, new: &Value) -> String {
    let mut parts = Vec::new();
    let keys: std::collections::BTreeSet<&String> = old
        .as_object()
        .into_iter()
        .chain(new.as_object())
        .flat_map(|fields| fields.keys())
        .collect();
    for key in keys {
        if key == "conditions" || old.get(key) == new.get(key) {
            continue;
        }
        parts.push(key.clone());
    }
    let conditions = |status: &Value| -> BTreeMap<String, Value> {
        status["conditions"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|c| (c["type"].as_str().unwrap_or_default().to_string(), c.clone()))
            .collect()
    };
    let (before, after) = (conditions(old), conditions(new));
    let types: std::collections::BTreeSet<&String> = before.keys().chain(after.keys()).collect();
    let brief = |c: Option<&Value>| {
        c.map(|c| {
            format!(
                "{}/{}",
                c["status"].as_str().unwrap_or("?"),
                c["reason"].as_str().unwrap_or("")
            )
        })
        .unwrap_or_else(|| "absent".into())
    };
    for type_ in types {
        let (b, a) = (before.get(type_), after.get(type_));
        if b == a {
            continue;
        }
        let (b_brief, a_brief) = (brief(b), brief(a));
        if b_brief == a_brief {
            parts.push(format!("{type_} (message or time only)"));
        } else {
            parts.push(format!("{type_} {b_brief}→{a_brief}"));
        }
    }
    parts.join(", ")
}

fn is_ready(machine: &OVirtMachine) -> bool {
    machine.status.as_ref().is_some_and(|s| {
        s.conditions
            .iter()
            .any(|c| c.type_ == "Ready" && c.status == ConditionStatus::True)
    })
}

/// Write requests on OVirtMachines, and Events written, as the apiserver counts them (`apiserver_request_total`).
#[derive(Default, Clone, Copy)]
struct WriteRequests {
    status: u64,
    other: u64,
    /// Events created or patched (a repeat counts into its series with a patch), in any namespace.
    events: u64,
}

impl WriteRequests {
    fn delta(&self, before: &WriteRequests) -> WriteRequests {
        WriteRequests {
            status: self.status.saturating_sub(before.status),
            other: self.other.saturating_sub(before.other),
            events: self.events.saturating_sub(before.events),
        }
    }

    fn plus(&self, more: &WriteRequests) -> WriteRequests {
        WriteRequests {
            status: self.status + more.status,
            other: self.other + more.other,
            events: self.events + more.events,
        }
    }
}

async fn status_write_requests(client: &kube::Client) -> Result<WriteRequests, Error> {
    let request = http::Request::get("/metrics").body(Vec::new())?;
    let text = client.request_text(request).await?;
    let mut counts = WriteRequests::default();
    for line in text.lines().filter(|l| l.starts_with("apiserver_request_total{")) {
        let Some((labels, value)) = line.rsplit_once(' ') else {
            continue;
        };
        let count = value.parse::<f64>().unwrap_or(0.0) as u64;
        if labels.contains("resource=\"events\"") {
            if ["POST", "PATCH"]
                .iter()
                .any(|verb| labels.contains(&format!("verb=\"{verb}\"")))
            {
                counts.events += count;
            }
            continue;
        }
        if !labels.contains("resource=\"ovirtmachines\"") {
            continue;
        }
        let write = ["APPLY", "PATCH", "UPDATE"]
            .iter()
            .any(|verb| labels.contains(&format!("verb=\"{verb}\"")));
        match (write, labels.contains("subresource=\"status\"")) {
            (true, true) => counts.status += count,
            (true, false) => counts.other += count,
            _ => {}
        }
    }
    Ok(counts)
}

/// `metrics_port`: serve plain-HTTP `/metrics` on 127.0.0.1 at that port (else none).
fn start_manager(args: &Args, kubeconfig: &Path, log: &Path, metrics_port: Option<u16>) -> Result<Child, Error> {
    let log_file = std::fs::File::create(log)?;
    let metrics = match metrics_port {
        Some(port) => vec![
            format!("--metrics-bind-address=127.0.0.1:{port}"),
            "--metrics-secure=false".to_string(),
        ],
        None => vec!["--metrics-bind-address=0".to_string()],
    };
    let child = std::process::Command::new(&args.manager)
        .arg(format!("--kubeconfig={}", kubeconfig.display()))
        .arg(format!("--namespace={NAMESPACE}"))
        .arg(format!("--credentials-namespace={NAMESPACE}"))
        .args(metrics)
        .arg("--health-probe-bind-address=0")
        // The benchmark's workload cluster runs on this host, which the operator refuses otherwise.
        .arg("--allow-internal-workload-servers")
        .args(&args.manager_args)
        .stdin(Stdio::null())
        .stdout(log_file.try_clone()?)
        .stderr(log_file)
        .spawn()
        .map_err(|err| format!("cannot start {}: {err}", args.manager.display()))?;
    Ok(child)
}

/// The operator process; killed when the benchmark ends early (an error), so that none is left behind.
struct Manager(Child);

impl Manager {
    /// SIGTERM, as Kubernetes stops a pod, then SIGKILL after 30 s.
    fn stop(&mut self) {
        // SAFETY: a plain syscall on the child this program started and has not reaped.
        unsafe {
            libc::kill(self.0.id() as libc::pid_t, libc::SIGTERM);
        }
        let deadline = Instant::now() + Duration::from_secs(30);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.0.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

impl Drop for Manager {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Each VM's kubelet: once the VM is up, a Node named like the VM with the VM id as systemUUID.
async fn play_kubelets(workload: kube::Client, control: Control) {
    let mut registered: HashSet<String> = HashSet::new();
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
                async move { objects::register_node(&workload, &name, &id).await.ok().map(|()| id) }
            })
            .buffer_unordered(PARALLEL)
            .filter_map(|id| async move { id })
            .collect()
            .await;
        registered.extend(done);
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// The operator's VmRSS and VmHWM once a second, written to a CSV file (seconds, rss_kib, hwm_kib, ready,
/// engine_requests), and the first sample at which VmHWM reached its highest value: a spike between two coarse
/// progress lines shows when it happened.
struct RssSamples {
    file: std::io::BufWriter<std::fs::File>,
    last: Option<Instant>,
    hwm_kib: u64,
    peak_at: Option<(f64, usize, u64)>,
    /// Every sample, for the plot.
    points: Vec<plot::Point>,
}

impl RssSamples {
    fn create(path: &Path) -> Result<RssSamples, Error> {
        use std::io::Write as _;
        let mut file = std::io::BufWriter::new(std::fs::File::create(path)?);
        writeln!(file, "seconds,rss_kib,hwm_kib,ready,engine_requests")?;
        Ok(RssSamples {
            file,
            last: None,
            hwm_kib: 0,
            peak_at: None,
            points: Vec::new(),
        })
    }

    fn sample(&mut self, pid: u32, t0: Instant, ready: usize, requests: u64) {
        use std::io::Write as _;
        // Once a second, and whenever more machines are Ready (the plot's last point is the last Ready).
        let more_ready = self.points.last().is_some_and(|point| ready > point.ready);
        if self.last.is_some_and(|last| last.elapsed() < Duration::from_secs(1)) && !more_ready {
            return;
        }
        self.last = Some(Instant::now());
        let (Some(rss), Some(hwm)) = (proc_status_kib(pid, "VmRSS:"), proc_status_kib(pid, "VmHWM:")) else {
            return;
        };
        let seconds = t0.elapsed().as_secs_f64();
        if hwm > self.hwm_kib {
            self.hwm_kib = hwm;
            self.peak_at = Some((seconds, ready, requests));
        }
        self.points.push(plot::Point {
            seconds,
            ready,
            requests,
            rss_kib: rss,
        });
        let _ = writeln!(self.file, "{seconds:.1},{rss},{hwm},{ready},{requests}");
        let _ = self.file.flush();
    }
}

/// The manager's engine rate limit (`--ovirt-qps`, 10 per second by default) from the flags the bench passes it.
fn engine_rate(manager_args: &[String]) -> f64 {
    let mut rate = 10.0;
    let mut args = manager_args.iter();
    while let Some(arg) = args.next() {
        let value = match arg.strip_prefix("--ovirt-qps") {
            Some(rest) if rest.starts_with('=') => Some(rest[1..].to_string()),
            Some("") => args.next().cloned(),
            _ => None,
        };
        if let Some(parsed) = value.and_then(|v| v.parse::<f64>().ok()).filter(|v| *v > 0.0) {
            rate = parsed;
        }
    }
    rate
}

/// Which part of the run a peak sampled at `seconds` belongs to: the apiserver's restart (from its going down to a
/// minute after it answered again: the relists and the retried writes) or the batch around it.
fn peak_phase(seconds: f64, apiserver_down: Option<(f64, f64)>) -> &'static str {
    match apiserver_down {
        Some((down, up)) if seconds >= down && seconds <= up + 60.0 => "the apiserver restart",
        Some((down, _)) if seconds < down => "the batch, before the apiserver restart",
        Some(_) => "the batch, after the apiserver restart",
        None => "the batch",
    }
}

/// A `kB` line of /proc/<pid>/status, e.g. `VmHWM:` (peak resident set).
fn proc_status_kib(pid: u32, key: &str) -> Option<u64> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = text.lines().find(|line| line.starts_with(key))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

/// User and system CPU seconds of the process so far (fields 14 and 15 of /proc/<pid>/stat).
fn proc_cpu_seconds(pid: u32) -> Option<(f64, f64)> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name may contain spaces; the fields after it are plain.
    let rest = text.rsplit_once(')')?.1;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // SAFETY: sysconf has no preconditions.
    let ticks = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64;
    let user: f64 = fields.get(11)?.parse().ok()?;
    let system: f64 = fields.get(12)?.parse().ok()?;
    (ticks > 0.0).then(|| (user / ticks, system / ticks))
}

fn log_levels(path: &Path) -> (usize, usize) {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let count = |level: &str| {
        let needle = format!("\"level\":\"{level}\"");
        text.lines().filter(|line| line.contains(&needle)).count()
    };
    (count("WARN"), count("ERROR"))
}

struct Report<'a> {
    args: &'a Args,
    all_ready: bool,
    elapsed: Duration,
    tracker: &'a Tracker,
    counters: &'a BTreeMap<String, u64>,
    /// Bytes of the engine's answers until all were Ready (what the operator downloaded).
    response_bytes: u64,
    timings: Timings,
    write_requests: WriteRequests,
    peak_rss_kib: Option<u64>,
    /// When the sampled peak was first reached: seconds since the start, Ready machines, engine requests so far.
    peak_at: Option<(f64, usize, u64)>,
    /// When kube-apiserver was down (`--apiserver-restart`), in seconds since the start.
    apiserver_down: Option<(f64, f64)>,
    cpu: Option<(f64, f64)>,
    /// Warnings and errors in the operator's (JSON) log.
    log_levels: (usize, usize),
    steady: Option<&'a Steady>,
    restart: Option<&'a Restart>,
    /// What the apiserver proxy was asked to do, and what it did.
    trouble: Option<(String, String)>,
}

/// What a restart of the operator with every machine Ready cost.
struct Restart {
    /// From the new process's start until every machine was taken up: `capov_actors_live{kind="machine"}` and
    /// `capov_machines_dormant` (machines resting without an actor) reached the machine count.
    all_live_after: Option<Duration>,
    seconds: u64,
    /// Engine requests by endpoint over the window; the writes are the non-GET ones.
    requests: BTreeMap<String, u64>,
    status_writes: u64,
    status_changes: BTreeMap<String, u64>,
    peak_rss_kib: Option<u64>,
    /// The most machine actors live, and messages in the supervisor's mailbox, in any sample of the window.
    most_live: usize,
    most_supervisor_mail: usize,
}

/// Stops nothing (the first operator is already stopped); starts a new operator with metrics on a free local port,
/// waits (at most the window) until every machine's actor is live, and counts what the window cost.
async fn restart_operator(
    args: &Args,
    kubeconfig: &Path,
    client: &kube::Client,
    control: &Control,
    tracker: &Arc<Mutex<Tracker>>,
) -> Result<Restart, Error> {
    let port = std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?.port();
    let before = control.counters();
    let writes_before = status_write_requests(client).await?;
    // The steady window's changes stay for its own report; the restart's are counted apart.
    let steady_changes = lock(tracker).steady_changes.replace(BTreeMap::new());
    let log_path = std::env::temp_dir().join("capov-bench-manager-restart.log");
    let started = Instant::now();
    let mut manager = Manager(start_manager(args, kubeconfig, &log_path, Some(port))?);
    say(&format!("operator restarted (log {})", log_path.display()));
    let window = Duration::from_secs(args.restart_seconds);
    let mut all_live_after = None;
    let (mut most_live, mut most_supervisor_mail) = (0, 0);
    while started.elapsed() < window {
        let sample = machine_actors(port).await;
        if let Some(sample) = &sample {
            most_live = most_live.max(sample.live);
            most_supervisor_mail = most_supervisor_mail.max(sample.supervisor_mail);
        }
        if all_live_after.is_none() && sample.is_some_and(|sample| sample.live + sample.dormant >= args.machines) {
            all_live_after = Some(started.elapsed());
            say(&format!(
                "all {} machines taken up (actor live or dormant) after {:.1} s",
                args.machines,
                started.elapsed().as_secs_f64()
            ));
        }
        if let Ok(Some(status)) = manager.0.try_wait() {
            return Err(format!("the restarted operator exited ({status}); see {}", log_path.display()).into());
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    let after = control.counters();
    let writes = status_write_requests(client).await?;
    let peak_rss_kib = proc_status_kib(manager.0.id(), "VmHWM:");
    manager.stop();
    let status_changes = std::mem::replace(&mut lock(tracker).steady_changes, steady_changes).unwrap_or_default();
    Ok(Restart {
        all_live_after,
        seconds: args.restart_seconds,
        requests: after
            .iter()
            .map(|(key, count)| (key.clone(), count.saturating_sub(before.get(key).copied().unwrap_or(0))))
            .filter(|(_, delta)| *delta > 0)
            .collect(),
        status_writes: writes.delta(&writes_before).status,
        status_changes,
        peak_rss_kib,
        most_live,
        most_supervisor_mail,
    })
}

/// The operator's machines as its plain-HTTP metrics count them.
struct MachineActors {
    /// `capov_actors_live{kind="machine"}`.
    live: usize,
    /// `capov_machines_dormant`: machines resting without an actor.
    dormant: usize,
    /// `capov_actor_mailbox_depth{kind="supervisor"}`.
    supervisor_mail: usize,
}

/// None while the operator does not answer.
async fn machine_actors(port: u16) -> Option<MachineActors> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut stream = tokio::net::TcpStream::connect(("127.0.0.1", port)).await.ok()?;
    let request = format!("GET /metrics HTTP/1.0\r\nHost: 127.0.0.1:{port}\r\n\r\n");
    stream.write_all(request.as_bytes()).await.ok()?;
    let mut body = String::new();
    tokio::time::timeout(Duration::from_secs(10), stream.read_to_string(&mut body))
        .await
        .ok()?
        .ok()?;
    let value = |wanted: &dyn Fn(&str) -> bool| {
        body.lines()
            .find(|line| wanted(line))
            .and_then(|line| line.rsplit(' ').next())
            .and_then(|value| value.parse::<f64>().ok())
            .map(|value| value as usize)
    };
    Some(MachineActors {
        live: value(&|line| line.starts_with("capov_actors_live{") && line.contains("kind=\"machine\""))?,
        dormant: value(&|line| line.starts_with("capov_machines_dormant "))?,
        supervisor_mail: value(&|line| {
            line.starts_with("capov_actor_mailbox_depth{") && line.contains("kind=\"supervisor\"")
        })?,
    })
}

/// Engine requests and status writes while every machine is Ready and nothing changes.
struct Steady {
    seconds: u64,
    requests: BTreeMap<String, u64>,
    status_writes: u64,
}

fn report(r: &Report) {
    let n = r.args.machines as f64;
    let mut times: Vec<Duration> = r.tracker.ready_at.values().copied().collect();
    times.sort();
    let percentile = |q: f64| -> String {
        if times.is_empty() {
            return "-".into();
        }
        let rank = ((q * times.len() as f64).ceil() as usize).clamp(1, times.len());
        secs(times[rank - 1])
    };
    let total = r.counters.get("total").copied().unwrap_or(0);
    println!();
    println!(
        "## {} machines over {} provider(s), manager flags: {}",
        r.args.machines,
        r.args.providers.max(1),
        if r.args.manager_args.is_empty() {
            "(defaults)".to_string()
        } else {
            r.args.manager_args.join(" ")
        }
    );
    println!();
    println!("| figure | value |");
    println!("|---|---|");
    let ready = if r.all_ready {
        format!("all {} Ready after {}", r.args.machines, secs(r.elapsed))
    } else {
        format!(
            "only {} of {} Ready after {} (timeout)",
            times.len(),
            r.args.machines,
            secs(r.elapsed)
        )
    };
    println!("| time until all Ready | {ready} |");
    // The engine's bound: the requests the batch needed at the rate the operator may send them.
    let qps = engine_rate(&r.args.manager_args);
    let bound = total as f64 / qps;
    println!(
        "| against the engine's bound | {total} requests ÷ {qps} per second = {bound:.1} s; took {:.1} × that |",
        r.elapsed.as_secs_f64() / bound.max(f64::MIN_POSITIVE)
    );
    // No operator makes progress while the apiserver is down: the bound with that time added says how much of the
    // rest the operator cost.
    if let Some((down, back)) = r.apiserver_down {
        let with_outage = bound + (back - down);
        println!(
            "| the apiserver's restart | down from {down:.1} s to {back:.1} s ({:.1} s); the engine's bound plus that: \
             {with_outage:.1} s, took {:.1} × that |",
            back - down,
            r.elapsed.as_secs_f64() / with_outage.max(f64::MIN_POSITIVE)
        );
    }
    println!(
        "| first Ready | {} |",
        times.first().map(|t| secs(*t)).unwrap_or_else(|| "-".into())
    );
    println!(
        "| per machine p50 / p90 / p99 | {} / {} / {} |",
        percentile(0.5),
        percentile(0.9),
        percentile(0.99)
    );
    println!(
        "| machines with an InternalIP at the end | {} |",
        r.tracker.with_ip.len()
    );
    println!(
        "| engine timings | {} (clone copies: {}{}) |",
        r.args.timings,
        if r.args.disk_clone {
            "every VM, "
        } else {
            "none, thin VMs; "
        },
        match r.timings.storage_mib_per_second {
            0 => "storage unlimited".to_string(),
            mib => format!("{mib} MiB/s per storage domain, shared"),
        }
    );
    println!("| engine requests | {total} ({:.1} per machine) |", total as f64 / n);
    println!(
        "| engine answer bytes | {:.1} MiB ({:.1} KiB per machine) |",
        r.response_bytes as f64 / f64::from(1 << 20),
        r.response_bytes as f64 / 1024.0 / n
    );
    println!(
        "| status changes seen by a watch | {} ({:.1} per machine) |",
        r.tracker.status_changes,
        r.tracker.status_changes as f64 / n
    );
    println!(
        "| status write requests (apiserver metrics) | {} ({:.1} per machine); other OVirtMachine writes {}; Events \
         written {} ({:.1} per machine) |",
        r.write_requests.status,
        r.write_requests.status as f64 / n,
        r.write_requests.other,
        r.write_requests.events,
        r.write_requests.events as f64 / n
    );
    match r.peak_rss_kib {
        Some(kib) => println!("| operator peak RSS (VmHWM) | {:.1} MiB |", kib as f64 / 1024.0),
        None => println!("| operator peak RSS (VmHWM) | unavailable |"),
    }
    if let Some((seconds, ready, requests)) = r.peak_at {
        println!(
            "| peak reached (VmHWM sampled each second) | at {seconds:.0} s, {ready} Ready, {requests} engine \
             requests: {} |",
            peak_phase(seconds, r.apiserver_down)
        );
    }
    let restarted_peak = r.restart.and_then(|restart| restart.peak_rss_kib);
    if let Some(worst) = r.peak_rss_kib.max(restarted_peak) {
        let at = if restarted_peak > r.peak_rss_kib {
            "the restarted operator"
        } else {
            "the batch"
        };
        println!(
            "| worst peak RSS, batch and restart | {:.1} MiB ({at}) |",
            worst as f64 / 1024.0
        );
    }
    if let Some((asked, done)) = &r.trouble {
        println!("| apiserver trouble | {asked}: {done} |");
    }
    if let Some((user, system)) = r.cpu {
        println!("| operator CPU time | {user:.1} s user + {system:.1} s system |");
    }
    println!(
        "| operator log | {} warnings, {} errors |",
        r.log_levels.0, r.log_levels.1
    );
    print_not_ready(r.tracker);
    println!();
    println!("Engine requests by endpoint (per machine):");
    let mut endpoints: Vec<(&String, &u64)> = r.counters.iter().filter(|(k, _)| *k != "total").collect();
    endpoints.sort_by(|a, b| b.1.cmp(a.1));
    for (endpoint, count) in endpoints {
        println!("  {count:>8}  {:>6.2}  {endpoint}", *count as f64 / n);
    }
    println!(
        "Status changes seen by the watch until all were Ready, by what changed (per machine; a machine's first status is one, marked):"
    );
    let mut changes: Vec<(&String, &u64)> = r.tracker.batch_changes.iter().collect();
    changes.sort_by(|a, b| b.1.cmp(a.1));
    for (change, count) in changes.into_iter().take(20) {
        println!("  {count:>8}  {:>6.2}  {change}", *count as f64 / n);
    }
    if let Some(steady) = r.steady {
        let total = steady.requests.get("total").copied().unwrap_or(0);
        let per_second = |count: u64| count as f64 / steady.seconds as f64;
        println!();
        println!(
            "Steady state, {} s with all Ready: {total} engine requests ({:.2}/s), {} status writes",
            steady.seconds,
            per_second(total),
            steady.status_writes
        );
        let mut endpoints: Vec<(&String, &u64)> = steady.requests.iter().filter(|(k, _)| *k != "total").collect();
        endpoints.sort_by(|a, b| b.1.cmp(a.1));
        for (endpoint, count) in endpoints {
            println!("  {count:>8}  {:>6.2}/s  {endpoint}", per_second(*count));
        }
        println!("Status changes seen by the watch in that window, by what changed:");
        for (change, count) in r.tracker.steady_changes.iter().flatten() {
            println!("  {count:>8}  {change}");
        }
    }
    if let Some(restart) = r.restart {
        let total = restart.requests.get("total").copied().unwrap_or(0);
        let writes: u64 = restart
            .requests
            .iter()
            .filter(|(k, _)| *k != "total" && !k.starts_with("GET "))
            .map(|(_, count)| count)
            .sum();
        println!();
        println!(
            "Restart with all Ready: every machine taken up (actor live or dormant) after {}; over {} s from the start: {writes} engine \
             writes, {total} engine requests, {} status writes, peak RSS {}",
            restart
                .all_live_after
                .map(secs)
                .unwrap_or_else(|| "never (in the window)".into()),
            restart.seconds,
            restart.status_writes,
            restart
                .peak_rss_kib
                .map(|kib| format!("{:.1} MiB", kib as f64 / 1024.0))
                .unwrap_or_else(|| "unknown".into()),
        );
        println!(
            "Sampled every 0.5 s in that window: at most {} machine actors live, {} messages in the supervisor's mailbox",
            restart.most_live, restart.most_supervisor_mail
        );
        for (endpoint, count) in restart.requests.iter().filter(|(k, _)| *k != "total") {
            println!("  {count:>8}  {endpoint}");
        }
        let searches = restart.requests.get("GET /vms").copied().unwrap_or(0);
        println!(
            "Searches (GET /vms) in that window: {searches}, {:.2} per 50 machines (one search asks for 50 VMs)",
            searches as f64 * 50.0 / n
        );
        println!("Status changes seen by the watch in that window, by what changed:");
        for (change, count) in &restart.status_changes {
            println!("  {count:>8}  {change}");
        }
    }
}

/// Machines never Ready, grouped by what their status says (each condition that is not True, with its reason, and
/// the VM status): why a run did not finish.
fn print_not_ready(tracker: &Tracker) {
    let mut groups: BTreeMap<String, Vec<&String>> = BTreeMap::new();
    for (name, status) in &tracker.last_status {
        if tracker.ready_at.contains_key(name) {
            continue;
        }
        let mut parts: Vec<String> = status["conditions"]
            .as_array()
            .map(|conditions| {
                conditions
                    .iter()
                    .filter(|c| c["status"] != "True" && c["type"] != "Paused")
                    .map(|c| {
                        format!(
                            "{}={}",
                            c["type"].as_str().unwrap_or("?"),
                            c["reason"].as_str().unwrap_or("?")
                        )
                    })
                    .collect()
            })
            .unwrap_or_default();
        parts.push(format!("vmStatus={}", status["vmStatus"].as_str().unwrap_or("-")));
        groups.entry(parts.join(" ")).or_default().push(name);
    }
    if groups.is_empty() {
        return;
    }
    println!();
    println!("Machines not Ready at the end, by status:");
    for (summary, mut names) in groups {
        names.sort();
        let sample: Vec<&str> = names.iter().take(5).map(|n| n.as_str()).collect();
        println!("  {:>6}  {summary}  (e.g. {})", names.len(), sample.join(", "));
    }
}

fn secs(duration: Duration) -> String {
    format!("{:.1} s", duration.as_secs_f64())
}

#[cfg(test)]
mod tests {
    use super::{engine_rate, peak_phase};

    #[test]
    fn the_engine_rate_comes_from_the_managers_flags() {
        let flags = |list: &[&str]| list.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(engine_rate(&[]), 10.0);
        assert_eq!(engine_rate(&flags(&["--ovirt-qps=200", "--ovirt-burst=200"])), 200.0);
        assert_eq!(engine_rate(&flags(&["--ovirt-qps", "50"])), 50.0);
        assert_eq!(engine_rate(&flags(&["--ovirt-qps=zero"])), 10.0);
    }

    #[test]
    fn a_peak_is_placed_before_during_or_after_the_apiserver_restart() {
        let restart = Some((100.0, 130.0));
        assert_eq!(peak_phase(50.0, restart), "the batch, before the apiserver restart");
        assert_eq!(peak_phase(100.0, restart), "the apiserver restart");
        assert_eq!(peak_phase(189.0, restart), "the apiserver restart");
        assert_eq!(peak_phase(191.0, restart), "the batch, after the apiserver restart");
        assert_eq!(peak_phase(191.0, None), "the batch");
    }
}
