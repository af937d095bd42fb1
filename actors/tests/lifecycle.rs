//! A machine's whole life on a real kube-apiserver with the engine simulator: from nothing to Ready through the
//! documented conditions, the workload Node's providerID, and deletion back to nothing.

mod support;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use capov_crds::{ConditionStatus, OVirtMachine, Severity};
use capov_ovirt_sim::Transition;
use capov_testkit::eventually;
use futures::StreamExt;
use kube::api::{Api, DeleteParams};
use kube::runtime::{WatchStreamExt, watcher};
use serde_json::json;
use support::{World, condition, events_about, metric_sum};

#[tokio::test]
async fn a_machine_goes_from_nothing_to_ready_and_back_to_nothing() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let mut world = World::new("lifecycle").await;

    let api: Api<OVirtMachine> = Api::namespaced(world.client.clone(), &world.namespace);
    // The VM stays image-locked, then powering up, until the test has seen each state reported (a timer would race
    // the status writer).
    world.sim.control().hold(Transition::VmImagesReady);
    world.sim.control().hold(Transition::VmUp);
    world.start_operator().await;
    world
        .create_machine(
            "worker-0",
            json!({"ovirtcluster": "Default", "template": "ubuntu-22.04", "osdisksizegb": 30,
                   "cpu": {"sockets": 1, "cores": 2, "threads": 1}, "memory": {"sizemb": 4096, "guaranteedmb": 2048},
                   "nics": [{"vnicprofile": "ovirtmgmt"}]}),
        )
        .await;

    // While its disks are copied the VM exists in the engine under CAPOV's marker and MachineCreated says so;
    // spec.providerID (write-once) waits until the copy is done, since a create can still vanish until then.
    eventually(Duration::from_secs(60), "MachineCreated VMImageLocked", || async {
        let machine = world.machine("worker-0").await;
        condition(&machine, "MachineCreated")
            .is_some_and(|c| c.reason == "VMImageLocked")
            .then_some(())
    })
    .await;
    let locked = world
        .sim
        .control()
        .vm_by_name("worker-0")
        .expect("the VM exists in the engine");
    assert_eq!(locked.status, "image_locked");
    assert_eq!(world.machine("worker-0").await.spec.provider_id, None);
    world.sim.control().release(Transition::VmImagesReady);
    let vm_id = world.vm_id("worker-0").await;
    assert_eq!(vm_id, locked.id, "the providerID names the VM created");

    // On the way, the documents' §5.3 example state: everything before MachineOn True, MachineOn powering up.
    eventually(Duration::from_secs(60), "the documented powering-up state", || async {
        let machine = world.machine("worker-0").await;
        documented_powering_up(&machine).then_some(())
    })
    .await;
    world.sim.control().release(Transition::VmUp);

    // Up, but no Node yet: K8sProviderIDSetup waits (Info) and Ready is not True.
    let waiting = eventually(Duration::from_secs(60), "WaitingForNode", || async {
        let machine = world.machine("worker-0").await;
        let up = machine.status.as_ref().is_some_and(|s| s.ready);
        let waiting = condition(&machine, "K8sProviderIDSetup").is_some_and(|c| c.reason == "WaitingForNode");
        (up && waiting).then_some(machine)
    })
    .await;
    assert_eq!(
        condition(&waiting, "K8sProviderIDSetup").and_then(|c| c.severity),
        Some(Severity::Info)
    );
    assert_ne!(
        condition(&waiting, "Ready").map(|c| c.status),
        Some(ConditionStatus::True)
    );
    // The kubelet registers; CAPOV sets the Node's providerID.
    world.register_node("worker-0-node", &vm_id.to_uppercase()).await;
    eventually(Duration::from_secs(60), "the Node's providerID", || async {
        world
            .node_provider_id("worker-0-node")
            .await
            .filter(|id| *id == format!("ovirt://{vm_id}"))
    })
    .await;
    let machine = eventually(Duration::from_secs(60), "Ready", || async {
        let machine = world.machine("worker-0").await;
        condition(&machine, "Ready")
            .is_some_and(|c| c.status == ConditionStatus::True)
            .then_some(machine)
    })
    .await;
    // An Event for each step reached (SPEC §4), none for the waits the test held it in on the way (VMImageLocked,
    // VMPoweringUp, WaitingForNode): their conditions showed them.
    let steps = [
        "Connected",
        "VMCreated",
        "DisksReady",
        "NetworkSet",
        "VMUp",
        "ProviderIDSet",
    ];
    let reasons = event_reasons_once(&world, "worker-0", &steps).await;
    for wait in ["VMImageLocked", "VMPoweringUp", "WaitingForNode"] {
        assert!(
            !reasons.iter().any(|r| r == wait),
            "an Event for the wait {wait}: {reasons:?}"
        );
    }
    let status = machine.status.clone().expect("status");
    for type_ in [
        "CanConnectToOVirt",
        "MachineCreated",
        "MachineDiskResized",
        "MachineNetworkSet",
        "MachineOn",
        "K8sProviderIDSetup",
    ] {
        let c = condition(&machine, type_).unwrap_or_else(|| panic!("{type_} missing"));
        assert_eq!(c.status, ConditionStatus::True, "{type_}: {c:?}");
        assert!(!c.reason.is_empty(), "{type_} has no reason");
    }
    assert_eq!(
        condition(&machine, "Paused").map(|c| c.status),
        Some(ConditionStatus::False)
    );
    assert_eq!(status.initialization.and_then(|i| i.provisioned), Some(true));
    assert_eq!(status.vm_status.as_deref(), Some("up"));
    let addresses = eventually(Duration::from_secs(30), "an InternalIP", || async {
        let machine = world.machine("worker-0").await;
        let addresses = machine.status.map(|s| s.addresses).unwrap_or_default();
        addresses.iter().any(|a| a.type_ == "InternalIP").then_some(addresses)
    })
    .await;
    assert!(
        addresses
            .iter()
            .any(|a| a.type_ == "InternalDNS" && a.address == "worker-0"),
        "{addresses:?}"
    );
    assert!(
        addresses
            .iter()
            .all(|a| !a.address.starts_with("fe80") && !a.address.starts_with("169.254")),
        "{addresses:?}"
    );

    // The engine's VM matches the spec.
    let vm = world.sim.control().vm(&vm_id).expect("vm");
    assert_eq!(vm.status, "up");
    let boot = vm.disks.iter().find(|d| d.bootable).expect("boot disk");
    assert_eq!(boot.provisioned_size, 30 << 30);

    // What the runtime did shows in its metrics.
    let metrics = &world.metrics;
    let provider = world.provider.as_str();
    // Every request the engine received was counted (equal once no request is in flight).
    eventually(
        Duration::from_secs(10),
        "engine request metrics = the engine's own count",
        || async {
            let counted = metric_sum(metrics, "capov_engine_requests_total", &[("provider", provider)]);
            let received = world.sim.control().counter("total") as f64;
            (counted == received && counted > 0.0).then_some(())
        },
    )
    .await;
    assert!(
        metric_sum(
            metrics,
            "capov_engine_request_duration_seconds",
            &[("provider", provider)]
        ) > 0.0
    );
    assert!(
        metric_sum(
            metrics,
            "capov_reconciles_total",
            &[("kind", "machine"), ("result", "requeue")]
        ) >= 1.0
    );
    assert!(
        metric_sum(
            metrics,
            "capov_reconciles_total",
            &[("kind", "provider"), ("result", "success")]
        ) >= 1.0
    );
    assert!(
        metric_sum(
            metrics,
            "capov_status_writes_total",
            &[("kind", "machine"), ("result", "success")]
        ) >= 1.0
    );
    // Ready, the machine has nothing to do until something changes: its actor stops and the supervisor keeps its
    // state (the deletion below wakes it).
    eventually(
        Duration::from_secs(30),
        "the Ready machine to rest without an actor",
        || async {
            let live = metric_sum(metrics, "capov_actors_live", &[("kind", "machine")]);
            let dormant = metric_sum(metrics, "capov_machines_dormant", &[]);
            (live == 0.0 && dormant == 1.0).then_some(())
        },
    )
    .await;
    for kind in ["supervisor", "provider", "status-writer"] {
        assert_eq!(
            metric_sum(metrics, "capov_actors_live", &[("kind", kind)]),
            1.0,
            "live {kind} actors"
        );
    }
    for kind in ["supervisor", "provider", "machine", "status-writer"] {
        assert!(
            metric_sum(metrics, "capov_actor_messages_total", &[("kind", kind)]) >= 1.0,
            "{kind} messages"
        );
        let depth = metric_sum(metrics, "capov_actor_mailbox_depth", &[("kind", kind)]);
        assert!(
            depth >= 0.0,
            "{kind} mailbox depth {depth}: a message was counted out that was never counted in"
        );
    }

    // Deletion: the VM goes, then the finalizer.
    api.delete("worker-0", &DeleteParams::default()).await.expect("delete");
    eventually(Duration::from_secs(60), "the OVirtMachine to be gone", || async {
        api.get_opt("worker-0").await.expect("get").is_none().then_some(())
    })
    .await;
    assert!(world.sim.control().vm(&vm_id).is_none(), "the VM outlived its machine");
    // The deletion's steps are Info and never end True; each is recorded all the same.
    event_reasons_once(&world, "worker-0", &["VMDeleting"]).await;
    // Every body CAPOV sent (add with disks and NICs, disk resize, start, description upgrade) passed the engine's
    // model check.
    assert_eq!(
        world.sim.control().rejected_bodies(),
        std::collections::BTreeMap::new(),
        "request bodies a real engine refuses"
    );
    eventually(
        Duration::from_secs(10),
        "the machine actor to stop, its state forgotten",
        || async {
            let live = metric_sum(&world.metrics, "capov_actors_live", &[("kind", "machine")]);
            let dormant = metric_sum(&world.metrics, "capov_machines_dormant", &[]);
            (live == 0.0 && dormant == 0.0).then_some(())
        },
    )
    .await;
    world.stop_operator().await;
}

