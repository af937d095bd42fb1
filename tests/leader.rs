//! Leader election with real `manager` processes against one real apiserver: two replicas, exactly one leads (the
//! Lease names it, `capov_leader` is 1 only there, the standby is ready but runs no controllers). A SIGKILLed
//! leader is replaced once its Lease expires, and the new leader finishes the machines it found half-done without
//! duplicating a VM; a SIGTERMed leader releases the Lease so that the standby takes over at once; a leader whose
//! Lease is taken stops its controllers and stands by again. A leader cut off from the apiserver in the middle of a
//! deletion wave stops writing to the engine before the standby takes over.

mod support;

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use capov::leader::{LEASE_DURATION, RENEW_INTERVAL, RETRY_PERIOD};
use capov_crds::OVirtMachine;
use capov_harness::{ControlPlane, objects};
use capov_ovirt_sim::Timings;
use capov_testkit::eventually;
use k8s_openapi::api::coordination::v1::Lease;
use kube::api::{Api, Patch, PatchParams};
use serde_json::{Value, json};
use support::{
    LEASE_NAME, Manager, engine, holder, http, is_ready, labels, register_up_nodes, vms_per_name, wait_all_deleted,
};

/// Starts two replicas at once and waits until one of them holds the Lease: returns (leader, standby).
async fn elect(
    plane: &ControlPlane,
    leases: &Api<Lease>,
    namespace: &str,
    dir: &Path,
    http: &reqwest::Client,
) -> (Manager, Manager) {
    let a = Manager::start(plane.kubeconfig_path(), namespace, "replica-a", dir);
    let b = Manager::start(plane.kubeconfig_path(), namespace, "replica-b", dir);
    let elected = eventually(Duration::from_secs(60), "a leader", || async { holder(leases).await }).await;
    let (leader, standby) = if a.is_holder(Some(&elected)) {
        (a, b)
    } else {
        assert!(
            b.is_holder(Some(&elected)),
            "the Lease names neither replica: {elected}"
        );
        (b, a)
    };

    // Exactly one leads: the gauges say so, the standby is ready all the same and never started the controllers.
    eventually(Duration::from_secs(30), "the leader's capov_leader = 1", || async {
        (leader.leader_gauge(http).await == Some(1)).then_some(())
    })
    .await;
    eventually(Duration::from_secs(30), "the standby ready", || async {
        (standby.readyz(http).await == Some(200)).then_some(())
    })
    .await;
    assert_eq!(standby.leader_gauge(http).await, Some(0), "the standby's capov_leader");
    let standing_by = eventually(Duration::from_secs(30), "the standby's standing-by line", || async {
        standby
            .logs()
            .into_iter()
            .find(|line| line["message"] == "standing by: another replica leads")
    })
    .await;
    assert_eq!(standing_by["leader"].as_str(), Some(elected.as_str()));
    assert!(
        leader
            .messages()
            .iter()
            .any(|m| m == "became the leader; starting the controllers")
    );
    assert!(
        !standby.messages().iter().any(|m| m.starts_with("became the leader")),
        "the standby started the controllers:\n{}",
        standby.log_text()
    );
    assert_eq!(
        holder(leases).await.as_deref(),
        Some(elected.as_str()),
        "the Lease changed hands"
    );
    (leader, standby)
}

