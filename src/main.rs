//! `manager`: the CAPOV operator process (shipped as `/manager` in the image).

use std::process::ExitCode;
use std::time::Duration;

use capov::cli::{Command, Config, ParseError};
use capov::leader::{self, Candidate, ElectionSettings, Ended};
use capov::metrics::MetricsServerOptions;
use capov::{Metrics, Readiness, check_engine, health, logging, metrics};
use capov_actors::runtime::{EngineWriteGate, KubeClients, RuntimeSettings, SupervisorMsg};
use capov_core::policy::feature_gates::FeatureGates;
use kube::config::{KubeConfigOptions, Kubeconfig};
use ractor::ActorRef;

/// How long the actors get to stop: the chart gives the pod 10 s after SIGTERM, and the leader still has to
/// release its Lease after them.
const STOP_TIMEOUT: Duration = Duration::from_secs(7);

/// `--features dhat-heap`: every allocation goes through dhat, which records where the heap is at its peak.
#[cfg(feature = "dhat-heap")]
#[global_allocator]
static ALLOC: dhat::Alloc = dhat::Alloc;

/// glibc builds: at most two malloc arenas. glibc gives threads that allocate at once arenas of their own, up to 8
/// per core, and memory freed in one stays there for that arena's next allocations. The runtime's worker and
/// blocking threads (DNS lookups, file reads) each touch the heap, so freed pages piled up in arenas that rarely
/// used them again: a restart at 3,000 machines peaked at 195.5 MiB with the default and 154.8 MiB with two
/// (docs/benchmarks.md). The image's static musl build has one allocator lock and no arenas; nothing to do there.
fn limit_malloc_arenas() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: called before the runtime starts any thread; mallopt only sets one of the allocator's parameters.
    unsafe {
        libc::mallopt(libc::M_ARENA_MAX, 2);
    }
}

fn main() -> ExitCode {
    // `/usr/bin/wget` in the image is a link to `/manager` (the documents' troubleshooting command).
    let mut args = std::env::args_os();
    if capov::wget::invoked_as_wget(args.next().as_ref()) {
        return capov::wget::main(args);
    }
    // Declared first so that it drops last, after the runtime: the profile is written as the process ends.
    #[cfg(feature = "dhat-heap")]
    // Whole stacks: the frames that say which store or actor holds the bytes are deep below the allocation.
    let _profiler = dhat::Profiler::builder().trim_backtraces(None).build();
    let config = match Config::parse_from(std::env::args_os()) {
        Ok(config) => config,
        Err(err) => return usage(err),
    };
    if config.print_config {
        return match serde_json::to_string_pretty(&config) {
            Ok(json) => {
                println!("{json}");
                ExitCode::SUCCESS
            }
            Err(err) => {
                eprintln!("manager: cannot print the configuration: {err}");
                ExitCode::FAILURE
            }
        };
    }
    logging::init(config.log_format, config.debug);
    // One crypto provider for every TLS user in the process (kube, the metrics endpoint, the oVirt client).
    let _ = rustls::crypto::ring::default_provider().install_default();
    limit_malloc_arenas();
    let runtime = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(runtime) => runtime,
        Err(err) => {
            eprintln!("manager: cannot start the async runtime: {err}");
            return ExitCode::FAILURE;
        }
    };
    runtime.block_on(run(config))
}

fn usage(err: ParseError) -> ExitCode {
    if err.is_informational() {
        print!("{}", err.message());
        ExitCode::SUCCESS
    } else {
        eprintln!("manager: {}", err.message());
        ExitCode::from(2)
    }
}

