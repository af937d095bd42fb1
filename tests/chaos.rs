//! Chaos: the real `manager` process is SIGKILLed at random points while it brings 50 machines up (and a few times
//! while it deletes them), and restarted each time. Every machine must end with exactly one VM — a restarted
//! operator adopts a VM it created but did not record, through the ownership marker in the VM's description — all
//! machines must become Ready, and deleting them must leave no VM and no finalizer behind.
//!
//! Delays and the kind of each kill come from a seeded xorshift; the seed is printed, and
//! `CAPOV_CHAOS_SEED=<seed> cargo test -p capov --test chaos -- --nocapture` replays the schedule (the operator's own
//! timing still varies from run to run).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use capov_crds::{ConditionStatus, OVirtCluster, OVirtMachine, OVirtProvider};
use capov_harness::{ControlPlane, Engine, Options, objects, play_kubelets, shared};
use capov_ovirt_sim::{Control, Simulator, Timings};
use capov_testkit::{WithLog, eventually};
use kube::api::{Api, DeleteParams, ListParams};
use serde_json::{Value, json};

const MACHINES: usize = 50;
/// Kills while the machines are being created and started.
const CREATION_KILLS: usize = 6;
/// Kills while they are being deleted.
const DELETION_KILLS: usize = 2;
const CLUSTER: &str = "chaos";
/// The operator's engine rate limit (default 10/s) is raised so that 50 machines and six restarts, each of which
/// re-reads every machine's VM, fit in the test's time budget; the kill points do not depend on it.
const OVIRT_QPS: &str = "50";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_repeatedly_killed_operator_creates_each_vm_once_and_deletes_them_all() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let started = Instant::now();
    let seed = std::env::var("CAPOV_CHAOS_SEED")
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or_else(time_seed);
    println!("chaos seed {seed} (replay: CAPOV_CHAOS_SEED={seed} cargo test -p capov --test chaos -- --nocapture)");
    let mut rng = XorShift::new(seed);

    let plane = shared().await;
    let client = plane.client().await.expect("client");
    let namespace = plane.create_namespace(&client, "chaos").await.expect("namespace");
    let engine = Engine::start(&client, &namespace, Simulator::builder().timings(Timings::fast()))
        .await
        .expect("engine");
    let (control, provider) = (engine.sim.control().clone(), engine.provider.clone());
    let workload = ControlPlane::start(Options::default()).await.expect("workload cluster");
    let labels = objects::cluster_labels(&namespace, CLUSTER);
    let kubeconfig = workload.kubeconfig_yaml().expect("workload kubeconfig");
    objects::create_workload_cluster(&client, &namespace, CLUSTER, labels.clone(), &kubeconfig)
        .await
        .expect("cluster");

    let mut operator = Operator::new(plane.kubeconfig_path(), &namespace);
    operator.start();
    // CAPI core creates the machines while the operator runs (and dies); each VM's kubelet registers its Node.
    let creator = tokio::spawn(create_machines(
        client.clone(),
        namespace.clone(),
        provider.clone(),
        labels,
    ));
    let kubelets = play_kubelets(control.clone(), workload.client().await.expect("workload client"));
    let machines: Api<OVirtMachine> = Api::namespaced(client.clone(), &namespace);

    // Creation under fire. A "targeted" kill waits for the engine to create a VM and kills at once, before the
    // operator can record it in spec.providerID: the window the ownership marker exists for. Until one kill has
    // caught that window every kill is targeted; after that the RNG chooses.
    let mut unrecorded_at_kill: BTreeSet<String> = BTreeSet::new();
    for kill in 0..CREATION_KILLS {
        let delay = Duration::from_millis(rng.between(300, 4000));
        let targeted = unrecorded_at_kill.is_empty() || rng.next().is_multiple_of(2);
        tokio::time::sleep(delay).await;
        let how = if targeted
            && control.vm_count() < MACHINES
            && kill_at_next_vm_creation(control.clone(), operator.pid(), Duration::from_secs(20)).await
        {
            "right after the engine created a VM"
        } else {
            operator.kill();
            "at a random point"
        };
        operator.reap();
        let unrecorded = unrecorded_vms(&machines, &control).await;
        println!(
            "kill {kill} at {:.1}s: {how} (waited {delay:?} after the start); {} VMs in the engine, {} of them not \
             recorded in spec.providerID {unrecorded:?}",
            started.elapsed().as_secs_f64(),
            control.vm_count(),
            unrecorded.len()
        );
        unrecorded_at_kill.extend(unrecorded);
        operator.start();
    }
    creator.await.expect("creator task").expect("create machines");

    // The last operator brings everything to Ready.
    let ready = eventually(
        Duration::from_secs(150),
        operator.with_log(format!("seed {seed}: all machines Ready")),
        || async {
            let list = machines
                .list(&ListParams::default())
                .await
                .map_err(|err| err.to_string())?;
            let ready = list.items.iter().filter(|machine| is_ready(machine)).count();
            if list.items.len() == MACHINES && ready == MACHINES {
                Ok(list.items)
            } else {
                Err(format!("{ready} of {} machines Ready", list.items.len()))
            }
        },
    )
    .await;
    println!(
        "all {MACHINES} machines Ready at {:.1}s",
        started.elapsed().as_secs_f64()
    );

    // Exactly one VM per machine, each carrying the marker of its machine (namespace/name, UID and this management
    // cluster), each recorded by exactly one machine.
    let management_cluster = Api::<k8s_openapi::api::core::v1::Namespace>::all(client.clone())
        .get("kube-system")
        .await
        .expect("kube-system")
        .metadata
        .uid
        .expect("kube-system uid");
    let vms = control.vms();
    let names: Vec<&str> = vms.iter().map(|vm| vm.name.as_str()).collect();
    assert_eq!(vms.len(), MACHINES, "seed {seed}: VMs in the engine: {names:?}");
    let unique: BTreeSet<&str> = names.iter().copied().collect();
    assert_eq!(unique.len(), MACHINES, "seed {seed}: duplicate VM names: {names:?}");
    for vm in &vms {
        assert_eq!(vm.status, "up", "seed {seed}: VM {}", vm.name);
    }
    let mut recorded_ids = BTreeSet::new();
    for machine in &ready {
        let name = machine.metadata.name.clone().unwrap_or_default();
        let provider_id = machine.spec.provider_id.clone().unwrap_or_default();
        let id = capov_core::trust::identity::parse_provider_id(&provider_id)
            .unwrap_or_else(|| panic!("seed {seed}: {name} has providerID {provider_id:?}"));
        let vm = control
            .vm(id)
            .unwrap_or_else(|| panic!("seed {seed}: {name}'s providerID {provider_id} names no VM"));
        assert_eq!(
            vm.name, name,
            "seed {seed}: {name}'s providerID names another machine's VM"
        );
        let owner = capov_core::trust::identity::OwnerIdentity {
            namespace: namespace.clone(),
            name: name.clone(),
            uid: machine.metadata.uid.clone().unwrap_or_default(),
            previous_uid: None,
            management_cluster: management_cluster.clone(),
            accepted_management_clusters: Vec::new(),
        };
        assert_eq!(
            capov_core::trust::identity::ownership(&vm.description, &owner),
            capov_core::trust::identity::Ownership::Owned,
            "seed {seed}: VM {name} lacks its machine's marker: {:?}",
            vm.description
        );
        assert!(
            recorded_ids.insert(id.to_string()),
            "seed {seed}: two machines record VM {id}"
        );
    }
    // The window was hit, and a restarted operator adopted each VM left unrecorded instead of creating another.
    assert!(
        !unrecorded_at_kill.is_empty(),
        "seed {seed}: no kill landed between a VM's creation and its providerID, so adoption was not exercised"
    );
    let logged = operator.logged_machines();
    let adopted = &logged["adopted the VM carrying this machine's marker"];
    assert!(
        !adopted.is_empty(),
        "seed {seed}: VMs were left unrecorded at kills ({unrecorded_at_kill:?}) but none was adopted"
    );
    // providerIDs are write-once, so a VM adopted by one run was unrecorded when the run before it was killed; an
    // adoption without such a kill would mean an operator lost track of its own write.
    assert!(
        adopted.is_subset(&unrecorded_at_kill),
        "seed {seed}: adopted {adopted:?}, but only {unrecorded_at_kill:?} were left unrecorded by a kill"
    );
    let creates = control.counter("POST /vms");
    println!(
        "adopted after a kill: {adopted:?}; the engine got {creates} create requests for {MACHINES} VMs ({:.1}s)",
        started.elapsed().as_secs_f64()
    );

    // Deletion under fire: every VM and every finalizer goes.
    machines
        .delete_collection(&DeleteParams::default(), &ListParams::default())
        .await
        .expect("delete the OVirtMachines");
    for kill in 0..DELETION_KILLS {
        let delay = Duration::from_millis(rng.between(300, 3000));
        tokio::time::sleep(delay).await;
        operator.kill();
        operator.reap();
        println!(
            "deletion kill {kill}: {delay:?} after the start; {} VMs left in the engine",
            control.vm_count()
        );
        operator.start();
    }
    eventually(
        Duration::from_secs(90),
        operator.with_log(format!("seed {seed}: every machine and VM deleted")),
        || async {
            let left = machines
                .list(&ListParams::default())
                .await
                .map_err(|err| err.to_string())?;
            let vms = control.vm_count();
            if left.items.is_empty() && vms == 0 {
                Ok(())
            } else {
                Err(format!("{} machines and {vms} VMs left", left.items.len()))
            }
        },
    )
    .await;
    // The cluster and the provider (released once no machine uses it) go too: no finalizer is left anywhere.
    let clusters: Api<OVirtCluster> = Api::namespaced(client.clone(), &namespace);
    clusters
        .delete(CLUSTER, &DeleteParams::default())
        .await
        .expect("delete the OVirtCluster");
    let providers: Api<OVirtProvider> = Api::all(client.clone());
    providers
        .delete(&provider, &DeleteParams::default())
        .await
        .expect("delete the OVirtProvider");
    eventually(
        Duration::from_secs(60),
        operator.with_log(format!(
            "seed {seed}: the OVirtCluster and OVirtProvider gone (no finalizer kept)"
        )),
        || async {
            let cluster_gone = clusters.get_opt(CLUSTER).await.ok()?.is_none();
            let provider_gone = providers.get_opt(&provider).await.ok()?.is_none();
            (cluster_gone && provider_gone).then_some(())
        },
    )
    .await;
    assert_eq!(control.vm_count(), 0, "seed {seed}");
    println!(
        "everything deleted at {:.1}s after {} operator starts",
        started.elapsed().as_secs_f64(),
        operator.starts
    );
    kubelets.abort();
    operator.kill();
    operator.reap();
    operator.remove_logs();
}

