//! What the runtime keeps of the objects it watches: only what it reads. Every object held per machine is held
//! thousands of times, and the heap profile (docs/benchmarks.md, "Where the memory goes") showed most of an object
//! to be `metadata.managedFields`, which CAPOV never reads (server-side apply computes it on the server): about
//! 15 KB of an OVirtMachine with its conditions, decoded as nested JSON maps. These trims run on each watch event
//! before the object reaches a store, the supervisor or an actor, and on the objects a write returns.

use std::collections::BTreeMap;

use capov_crds::labels::CONTROL_PLANE_LABEL;
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::{Namespace, Secret};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};

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

/// An OVirtMachine from a watch event. Its lists are decoded by doubling (five conditions take room for eight) and
/// the object lives as long as its machine: they are cut to their length.
pub fn machine(machine: &mut capov_crds::OVirtMachine) {
    crd(machine);
    if let Some(status) = machine.status.as_mut() {
        status.conditions.shrink_to_fit();
        status.addresses.shrink_to_fit();
    }
}

/// An OVirtMachine a write returned, becoming the machine actor's object (its status as [`held_status`] keeps it),
/// trimmed to what the watch keeps of it (`slim_meta::OVIRT_MACHINE`): the write's answer carries every label and
/// annotation the tenant wrote.
pub fn own(mut machine: capov_crds::OVirtMachine) -> std::sync::Arc<capov_crds::OVirtMachine> {
    crate::runtime::kube::slim_meta::trim_meta(&mut machine.metadata, &crate::runtime::kube::slim_meta::OVIRT_MACHINE);
    machine.status = machine.status.as_ref().map(held_status);
    std::sync::Arc::new(machine)
}

/// An OVirtMachine as the supervisor and its machine actor hold it, and its whole status apart. The status is CAPOV's
/// own: the actor keeps it as it last sent it, so the object needs only what the actor reads of the server's copy
/// ([`held_status`]); a whole second copy of every machine's conditions and addresses was about 2 KB a machine. The
/// whole status serves once, when the actor starts (what the server already has is not written again).
pub fn split_status(
    mut machine: capov_crds::OVirtMachine,
) -> (
    std::sync::Arc<capov_crds::OVirtMachine>,
    Option<capov_crds::OVirtMachineStatus>,
) {
    let whole = machine.status.take();
    machine.status = whole.as_ref().map(held_status);
    (std::sync::Arc::new(machine), whole)
}

