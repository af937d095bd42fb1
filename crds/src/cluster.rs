//! OVirtCluster: the infrastructure side of a CAPI Cluster on oVirt.

use kube::{CustomResource, KubeSchema};
use serde::{Deserialize, Serialize};

use crate::condition::Condition;
use crate::ipam::IpPoolRef;
use crate::machine::Initialization;

/// The infrastructure cluster on oVirt, referenced by a CAPI Cluster's spec.infrastructureRef.
#[derive(CustomResource, KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[kube(
    group = "infrastructure.cluster.x-k8s.io",
    version = "v1beta1",
    kind = "OVirtCluster",
    plural = "ovirtclusters",
    namespaced,
    shortname = "capovc",
    category = "cluster-api",
    status = "OVirtClusterStatus",
    printcolumn(
        name = "ControlPlane Endpoint",
        type_ = "string",
        json_path = ".spec.controlPlaneEndpoint.host"
    ),
    printcolumn(name = "Ready", type_ = "boolean", json_path = ".status.ready"),
    printcolumn(
        name = "Cluster",
        type_ = "string",
        json_path = ".metadata.labels['cluster\\.x-k8s\\.io/cluster-name']",
        priority = 1
    ),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp",
        priority = 1
    )
)]
#[x_kube(validation = Rule::new(
    "has(self.controlPlaneEndpointFromPool) == has(oldSelf.controlPlaneEndpointFromPool)"
).message(
    "spec.controlPlaneEndpointFromPool can only be set when the OVirtCluster is created, and cannot be removed: \
     the address it gave is the workload cluster's API address"
))]
#[serde(rename_all = "camelCase")]
pub struct OVirtClusterSpec {
    /// Where the workload cluster's API server is reached: a VIP or the control-plane load balancer. With
    /// controlPlaneEndpointFromPool, CAPOV writes it once the pool gave an address; leave it out then.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub control_plane_endpoint: Option<ApiEndpoint>,

    /// Take the control-plane endpoint's host from an IPAM pool: CAPOV claims one address (an IPAddressClaim owned
    /// by the OVirtCluster, released when it is deleted), writes it to spec.controlPlaneEndpoint and reports the
    /// cluster ready only then. The address is a VIP that something in the cluster must serve (e.g. kube-vip,
    /// flavor `kube-vip`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[x_kube(validation = Rule::new("self == oldSelf").message(
        "spec.controlPlaneEndpointFromPool cannot change: the address it gave is the workload cluster's API address"
    ))]
    pub control_plane_endpoint_from_pool: Option<EndpointFromPool>,
}

/// An IPAM pool to take the control-plane endpoint from, and the API server's port.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
pub struct EndpointFromPool {
    #[serde(flatten)]
    pub pool: IpPoolRef,

    /// TCP port of the API server behind the address. Default 6443.
    #[serde(default = "default_api_port")]
    #[x_kube(validation = Rule::new("self >= 1 && self <= 65535").message(
        "spec.controlPlaneEndpointFromPool.port must be between 1 and 65535, e.g. 6443"
    ))]
    pub port: i32,
}

fn default_api_port() -> i32 {
    6443
}

/// A host and port of an API server.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
pub struct ApiEndpoint {
    /// DNS name or IP address, e.g. 10.0.1.100.
    #[x_kube(validation = Rule::new("self != ''").message("spec.controlPlaneEndpoint.host must be a DNS name or IP address"))]
    pub host: String,

    /// TCP port, 1-65535 (6443 for kube-apiserver).
    #[x_kube(validation = Rule::new("self >= 1 && self <= 65535").message(
        "spec.controlPlaneEndpoint.port must be between 1 and 65535, e.g. 6443"
    ))]
    pub port: i32,
}

/// Observed state of the infrastructure cluster.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct OVirtClusterStatus {
    /// True once the infrastructure is ready (CAPI v1beta1 contract).
    #[serde(default)]
    pub ready: bool,

    /// CAPI v1beta2 contract: provisioned is set once and never reset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub initialization: Option<Initialization>,

    /// Ready and Paused.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[x_kube(merge_strategy = ListMerge::Map(vec!["type".into()]))]
    pub conditions: Vec<Condition>,
}
