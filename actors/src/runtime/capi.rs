//! The Cluster API objects CAPOV reads (Machine, Cluster) at the storage version of current CAPI core, and the
//! few facts it needs from them.

use kube::api::{ApiResource, DynamicObject};
use kube::core::GroupVersionKind;
use serde_json::Value;

pub fn machine_resource() -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("cluster.x-k8s.io", "v1beta2", "Machine"),
        "machines",
    )
}

pub fn cluster_resource() -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("cluster.x-k8s.io", "v1beta2", "Cluster"),
        "clusters",
    )
}

fn field<'a>(object: &'a DynamicObject, path: &[&str]) -> Option<&'a Value> {
    path.iter().try_fold(&object.data, |value, key| value.get(*key))
}

/// `Cluster.spec.paused`.
pub fn cluster_paused(cluster: &DynamicObject) -> bool {
    field(cluster, &["spec", "paused"])
        .and_then(Value::as_bool)
        .unwrap_or(false)
}

/// The Cluster's infrastructure is provisioned (v1beta2 `status.initialization.infrastructureProvisioned`, or the
/// v1beta1 `status.infrastructureReady`).
pub fn cluster_infrastructure_provisioned(cluster: &DynamicObject) -> bool {
    field(cluster, &["status", "initialization", "infrastructureProvisioned"])
        .and_then(Value::as_bool)
        .unwrap_or(false)
        || field(cluster, &["status", "infrastructureReady"])
            .and_then(Value::as_bool)
            .unwrap_or(false)
}

/// `Machine.spec.bootstrap.dataSecretName`.
pub fn machine_bootstrap_secret(machine: &DynamicObject) -> Option<String> {
    field(machine, &["spec", "bootstrap", "dataSecretName"])
        .and_then(Value::as_str)
        .map(String::from)
}

/// `Machine.spec.clusterName`.
pub fn machine_cluster_name(machine: &DynamicObject) -> Option<String> {
    field(machine, &["spec", "clusterName"])
        .and_then(Value::as_str)
        .map(String::from)
}

/// `Machine.spec.infrastructureRef.name`: the OVirtMachine of this Machine.
pub fn machine_infrastructure_name(machine: &DynamicObject) -> Option<String> {
    field(machine, &["spec", "infrastructureRef", "name"])
        .and_then(Value::as_str)
        .map(String::from)
}