/// What a machine actor reads of the server's status after it started: the failure fields and CanConnectToOVirt, to
/// notice a user clearing a failure (`adopt_user_status_changes`).
pub fn held_status(status: &capov_crds::OVirtMachineStatus) -> capov_crds::OVirtMachineStatus {
    capov_crds::OVirtMachineStatus {
        failure_reason: status.failure_reason.clone(),
        failure_message: status.failure_message.clone(),
        // At most one condition of a type: collected from an Option, the list is exactly as long as what it holds.
        conditions: status
            .conditions
            .iter()
            .find(|c| c.type_ == capov_core::conditions::types::CAN_CONNECT_TO_OVIRT)
            .cloned()
            .into_iter()
            .collect(),
        ..capov_crds::OVirtMachineStatus::default()
    }
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

/// A CAPI object (`capi.rs` decodes only the fields read): its identity, on a Machine the labels that name its group
/// (its affinity group and placement) and its controller if that is a control plane (the fair share's urgent class:
/// `capi::machine_controlled_by_control_plane`); no other label, no annotations, other owners or managedFields.
pub fn capi<K: kube::Resource>(object: &mut K) {
    let labels: BTreeMap<String, String> = object
        .meta()
        .labels
        .iter()
        .flatten()
        .filter(|(key, _)| GROUP_LABELS.contains(&key.as_str()))
        .map(|(key, value)| (key.clone(), value.clone()))
        .collect();
    let control_plane = object
        .meta()
        .owner_references
        .iter()
        .flatten()
        .find(|owner| crate::runtime::capi::is_control_plane_controller(owner))
        .filter(|owner| owner_size(owner) <= MAX_KEPT_OWNER_BYTES)
        .map(|owner| OwnerReference {
            api_version: owner.api_version.clone(),
            kind: owner.kind.clone(),
            name: owner.name.clone(),
            uid: owner.uid.clone(),
            controller: Some(true),
            block_owner_deletion: None,
        });
    let meta = ObjectMeta {
        owner_references: control_plane.map(|owner| vec![owner]),
        ..identity(object.meta(), (!labels.is_empty()).then_some(labels))
    };
    *object.meta_mut() = meta;
}

/// The most a kept controller reference may hold (apiVersion, kind, name, uid together). The apiserver bounds none of
/// them; a control-plane provider's is about 150 bytes. A longer one is dropped: its Machine then counts as a worker,
/// which orders only its own tenant's work.
const MAX_KEPT_OWNER_BYTES: usize = 1024;

fn owner_size(owner: &OwnerReference) -> usize {
    owner.api_version.len() + owner.kind.len() + owner.name.len() + owner.uid.len()
}

/// An IPAddressClaim: its identity, and, of a claim of CAPOV's (owned by an OVirtMachine or OVirtCluster:
/// `slim_meta` keeps only owners of those kinds), what tells whose it is and where it stands (owners, finalizers,
/// creation and deletion times). Another claim keeps only its identity: its name is all a machine checks (a claim of
/// the name it wants that is not its own is a conflict).
pub fn ip_claim(claim: &mut crate::runtime::ipam::IpAddressClaim) {
    let meta = &claim.metadata;
    if meta.owner_references.is_none() {
        claim.metadata = identity(meta, None);
        return;
    }
    claim.metadata = ObjectMeta {
        owner_references: meta.owner_references.clone(),
        finalizers: meta.finalizers.clone(),
        creation_timestamp: meta.creation_timestamp.clone(),
        deletion_timestamp: meta.deletion_timestamp.clone(),
        ..identity(meta, None)
    };
}

/// An IPAddress: its identity (`ipam.rs` decodes only the spec's address fields).
pub fn ip_address(address: &mut crate::runtime::ipam::IpAddress) {
    capi(address);
}

/// The labels CAPI sets on a Machine that name its group.
const GROUP_LABELS: [&str; 3] = [
    CONTROL_PLANE_LABEL,
    capov_core::placement::affinity_groups::DEPLOYMENT_LABEL,
    capov_core::placement::affinity_groups::MACHINE_SET_LABEL,
];

/// Whether two copies of an object are the same version of it (a relist shows unchanged objects again).
pub fn same_version<K: kube::Resource>(held: &K, seen: &K) -> bool {
    let (held, seen) = (held.meta(), seen.meta());
    held.uid == seen.uid && held.resource_version.is_some() && held.resource_version == seen.resource_version
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
    fn a_capi_object_keeps_its_identity() {
        let mut machine: crate::runtime::capi::Machine = serde_json::from_value(json!({
            "metadata": {"name": "m", "namespace": "ns", "uid": "u", "resourceVersion": "7",
                         "annotations": {"big": "x"}, "labels": {"a": "b"},
                         "managedFields": [{"manager": "capi", "fieldsV1": {"f:spec": {}}}]},
            "spec": {"clusterName": "c"}
        }))
        .expect("machine");
        capi(&mut machine);
        let meta = &machine.metadata;
        assert_eq!(
            (meta.name.as_deref(), meta.namespace.as_deref(), meta.uid.as_deref()),
            (Some("m"), Some("ns"), Some("u"))
        );
        assert_eq!(meta.resource_version.as_deref(), Some("7"));
        assert!(meta.managed_fields.is_none() && meta.annotations.is_none() && meta.labels.is_none());
        assert_eq!(machine.spec.cluster_name.as_deref(), Some("c"));
        let mut control_plane: crate::runtime::capi::Machine = serde_json::from_value(json!({
            "metadata": {"name": "cp", "labels": {"a": "b", "cluster.x-k8s.io/control-plane": ""}}
        }))
        .expect("machine");
        capi(&mut control_plane);
        let labels = control_plane.metadata.labels.expect("the control-plane label");
        assert_eq!(labels.keys().collect::<Vec<_>>(), ["cluster.x-k8s.io/control-plane"]);
    }

    #[test]
    fn a_capi_machine_keeps_only_a_control_plane_controller_of_its_owners() {
        let machine = |owners: serde_json::Value| -> crate::runtime::capi::Machine {
            let mut machine: crate::runtime::capi::Machine =
                serde_json::from_value(json!({"metadata": {"name": "m", "ownerReferences": owners}})).expect("machine");
            capi(&mut machine);
            machine
        };
        let kcp = json!({"apiVersion": "controlplane.cluster.x-k8s.io/v1beta2", "kind": "KubeadmControlPlane",
                         "name": "c-cp", "uid": "u-1", "controller": true, "blockOwnerDeletion": true});
        let other = json!({"apiVersion": "v1", "kind": "ConfigMap", "name": "x", "uid": "u-2"});
        let kept = machine(json!([other.clone(), kcp]));
        let owners = kept
            .metadata
            .owner_references
            .as_deref()
            .expect("the control plane kept");
        assert_eq!(owners.len(), 1);
        assert_eq!(
            (owners[0].kind.as_str(), owners[0].name.as_str()),
            ("KubeadmControlPlane", "c-cp")
        );
        assert!(crate::runtime::capi::machine_controlled_by_control_plane(&kept));
        let machine_set = json!({"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "MachineSet", "name": "ms",
                                 "uid": "u-3", "controller": true});
        assert!(machine(json!([other, machine_set])).metadata.owner_references.is_none());
        // A tenant-written reference of 1 MB is not kept.
        let fat = json!({"apiVersion": "controlplane.cluster.x-k8s.io/v1beta2", "kind": "x".repeat(1 << 20),
                         "name": "c-cp", "uid": "u-4", "controller": true});
        let fat = machine(json!([fat]));
        assert!(fat.metadata.owner_references.is_none());
        assert!(!crate::runtime::capi::machine_controlled_by_control_plane(&fat));
    }

    #[test]
    fn copies_are_the_same_version_only_with_the_same_uid_and_resource_version() {
        let object = |uid: &str, version: Option<&str>| {
            let mut namespace = Namespace::default();
            namespace.metadata.uid = Some(uid.into());
            namespace.metadata.resource_version = version.map(String::from);
            namespace
        };
        assert!(same_version(&object("a", Some("7")), &object("a", Some("7"))));
        assert!(!same_version(&object("a", Some("7")), &object("a", Some("8"))));
        assert!(!same_version(&object("a", Some("7")), &object("b", Some("7"))));
        assert!(!same_version(&object("a", None), &object("a", None)));
    }

    #[test]
    fn a_capi_machine_keeps_the_labels_naming_its_group() {
        let mut machine: crate::runtime::capi::Machine = serde_json::from_value(json!({
            "metadata": {"name": "m", "labels": {"cluster.x-k8s.io/deployment-name": "workers",
                                                 "cluster.x-k8s.io/cluster-name": "c", "team": "a"}},
            "spec": {"failureDomain": "rack-a"}
        }))
        .expect("machine");
        capi(&mut machine);
        let labels = machine.metadata.labels.expect("labels");
        assert_eq!(labels.len(), 1);
        assert_eq!(labels["cluster.x-k8s.io/deployment-name"], "workers");
        assert_eq!(machine.spec.failure_domain.as_deref(), Some("rack-a"));
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

    #[test]
    fn a_machine_is_held_with_the_status_fields_its_actor_reads_and_the_whole_status_apart() {
        let machine: capov_crds::OVirtMachine = serde_json::from_value(json!({
            "apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1", "kind": "OVirtMachine",
            "metadata": {"name": "m", "namespace": "ns", "managedFields": [{"manager": "capov"}]},
            "spec": {"provider": "p", "ovirtcluster": "Default", "template": "t"},
            "status": {
                "ready": true,
                "failureReason": "CreateError", "failureMessage": "the template is gone",
                "addresses": [{"type": "InternalIP", "address": "10.0.0.5"}],
                "conditions": [
                    {"type": "Ready", "status": "True", "reason": "Ready", "lastTransitionTime": "2026-12-04T10:00:00Z"},
                    {"type": "CanConnectToOVirt", "status": "True", "reason": "Connected",
                     "lastTransitionTime": "2026-12-04T10:00:00Z"}
                ]
            }
        }))
        .expect("machine");
        let (held, whole) = split_status(machine.clone());
        assert_eq!(whole, machine.status, "the whole status, as the server had it");
        let status = held.status.as_ref().expect("held status");
        assert_eq!(status.failure_reason.as_deref(), Some("CreateError"));
        assert_eq!(status.failure_message.as_deref(), Some("the template is gone"));
        let kept: Vec<&str> = status.conditions.iter().map(|c| c.type_.as_ref()).collect();
        assert_eq!(kept, ["CanConnectToOVirt"]);
        assert!(status.addresses.is_empty() && !status.ready);
        assert_eq!(held.spec, machine.spec);
        assert_eq!(held.metadata.name.as_deref(), Some("m"));
    }
}
