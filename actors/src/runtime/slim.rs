//! What the runtime keeps of the objects it watches: only what it reads. Every object held per machine is held
//! thousands of times, and the heap profile (docs/benchmarks.md, "Where the memory goes") showed most of an object
//! to be `metadata.managedFields`, which CAPOV never reads (server-side apply computes it on the server): about
//! 15 KB of an OVirtMachine with its conditions, decoded as nested JSON maps. These trims run on each watch event
//! before the object reaches a store, the supervisor or an actor, and on the objects a write returns.

use std::collections::BTreeMap;

use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::{Namespace, Secret};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::DynamicObject;
use serde_json::{Map, Value};

/// The Secret keys the provider reads (`connection::credentials`); a credentials Secret's other keys, and every
/// key of the other Secrets of the namespace (bootstrap data, kubeconfigs), are dropped.
pub const CREDENTIAL_KEYS: [&str; 2] = ["username", "password"];

/// Drops the server-side-apply bookkeeping; the rest of the object stays as it was.
pub fn strip_managed_fields(meta: &mut ObjectMeta) {
    meta.managed_fields = None;
}

/// A CAPOV object (OVirtMachine, OVirtCluster, OVirtProvider): everything but `metadata.managedFields` is read.
pub fn crd<K: kube::Resource>(object: &mut K) {
    strip_managed_fields(object.meta_mut());
}

/// An OVirtMachine a write returned, becoming the machine actor's object.
pub fn own(mut machine: capov_crds::OVirtMachine) -> std::sync::Arc<capov_crds::OVirtMachine> {
    crd(&mut machine);
    std::sync::Arc::new(machine)
}

/// A Namespace: its name and labels (for `spec.allowedNamespaces.selector`), and what identifies the version.
pub fn namespace(namespace: &mut Namespace) {
    let labels = namespace.metadata.labels.take();
    *namespace = Namespace {
        metadata: identity(&namespace.metadata, labels),
        spec: None,
        status: None,
    };
}

/// A Secret of the credentials namespace: only the credential keys of its data.
pub fn secret(secret: &mut Secret) {
    let data: BTreeMap<String, ByteString> = secret
        .data
        .take()
        .unwrap_or_default()
        .into_iter()
        .filter(|(key, _)| CREDENTIAL_KEYS.contains(&key.as_str()))
        .collect();
    *secret = Secret {
        metadata: identity(&secret.metadata, None),
        data: Some(data),
        ..Secret::default()
    };
}

/// The fields of a CAPI Machine that `capi.rs` reads: `spec.clusterName`, `spec.bootstrap.dataSecretName` and
/// `spec.infrastructureRef.name` (which OVirtMachine to wake when the Machine changes).
pub const CAPI_MACHINE_FIELDS: &[&[&str]] = &[
    &["spec", "clusterName"],
    &["spec", "bootstrap", "dataSecretName"],
    &["spec", "infrastructureRef", "name"],
];

/// The fields of a CAPI Cluster that `capi.rs` and the machine passes read.
pub const CAPI_CLUSTER_FIELDS: &[&[&str]] = &[
    &["spec", "paused"],
    &["spec", "controlPlaneEndpoint", "host"],
    &["status", "initialization", "infrastructureProvisioned"],
    &["status", "infrastructureReady"],
];

/// A CAPI object reduced to `fields` (each a path of keys; absent ones stay absent) and its identity.
pub fn capi(object: &mut DynamicObject, fields: &[&[&str]]) {
    let mut kept = Value::Object(Map::new());
    for path in fields {
        let Some(value) = path.iter().try_fold(&object.data, |value, key| value.get(*key)) else {
            continue;
        };
        let Some((last, parents)) = path.split_last() else {
            continue;
        };
        let mut at = &mut kept;
        for key in parents {
            at = match at {
                Value::Object(map) => map.entry(key.to_string()).or_insert_with(|| Value::Object(Map::new())),
                _ => break,
            };
        }
        if let Value::Object(map) = at {
            map.insert(last.to_string(), value.clone());
        }
    }
    object.data = kept;
    object.metadata = identity(&object.metadata, None);
}

