//! The operator-level fault suite: a whole scale-up and deletion of many machines against the real kube-apiserver
//! and the engine simulator, with the faults a real engine shows injected along the way. The closing lines say what
//! was injected and what was found; docs/faults.md keeps the table.
//!
//! `CAPOV_FAULT_MACHINES` (default 50) and `CAPOV_FAULT_OUTAGE_SECS` (default 60) size the run; the documented
//! longer run is `CAPOV_FAULT_MACHINES=200`.

mod support;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use capov_crds::{ConditionStatus, OVirtMachine, OVirtProvider};
use capov_ovirt_sim::{BodyFault, SlowReplies};
use capov_testkit::eventually;
use futures::StreamExt;
use kube::api::Api;
use support::{World, condition, metric_sum};

/// The engine client's request timeout in this suite: short, so that a latency spike beyond it costs seconds.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(5);
/// One retry at the backoff's ceiling with its +20 % jitter: a machine whose engine calls failed several times in a
/// row may wait that long once (by design), and a run that ends within the deadlines must allow for it.
const LONGEST_BACKOFF: Duration = Duration::from_secs(capov_core::policy::backoff::MAX_BACKOFF.as_secs() * 6 / 5);
/// How long the latency spike lasts at least, and at most while no POST has outlived the client's timeout yet (on a
/// busy machine the first creates can come late in the spike: the 503s before them send machines into backoff).
const SPIKE: Duration = Duration::from_secs(20);
const SPIKE_AT_MOST: Duration = Duration::from_secs(90);

