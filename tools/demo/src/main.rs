//! The CAPOV demo (run it through `./tools/demo.sh`): starts etcd + kube-apiserver with the Cluster API core
//! manager (or uses the cluster of `--kubeconfig`), an oVirt engine simulator over HTTPS, and the real `manager`;
//! creates an OVirtProvider with its Secret, a CAPI Cluster with its OVirtCluster, a control-plane Machine and a
//! MachineDeployment of OVirtMachineTemplate-based workers (three machines in all); and shows their progress until
//! all are Ready. A second local apiserver plays the workload cluster, and the demo plays each VM's kubelet
//! registering its Node. On a `--kubeconfig` cluster without CAPI core the demo creates the Machines itself.
//!
//! Two modes, and the demo says which it runs: with `--image` the operator runs as users run it, a pod from that
//! image installed by Helm on a real node joined to the demo's control plane ([`pod`]); without, `--manager` runs as
//! a process on this machine with the admin kubeconfig.

mod pod;
mod progress;

use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, ExitCode, Stdio};
use std::time::{Duration, Instant};

use base64::Engine as _;
use capov_crds::OVirtMachine;
use capov_harness::{ControlPlane, Options, objects, routable_address};
use capov_ovirt_sim::{Simulator, SimulatorHandle, Timings};
use clap::Parser;
use k8s_openapi::api::core::v1::Namespace;
use kube::api::{Api, ListParams, PostParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use progress::Row;
use serde_json::json;

/// Shows CAPOV bringing machines to Ready on a local control plane and the oVirt engine simulator.
#[derive(Parser)]
struct Args {
    /// The `manager` binary to run as a process (tools/demo.sh builds it); ignored with `--image`.
    #[arg(long, required_unless_present = "image")]
    manager: Option<PathBuf>,
    /// Run the operator as a pod from this (local) image, installed by Helm on a real node started here; needs root
    /// (tools/demo.sh chooses this whenever the node can be started).
    #[arg(long, conflicts_with = "kubeconfig")]
    image: Option<String>,
    /// Use this cluster instead of starting a local apiserver (also from KUBECONFIG).
    #[arg(long, env = "KUBECONFIG")]
    kubeconfig: Option<PathBuf>,
    /// Print progress lines instead of a live table, and exit 0 once every machine is Ready (for CI).
    #[arg(long)]
    headless: bool,
    /// How many machines to create.
    #[arg(long, default_value_t = 3)]
    machines: usize,
    /// Give up after this many seconds.
    #[arg(long, default_value_t = 600)]
    timeout: u64,
}

const NAMESPACE: &str = "capov-demo";
const CREDENTIALS_NAMESPACE: &str = "capov-system";
const CLUSTER: &str = "demo";
const PROVIDER: &str = "demo-engine";

#[tokio::main]
async fn main() -> ExitCode {
    let args = Args::parse();
    let _ = rustls::crypto::ring::default_provider().install_default();
    match run(args).await {
        Ok(code) => code,
        Err(err) => {
            eprintln!("demo: {err}");
            ExitCode::FAILURE
        }
    }
}

type Error = Box<dyn std::error::Error>;

/// How the operator runs in this demo.
enum Operator {
    Process { child: Child, log: PathBuf },
    Pod { _node: capov_harness::Node },
}

impl Operator {
    fn stop(&mut self) {
        // The pod goes with the node when the node is dropped.
        if let Operator::Process { child, .. } = self {
            stop(child);
        }
    }

    fn where_to_look(&self) -> String {
        match self {
            Operator::Process { log, .. } => format!("the operator's log is {}", log.display()),
            Operator::Pod { .. } => format!("kubectl logs -n {} deployment/capov-controller-manager", pod::NAMESPACE),
        }
    }
}

async fn run(args: Args) -> Result<ExitCode, Error> {
    match (&args.image, &args.kubeconfig) {
        (Some(image), _) => say(&format!(
            "mode: pod — the operator runs as a pod from the image {image}, installed by Helm on a real node"
        )),
        (None, Some(_)) => say("mode: process — the operator runs on this machine against the given cluster"),
        (None, None) => say(
            "mode: process — the operator runs on this machine with the admin kubeconfig (as root, tools/demo.sh runs \
             it as a pod unless given --mode process)",
        ),
    }
    let in_cluster = args.image.is_some();
    let (local, kubeconfig, capi_core) = match &args.kubeconfig {
        Some(path) => {
            let client = client_from(path).await?;
            say("installing CAPOV's CRDs (chart/capov-crds) and Cluster API's CRDs");
            capov_harness::install_crds(&client).await?;
            capov_harness::install_capi_crds(&client).await?;
            let capi_core = runs_capi_core(&client).await;
            if !capi_core {
                say("no Cluster API core manager in capi-system: the demo creates the Machines itself");
            }
            (None, path.clone(), capi_core)
        }
        None => {
            say("starting the management cluster (etcd + kube-apiserver + Cluster API core manager)");
            let options = Options {
                controller_manager: true,
                // In-cluster, Helm installs CAPOV's CRDs (chart/capov-crds).
                crds: !in_cluster,
                capi_crds: true,
                capi_manager: true,
            };
            let plane = if in_cluster {
                ControlPlane::start_for_node(options, routable_address()?).await?
            } else {
                ControlPlane::start(options).await?
            };
            let path = plane.kubeconfig_path().to_path_buf();
            (Some(plane), path, true)
        }
    };
    let client = client_from(&kubeconfig).await?;
    // A pod reaches neither loopback apiserver nor loopback engine: in-cluster, both listen on the node's address.
    say("starting the workload cluster (a second apiserver for the machines' Nodes)");
    let workload = if in_cluster {
        ControlPlane::start_for_node(Options::default(), routable_address()?).await?
    } else {
        ControlPlane::start(Options::default()).await?
    };
    say("starting the oVirt engine simulator (HTTPS)");
    let mut sim = Simulator::builder().timings(Timings::realistic());
    if in_cluster {
        let address = routable_address()?;
        sim = sim.listen(SocketAddr::new(address, 0)).tls_name(&address.to_string());
    }
    let sim = sim.start().await?;
    say(&format!("engine API at {}", sim.api_url()));

    let mut operator = match (&args.image, &local) {
        (Some(image), Some(plane)) => Operator::Pod {
            _node: pod::install(plane, image).await?,
        },
        _ => {
            let manager = args.manager.as_deref().ok_or("--manager or --image is needed")?;
            let log = std::env::temp_dir().join("capov-demo-manager.log");
            let child = start_manager(manager, &kubeconfig, &log)?;
            say(&format!("operator running (logs: {})", log.display()));
            Operator::Process { child, log }
        }
    };
    for namespace in [NAMESPACE, CREDENTIALS_NAMESPACE] {
        ensure_namespace(&client, namespace).await?;
    }
    create_objects(&client, &sim, &workload, args.machines, capi_core).await?;

    let outcome = watch(&client, &workload, &sim, &args).await;
    match outcome {
        Ok(()) => {
            println!("\nAll {} machines are Ready.", args.machines);
            println!("\nLook around:");
            println!("  export KUBECONFIG={}", kubeconfig.display());
            if in_cluster {
                println!("  kubectl get pods -n {}", pod::NAMESPACE);
                println!(
                    "  kubectl logs -n {} deployment/capov-controller-manager",
                    pod::NAMESPACE
                );
            }
            println!("  kubectl get capovp,capovc -A");
            if capi_core {
                println!("  kubectl get clusters,machinedeployments,machines -n {NAMESPACE}");
            }
            println!("  kubectl get capovm -n {NAMESPACE} -o wide");
            let first = if capi_core { "control-plane-0" } else { "worker-0" };
            println!("  kubectl describe capovm -n {NAMESPACE} {first}");
            println!("  curl -sk {}/sim/vms    # the engine's VMs", sim.base_url());
            if args.headless {
                operator.stop();
                return Ok(ExitCode::SUCCESS);
            }
            println!("\nStop the demo with Ctrl-C (everything it started is removed).");
            let _ = tokio::signal::ctrl_c().await;
            operator.stop();
            Ok(ExitCode::SUCCESS)
        }
        Err(err) => {
            operator.stop();
            eprintln!("demo: {err}; {}", operator.where_to_look());
            Ok(ExitCode::FAILURE)
        }
    }
}

fn say(line: &str) {
    println!("==> {line}");
}

async fn client_from(path: &Path) -> Result<kube::Client, Error> {
    let kubeconfig = Kubeconfig::read_from(path)?;
    let config = kube::Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default()).await?;
    Ok(kube::Client::try_from(config)?)
}