#[tokio::test]
async fn a_killed_leader_is_replaced_and_its_half_done_machines_are_finished() {
    let plane = capov_harness::shared().await;
    let client = plane.client().await.expect("client");
    let namespace = plane.create_namespace(&client, "leader-kill").await.expect("namespace");
    let leases: Api<Lease> = Api::namespaced(client.clone(), &namespace);
    let dir = tempfile::tempdir().expect("log dir");
    let http = http();
    let engine = engine(&client, &namespace).await;
    let (mut leader, mut standby) = elect(plane, &leases, &namespace, dir.path(), &http).await;

    let names: Vec<String> = (0..3).map(|i| format!("worker-{i}")).collect();
    for name in &names {
        let spec = json!({"provider": engine.provider, "ovirtcluster": "Default", "template": "ubuntu-22.04",
                          "osdisksizegb": 40, "cpu": {"sockets": 1, "cores": 2, "threads": 1},
                          "memory": {"sizemb": 4096}, "nics": [{"vnicprofile": "ovirtmgmt"}]});
        objects::create_machine(&client, &namespace, "workload", name, labels(&namespace), spec)
            .await
            .expect("machine");
    }

    // Half-done: the leader has created a VM, and no machine is Ready (their Nodes are not registered yet).
    let machines: Api<OVirtMachine> = Api::namespaced(client.clone(), &namespace);
    eventually(Duration::from_secs(90), "the leader to create a VM", || async {
        vms_per_name(&engine.sim, &names)
            .values()
            .any(|count| *count > 0)
            .then_some(())
    })
    .await;
    let before = machines.list(&Default::default()).await.expect("machines");
    assert!(
        !before.items.iter().any(is_ready),
        "a machine was Ready before the kill"
    );
    let states: Vec<(String, String)> = engine
        .sim
        .control()
        .vms()
        .into_iter()
        .map(|vm| (vm.name, vm.status))
        .collect();
    assert!(
        states.iter().all(|(_, status)| status != "up"),
        "a VM was already up at the kill: {states:?}"
    );
    leader.sigkill();
    let killed = Instant::now();

    // The standby waits for the Lease to expire — not less, since the dead leader may have renewed just before —
    // and takes it within a retry period or so after.
    let takeover = eventually(
        LEASE_DURATION + RETRY_PERIOD * 3,
        "the standby to take the Lease",
        || async {
            standby
                .is_holder(holder(&leases).await.as_deref())
                .then(|| killed.elapsed())
        },
    )
    .await;
    assert!(
        takeover >= LEASE_DURATION - RENEW_INTERVAL - Duration::from_secs(1),
        "took over after {takeover:?}, before the dead leader's Lease could have expired"
    );
    eventually(Duration::from_secs(10), "the new leader's capov_leader = 1", || async {
        (standby.leader_gauge(&http).await == Some(1)).then_some(())
    })
    .await;

    // The new leader finishes every machine; the test plays each VM's kubelet registering its Node.
    let workload = engine.workload.client().await.expect("workload client");
    let registered = Mutex::new(BTreeSet::new());
    eventually(
        Duration::from_secs(180),
        standby.with_log("every machine Ready under the new leader"),
        || async {
            let list = register_up_nodes(&machines, &workload, &engine.sim, &registered)
                .await
                .ok_or("cannot list the machines")?;
            if list.len() == names.len() && list.iter().all(is_ready) {
                return Ok(());
            }
            let states: Vec<_> = list
                .iter()
                .map(|m| (m.metadata.name.clone(), m.status.clone()))
                .collect();
            Err(format!("{states:?}"))
        },
    )
    .await;

    let counts = vms_per_name(&engine.sim, &names);
    assert!(
        counts.values().all(|count| *count == 1),
        "VMs per machine name: {counts:?} (at the kill: {states:?})"
    );
    assert_eq!(
        engine.sim.control().vm_count(),
        names.len(),
        "{:?}",
        engine.sim.control().vms()
    );

    standby.sigterm();
    let status = standby.wait_exit(Duration::from_secs(20)).await;
    assert!(status.success(), "exit {status}; log:\n{}", standby.log_text());
    assert!(holder(&leases).await.is_none(), "the last leader left the Lease held");
}