/// A Ready machine rests without an actor (`machine::dormant`) and keeps what it holds: each time its resync timer
/// comes round, the timer's tick finds no actor, the supervisor wakes the machine with its state, the pass decides
/// from the snapshot the provider's search delivered (no read of the VM), and the machine rests again.
#[tokio::test]
async fn a_dormant_machine_wakes_for_its_resync_and_rests_again() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let mut world = World::new("dormant").await;
    let settings = capov_actors::runtime::RuntimeSettings {
        sync_period: Duration::from_secs(2),
        ..world.settings()
    };
    world.start_operator_with(settings).await;
    world.bring_to_ready("worker-0").await;
    let metrics = &world.metrics;
    let at_rest = || {
        let live = metric_sum(metrics, "capov_actors_live", &[("kind", "machine")]);
        let dormant = metric_sum(metrics, "capov_machines_dormant", &[]);
        live == 0.0 && dormant == 1.0
    };
    let passes = || metric_sum(metrics, "capov_reconciles_total", &[("kind", "machine")]);
    eventually(Duration::from_secs(30), "the Ready machine at rest", || async {
        at_rest().then_some(())
    })
    .await;
    let control = world.sim.control();
    let vm_reads = control.counter("GET /vms/{id}");
    let before = passes();
    // Three resyncs of a 2 s sync period (jittered); nothing else in this steady world passes the machine so often.
    eventually(Duration::from_secs(30), "three resync passes", || async {
        (passes() >= before + 3.0).then_some(())
    })
    .await;
    eventually(Duration::from_secs(30), "the machine at rest again", || async {
        at_rest().then_some(())
    })
    .await;
    assert_eq!(
        control.counter("GET /vms/{id}"),
        vm_reads,
        "a woken machine read its VM instead of deciding from the snapshot it kept"
    );
    let machine = world.machine("worker-0").await;
    assert_eq!(
        condition(&machine, "Ready").map(|c| c.status),
        Some(ConditionStatus::True)
    );
    world.stop_operator().await;
}

