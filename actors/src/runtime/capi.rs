//! The Cluster API objects CAPOV reads (Machine, Cluster) at the storage version of current CAPI core, decoded into
//! types that hold only the fields CAPOV reads: the rest of each object is skipped while decoding. The stores hold
//! one of each per machine; as `DynamicObject`s (a JSON tree, each map node 632 bytes however few its entries) even
//! the reduced objects took about 3.7 KB each (docs/benchmarks.md, "Where the memory goes").

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use serde::Deserialize;

use crate::runtime::kube::resource::namespaced_resource;

/// A CAPI `Machine` (cluster.x-k8s.io/v1beta2): what CAPOV reads of it.
#[derive(Clone, Debug, Default, Deserialize)]
pub struct Machine {
    #[serde(default, deserialize_with = "crate::runtime::kube::slim_meta::capi_meta")]
    pub metadata: ObjectMeta,
    #[serde(default)]
    pub spec: MachineSpec,
    #[serde(default)]
    pub status: MachineStatus,
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MachineStatus {
    /// The workload cluster's Node of this Machine, once CAPI linked them (v1beta1 and v1beta2 alike).
    #[serde(default)]
    pub node_ref: NameRef,
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MachineSpec {
    #[serde(default)]
    pub cluster_name: Option<String>,
    #[serde(default)]
    pub bootstrap: MachineBootstrap,
    #[serde(default)]
    pub infrastructure_ref: NameRef,
    /// The failure domain CAPI placed the Machine in (KubeadmControlPlane spreads over them).
    #[serde(default)]
    pub failure_domain: Option<String>,
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MachineBootstrap {
    #[serde(default)]
    pub data_secret_name: Option<String>,
}

#[derive(Clone, Debug, Default, Deserialize)]
pub struct NameRef {
    #[serde(default)]
    pub name: Option<String>,
}

/// A CAPI `Cluster` (cluster.x-k8s.io/v1beta2): what CAPOV reads of it.
#[derive(Clone, Debug, Default, Deserialize)]
pub struct Cluster {
    #[serde(default, deserialize_with = "crate::runtime::kube::slim_meta::capi_meta")]
    pub metadata: ObjectMeta,
    #[serde(default)]
    pub spec: ClusterSpec,
    #[serde(default)]
    pub status: ClusterStatus,
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ClusterSpec {
    #[serde(default)]
    pub paused: Option<bool>,
    #[serde(default)]
    pub control_plane_endpoint: Endpoint,
    /// The OVirtCluster of the Cluster.
    #[serde(default)]
    pub infrastructure_ref: NameRef,
}

#[derive(Clone, Debug, Default, Deserialize)]
pub struct Endpoint {
    #[serde(default)]
    pub host: Option<String>,
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ClusterStatus {
    #[serde(default)]
    pub initialization: ClusterInitialization,
    /// v1beta1's flag, still read for clusters written by older CAPI versions.
    #[serde(default)]
    pub infrastructure_ready: Option<bool>,
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ClusterInitialization {
    #[serde(default)]
    pub infrastructure_provisioned: Option<bool>,
}

namespaced_resource!(Machine, "cluster.x-k8s.io", "v1beta2", "Machine", "machines");
namespaced_resource!(Cluster, "cluster.x-k8s.io", "v1beta2", "Cluster", "clusters");

/// `Cluster.spec.paused`.
pub fn cluster_paused(cluster: &Cluster) -> bool {
    cluster.spec.paused.unwrap_or(false)
}

/// The Cluster's infrastructure is provisioned (v1beta2 `status.initialization.infrastructureProvisioned`, or the
/// v1beta1 `status.infrastructureReady`).
pub fn cluster_infrastructure_provisioned(cluster: &Cluster) -> bool {
    cluster
        .status
        .initialization
        .infrastructure_provisioned
        .unwrap_or(false)
        || cluster.status.infrastructure_ready.unwrap_or(false)
}

/// `Cluster.spec.controlPlaneEndpoint.host`.
pub fn cluster_control_plane_host(cluster: &Cluster) -> Option<String> {
    cluster.spec.control_plane_endpoint.host.clone()
}

/// `Machine.spec.bootstrap.dataSecretName`.
pub fn machine_bootstrap_secret(machine: &Machine) -> Option<String> {
    machine.spec.bootstrap.data_secret_name.clone()
}

/// `Machine.spec.clusterName`.
pub fn machine_cluster_name(machine: &Machine) -> Option<String> {
    machine.spec.cluster_name.clone()
}

/// `Machine.status.nodeRef.name`: the Node CAPI linked to this Machine.
pub fn machine_node_name(machine: &Machine) -> Option<String> {
    machine.status.node_ref.name.clone().filter(|name| !name.is_empty())
}

/// The API group of Cluster API's control-plane providers (KubeadmControlPlane, and the others that follow the
/// contract).
pub const CONTROL_PLANE_GROUP: &str = "controlplane.cluster.x-k8s.io";

/// Whether `owner` is a Machine's controller of [`CONTROL_PLANE_GROUP`]: what a control-plane provider sets on the
/// Machines it creates.
pub fn is_control_plane_controller(owner: &OwnerReference) -> bool {
    owner.controller == Some(true)
        && owner
            .api_version
            .split_once('/')
            .is_some_and(|(group, _)| group == CONTROL_PLANE_GROUP)
}

/// The Machine belongs to a control plane: its controller is a control-plane object (e.g. a KubeadmControlPlane),
/// as the control-plane provider that created it set it. Not the `cluster.x-k8s.io/control-plane` label: the fair
/// share (`crate::fair_share`) reads this one.
pub fn machine_controlled_by_control_plane(machine: &Machine) -> bool {
    machine
        .metadata
        .owner_references
        .iter()
        .flatten()
        .any(is_control_plane_controller)
}

/// `Machine.spec.failureDomain`.
pub fn machine_failure_domain(machine: &Machine) -> Option<String> {
    machine.spec.failure_domain.clone()
}

/// `Cluster.spec.infrastructureRef.name`: the OVirtCluster of this Cluster.
pub fn cluster_infrastructure_name(cluster: &Cluster) -> Option<String> {
    cluster.spec.infrastructure_ref.name.clone()
}

/// `Machine.spec.infrastructureRef.name`: the OVirtMachine of this Machine.
pub fn machine_infrastructure_name(machine: &Machine) -> Option<String> {
    machine.spec.infrastructure_ref.name.clone()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_machine_decodes_the_fields_read_and_skips_the_rest() {
        let machine: Machine = serde_json::from_value(json!({
            "apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Machine",
            "metadata": {"name": "m", "namespace": "ns"},
            "spec": {"clusterName": "c", "bootstrap": {"dataSecretName": "s", "configRef": {"name": "k"}},
                     "infrastructureRef": {"name": "om", "kind": "OVirtMachine"}, "version": "v1.36"},
            "status": {"phase": "Running", "conditions": [{"type": "Ready"}], "nodeRef": {"name": "n-1"}}
        }))
        .expect("machine");
        assert_eq!(machine_cluster_name(&machine).as_deref(), Some("c"));
        assert_eq!(machine_node_name(&machine).as_deref(), Some("n-1"));
        assert_eq!(machine_bootstrap_secret(&machine).as_deref(), Some("s"));
        assert_eq!(machine_infrastructure_name(&machine).as_deref(), Some("om"));
        let bare: Machine = serde_json::from_value(json!({"metadata": {"name": "m"}, "spec": {}})).expect("bare");
        assert_eq!(machine_bootstrap_secret(&bare), None);
        assert_eq!(machine_node_name(&bare), None);
    }

    #[test]
    fn a_machine_is_a_control_planes_by_its_controller_not_by_its_label() {
        let machine = |labels: serde_json::Value, owners: serde_json::Value| -> Machine {
            serde_json::from_value(json!({
                "metadata": {"name": "m", "namespace": "ns", "labels": labels, "ownerReferences": owners},
                "spec": {"clusterName": "c"}
            }))
            .expect("machine")
        };
        let kcp = |controller: bool| {
            json!({"apiVersion": "controlplane.cluster.x-k8s.io/v1beta2", "kind": "KubeadmControlPlane",
                   "name": "c-cp", "uid": "0b0b0b0b-0000-4000-8000-000000000001", "controller": controller})
        };
        let machine_set = json!({"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "MachineSet", "name": "c-md-x",
                                 "uid": "0b0b0b0b-0000-4000-8000-000000000002", "controller": true});
        assert!(machine_controlled_by_control_plane(&machine(
            json!({}),
            json!([kcp(true)])
        )));
        let labelled = machine(json!({"cluster.x-k8s.io/control-plane": ""}), json!([machine_set]));
        assert!(!machine_controlled_by_control_plane(&labelled), "the label alone");
        assert!(
            !machine_controlled_by_control_plane(&machine(json!({}), json!([kcp(false)]))),
            "not the controller"
        );
        let look_alike = json!({"apiVersion": "controlplane.cluster.x-k8s.io.example/v1", "kind": "KubeadmControlPlane",
                                "name": "x", "uid": "u", "controller": true});
        assert!(!machine_controlled_by_control_plane(&machine(
            json!({}),
            json!([look_alike])
        )));
        assert!(!machine_controlled_by_control_plane(&machine(json!({}), json!([]))));
    }

    #[test]
    fn a_cluster_reads_paused_endpoint_and_both_provisioning_flags() {
        let cluster: Cluster = serde_json::from_value(json!({
            "metadata": {"name": "c", "namespace": "ns"},
            "spec": {"paused": true, "controlPlaneEndpoint": {"host": "10.0.0.1", "port": 6443}},
            "status": {"initialization": {"infrastructureProvisioned": true}, "phase": "Provisioned"}
        }))
        .expect("cluster");
        assert!(cluster_paused(&cluster));
        assert!(cluster_infrastructure_provisioned(&cluster));
        assert_eq!(cluster_control_plane_host(&cluster).as_deref(), Some("10.0.0.1"));
        let v1beta1: Cluster =
            serde_json::from_value(json!({"metadata": {"name": "c"}, "status": {"infrastructureReady": true}}))
                .expect("cluster");
        assert!(cluster_infrastructure_provisioned(&v1beta1) && !cluster_paused(&v1beta1));
    }
}
