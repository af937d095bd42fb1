//! OVirtClusterTemplate: the OVirtCluster a ClusterClass stamps out for each of its Clusters (CAPI's
//! InfraClusterTemplate contract).

use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::cluster::OVirtClusterSpec;
use crate::template::TemplateObjectMeta;

/// The OVirtCluster of every Cluster made from a ClusterClass (its spec.infrastructure.templateRef). The topology
/// controller copies spec.template into a new OVirtCluster per Cluster and applies the class's patches to it.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "infrastructure.cluster.x-k8s.io",
    version = "v1beta1",
    kind = "OVirtClusterTemplate",
    plural = "ovirtclustertemplates",
    namespaced,
    category = "cluster-api",
    printcolumn(name = "Age", type_ = "date", json_path = ".metadata.creationTimestamp")
)]
pub struct OVirtClusterTemplateSpec {
    /// The OVirtCluster every Cluster of the class starts from.
    pub template: OVirtClusterTemplateResource,
}

/// Metadata and spec of the OVirtClusters made from the template.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct OVirtClusterTemplateResource {
    /// Labels and annotations for the OVirtClusters made from the template.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<TemplateObjectMeta>,

    /// The OVirtCluster spec, field for field: every field an OVirtCluster takes, a template takes too.
    pub spec: OVirtClusterSpec,
}