/// Once Ready, a machine costs the engine only its share of the provider's batched search (every 12 polls), not
/// reads of its own; a VM stopped behind CAPOV's back is still noticed through that search.
#[tokio::test]
async fn a_ready_machine_is_watched_by_the_batched_search_alone() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let mut world = World::new("steady").await;
    world.start_operator().await;
    let vm_id = world.bring_to_ready("worker-0").await;

    let control = world.sim.control();
    let searches = || control.counter("GET /vms");
    let searches_after = |floor: u64| async move {
        eventually(Duration::from_secs(30), "batched status searches", || async {
            (searches() >= floor).then_some(())
        })
        .await
    };
    // Let the pass that wrote Ready finish, then count over three steady polls.
    searches_after(searches() + 1).await;
    let vm_reads = control.counter("GET /vms/{id}");
    searches_after(searches() + 3).await;
    assert_eq!(
        control.counter("GET /vms/{id}"),
        vm_reads,
        "a Ready machine read its VM between sync periods"
    );
    for per_vm in [
        "GET /vms/{id}/nics",
        "GET /vms/{id}/reporteddevices",
        "GET /vms/{id}/diskattachments",
    ] {
        assert_eq!(control.counter(per_vm), 0, "{per_vm}: the VM read should inline it");
    }

    control
        .set_vm_status(&vm_id, "down")
        .expect("stop the VM in the engine");
    let machine = world
        .wait_reason(Duration::from_secs(30), "worker-0", "MachineOn", "VMDown")
        .await;
    assert_eq!(
        condition(&machine, "MachineOn").and_then(|c| c.severity),
        Some(Severity::Warning)
    );
    assert!(machine.status.is_some_and(|s| s.ready), "status.ready stays set");
    world.stop_operator().await;
}

