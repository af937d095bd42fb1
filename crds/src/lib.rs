//! CAPOV's Kubernetes API, group `infrastructure.cluster.x-k8s.io`, version `v1beta1`: the Rust types of the five
//! custom resources, their validation (schema and CEL), and the generator of the CRD manifests.

// kube's `printcolumn(...)` attributes repeat `type_`/`priority` keys by design; clippy mistakes them for duplicates.
#![allow(clippy::duplicated_attributes)]

pub mod cluster;
pub mod cluster_template;
pub mod condition;
pub mod generate;
pub mod ipam;
pub mod labels;
pub mod machine;
pub mod provider;
pub mod reference;
pub mod template;
pub mod workload_tuning;

pub use cluster::{
    ApiEndpoint, ClusterCapacity, EndpointFromPool, FailureDomainOverrides, FailureDomainSpec, FailureDomainStatus,
    OVirtCluster, OVirtClusterCapacity, OVirtClusterSpec, OVirtClusterStatus, StorageDomainCapacity, VnicProfileRename,
};
pub use cluster_template::{OVirtClusterTemplate, OVirtClusterTemplateResource, OVirtClusterTemplateSpec};
pub use condition::{Condition, ConditionStatus, Severity};
pub use ipam::IpPoolRef;
pub use machine::{
    AntiAffinity, CpuMode, CpuPinningPolicy, CpuTopology, CpuTuning, DataDisk, DataDiskStatus, DiskFormat,
    DiskInterface, Dns, HighAvailability, Initialization, MachineAddress, MachineSettings, Memory, Nic, Numa,
    NumaTuneMode, OVirtMachine, OVirtMachineSpec, OVirtMachineStatus, TemplateVersion, Vgpu, VmType,
};
pub use provider::{
    AllowedNamespaces, OVirtProvider, OVirtProviderSpec, OVirtProviderStatus, ProviderTls, TenantPlacement,
};
pub use template::{
    Architecture, NodeInfo, OVirtMachineTemplate, OVirtMachineTemplateResource, OVirtMachineTemplateSpec,
    OVirtMachineTemplateStatus, OperatingSystem, TemplateObjectMeta,
};