/// xorshift64: enough randomness for a kill schedule, reproducible from its seed.
struct XorShift(u64);

impl XorShift {
    fn new(seed: u64) -> Self {
        // The all-zero state would stay zero.
        XorShift(seed.max(1))
    }

    fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x
    }

    /// Uniform enough in `low..=high`.
    fn between(&mut self, low: u64, high: u64) -> u64 {
        low + self.next() % (high - low + 1)
    }
}

fn time_seed() -> u64 {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0);
    nanos ^ u64::from(std::process::id())
}

/// The `manager` process under test, restarted after every kill; one log file per run.
struct Operator {
    kubeconfig: PathBuf,
    namespace: String,
    logs: PathBuf,
    child: Option<Child>,
    starts: usize,
}

impl Operator {
    fn new(kubeconfig: &Path, namespace: &str) -> Self {
        let logs = std::env::temp_dir().join(format!("capov-{namespace}"));
        std::fs::create_dir_all(&logs).expect("log directory");
        Operator {
            kubeconfig: kubeconfig.to_path_buf(),
            namespace: namespace.to_string(),
            logs,
            child: None,
            starts: 0,
        }
    }

    fn log_path(&self, run: usize) -> PathBuf {
        self.logs.join(format!("manager-{run}.log"))
    }

    fn start(&mut self) {
        assert!(self.child.is_none(), "the previous operator still runs");
        let log = std::fs::File::create(self.log_path(self.starts)).expect("log file");
        let ns = &self.namespace;
        let child = Command::new(env!("CARGO_BIN_EXE_manager"))
            .arg(format!("--kubeconfig={}", self.kubeconfig.display()))
            .arg(format!("--namespace={ns}"))
            .arg(format!("--watch-filter={ns}"))
            .arg(format!("--credentials-namespace={ns}"))
            .arg("--metrics-bind-address=0")
            // The workload cluster runs on loopback.
            .arg("--allow-internal-workload-servers")
            .arg("--health-probe-bind-address=0")
            .arg("--log-format=json")
            .arg(format!("--ovirt-qps={OVIRT_QPS}"))
            .arg(format!("--ovirt-burst={OVIRT_QPS}"))
            .stdin(Stdio::null())
            .stdout(log.try_clone().expect("log file"))
            .stderr(log)
            .spawn()
            .expect("start the manager");
        self.child = Some(child);
        self.starts += 1;
    }