#[tokio::test]
async fn sigterm_hands_over_at_once_and_a_taken_lease_sends_the_leader_back_to_standby() {
    let plane = capov_harness::shared().await;
    let client = plane.client().await.expect("client");
    let namespace = plane.create_namespace(&client, "leader-term").await.expect("namespace");
    let leases: Api<Lease> = Api::namespaced(client.clone(), &namespace);
    let dir = tempfile::tempdir().expect("log dir");
    let http = http();
    let (mut leader, standby) = elect(plane, &leases, &namespace, dir.path(), &http).await;

    // SIGTERM: the leader stops, releases the Lease and exits 0; the standby takes over well before the Lease
    // could have expired (at the earliest a renew interval's worth short of its duration from now).
    leader.sigterm();
    let terminated = Instant::now();
    let handover = eventually(LEASE_DURATION, "the standby to take the released Lease", || async {
        standby
            .is_holder(holder(&leases).await.as_deref())
            .then(|| terminated.elapsed())
    })
    .await;
    assert!(
        handover < LEASE_DURATION - RENEW_INTERVAL - Duration::from_secs(1),
        "handover took {handover:?}: the Lease was not released"
    );
    let status = leader.wait_exit(Duration::from_secs(20)).await;
    assert!(status.success(), "exit {status}; log:\n{}", leader.log_text());
    let messages = leader.messages();
    for expected in ["shutting down", "released the leader-election Lease"] {
        assert!(
            messages.iter().any(|m| m == expected),
            "no {expected:?} in {messages:?}"
        );
    }
    eventually(Duration::from_secs(10), "the new leader's capov_leader = 1", || async {
        (standby.leader_gauge(&http).await == Some(1)).then_some(())
    })
    .await;

    // Someone else takes the Lease: the leader notices at its next renewal, says why in one error line, stops its
    // controllers and stands by again in the same process (a leader may lose its Lease to an API server restart:
    // that must not restart the operator).
    let new_leader = standby;
    let intruder = json!({"spec": {"holderIdentity": "intruder", "leaseDurationSeconds": 3600,
                                   "renewTime": k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime(k8s_openapi::jiff::Timestamp::now())}});
    leases
        .patch(LEASE_NAME, &PatchParams::default(), &Patch::Merge(&intruder))
        .await
        .expect("take the Lease");
    let standing_by = eventually(
        RENEW_INTERVAL + Duration::from_secs(15),
        "the former leader standing by for the intruder",
        || async {
            new_leader
                .logs()
                .into_iter()
                .find(|line| line["message"] == "standing by: another replica leads" && line["leader"] == "intruder")
        },
    )
    .await;
    assert_eq!(standing_by["leader"], "intruder");
    let mut new_leader = new_leader;
    assert!(
        new_leader.child.try_wait().expect("try_wait").is_none(),
        "the former leader exited; log:\n{}",
        new_leader.log_text()
    );
    assert_eq!(
        new_leader.leader_gauge(&http).await,
        Some(0),
        "capov_leader after the loss"
    );
    let errors: Vec<Value> = new_leader
        .logs()
        .into_iter()
        .filter(|line| line["level"] == "ERROR")
        .collect();
    assert_eq!(errors.len(), 1, "one error line: {errors:?}");
    assert_eq!(errors[0]["message"], "lost leadership; stopping all controllers");
    assert!(
        errors[0]["reason"]
            .as_str()
            .is_some_and(|r| r.contains("another replica")),
        "{}",
        errors[0]
    );
    let messages = new_leader.messages();
    let stopped = messages
        .iter()
        .position(|m| m == "the controllers stopped; standing by again")
        .expect("the controllers stopped before standing by");
    assert!(
        messages[stopped..].iter().any(|m| m == "waiting to become the leader"),
        "{messages:?}"
    );
    assert_eq!(holder(&leases).await.as_deref(), Some("intruder"));
}

