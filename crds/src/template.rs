//! OVirtMachineTemplate: the OVirtMachine settings CAPI stamps out for each machine of a group.

use std::collections::BTreeMap;

use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::machine::MachineSettings;

/// Settings for the OVirtMachines of a MachineDeployment or control plane (spec.template.spec of their
/// infrastructureRef). Editing it affects only machines created afterwards; to change existing machines, reference
/// a new template (rolling update). CAPOV reports in status what one machine of the template offers (CPU, memory,
/// disk, architecture, OS), which the cluster autoscaler reads to scale a MachineDeployment up from zero.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "infrastructure.cluster.x-k8s.io",
    version = "v1beta1",
    kind = "OVirtMachineTemplate",
    plural = "ovirtmachinetemplates",
    namespaced,
    category = "cluster-api",
    status = "OVirtMachineTemplateStatus",
    printcolumn(name = "Template", type_ = "string", json_path = ".spec.template.spec.template"),
    printcolumn(name = "Provider", type_ = "string", json_path = ".spec.template.spec.provider"),
    printcolumn(name = "CPU", type_ = "string", json_path = ".status.capacity.cpu", priority = 1),
    printcolumn(
        name = "Memory",
        type_ = "string",
        json_path = ".status.capacity.memory",
        priority = 1
    ),
    printcolumn(name = "Age", type_ = "date", json_path = ".metadata.creationTimestamp")
)]
pub struct OVirtMachineTemplateSpec {
    /// The machine every OVirtMachine of the group starts from.
    pub template: OVirtMachineTemplateResource,
}

/// Metadata and spec of the OVirtMachines made from the template.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct OVirtMachineTemplateResource {
    /// Labels and annotations CAPI passes on to the Machine (and from there to the Node).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<TemplateObjectMeta>,

    /// All OVirtMachine spec fields except providerID, which the controller sets on each machine.
    pub spec: MachineSettings,
}

/// The labels and annotations of a CAPI template's metadata.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct TemplateObjectMeta {
    /// Labels for the created objects.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: BTreeMap<String, String>,
    /// Annotations for the created objects.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub annotations: BTreeMap<String, String>,
}

/// What one machine of the template offers, as CAPOV computed it from the template's spec (CAPI's "autoscaling
/// from zero" contract for InfraMachineTemplates). A value the spec leaves to the oVirt template is not reported.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct OVirtMachineTemplateStatus {
    /// Resources of one machine as Kubernetes quantities: `cpu` (sockets × cores × threads, when spec.cpu sets all
    /// three), `memory` (spec.memory.sizemb, e.g. `4096Mi`) and `ephemeral-storage` (spec.osdisksizegb, e.g.
    /// `40Gi`). The cluster autoscaler reads them to scale a MachineDeployment up from zero; the capacity
    /// annotations on the MachineDeployment override them.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub capacity: BTreeMap<String, String>,

    /// Operating system of the machines (always linux: CAPOV boots machines with cloud-init or Ignition only);
    /// the architecture is left out, it is the oVirt cluster's, which the autoscaler then takes as amd64.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_info: Option<NodeInfo>,
}

/// The architecture and operating system a machine of the template runs, as a Node reports them.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NodeInfo {
    /// CPU architecture: amd64, arm64, s390x or ppc64le.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub architecture: Option<Architecture>,
    /// Operating system: linux or windows.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub operating_system: Option<OperatingSystem>,
}

/// A CPU architecture as Kubernetes names it (a Node's `status.nodeInfo.architecture`).
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Architecture {
    Amd64,
    Arm64,
    S390x,
    Ppc64le,
}

/// An operating system as Kubernetes names it (a Node's `status.nodeInfo.operatingSystem`).
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum OperatingSystem {
    Linux,
    Windows,
}