    fn pid(&self) -> u32 {
        self.child.as_ref().map(Child::id).expect("a running operator")
    }

    /// SIGKILL (what `Child::kill` sends on Unix): no shutdown code runs.
    fn kill(&mut self) {
        if let Some(child) = &mut self.child {
            let _ = child.kill();
        }
    }

    /// Waits for the killed process, so that no two operators ever run at once.
    fn reap(&mut self) {
        if let Some(mut child) = self.child.take() {
            let status = child.wait().expect("wait for the manager");
            assert!(
                !status.success(),
                "the manager exited by itself ({status}); log: {}",
                self.log_path(self.starts - 1).display()
            );
        }
    }

    /// `what` a failure message says, with the end of the current run's log (read only when shown).
    fn with_log(&self, what: String) -> WithLog {
        WithLog::new(
            format!("{what} (logs of all runs in {})", self.logs.display()),
            self.log_path(self.starts.saturating_sub(1)),
        )
    }

    /// For each log message of interest, the machines it was logged for, over every run so far.
    fn logged_machines(&self) -> BTreeMap<&'static str, BTreeSet<String>> {
        const MESSAGES: [&str; 2] = ["adopted the VM carrying this machine's marker", "VM created"];
        let mut found: BTreeMap<&'static str, BTreeSet<String>> =
            MESSAGES.iter().map(|m| (*m, BTreeSet::new())).collect();
        for run in 0..self.starts {
            let text = std::fs::read_to_string(self.log_path(run)).unwrap_or_default();
            for line in text.lines().filter_map(|line| serde_json::from_str::<Value>(line).ok()) {
                let (Some(message), Some(object)) = (line["message"].as_str(), line["object"].as_str()) else {
                    continue;
                };
                if let (Some(set), Some(name)) = (found.get_mut(message), object.rsplit('/').next()) {
                    set.insert(name.to_string());
                }
            }
        }
        found
    }

    fn remove_logs(&self) {
        let _ = std::fs::remove_dir_all(&self.logs);
    }
}