/// Name, namespace, uid and resourceVersion (what a store's keys and an ObjectRef need), and `labels` if given.
fn identity(meta: &ObjectMeta, labels: Option<BTreeMap<String, String>>) -> ObjectMeta {
    ObjectMeta {
        name: meta.name.clone(),
        namespace: meta.namespace.clone(),
        uid: meta.uid.clone(),
        resource_version: meta.resource_version.clone(),
        labels,
        ..ObjectMeta::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_capi_machine_keeps_only_what_is_read() {
        let mut machine: DynamicObject = serde_json::from_value(json!({
            "apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Machine",
            "metadata": {"name": "m", "namespace": "ns", "uid": "u", "resourceVersion": "7",
                         "annotations": {"big": "x"}, "labels": {"a": "b"},
                         "managedFields": [{"manager": "capi", "fieldsV1": {"f:spec": {}}}]},
            "spec": {"clusterName": "c", "bootstrap": {"dataSecretName": "s", "configRef": {"name": "k"}},
                     "infrastructureRef": {"name": "om", "kind": "OVirtMachine"}, "version": "v1.36"},
            "status": {"phase": "Running", "conditions": [{"type": "Ready"}]}
        }))
        .expect("machine");
        capi(&mut machine, CAPI_MACHINE_FIELDS);
        assert_eq!(
            machine.data,
            json!({"spec": {"clusterName": "c", "bootstrap": {"dataSecretName": "s"},
                            "infrastructureRef": {"name": "om"}}})
        );
        assert_eq!(machine.metadata.name.as_deref(), Some("m"));
        assert_eq!(machine.metadata.namespace.as_deref(), Some("ns"));
        assert_eq!(machine.metadata.resource_version.as_deref(), Some("7"));
        assert!(machine.metadata.managed_fields.is_none());
        assert!(machine.metadata.annotations.is_none());
    }

    #[test]
    fn a_capi_cluster_keeps_paused_endpoint_and_provisioning() {
        let mut cluster: DynamicObject = serde_json::from_value(json!({
            "apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Cluster",
            "metadata": {"name": "c", "namespace": "ns"},
            "spec": {"paused": true, "controlPlaneEndpoint": {"host": "10.0.0.1", "port": 6443},
                     "topology": {"class": "x"}},
            "status": {"initialization": {"infrastructureProvisioned": true}, "phase": "Provisioned"}
        }))
        .expect("cluster");
        capi(&mut cluster, CAPI_CLUSTER_FIELDS);
        assert_eq!(
            cluster.data,
            json!({"spec": {"paused": true, "controlPlaneEndpoint": {"host": "10.0.0.1"}},
                   "status": {"initialization": {"infrastructureProvisioned": true}}})
        );
    }

    #[test]
    fn a_secret_keeps_only_the_credential_keys() {
        let mut secret: Secret = serde_json::from_value(json!({
            "metadata": {"name": "s", "namespace": "ns", "managedFields": [{"manager": "kubectl"}]},
            "data": {"username": "dQ==", "password": "cA==", "value": "Ym9vdHN0cmFw"}
        }))
        .expect("secret");
        super::secret(&mut secret);
        let keys: Vec<&String> = secret.data.as_ref().expect("data").keys().collect();
        assert_eq!(keys, ["password", "username"]);
        assert!(secret.metadata.managed_fields.is_none());
        assert_eq!(secret.metadata.name.as_deref(), Some("s"));
    }

    #[test]
    fn a_namespace_keeps_its_labels() {
        let mut ns: Namespace = serde_json::from_value(json!({
            "metadata": {"name": "t", "labels": {"team": "a"}, "annotations": {"x": "y"},
                         "managedFields": [{"manager": "kubectl"}]},
            "spec": {"finalizers": ["kubernetes"]}
        }))
        .expect("namespace");
        namespace(&mut ns);
        assert_eq!(
            ns.metadata
                .labels
                .as_ref()
                .and_then(|l| l.get("team"))
                .map(String::as_str),
            Some("a")
        );
        assert!(ns.metadata.annotations.is_none() && ns.metadata.managed_fields.is_none() && ns.spec.is_none());
    }
}