/// The provider's credentials Secret exists before the operator starts, among many other Secrets whose list takes a
/// while: the provider is never reported without it (it used to show CredentialsNotFound for a moment whenever the
/// provider watch answered before the Secret watch).
#[tokio::test]
async fn an_operator_start_never_reports_an_existing_secret_missing() {
    use capov_crds::OVirtProvider;

    let _ = rustls::crypto::ring::default_provider().install_default();
    let mut world = World::new("start-secrets").await;
    futures::stream::iter(0..400)
        .for_each_concurrent(16, |n| {
            let world = &world;
            async move { world.create_secret(&format!("filler-{n}"), &[("value", "x")]).await }
        })
        .await;
    let reasons: Arc<Mutex<Vec<String>>> = Arc::default();
    let api: Api<OVirtProvider> = Api::all(world.client.clone());
    let config = watcher::Config::default().fields(&format!("metadata.name={}", world.provider));
    let recorder = {
        let reasons = reasons.clone();
        let stream = watcher(api, config).applied_objects();
        tokio::spawn(async move {
            let mut stream = std::pin::pin!(stream);
            while let Some(Ok(provider)) = stream.next().await {
                let conditions = provider.status.map(|s| s.conditions).unwrap_or_default();
                reasons
                    .lock()
                    .expect("lock")
                    .extend(conditions.into_iter().map(|c| c.reason.into_owned()));
            }
        })
    };
    world.start_operator().await;
    eventually(Duration::from_secs(60), "the provider connected", || async {
        reasons
            .lock()
            .expect("lock")
            .iter()
            .any(|r| r == "Connected")
            .then_some(())
    })
    .await;
    recorder.abort();
    let reasons = reasons.lock().expect("lock").clone();
    assert!(
        !reasons.iter().any(|r| r == "CredentialsNotFound"),
        "reported at start: {reasons:?}"
    );
    world.stop_operator().await;
}