async fn ensure_namespace(client: &kube::Client, name: &str) -> Result<(), Error> {
    let namespaces: Api<Namespace> = Api::all(client.clone());
    if namespaces.get_opt(name).await?.is_none() {
        let namespace: Namespace = serde_json::from_value(json!({"metadata": {"name": name}}))?;
        namespaces.create(&PostParams::default(), &namespace).await?;
    }
    Ok(())
}

/// Whether the cluster runs the CAPI core manager as `clusterctl init` installs it.
async fn runs_capi_core(client: &kube::Client) -> bool {
    let deployments: Api<k8s_openapi::api::apps::v1::Deployment> = Api::namespaced(client.clone(), "capi-system");
    matches!(deployments.get_opt("capi-controller-manager").await, Ok(Some(_)))
}

/// What a user creates: provider + Secret, then either (with CAPI core) a Cluster + OVirtCluster, a control-plane
/// Machine and a MachineDeployment of the other machines, or (without) what CAPI core would make: a provisioned
/// Cluster and Machines with their bootstrap data and OVirtMachines.
async fn create_objects(
    client: &kube::Client,
    sim: &SimulatorHandle,
    workload: &ControlPlane,
    machines: usize,
    capi_core: bool,
) -> Result<(), Error> {
    say(&format!(
        "creating OVirtProvider {PROVIDER}, Cluster {CLUSTER} and {machines} machines in namespace {NAMESPACE}"
    ));
    let credentials = [("username", "admin@internal"), ("password", "admin")];
    objects::apply_secret(client, CREDENTIALS_NAMESPACE, "demo-engine-credentials", &credentials).await?;
    let ca = base64::engine::general_purpose::STANDARD.encode(sim.ca_pem().unwrap_or_default());
    let spec =
        json!({"engine": sim.api_url(), "credentialsSecretName": "demo-engine-credentials", "tls": {"certs": ca}});
    objects::apply_provider(client, PROVIDER, json!({}), spec).await?;
    let kubeconfig = workload.kubeconfig_yaml()?;
    let spec = json!({"provider": PROVIDER, "ovirtcluster": "Default", "template": "ubuntu-22.04", "osdisksizegb": 40,
                      "cpu": {"sockets": 1, "cores": 2, "threads": 1}, "memory": {"sizemb": 4096},
                      "nics": [{"vnicprofile": "ovirtmgmt"}]});
    if capi_core {
        let endpoint = (api_host(workload), workload.api_port());
        objects::create_capi_managed_cluster(client, NAMESPACE, CLUSTER, endpoint, &kubeconfig).await?;
        // Without a control-plane provider, CAPI counts the control plane initialized once a Machine labelled as
        // control plane has its Node.
        let labels = json!({"cluster.x-k8s.io/cluster-name": CLUSTER, "cluster.x-k8s.io/control-plane": ""});
        objects::create_machine(client, NAMESPACE, CLUSTER, "control-plane-0", labels, spec.clone()).await?;
        let workers = u32::try_from(machines.saturating_sub(1)).unwrap_or(u32::MAX);
        objects::apply_machine_template(client, NAMESPACE, "workers", spec).await?;
        objects::apply_secret(
            client,
            NAMESPACE,
            "workers-bootstrap",
            &[
                ("value", "#cloud-config\nhostname: worker\n"),
                ("format", "cloud-config"),
            ],
        )
        .await?;
        objects::apply_machine_deployment(
            client,
            NAMESPACE,
            "workers",
            CLUSTER,
            workers,
            "workers",
            "workers-bootstrap",
        )
        .await?;
        say(&format!(
            "created Cluster {CLUSTER}, Machine control-plane-0 and MachineDeployment workers ({workers} replicas)"
        ));
        return Ok(());
    }
    objects::apply_secret(
        client,
        NAMESPACE,
        &format!("{CLUSTER}-kubeconfig"),
        &[("value", &kubeconfig)],
    )
    .await?;
    let labels = json!({"cluster.x-k8s.io/cluster-name": CLUSTER});
    objects::create_provisioned_cluster(client, NAMESPACE, CLUSTER, labels.clone()).await?;
    for index in 0..machines {
        objects::create_machine(
            client,
            NAMESPACE,
            CLUSTER,
            &format!("worker-{index}"),
            labels.clone(),
            spec.clone(),
        )
        .await?;
    }
    Ok(())
}