async fn run(config: Config) -> ExitCode {
    if let Some(Command::CheckEngine { provider }) = &config.command {
        return check_engine(&config, provider).await;
    }
    tracing::info!(
        config = %serde_json::to_string(&config).unwrap_or_default(),
        version = env!("CARGO_PKG_VERSION"),
        "starting capov manager"
    );
    let (kube_config, clients) = match kube_client(&config).await {
        Ok(built) => built,
        Err(err) => {
            tracing::error!(error = %err, "cannot build a Kubernetes client");
            return ExitCode::FAILURE;
        }
    };
    let metrics = Metrics::new();
    metrics
        .max_concurrent_reconciles
        .set(f64::from(config.max_concurrent_reconciles));
    metrics.leader.set(i64::from(!config.leader_elect));
    let settings = runtime_settings(&config);
    metrics.engine_rate_limit_qps.set(f64::from(settings.ovirt_qps));
    metrics.engine_rate_limit_burst.set(f64::from(settings.ovirt_burst));
    let client = clients.requests.clone();
    let readiness = Readiness::new(client.clone());

    let health_server = match config.health_probe_bind_address {
        Some(address) => match health::serve(address, readiness.clone()).await {
            Ok(handle) => Some(handle),
            Err(err) => {
                tracing::error!(%address, error = %err, "cannot serve health probes");
                return ExitCode::FAILURE;
            }
        },
        None => None,
    };
    let metrics_server = match config.metrics_bind_address {
        Some(address) => {
            let namespace = std::env::var("POD_NAMESPACE").unwrap_or_else(|_| config.credentials_namespace.clone());
            let options = MetricsServerOptions::new(
                address,
                config.metrics_secure,
                config.metrics_cert_dir.clone(),
                &namespace,
            );
            match metrics::serve(options, metrics.clone(), client.clone()).await {
                Ok(handle) => Some(handle),
                Err(err) => {
                    tracing::error!(error = %err, "cannot serve metrics");
                    return ExitCode::FAILURE;
                }
            }
        }
        None => None,
    };

    let code = if config.leader_elect {
        // A standby is ready as soon as the API server answers: it has no caches, and a rollout must not wait for
        // a leader that never comes.
        readiness.mark_synced();
        run_elected(&config, kube_config, clients, settings, &metrics).await
    } else {
        match start_controllers(clients, settings, metrics.clone()).await {
            Ok(supervisor) => {
                let marking = tokio::spawn(mark_ready_once_synced(supervisor.clone(), metrics.clone(), readiness));
                let asked = tokio::select! {
                    () = shutdown_signal() => true,
                    () = capov_actors::runtime::stopped(supervisor.clone()) => false,
                };
                marking.abort();
                if asked {
                    tracing::info!("shutting down");
                    stop_controllers(supervisor).await;
                    ExitCode::SUCCESS
                } else {
                    // The process exits so that Kubernetes restarts it with fresh actors.
                    tracing::error!("the controllers stopped by themselves; exiting");
                    ExitCode::FAILURE
                }
            }
            Err(err) => {
                tracing::error!(error = %err, "cannot start the controllers");
                ExitCode::FAILURE
            }
        }
    };
    if let Some(server) = metrics_server {
        server.shutdown().await;
    }
    if let Some(server) = health_server {
        server.shutdown().await;
    }
    code
}

/// Runs the controllers only while this replica holds the leader-election Lease (see `capov::leader`).
async fn run_elected(
    config: &Config,
    kube_config: kube::Config,
    clients: KubeClients,
    settings: RuntimeSettings,
    metrics: &Metrics,
) -> ExitCode {
    let pod_name = std::env::var("POD_NAME").or_else(|_| std::env::var("HOSTNAME")).ok();
    let identity = leader::identity(pod_name.as_deref(), &leader::random_suffix());
    let election = ElectionSettings::new(&config.credentials_namespace, &config.leader_election_id, identity);
    let candidate = match Candidate::new(kube_config, election) {
        Ok(candidate) => candidate,
        Err(err) => {
            tracing::error!(error = %err, "cannot set up leader election");
            return ExitCode::FAILURE;
        }
    };
    // Engine writes only while the Lease is fresh (see `capov::fence`).
    let settings = RuntimeSettings {
        engine_write_gate: Some(EngineWriteGate(candidate.fence())),
        ..settings
    };
    // Called again for each term of leadership: fresh actors with the same clients and settings.
    let start = async || {
        let supervisor = start_controllers(clients.clone(), settings.clone(), metrics.clone()).await?;
        let gone = capov_actors::runtime::stopped(supervisor.clone());
        Ok((supervisor, gone))
    };
    match leader::run(
        candidate,
        metrics.leader.clone(),
        shutdown_signal(),
        start,
        stop_controllers,
    )
    .await
    {
        Ended::Shutdown => ExitCode::SUCCESS,
        Ended::Lost | Ended::StartFailed | Ended::WorkStopped => ExitCode::FAILURE,
    }
}

