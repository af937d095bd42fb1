//! Plain http engines on a real kube-apiserver with the engine simulator: they work, and every status that says
//! so also says that the connection is not encrypted.

mod support;

use std::time::Duration;

use capov_crds::{ConditionStatus, OVirtProvider};
use capov_testkit::eventually;
use k8s_openapi::api::events::v1::Event;
use kube::api::Api;
use serde_json::json;
use support::{World, condition, events_about};

const MINUTE: Duration = Duration::from_secs(60);

#[tokio::test]
async fn a_plain_http_engine_connects_and_every_connection_condition_says_it_is_insecure() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let mut world = World::new_plain_http("plainhttp").await;
    assert!(world.sim.api_url().starts_with("http://"), "{}", world.sim.api_url());
    world.start_operator().await;

    let providers: Api<OVirtProvider> = Api::all(world.client.clone());
    let status = eventually(MINUTE, "provider Ready", || async {
        let status = providers.get(&world.provider).await.ok()?.status?;
        status.ready.then_some(status)
    })
    .await;
    let reported = |type_: &str| {
        status
            .conditions
            .iter()
            .find(|c| c.type_ == type_)
            .map(|c| (c.status, c.reason.to_string(), c.message.clone()))
    };
    for type_ in ["CanConnectToOVirt", "Ready"] {
        let (state, reason, message) = reported(type_).unwrap_or_else(|| panic!("provider {type_}"));
        assert_eq!(
            (state, reason.as_ref()),
            (ConditionStatus::True, "InsecureTransport"),
            "{type_}"
        );
        assert!(
            message.contains("unencrypted") && message.contains("https://"),
            "{type_}: {message}"
        );
    }

    world
        .create_machine(
            "worker-0",
            json!({"ovirtcluster": "Default", "template": "ubuntu-22.04"}),
        )
        .await;
    let vm_id = world.vm_id("worker-0").await;
    world.register_node("worker-0-node", &vm_id).await;
    let machine = eventually(MINUTE, "machine Ready", || async {
        let machine = world.machine("worker-0").await;
        condition(&machine, "Ready")
            .is_some_and(|c| c.status == ConditionStatus::True)
            .then_some(machine)
    })
    .await;
    let connected = condition(&machine, "CanConnectToOVirt").expect("machine CanConnectToOVirt");
    assert_eq!(connected.status, ConditionStatus::True);
    assert_eq!(connected.reason, "InsecureTransport");
    assert!(connected.message.contains("unencrypted"), "{}", connected.message);

    // Events of cluster-scoped objects live in the default namespace.
    let warnings = eventually(MINUTE, "InsecureTransport Event", || async {
        let ours: Vec<Event> = events_about(&world.client, "default", &world.provider)
            .await?
            .into_iter()
            .filter(|e| e.reason.as_deref() == Some("InsecureTransport"))
            .collect();
        (!ours.is_empty()).then_some(ours)
    })
    .await;
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    let warning = &warnings[0];
    assert_eq!(warning.type_.as_deref(), Some("Warning"));
    assert_eq!(
        warning.regarding.as_ref().and_then(|r| r.kind.as_deref()),
        Some("OVirtProvider")
    );
    assert!(warning.series.is_none(), "recorded once: {:?}", warning.series);
    let note = warning.note.clone().unwrap_or_default();
    assert!(
        note.contains("unencrypted") && note.contains(world.sim.base_url()),
        "{note}"
    );
    world.stop_operator().await;
}