fn from_env(name: &str, default: u64) -> u64 {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

fn provider_reason(provider: &OVirtProvider) -> Option<(ConditionStatus, String)> {
    let c = provider
        .status
        .as_ref()?
        .conditions
        .iter()
        .find(|c| c.type_ == "CanConnectToOVirt")?;
    Some((c.status, c.reason.to_string()))
}

fn is_ready(machine: &OVirtMachine) -> bool {
    condition(machine, "Ready").is_some_and(|c| c.status == ConditionStatus::True)
}

/// What the run found, printed at the end as the suite's closing table.
#[derive(Default)]
struct Findings {
    lines: Vec<String>,
}

impl Findings {
    fn note(&mut self, fault: &str, found: String) {
        println!("fault suite | {fault} | {found}");
        self.lines.push(format!("| {fault} | {found} |"));
    }
}

#[tokio::test]
async fn machines_reach_ready_and_are_deleted_through_engine_faults() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let machines_wanted = from_env("CAPOV_FAULT_MACHINES", 50) as usize;
    let outage = Duration::from_secs(from_env("CAPOV_FAULT_OUTAGE_SECS", 60));
    let mut findings = Findings::default();
    let mut world = World::new("faults").await;
    let control = world.sim.control().clone();
    world
        .start_operator_with(capov_actors::runtime::RuntimeSettings {
            ovirt_qps: 200,
            ovirt_burst: 200,
            engine_request_timeout: REQUEST_TIMEOUT,
            ..world.settings()
        })
        .await;
    let providers = Api::<OVirtProvider>::all(world.client.clone());
    let machines = Api::<OVirtMachine>::namespaced(world.client.clone(), &world.namespace);
    eventually(Duration::from_secs(60), "provider connected", || async {
        let provider = providers.get(&world.provider).await.ok()?;
        (provider_reason(&provider)? == (ConditionStatus::True, "Connected".into())).then_some(())
    })
    .await;

    // Throughout the scale-up: one engine answer in five is a 503, and SSO tokens expire every 30 s. While the
    // first VMs are created, a latency spike: the engine carries out every POST at once and answers it only after
    // the client gave up, so CAPOV does not know that its creates and starts happened.
    control.set_error_rate(0.2, 503);
    control.set_token_ttl(Some(Duration::from_secs(30)));
    let spike_delay = REQUEST_TIMEOUT + Duration::from_secs(2);
    control.set_slow_replies(Some(SlowReplies {
        delay_ms: spike_delay.as_millis() as u64,
        method: Some("POST".into()),
        path_contains: Some("/vms".into()),
    }));
    let mut spike = Some(Instant::now());
    let names: Vec<String> = (0..machines_wanted).map(|i| format!("f-{i}")).collect();
    let started = Instant::now();
    world.create_machines(&names).await;

    // The test plays each VM's kubelet; along the way, an outage as refused connections and malformed answers.
    let workload = world.workload.client().await.expect("workload client");
    let registered = Mutex::new(BTreeSet::new());
    let mut outage_phase = OutagePhase::Spike;
    let mut saw_unreachable = false;
    let mut requests_at_outage = 0.0;
    let mut ready_at_outage = 0;
    let mut body_reads_at = 0;
    let deadline = Instant::now()
        + Duration::from_secs(180)
        + Duration::from_secs(5) * machines_wanted as u32
        + outage
        + LONGEST_BACKOFF;
    loop {
        let items = world.register_up_nodes(&workload, &registered).await;
        let ready = items.iter().filter(|m| is_ready(m)).count();
        let given_up = metric_sum(
            &world.metrics,
            "capov_engine_requests_total",
            &[("method", "POST"), ("code", "error")],
        );
        let spike_over =
            |since: &Instant| since.elapsed() >= SPIKE_AT_MOST || (since.elapsed() >= SPIKE && given_up > 0.0);
        if let Some(since) = spike.filter(spike_over) {
            control.set_slow_replies(None);
            findings.note(
                &format!(
                    "POST answers held {} s (the client's request timeout: {} s) for {} s from the first create",
                    spike_delay.as_secs(),
                    REQUEST_TIMEOUT.as_secs(),
                    since.elapsed().as_secs()
                ),
                format!(
                    "{given_up} POSTs given up by the client though the engine carried them out; {} VMs for {} \
                     machine names by then",
                    control.vm_count(),
                    machines_wanted
                ),
            );
            assert!(
                given_up > 0.0,
                "no POST outlived the client's request timeout in {} s",
                SPIKE_AT_MOST.as_secs()
            );
            spike = None;
        }
        let requests = metric_sum(&world.metrics, "capov_engine_requests_total", &[]);
        match outage_phase {
            // Malformed answers right after the spike, while many machines still read their VMs.
            OutagePhase::Spike if spike.is_none() => {
                body_reads_at = vm_reads(&control);
                outage_phase = OutagePhase::Bodies(Instant::now(), 0);
            }
            // Each malformed answer stays until at least one request got it, and at least 3 s.
            OutagePhase::Bodies(since, step)
                if since.elapsed() >= Duration::from_secs(3) && vm_reads(&control) > body_reads_at =>
            {
                body_reads_at = vm_reads(&control);
                let faults = [
                    Some(BodyFault::Html),
                    Some(BodyFault::Truncated),
                    Some(BodyFault::ForeignRoot { root: "fault".into() }),
                    Some(BodyFault::Oversized {
                        bytes: 300 << 20,
                        announce_length: false,
                    }),
                    None,
                ];
                control.set_body_fault(faults[step].clone(), Some("GET"), Some("/vms"));
                outage_phase = match faults[step] {
                    Some(_) => OutagePhase::Bodies(Instant::now(), step + 1),
                    None => OutagePhase::BeforeOutage,
                };
            }
            OutagePhase::BeforeOutage if ready * 3 >= machines_wanted => {
                control.set_refusing_connections(true);
                requests_at_outage = requests;
                ready_at_outage = ready;
                outage_phase = OutagePhase::Outage(Instant::now());
            }
            OutagePhase::Outage(since) => {
                if let Ok(provider) = providers.get(&world.provider).await {
                    saw_unreachable |=
                        provider_reason(&provider).is_some_and(|(_, reason)| reason == "EngineUnreachable");
                }
                if since.elapsed() >= outage {
                    control.set_refusing_connections(false);
                    let rate = (requests - requests_at_outage) / since.elapsed().as_secs_f64();
                    findings.note(
                        &format!("engine host down {}s (refused connections)", outage.as_secs()),
                        format!(
                            "began with {ready_at_outage} of {machines_wanted} Ready; provider EngineUnreachable: \
                             {saw_unreachable}; {rate:.2} engine requests/s during it"
                        ),
                    );
                    assert!(
                        saw_unreachable,
                        "the provider never showed EngineUnreachable during the outage"
                    );
                    assert!(rate <= 5.0, "{rate:.2} requests/s against a down engine");
                    outage_phase = OutagePhase::After;
                }
            }
            _ => {}
        }
        if ready == machines_wanted && outage_phase == OutagePhase::After && spike.is_none() {
            break;
        }
        if Instant::now() >= deadline {
            let stuck: Vec<String> = items
                .iter()
                .filter(|m| !is_ready(m))
                .map(|m| describe(m, &control, false))
                .collect();
            panic!(
                "{ready} of {machines_wanted} Ready by the deadline (phase {outage_phase:?}); not Ready:\n{}",
                stuck.join("\n")
            );
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    let per_name = vms_per_name(&control, &names);
    let duplicates = per_name.values().filter(|count| **count > 1).count();
    assert_eq!(duplicates, 0, "{per_name:?}");
    assert_eq!(control.vm_count(), machines_wanted);
    findings.note(
        "scale-up with 20 % 503s and tokens expiring every 30 s; after the spike, malformed GET /vms answers (HTML, \
         truncated, foreign root, 300 MB), each for 3 s and at least one request",
        format!(
            "{machines_wanted} of {machines_wanted} Ready in {:.0} s; 0 duplicate VMs; the simulator generated {} MB \
             for 300 MB answers, each cut by the client at 16 MiB",
            started.elapsed().as_secs_f64(),
            control.streamed_bytes() >> 20
        ),
    );

    // The password changes on the engine; the Secret does not. Then it is fixed.
    control.set_error_rate(0.0, 503);
    control.set_user("admin@internal", "changed-on-the-engine");
    control.expire_tokens();
    eventually(Duration::from_secs(90), "provider AuthenticationFailed", || async {
        let provider = providers.get(&world.provider).await.ok()?;
        (provider_reason(&provider)?.1 == "AuthenticationFailed").then_some(())
    })
    .await;
    control.set_user("admin@internal", "admin");
    eventually(Duration::from_secs(90), "provider connected again", || async {
        let provider = providers.get(&world.provider).await.ok()?;
        (provider_reason(&provider)? == (ConditionStatus::True, "Connected".into())).then_some(())
    })
    .await;
    let critical = machines
        .list(&Default::default())
        .await
        .expect("machines")
        .items
        .iter()
        .filter(|m| m.status.as_ref().is_some_and(|s| s.failure_reason.is_some()))
        .count();
    findings.note(
        "engine password changed, Secret unchanged, then fixed",
        format!("provider AuthenticationFailed, then Connected by itself; {critical} machines with a failureReason"),
    );

    // Deletion with one engine answer in five a 503.
    control.set_error_rate(0.2, 503);
    let deleting = Instant::now();
    futures::stream::iter(names.iter())
        .for_each_concurrent(10, |name| {
            let machines = machines.clone();
            async move {
                machines.delete(name, &Default::default()).await.expect("delete");
            }
        })
        .await;
    // A machine whose engine calls fail several times in a row backs off (5 s doubling to 5 minutes): the deadline
    // allows for one wait at the ceiling, and names the machines still there if it passes.
    let deletion_time = Duration::from_secs(120) + Duration::from_secs(5) * machines_wanted as u32 + LONGEST_BACKOFF;
    eventually(deletion_time, "every machine deleted", || async {
        let list = machines.list(&Default::default()).await.expect("machines");
        if list.items.is_empty() {
            return Ok(());
        }
        let left: Vec<String> = list.items.iter().map(|m| describe(m, &control, true)).collect();
        Err(format!("{} machines left:\n{}", left.len(), left.join("\n")))
    })
    .await;
    control.set_error_rate(0.0, 503);
    let orphans = control.vm_count();
    assert_eq!(orphans, 0, "VMs left behind: {:?}", control.vms());
    let restarts = metric_sum(&world.metrics, "capov_actor_restarts_total", &[]);
    assert_eq!(restarts, 0.0, "actors panicked or failed and were restarted");
    findings.note(
        "deletion with 20 % 503s",
        format!(
            "{machines_wanted} deleted in {:.0} s; 0 stuck finalizers, 0 orphaned VMs, 0 actor restarts (no panics)",
            deleting.elapsed().as_secs_f64()
        ),
    );
    world.stop_operator().await;
    // The operator runs in this process, beside the simulator and the test's own clients: the whole stays under
    // the chart's memory limit, which a buffered 300 MB answer alone would break.
    let peak = peak_rss_bytes().expect("VmHWM in /proc/self/status");
    findings.note(
        "peak RSS of the test process (operator, simulator and test clients)",
        format!(
            "{:.1} MiB (bound: {} MiB)",
            peak as f64 / 1048576.0,
            PEAK_RSS_BOUND >> 20
        ),
    );
    assert!(peak <= PEAK_RSS_BOUND, "peak RSS {peak} bytes");
    println!("{}", findings.lines.join("\n"));
}

/// The chart's default memory limit.
const PEAK_RSS_BOUND: u64 = 256 << 20;

/// This process's peak resident set (`VmHWM`), in bytes.
fn peak_rss_bytes() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|line| line.starts_with("VmHWM:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum OutagePhase {
    /// The latency spike of the first 20 s.
    Spike,
    /// Malformed answers, one after the other (since when the current one is served, its index).
    Bodies(Instant, usize),
    /// Waiting until a third of the machines are Ready.
    BeforeOutage,
    Outage(Instant),
    After,
}

/// A machine for a timeout message: name, VM and its engine status, and its conditions (all, or only those not
/// True).
fn describe(machine: &OVirtMachine, control: &capov_ovirt_sim::Control, all_conditions: bool) -> String {
    let conditions: Vec<String> = machine
        .status
        .iter()
        .flat_map(|s| s.conditions.iter())
        .filter(|c| all_conditions || c.status != ConditionStatus::True)
        .map(|c| format!("{} {:?} {} {:?}", c.type_, c.status, c.reason, c.message))
        .collect();
    let vm = machine
        .spec
        .provider_id
        .as_deref()
        .and_then(|id| id.strip_prefix("ovirt://"));
    let vm_status = vm.and_then(|id| control.vm(id)).map(|vm| vm.status);
    format!("{:?} vm {vm:?} {vm_status:?}: {conditions:?}", machine.metadata.name)
}

/// Engine reads of VMs (`GET /vms…`) received so far.
fn vm_reads(control: &capov_ovirt_sim::Control) -> u64 {
    control
        .counters()
        .iter()
        .filter(|(key, _)| key.starts_with("GET /vms"))
        .map(|(_, count)| count)
        .sum()
}

fn vms_per_name(control: &capov_ovirt_sim::Control, names: &[String]) -> BTreeMap<String, usize> {
    let vms = control.vms();
    names
        .iter()
        .map(|name| (name.clone(), vms.iter().filter(|vm| &vm.name == name).count()))
        .collect()
}