/// A Ready machine learns of a new address through its provider's batched search (once a minute in production,
/// every 12 polls here: 2.4 s), never by reading its own VM: its resyncs (every 2 s here) decide from what the
/// search handed over.
#[tokio::test]
async fn a_ready_machine_sees_a_new_address_through_the_batched_search_without_reading_its_vm() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let mut world = World::new("resync").await;
    let settings = capov_actors::runtime::RuntimeSettings {
        sync_period: Duration::from_secs(2),
        ..world.settings()
    };
    world.start_operator_with(settings).await;
    world.bring_to_ready("worker-0").await;
    let vm_id = world.vm_id("worker-0").await;
    let control = world.sim.control();
    let reads = control.counter("GET /vms/{id}");
    let searches = control.counter("GET /vms");
    control
        .add_guest_address(&vm_id, "10.0.1.200")
        .expect("a VIP on the VM's NIC");
    eventually(
        Duration::from_secs(30),
        "the new address in status.addresses",
        || async {
            let machine = world.machine("worker-0").await;
            machine
                .status
                .as_ref()
                .is_some_and(|s| s.addresses.iter().any(|a| a.address == "10.0.1.200"))
                .then_some(())
        },
    )
    .await;
    assert!(control.counter("GET /vms") > searches, "seen without a search");
    assert_eq!(
        control.counter("GET /vms/{id}"),
        reads,
        "the machine read its VM itself instead of deciding from the search"
    );
    world.stop_operator().await;
}

/// Liveness: when the status writer dies, the runtime stops (the process then exits non-zero and is restarted)
/// instead of running actors whose results reach nobody; a fresh runtime brings the machine to Ready.
#[tokio::test]
async fn a_dead_status_writer_stops_the_runtime_and_a_restart_converges() {
    use capov_actors::runtime::status::writer::StatusWriterMsg;

    let mut world = World::new("liveness").await;
    world.start_operator().await;
    let supervisor = world.operator.clone().expect("runtime");
    let writer = supervisor
        .get_cell()
        .get_children()
        .into_iter()
        .find(|child| child.is_message_type_of::<StatusWriterMsg>() == Some(true))
        .expect("the status writer is a child of the supervisor");
    world
        .create_machine("worker", json!({"ovirtcluster": "Default", "template": "ubuntu-22.04"}))
        .await;
    writer.stop(Some("killed by the test".into()));
    tokio::time::timeout(
        Duration::from_secs(30),
        capov_actors::runtime::stopped(supervisor.clone()),
    )
    .await
    .expect("the runtime stopped within 30 s of losing its status writer");
    world.operator = None;

    world.start_operator().await;
    let vm_id = world.vm_id("worker").await;
    world.register_node("worker-node", &vm_id).await;
    eventually(Duration::from_secs(60), "worker Ready after the restart", || async {
        let machine = world.machine("worker").await;
        condition(&machine, "Ready")
            .is_some_and(|c| c.status == ConditionStatus::True)
            .then_some(())
    })
    .await;
    println!("liveness: killing the status writer stopped the runtime; a fresh runtime brought the machine to Ready");
    world.stop_operator().await;
}

/// The reasons of the Events about the OVirtMachine `name`, once there is an Event of each of `expected` (Events
/// are written in the background, a few at once, so in no fixed order).
async fn event_reasons_once(world: &World, name: &str, expected: &[&str]) -> Vec<String> {
    eventually(Duration::from_secs(60), format!("the Events {expected:?}"), || async {
        let events = events_about(&world.client, &world.namespace, name).await?;
        let reasons: Vec<String> = events.into_iter().filter_map(|e| e.reason).collect();
        expected
            .iter()
            .all(|reason| reasons.iter().any(|r| r == reason))
            .then_some(reasons)
    })
    .await
}

/// The documents' §5.3 example: everything before MachineOn True, MachineOn False "powering up" (Info).
fn documented_powering_up(machine: &OVirtMachine) -> bool {
    let on = condition(machine, "MachineOn");
    on.is_some_and(|c| {
        c.status == ConditionStatus::False
            && c.reason == "VMPoweringUp"
            && c.severity == Some(Severity::Info)
            && c.message == "powering up"
    }) && [
        "CanConnectToOVirt",
        "MachineCreated",
        "MachineDiskResized",
        "MachineNetworkSet",
    ]
    .iter()
    .all(|t| condition(machine, t).is_some_and(|c| c.status == ConditionStatus::True))
}

