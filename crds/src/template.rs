//! OVirtMachineTemplate: the OVirtMachine settings CAPI stamps out for each machine of a group.

use std::collections::BTreeMap;

use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::machine::MachineSettings;

/// Settings for the OVirtMachines of a MachineDeployment or control plane (spec.template.spec of their
/// infrastructureRef). Editing it affects only machines created afterwards; to change existing machines, reference
/// a new template (rolling update).
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "infrastructure.cluster.x-k8s.io",
    version = "v1beta1",
    kind = "OVirtMachineTemplate",
    plural = "ovirtmachinetemplates",
    namespaced,
    category = "cluster-api",
    printcolumn(name = "Template", type_ = "string", json_path = ".spec.template.spec.template"),
    printcolumn(name = "Provider", type_ = "string", json_path = ".spec.template.spec.provider"),
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