/// The host of the workload apiserver's URL: loopback, or the node's address in-cluster.
fn api_host(plane: &ControlPlane) -> &str {
    let url = plane.url();
    let authority = url.strip_prefix("https://").unwrap_or(url);
    authority.rsplit_once(':').map_or(authority, |(host, _)| host)
}

fn start_manager(manager: &Path, kubeconfig: &Path, log: &Path) -> Result<Child, Error> {
    let log_file = std::fs::File::create(log)?;
    let child = std::process::Command::new(manager)
        .arg(format!("--kubeconfig={}", kubeconfig.display()))
        .arg(format!("--credentials-namespace={CREDENTIALS_NAMESPACE}"))
        .arg(format!(
            "--metrics-bind-address=127.0.0.1:{}",
            capov_harness::free_port()
        ))
        .arg(format!(
            "--health-probe-bind-address=127.0.0.1:{}",
            capov_harness::free_port()
        ))
        .arg("--log-format=text")
        // The demo's workload cluster runs on this host, which the operator refuses otherwise.
        .arg("--allow-internal-workload-servers")
        .stdin(Stdio::null())
        .stdout(log_file.try_clone()?)
        .stderr(log_file)
        .spawn()
        .map_err(|err| format!("cannot start {}: {err}", manager.display()))?;
    Ok(child)
}