/// Liveness: work that stops by itself (the runtime's supervisor died, e.g. with its status writer) makes the
/// leader release the Lease and end with `WorkStopped` (the process then exits non-zero), instead of renewing a
/// Lease for a runtime that does no work.
#[tokio::test]
async fn work_that_stops_by_itself_releases_the_lease_and_ends_non_zero() {
    use capov::leader::{Candidate, ElectionSettings, Ended, holder};
    use std::sync::atomic::{AtomicBool, Ordering};

    let plane = capov_harness::shared().await;
    let client = plane.client().await.expect("client");
    let namespace = plane.create_namespace(&client, "liveness").await.expect("namespace");
    let settings = ElectionSettings::new(&namespace, "liveness-lease", "liveness_0a1b2c3d".into());
    let config = kube::Config::from_custom_kubeconfig(
        kube::config::Kubeconfig::read_from(plane.kubeconfig_path()).expect("kubeconfig"),
        &Default::default(),
    )
    .await
    .expect("config");
    let candidate = Candidate::new(config, settings).expect("candidate");
    let leases: Api<Lease> = Api::namespaced(client.clone(), &namespace);
    let stopped = AtomicBool::new(false);
    let gauge = prometheus::IntGauge::new("test_leader", "leader").expect("gauge");

    let start = async || {
        // The work "dies" once the Lease shows this replica as its holder: the leader held it while working.
        let leases = leases.clone();
        let gone = async move {
            eventually(Duration::from_secs(30), "the Lease to show this replica", || async {
                let lease = leases.get("liveness-lease").await.ok()?;
                (holder(&lease) == Some("liveness_0a1b2c3d")).then_some(())
            })
            .await
        };
        Ok(((), gone))
    };
    let stop = async |()| {
        stopped.store(true, Ordering::SeqCst);
        true
    };
    let ended = tokio::time::timeout(
        Duration::from_secs(30),
        capov::leader::run(candidate, gauge.clone(), std::future::pending(), start, stop),
    )
    .await
    .expect("the leader ended within 30 s");
    assert!(matches!(ended, Ended::WorkStopped), "ended {ended:?}");
    assert!(stopped.load(Ordering::SeqCst), "the work was stopped");
    assert_eq!(gauge.get(), 0, "capov_leader is 0 after the work stopped");
    let lease = leases.get("liveness-lease").await.expect("lease");
    assert_eq!(holder(&lease), None, "the Lease was released for a standby");
    println!("liveness: work that stopped by itself ended the leader with WorkStopped and released the Lease");
}

/// A TCP proxy in front of the apiserver that can be switched to swallow everything in both directions: the
/// replica behind it keeps its connections and gets no answer, as when its node is cut off from the control plane.
struct CutProxy {
    port: u16,
    cut: std::sync::Arc<std::sync::atomic::AtomicBool>,
    _task: tokio::task::JoinHandle<()>,
}

impl CutProxy {
    async fn start(upstream: u16) -> CutProxy {
        use std::sync::Arc;
        use std::sync::atomic::AtomicBool;
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let port = listener.local_addr().expect("addr").port();
        let cut = Arc::new(AtomicBool::new(false));
        let task = {
            let cut = cut.clone();
            tokio::spawn(async move {
                while let Ok((client, _)) = listener.accept().await {
                    let cut = cut.clone();
                    tokio::spawn(async move {
                        let Ok(server) = tokio::net::TcpStream::connect(("127.0.0.1", upstream)).await else {
                            return;
                        };
                        let (client_read, client_write) = client.into_split();
                        let (server_read, server_write) = server.into_split();
                        tokio::spawn(pump(client_read, server_write, cut.clone()));
                        pump(server_read, client_write, cut).await;
                    });
                }
            })
        };
        CutProxy { port, cut, _task: task }
    }

    fn cut(&self) {
        self.cut.store(true, std::sync::atomic::Ordering::SeqCst);
    }
}

