//! kube-apiserver restarted under a leader-elected `manager` in the middle of a scale-up (etcd and its data kept):
//! the apiserver stays away longer than the Lease lasts, so the leader surely loses it. The process does not
//! restart: it stops its controllers, sends no engine write while it cannot renew, takes the Lease again once the
//! apiserver is back, and brings every machine to Ready without a duplicate VM; the deletion then leaves nothing.

mod support;

use std::collections::BTreeSet;
use std::sync::Mutex;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use capov::fence::RENEW_DEADLINE;
use capov::leader::LEASE_DURATION;
use capov_crds::OVirtMachine;
use capov_harness::{ControlPlane, Options, objects};
use capov_testkit::eventually;
use k8s_openapi::api::coordination::v1::Lease;
use kube::api::Api;
use serde_json::json;
use support::{Manager, engine, holder, http, is_ready, labels, register_up_nodes, vms_per_name, wait_all_deleted};

const MACHINES: usize = 8;

fn now_ms() -> u64 {
    u64::try_from(SystemTime::now().duration_since(UNIX_EPOCH).expect("clock").as_millis()).expect("ms")
}

#[tokio::test]
async fn an_apiserver_restart_does_not_restart_the_operator_and_loses_nothing() {
    let mut plane = ControlPlane::start(Options {
        controller_manager: true,
        crds: true,
        capi_crds: true,
        capi_manager: false,
    })
    .await
    .expect("control plane");
    let client = plane.client().await.expect("client");
    let namespace = plane
        .create_namespace(&client, "apiserver-restart")
        .await
        .expect("namespace");
    let leases: Api<Lease> = Api::namespaced(client.clone(), &namespace);
    let machines: Api<OVirtMachine> = Api::namespaced(client.clone(), &namespace);
    let dir = tempfile::tempdir().expect("log dir");
    let http = http();
    let engine = engine(&client, &namespace).await;
    let control = engine.sim.control().clone();
    let workload = engine.workload.client().await.expect("workload client");

    let mut manager = Manager::start(plane.kubeconfig_path(), &namespace, "replica-a", dir.path());
    eventually(Duration::from_secs(60), "the manager to lead", || async {
        (manager.is_holder(holder(&leases).await.as_deref()) && manager.leader_gauge(&http).await == Some(1))
            .then_some(())
    })
    .await;
    let names: Vec<String> = (0..MACHINES).map(|i| format!("worker-{i}")).collect();
    for name in &names {
        let spec = json!({"provider": engine.provider, "ovirtcluster": "Default", "template": "ubuntu-22.04"});
        objects::create_machine(&client, &namespace, "workload", name, labels(&namespace), spec)
            .await
            .expect("machine");
    }

    // Mid-run: some VMs exist, not every machine is Ready.
    let registered = Mutex::new(BTreeSet::new());
    let ready_before = eventually(Duration::from_secs(120), "the scale-up under way", || async {
        let list = register_up_nodes(&machines, &workload, &engine.sim, &registered).await?;
        let ready = list.iter().filter(|m| is_ready(m)).count();
        (control.vm_count() > 0 && ready >= 1).then_some(ready)
    })
    .await;

    let down = LEASE_DURATION + Duration::from_secs(5);
    let killed_ms = now_ms();
    let killed = Instant::now();
    plane.restart_apiserver(down).await.expect("apiserver restart");
    let back_ms = now_ms();
    let back_after = killed.elapsed();

    // The same process leads again, and finishes the scale-up.
    let releaded = eventually(Duration::from_secs(90), "the manager to lead again", || async {
        let lines = manager.messages();
        let terms = lines
            .iter()
            .filter(|m| *m == "became the leader; starting the controllers")
            .count();
        (terms >= 2).then(|| killed.elapsed())
    })
    .await;
    let all_ready = eventually(
        Duration::from_secs(240),
        "every machine Ready after the restart",
        || async {
            let list = register_up_nodes(&machines, &workload, &engine.sim, &registered).await?;
            (list.len() == MACHINES && list.iter().all(is_ready)).then(|| killed.elapsed())
        },
    )
    .await;
    assert!(
        manager.child.try_wait().expect("try_wait").is_none(),
        "the manager exited; log:\n{}",
        manager.log_text()
    );
    let messages = manager.messages();
    for expected in [
        "lost leadership; stopping all controllers",
        "the controllers stopped; standing by again",
    ] {
        assert!(
            messages.iter().any(|m| m == expected),
            "no {expected:?} in the log:\n{}",
            manager.log_text()
        );
    }

    // Fenced: no engine write from the fence's close (at most the renew deadline after the last renewal, which was
    // before the kill) until the apiserver was back.
    let fence_closed_by = killed_ms + RENEW_DEADLINE.as_millis() as u64 + 500;
    let writes = control.writes();
    let during_gap: Vec<_> = writes
        .iter()
        .filter(|w| w.received_ms > fence_closed_by && w.received_ms < back_ms)
        .collect();
    assert!(
        during_gap.is_empty(),
        "engine writes while the Lease could not be renewed: {during_gap:?}"
    );
    let per_name = vms_per_name(&engine.sim, &names);
    assert!(
        per_name.values().all(|count| *count == 1),
        "VMs per machine name: {per_name:?}"
    );

    // The deletion after the restart leaves no VM and no machine.
    for name in &names {
        machines.delete(name, &Default::default()).await.expect("delete");
    }
    wait_all_deleted(&machines, &engine.sim, Duration::from_secs(180)).await;
    assert!(
        manager.child.try_wait().expect("try_wait").is_none(),
        "the manager exited; log:\n{}",
        manager.log_text()
    );
    println!(
        "apiserver restart: injected a SIGKILLed kube-apiserver kept down {} s (ready again after {:.1} s) with {} of \
         {MACHINES} machines Ready; found the same manager process leading again {:.1} s after the kill, 0 engine \
         writes while it could not renew, all Ready {:.1} s after the kill, 1 VM per machine, all deleted after, 0 \
         left",
        down.as_secs(),
        back_after.as_secs_f64(),
        ready_before,
        releaded.as_secs_f64(),
        all_ready.as_secs_f64()
    );
    manager.sigterm();
    let status = manager.wait_exit(Duration::from_secs(30)).await;
    assert!(status.success(), "exit {status}; log:\n{}", manager.log_text());
}