fn stop(manager: &mut Child) {
    // SIGTERM first: the manager stops its actors and exits.
    let _ = std::process::Command::new("kill")
        .arg("-TERM")
        .arg(manager.id().to_string())
        .status();
    let deadline = Instant::now() + Duration::from_secs(20);
    while Instant::now() < deadline {
        if let Ok(Some(_)) = manager.try_wait() {
            return;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let _ = manager.kill();
    let _ = manager.wait();
}

/// Shows the machines until all are Ready, registering each VM's Node in the workload cluster once it is up.
async fn watch(
    client: &kube::Client,
    workload: &ControlPlane,
    sim: &SimulatorHandle,
    args: &Args,
) -> Result<(), Error> {
    let machines: Api<OVirtMachine> = Api::namespaced(client.clone(), NAMESPACE);
    let workload_client = workload.client().await?;
    let mut registered = BTreeSet::new();
    let deadline = Instant::now() + Duration::from_secs(args.timeout);
    let width = if args.headless {
        None
    } else {
        capov_testkit::terminal::width()
    };
    let mut shown = Shown::new(width, args.machines);
    loop {
        let list = machines.list(&ListParams::default()).await?;
        for machine in &list.items {
            let name = machine.metadata.name.clone().unwrap_or_default();
            let vm_id = machine
                .spec
                .provider_id
                .as_deref()
                .and_then(|p| p.strip_prefix("ovirt://"))
                .map(String::from);
            let up = sim.control().vm_by_name(&name).is_some_and(|vm| vm.status == "up");
            if let (Some(vm_id), true, false) = (vm_id, up, registered.contains(&name)) {
                objects::register_node(&workload_client, &name, &vm_id).await?;
                shown.note(format!("(demo) the kubelet of {name} registered its Node"));
                registered.insert(name);
            }
        }
        let rows: Vec<Row> = list.items.iter().map(Row::of).collect();
        shown.show(&rows);
        let ready = rows.iter().filter(|row| row.ready).count();
        if ready == args.machines {
            return Ok(());
        }
        if Instant::now() > deadline {
            return Err(format!(
                "only {ready} of {} machines Ready after {}s",
                args.machines, args.timeout
            )
            .into());
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

/// The progress on standard output: on a terminal (`width` known) one screen redrawn in place, holding the last
/// notes; otherwise plain lines of what changed, and the notes as they come.
struct Shown {
    width: Option<usize>,
    expected: usize,
    started: Instant,
    /// Plain lines: the rows last printed.
    rows: BTreeMap<String, Row>,
    /// The terminal: the screen last drawn and the notes it shows.
    screen: String,
    notes: Vec<String>,
}

impl Shown {
    const NOTES: usize = 3;

    fn new(width: Option<usize>, expected: usize) -> Shown {
        Shown {
            width,
            expected,
            started: Instant::now(),
            rows: BTreeMap::new(),
            screen: String::new(),
            notes: Vec::new(),
        }
    }

    fn note(&mut self, note: String) {
        if self.width.is_none() {
            println!("{note}");
            return;
        }
        self.notes.push(note);
        let excess = self.notes.len().saturating_sub(Self::NOTES);
        self.notes.drain(..excess);
    }

    fn show(&mut self, rows: &[Row]) {
        use std::io::Write as _;
        let elapsed = self.started.elapsed();
        let Some(width) = self.width else {
            for line in progress::changes(&self.rows, rows, self.expected, elapsed) {
                println!("{line}");
            }
            self.rows = rows.iter().map(|row| (row.name.clone(), row.clone())).collect();
            return;
        };
        let screen = progress::screen(rows, self.expected, elapsed, &self.notes, width);
        if screen != self.screen {
            print!(
                "{}",
                capov_testkit::terminal::redraw(self.screen.lines().count(), &screen)
            );
            let _ = std::io::stdout().flush();
            self.screen = screen;
        }
    }
}