/// Copies bytes until the proxy is cut; from then on reads and drops them.
async fn pump(
    mut from: tokio::net::tcp::OwnedReadHalf,
    mut to: tokio::net::tcp::OwnedWriteHalf,
    cut: std::sync::Arc<std::sync::atomic::AtomicBool>,
) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut buffer = vec![0u8; 16 * 1024];
    loop {
        let read = match from.read(&mut buffer).await {
            Ok(0) | Err(_) => return,
            Ok(read) => read,
        };
        if cut.load(std::sync::atomic::Ordering::SeqCst) {
            continue;
        }
        if to.write_all(&buffer[..read]).await.is_err() {
            return;
        }
    }
}

/// The leader loses the apiserver (a cut TCP proxy: no renewal, no answers) while it deletes machines, and keeps
/// reaching the engine. Its fence stops its engine writes before its Lease expires; the standby takes over and
/// finishes the deletions. The engine records who wrote what: no write of the old leader after the first of the
/// new one, no VM deleted twice, none left over.
#[tokio::test]
async fn a_leader_cut_off_from_the_apiserver_stops_engine_writes_before_the_standby_takes_over() {
    let plane = capov_harness::shared().await;
    let client = plane.client().await.expect("client");
    let namespace = plane
        .create_namespace(&client, "leader-fence")
        .await
        .expect("namespace");
    let leases: Api<Lease> = Api::namespaced(client.clone(), &namespace);
    let dir = tempfile::tempdir().expect("log dir");
    let http = http();
    let engine = engine(&client, &namespace).await;

    // Replica A reaches the apiserver only through the proxy.
    let proxy = CutProxy::start(plane.api_port()).await;
    let direct = format!("127.0.0.1:{}", plane.api_port());
    let kubeconfig = plane.kubeconfig_yaml().expect("kubeconfig");
    assert!(kubeconfig.contains(&direct), "the kubeconfig names {direct}");
    let proxied = dir.path().join("proxied.kubeconfig");
    std::fs::write(
        &proxied,
        kubeconfig.replace(&direct, &format!("127.0.0.1:{}", proxy.port)),
    )
    .expect("write");
    // A slow engine rate, so that the deletion wave lasts well past the cut.
    let slow = ["--ovirt-qps=2", "--ovirt-burst=2"];
    let mut a = Manager::start_with(&proxied, &namespace, "replica-a", dir.path(), &slow);
    eventually(Duration::from_secs(60), "replica A to lead", || async {
        a.is_holder(holder(&leases).await.as_deref()).then_some(())
    })
    .await;
    let b = Manager::start_with(plane.kubeconfig_path(), &namespace, "replica-b", dir.path(), &slow);
    eventually(Duration::from_secs(30), "replica B standing by", || async {
        (b.readyz(&http).await == Some(200) && b.leader_gauge(&http).await == Some(0)).then_some(())
    })
    .await;

    let names: Vec<String> = (0..8).map(|i| format!("worker-{i}")).collect();
    for name in &names {
        let spec = json!({"provider": engine.provider, "ovirtcluster": "Default", "template": "ubuntu-22.04"});
        objects::create_machine(&client, &namespace, "workload", name, labels(&namespace), spec)
            .await
            .expect("machine");
    }
    let machines: Api<OVirtMachine> = Api::namespaced(client.clone(), &namespace);
    eventually(Duration::from_secs(180), "a VM per machine, recorded", || async {
        let list = machines.list(&Default::default()).await.ok()?;
        let recorded = list.items.iter().filter(|m| m.spec.provider_id.is_some()).count();
        (recorded == names.len()).then_some(())
    })
    .await;

    // The deletion wave: VMs take seconds to power down and to be removed.
    let control = engine.sim.control();
    control.set_timings(Timings {
        shutdown_ms: 4000,
        disk_operation_ms: 4000,
        ..control.timings()
    });
    let wave_started = control.writes().len();
    let wave_began = Instant::now();
    for name in &names {
        machines.delete(name, &Default::default()).await.expect("delete");
    }
    eventually(Duration::from_secs(60), "replica A's first deletion write", || async {
        control.writes()[wave_started..]
            .iter()
            .any(|write| write.user_agent.ends_with("(replica-a)"))
            .then_some(())
    })
    .await;
    proxy.cut();
    let cut_into_wave = wave_began.elapsed();
    let cut_ms = u64::try_from(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .expect("clock")
            .as_millis(),
    )
    .expect("ms");

    // Replica B takes over and finishes: every machine gone, every VM removed.
    wait_all_deleted(&machines, &engine.sim, Duration::from_secs(240)).await;
    // Cut off, replica A stops its controllers and stands by again; only if they do not stop in time does it exit,
    // and then non-zero.
    let waiting = a.with_log("replica A to stand by again or exit");
    let replica_a = Mutex::new(&mut a);
    let a_outcome = eventually(Duration::from_secs(60), waiting, || async {
        let mut a = replica_a.lock().expect("replica A");
        if a.messages()
            .iter()
            .any(|m| m == "the controllers stopped; standing by again")
        {
            return Some("stood by again".to_string());
        }
        let status = a.child.try_wait().expect("try_wait")?;
        assert!(!status.success(), "the cut-off leader exited 0; log:\n{}", a.log_text());
        Some(format!("exited {status} (its controllers did not stop in time)"))
    })
    .await;

    let writes = control.writes();
    let by = |replica: &str| {
        let suffix = format!("({replica})");
        writes
            .iter()
            .filter(|write| write.user_agent.ends_with(&suffix))
            .cloned()
            .collect::<Vec<_>>()
    };
    let (of_a, of_b) = (by("replica-a"), by("replica-b"));
    let last_of_a = of_a.iter().map(|write| write.received_ms).max().expect("writes of A");
    let first_of_b = of_b.iter().map(|write| write.received_ms).min().expect("writes of B");
    assert!(
        last_of_a < first_of_b,
        "replica A wrote {} ms after replica B's first write: {:?}",
        last_of_a - first_of_b,
        of_a.iter()
            .filter(|write| write.received_ms >= first_of_b)
            .collect::<Vec<_>>()
    );
    // A's last accepted renewal was before the cut, so its fence closed at most RENEW_DEADLINE after it (a write
    // sent just before is recorded a moment later: 500 ms allowed for that).
    let fence_closed_by = cut_ms + capov::fence::RENEW_DEADLINE.as_millis() as u64 + 500;
    assert!(
        last_of_a <= fence_closed_by,
        "replica A wrote {} ms after its fence must have closed",
        last_of_a - fence_closed_by
    );
    let mut removed: BTreeMap<String, usize> = BTreeMap::new();
    let is_vm_path = |path: &str| {
        path.strip_prefix("/ovirt-engine/api/vms/")
            .is_some_and(|id| !id.is_empty() && !id.contains('/'))
    };
    for write in writes
        .iter()
        .filter(|write| write.method == "DELETE" && write.status < 300 && is_vm_path(&write.path))
    {
        *removed.entry(write.path.clone()).or_default() += 1;
    }
    assert!(
        removed.values().all(|count| *count == 1),
        "VMs deleted twice: {removed:?}"
    );
    assert_eq!(removed.len(), names.len(), "{removed:?}");
    let stopped_writing = a.messages().iter().any(|message| message.contains("lost leadership"));
    assert!(stopped_writing, "replica A's log:\n{}", a.log_text());
    println!(
        "fencing: injected a cut between the leader and the apiserver {:.1} s into a deletion wave of {} machines; \
         found {} writes of the old leader, its last {} ms after the cut, {} ms before the new leader's first ({} \
         writes), {} VMs deleted once each, 0 left; the old leader {a_outcome}",
        cut_into_wave.as_secs_f64(),
        names.len(),
        of_a.len(),
        last_of_a.saturating_sub(cut_ms),
        first_of_b - last_of_a,
        of_b.len(),
        removed.len()
    );
    drop(b);
}