/// What a user acts on in a machine's status (the operator writes a change of it at once): Ready, a failure, the
/// warnings and errors, pause, a deletion's steps, a Ready machine's addresses.
fn headline(machine: &OVirtMachine) -> String {
    let Some(status) = &machine.status else {
        return String::new();
    };
    let mut parts = vec![format!("ready={} failure={:?}", status.ready, status.failure_reason)];
    if status.ready {
        parts.extend(status.addresses.iter().map(|a| format!("{}={}", a.type_, a.address)));
    }
    for c in &status.conditions {
        if c.type_ == "Ready" || c.type_ == "Paused" {
            parts.push(format!("{}={:?}", c.type_, c.status));
        } else if c.type_ == "MachineDeleted" {
            parts.push(format!("{}={:?}:{}", c.type_, c.status, c.reason));
        } else if c.status == ConditionStatus::False && matches!(c.severity, Some(Severity::Warning | Severity::Error))
        {
            parts.push(format!("{}:{}", c.type_, c.reason));
        }
    }
    parts.join(" ")
}

/// With the operator's status spacing a machine's steps are not written one by one: two writes of its status that
/// change only progress lie at least the spacing apart, the steps between coalesce, and a step the machine then
/// stays in (waiting for its Node) still shows, within the spacing.
#[tokio::test]
async fn progress_is_written_at_most_once_per_spacing_and_a_lasting_step_still_shows() {
    const SPACING: Duration = Duration::from_secs(4);
    // Watch deliveries lag their writes by varying apiserver latency.
    const LAG: Duration = Duration::from_millis(800);
    let _ = rustls::crypto::ring::default_provider().install_default();
    let mut world = World::new("spacing").await;
    let api: Api<OVirtMachine> = Api::namespaced(world.client.clone(), &world.namespace);
    let seen: Arc<Mutex<Vec<(std::time::Instant, String, String)>>> = Arc::default();
    let watch = {
        let seen = seen.clone();
        let config = watcher::Config::default().fields("metadata.name=worker-0");
        tokio::spawn(async move {
            let mut stream = std::pin::pin!(watcher(api, config).applied_objects());
            while let Some(Ok(machine)) = stream.next().await {
                let status = serde_json::to_string(&machine.status).unwrap_or_default();
                let mut seen = seen.lock().unwrap();
                if seen.last().is_none_or(|(_, last, _)| *last != status) && machine.status.is_some() {
                    seen.push((std::time::Instant::now(), status, headline(&machine)));
                }
            }
        })
    };
    let settings = capov_actors::runtime::RuntimeSettings {
        status_spacing: SPACING,
        ..world.settings()
    };
    world.start_operator_with(settings).await;
    world
        .create_machine(
            "worker-0",
            json!({"ovirtcluster": "Default", "template": "ubuntu-22.04"}),
        )
        .await;
    world
        .wait_reason(
            Duration::from_secs(60),
            "worker-0",
            "K8sProviderIDSetup",
            "WaitingForNode",
        )
        .await;
    let vm_id = world.vm_id("worker-0").await;
    world.register_node("worker-0-node", &vm_id).await;
    world
        .wait_reason(Duration::from_secs(60), "worker-0", "Ready", "Ready")
        .await;
    watch.abort();

    let seen = seen.lock().unwrap().clone();
    assert!(seen.len() >= 2, "the first status and Ready: {seen:?}");
    for pair in seen.windows(2) {
        let ((before, _, before_headline), (after, status, after_headline)) = (&pair[0], &pair[1]);
        if before_headline == after_headline {
            assert!(
                after.duration_since(*before) + LAG >= SPACING,
                "progress written {:?} after the last write, under the spacing: {status}",
                after.duration_since(*before)
            );
        }
    }
    let coalesced = metric_sum(
        &world.metrics,
        "capov_status_updates_coalesced_total",
        &[("kind", "machine")],
    );
    assert!(coalesced >= 1.0, "the steps within the spacing coalesce: {coalesced}");
    world.stop_operator().await;
}