/// `/readyz` turns 200 once every watch of the runtime has listed its objects.
async fn mark_ready_once_synced(supervisor: ActorRef<SupervisorMsg>, metrics: Metrics, readiness: Readiness) {
    while !capov_actors::runtime::is_synced(&supervisor, &metrics).await {
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
    tracing::info!("caches synced; ready");
    readiness.mark_synced();
}

async fn start_controllers(
    clients: KubeClients,
    settings: RuntimeSettings,
    metrics: Metrics,
) -> Result<ActorRef<SupervisorMsg>, String> {
    capov_actors::runtime::start(clients, settings, metrics)
        .await
        .map_err(|err| err.to_string())
}

/// Stops every actor of the runtime; false when they did not all stop within [`STOP_TIMEOUT`].
async fn stop_controllers(supervisor: ActorRef<SupervisorMsg>) -> bool {
    match supervisor
        .stop_and_wait(Some("shutting down".into()), Some(STOP_TIMEOUT))
        .await
    {
        Ok(()) => true,
        Err(err) => {
            tracing::warn!(error = %err, "the controllers did not stop in time");
            false
        }
    }
}

/// `manager check-engine PROVIDER`: the report goes to stdout, exit 0 only when every step passed.
async fn check_engine(config: &Config, provider: &str) -> ExitCode {
    let client = kube_client(config).await.map(|(_, clients)| clients.requests);
    let mut stdout = std::io::stdout();
    if check_engine::check(client, provider, &config.credentials_namespace, &mut stdout).await {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

/// The actor runtime's settings from the flags; the feature gates are parsed here and logged once.
fn runtime_settings(config: &Config) -> RuntimeSettings {
    let parsed = FeatureGates::parse(&config.feature_gates);
    for ignored in &parsed.ignored {
        tracing::debug!("{ignored}");
    }
    tracing::info!("{}", parsed.gates);
    RuntimeSettings {
        credentials_namespace: config.credentials_namespace.clone(),
        watch_namespace: config.namespace.clone(),
        watch_filter: config.watch_filter.clone(),
        max_concurrent_reconciles: usize::try_from(config.max_concurrent_reconciles).unwrap_or(usize::MAX),
        // governor takes whole requests per second; a fractional rate rounds up so it never becomes 0.
        ovirt_qps: config.ovirt_qps.ceil().max(1.0) as u32,
        ovirt_burst: config.ovirt_burst.max(1),
        sync_period: config.sync_period,
        gates: parsed.gates,
        management_cluster_id: config.management_cluster_id.clone().unwrap_or_default(),
        allow_internal_workload_servers: config.allow_internal_workload_servers,
        // The engine's access log then tells which replica sent a request.
        instance: std::env::var("POD_NAME").or_else(|_| std::env::var("HOSTNAME")).ok(),
        ..RuntimeSettings::default()
    }
}

/// The configuration (for the Lease client, which sets its own shorter timeouts) and the management clients, with
/// connect, read and whole-request deadlines (`capov_actors::runtime::kube::clients`).
async fn kube_client(config: &Config) -> Result<(kube::Config, KubeClients), String> {
    let kube_config = match &config.kubeconfig {
        Some(path) => {
            let kubeconfig = Kubeconfig::read_from(path).map_err(|err| format!("{}: {err}", path.display()))?;
            kube::Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
                .await
                .map_err(|err| format!("{}: {err}", path.display()))?
        }
        None => kube::Config::infer().await.map_err(|err| err.to_string())?,
    };
    let clients = KubeClients::new(kube_config.clone()).map_err(|err| err.to_string())?;
    Ok((kube_config, clients))
}

/// SIGTERM (Kubernetes stopping the pod) or SIGINT (Ctrl-C).
async fn shutdown_signal() {
    use tokio::signal::unix::{SignalKind, signal};
    let mut terminate = match signal(SignalKind::terminate()) {
        Ok(signal) => signal,
        Err(err) => {
            tracing::warn!(error = %err, "cannot listen for SIGTERM; stopping only on Ctrl-C");
            let _ = tokio::signal::ctrl_c().await;
            return;
        }
    };
    tokio::select! {
        _ = terminate.recv() => {}
        _ = tokio::signal::ctrl_c() => {}
    }
}