impl Drop for Operator {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// Machines `worker-0..49` with their bootstrap data, as CAPI core would create them while scaling up: one every
/// 200 ms, so that VM creations — and the kills aimed right after one — go on for most of the kill phase.
async fn create_machines(
    client: kube::Client,
    namespace: String,
    provider: String,
    labels: Value,
) -> Result<(), capov_harness::HarnessError> {
    for index in 0..MACHINES {
        let spec = json!({"provider": provider, "ovirtcluster": "Default", "template": "ubuntu-22.04",
                          "osdisksizegb": 30, "cpu": {"sockets": 1, "cores": 2, "threads": 1},
                          "memory": {"sizemb": 4096}, "nics": [{"vnicprofile": "ovirtmgmt"}]});
        let name = format!("worker-{index}");
        objects::create_machine(&client, &namespace, CLUSTER, &name, labels.clone(), spec).await?;
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    Ok(())
}

/// Watches the engine from a blocking thread and SIGKILLs `pid` as soon as a VM more than now exists. False when no
/// VM was created within `timeout` (the operator is then still alive).
async fn kill_at_next_vm_creation(control: Control, pid: u32, timeout: Duration) -> bool {
    tokio::task::spawn_blocking(move || {
        let before = control.vm_count();
        let deadline = Instant::now() + timeout;
        while Instant::now() < deadline {
            if control.vm_count() > before {
                // SAFETY: a plain syscall on the child process this test started and has not reaped yet.
                unsafe {
                    libc::kill(pid as libc::pid_t, libc::SIGKILL);
                }
                return true;
            }
            std::thread::sleep(Duration::from_micros(200));
        }
        false
    })
    .await
    .expect("the engine watcher")
}

/// Names of the VMs in the engine whose OVirtMachine does not record them in spec.providerID.
async fn unrecorded_vms(machines: &Api<OVirtMachine>, control: &Control) -> Vec<String> {
    let list = machines.list(&ListParams::default()).await.expect("list machines");
    let recorded: BTreeMap<String, String> = list
        .items
        .into_iter()
        .filter_map(|m| Some((m.metadata.name?, m.spec.provider_id?)))
        .collect();
    control
        .vms()
        .into_iter()
        .filter(|vm| recorded.get(&vm.name).is_none_or(|id| id.is_empty()))
        .map(|vm| vm.name)
        .collect()
}

fn is_ready(machine: &OVirtMachine) -> bool {
    machine.status.as_ref().is_some_and(|s| {
        s.conditions
            .iter()
            .any(|c| c.type_ == "Ready" && c.status == ConditionStatus::True)
    })
}
