//! An engine outage shows on the provider and on the machines that need the engine, and both recover by themselves
//! once the engine answers again (SPEC §2 step 2): the provider re-checks its connection on a timer and whenever a
//! request of its machines fails. Real kube-apiserver; the engine simulator either answers 503 to everything (a
//! proxy in front of a stopped engine) or refuses connections (the engine's host is down).

mod support;

use std::time::Duration;

use capov_crds::{ConditionStatus, OVirtProvider};
use capov_testkit::eventually;
use kube::api::Api;
use serde_json::json;
use support::{World, condition};

const MINUTE: Duration = Duration::from_secs(60);

#[derive(Clone, Copy, Debug)]
enum Outage {
    Answers503,
    RefusedConnections,
}

impl Outage {
    fn set(self, world: &World, on: bool) {
        match self {
            Outage::Answers503 => world.sim.control().set_outage(on),
            Outage::RefusedConnections => world.sim.control().set_refusing_connections(on),
        }
    }
}

#[tokio::test]
async fn an_outage_shows_as_engine_unreachable_and_heals_by_itself() {
    outage_heals(Outage::Answers503, "outage").await;
}

#[tokio::test]
async fn refused_connections_show_as_engine_unreachable_and_heal_by_themselves() {
    outage_heals(Outage::RefusedConnections, "refused").await;
}

async fn outage_heals(outage: Outage, prefix: &str) {
    let mut world = World::new(prefix).await;
    world.start_operator().await;
    let providers = Api::<OVirtProvider>::all(world.client.clone());
    let provider_reason = |provider: &OVirtProvider| {
        provider
            .status
            .as_ref()
            .and_then(|s| s.conditions.iter().find(|c| c.type_ == "CanConnectToOVirt"))
            .map(|c| (c.status, c.reason.to_string()))
    };
    eventually(MINUTE, "provider connected", || async {
        let provider = providers.get(&world.provider).await.ok()?;
        (provider_reason(&provider)? == (ConditionStatus::True, "Connected".into())).then_some(())
    })
    .await;

    outage.set(&world, true);
    world
        .create_machine(
            "during-outage",
            json!({"ovirtcluster": "Default", "template": "ubuntu-22.04"}),
        )
        .await;
    eventually(MINUTE, "provider EngineUnreachable", || async {
        let provider = providers.get(&world.provider).await.ok()?;
        (provider_reason(&provider)? == (ConditionStatus::False, "EngineUnreachable".into())).then_some(())
    })
    .await;
    let machine = world
        .wait_reason(MINUTE, "during-outage", "CanConnectToOVirt", "EngineUnreachable")
        .await;
    let connect = condition(&machine, "CanConnectToOVirt").expect("condition");
    assert_eq!(connect.status, ConditionStatus::False);
    assert!(
        machine
            .status
            .as_ref()
            .and_then(|s| s.failure_reason.as_ref())
            .is_none(),
        "an outage is transient, never a failureReason"
    );
    assert_eq!(world.sim.control().vm_count(), 0);

    outage.set(&world, false);
    eventually(MINUTE, "provider connected again", || async {
        let provider = providers.get(&world.provider).await.ok()?;
        (provider_reason(&provider)? == (ConditionStatus::True, "Connected".into())).then_some(())
    })
    .await;
    world.vm_id("during-outage").await;
    world
        .wait_reason(MINUTE, "during-outage", "CanConnectToOVirt", "Connected")
        .await;
    println!(
        "outage ({outage:?}): provider and machine showed EngineUnreachable; after the outage both went back to \
         Connected and the machine got its VM, with no restart and no failureReason"
    );
    world.stop_operator().await;
}
