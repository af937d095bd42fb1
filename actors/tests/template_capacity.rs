//! What the cluster autoscaler reads to scale a MachineDeployment up from zero (CAPI's autoscaling-from-zero
//! contract): each OVirtMachineTemplate's status.capacity and status.nodeInfo, as CAPOV writes them on a real
//! kube-apiserver, computed from the template's spec and kept current when the spec changes.

mod support;

use std::time::Duration;

use capov_crds::OVirtMachineTemplate;
use capov_testkit::eventually;
use kube::api::{Api, DynamicObject, Patch, PatchParams, PostParams};
use kube::discovery::ApiResource;
use serde_json::{Value, json};
use support::World;

const MINUTE: Duration = Duration::from_secs(60);

/// The template's status as the autoscaler's clusterapi provider reads it: unstructured, `status.capacity` and
/// `status.nodeInfo` as plain JSON.
async fn raw_status(world: &World, name: &str) -> Option<Value> {
    let resource = ApiResource::erase::<OVirtMachineTemplate>(&());
    let api: Api<DynamicObject> = Api::namespaced_with(world.client.clone(), &world.namespace, &resource);
    api.get(name).await.ok()?.data.get("status").cloned()
}

#[tokio::test]
async fn template_capacity_follows_the_spec() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let mut world = World::new("tplcap").await;
    world.start_operator().await;

    let templates: Api<OVirtMachineTemplate> = Api::namespaced(world.client.clone(), &world.namespace);
    let template: OVirtMachineTemplate = serde_json::from_value(json!({
        "apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1",
        "kind": "OVirtMachineTemplate",
        // The runtime under test honours the watch filter label, as for every object it acts on.
        "metadata": {"name": "workers", "labels": world.labels()},
        "spec": {"template": {"spec": {
            "provider": world.provider, "ovirtcluster": "Default", "template": "ubuntu-22.04",
            "cpu": {"sockets": 1, "cores": 4, "threads": 2},
            "memory": {"sizemb": 8192},
            "osdisksizegb": 50
        }}}
    }))
    .expect("template");
    templates
        .create(&PostParams::default(), &template)
        .await
        .expect("create template");

    let expected = json!({
        "capacity": {"cpu": "8", "memory": "8192Mi", "ephemeral-storage": "50Gi"},
        "nodeInfo": {"operatingSystem": "linux"}
    });
    eventually(MINUTE, "capacity from the spec", || async {
        (raw_status(&world, "workers").await? == expected).then_some(())
    })
    .await;

    // More memory, and the disk size left to the oVirt template: memory follows, ephemeral-storage goes.
    let change = json!({"spec": {"template": {"spec": {"memory": {"sizemb": 16384}, "osdisksizegb": null}}}});
    templates
        .patch("workers", &PatchParams::default(), &Patch::Merge(&change))
        .await
        .expect("patch template");
    let expected = json!({
        "capacity": {"cpu": "8", "memory": "16384Mi"},
        "nodeInfo": {"operatingSystem": "linux"}
    });
    eventually(MINUTE, "capacity after the spec changed", || async {
        (raw_status(&world, "workers").await? == expected).then_some(())
    })
    .await;

    world.stop_operator().await;
}
