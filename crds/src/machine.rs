//! OVirtMachine: one virtual machine in oVirt, and the settings an OVirtMachineTemplate shares with it.

use kube::{CustomResource, KubeSchema};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::condition::Condition;

/// One virtual machine in oVirt. CAPI creates these from an OVirtMachineTemplate when a MachineDeployment or
/// control plane scales; the VM gets the OVirtMachine's name.
#[derive(CustomResource, KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[kube(
    group = "infrastructure.cluster.x-k8s.io",
    version = "v1beta1",
    kind = "OVirtMachine",
    plural = "ovirtmachines",
    namespaced,
    shortname = "capovm",
    category = "cluster-api",
    status = "OVirtMachineStatus",
    printcolumn(name = "Ready", type_ = "boolean", json_path = ".status.ready"),
    printcolumn(
        name = "Cluster",
        type_ = "string",
        json_path = ".metadata.labels['cluster\\.x-k8s\\.io/cluster-name']",
        priority = 1
    ),
    printcolumn(name = "State", type_ = "string", json_path = ".status.vmStatus", priority = 1),
    printcolumn(name = "ProviderID", type_ = "string", json_path = ".spec.providerID", priority = 1),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp",
        priority = 1
    )
)]
#[x_kube(validation = Rule::new(
    "!has(oldSelf.providerID) || (has(self.providerID) && self.providerID == oldSelf.providerID)"
).message(
    "spec.providerID is set by the controller once the VM exists and cannot be changed or removed; \
     delete the OVirtMachine to replace its VM"
))]
#[x_kube(validation = Rule::new("!has(oldSelf.providerID) || self.provider == oldSelf.provider").message(
    "spec.provider cannot change once the VM exists (spec.providerID is set): the VM lives on that OVirtProvider's \
     engine. To move the machine to another engine, delete this OVirtMachine and let CAPI create a new one"
))]
#[serde(rename_all = "camelCase")]
pub struct OVirtMachineSpec {
    #[serde(flatten)]
    pub settings: MachineSettings,

    /// Set by the controller once the VM exists: ovirt://<vm-id>, the engine's VM id (a UUID). Write-once.
    #[serde(rename = "providerID", default, skip_serializing_if = "Option::is_none")]
    // No `$` anchor: clusterctl would take it for a variable in the release; the length pins the end instead.
    #[x_kube(validation = Rule::new(
        "size(self) == 44 && self.matches('^ovirt://[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}')"
    )
    .message(
        "spec.providerID must be ovirt://<VM id>, the VM's id in oVirt (a UUID such as \
         ovirt://0a5c3c43-4b4e-4a31-9d0e-1b2f5a7e8c90); CAPOV writes it once the VM exists: leave it out"
    ))]
    pub provider_id: Option<String>,
}

/// What a VM should look like: every OVirtMachine field a template can set.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
pub struct MachineSettings {
    /// Name of the OVirtProvider (cluster-scoped) that connects to the engine.
    #[x_kube(validation = Rule::new("self != ''").message("spec.provider must name an OVirtProvider"))]
    pub provider: String,

    /// Name of the cluster in oVirt that runs the VM (e.g. Default).
    #[x_kube(validation = Rule::new("self != ''").message("spec.ovirtcluster must name a cluster in oVirt, e.g. Default"))]
    pub ovirtcluster: String,

    /// Name of the oVirt template the VM is created from (its newest version is used).
    #[x_kube(validation = Rule::new("self != ''").message("spec.template must name a template in oVirt"))]
    pub template: String,

    /// Storage domain for the VM's disks. Empty: the OVirtProvider's spec.storagedomainname, else where the
    /// template's disks are. A domain without the template's disks needs disk cloning.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub storagedomainname: Option<String>,

    /// Clone the template disks (true) or create thin copy-on-write disks (false). Empty: the OVirtProvider's
    /// spec.diskclone, else the operator's disk-clone feature gate.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub diskclone: Option<bool>,

    /// oVirt VM type.
    #[serde(default)]
    pub vmtype: VmType,

    /// CPU topology. Omitted: the template's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu: Option<CpuTopology>,

    /// Memory. Omitted: the template's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory: Option<Memory>,

    /// Size in GiB the bootable disk is grown to. Disks are never shrunk: a value below the template disk's size
    /// is reported as DiskShrinkNotAllowed.
    #[x_kube(validation = Rule::new("self >= 1 && self <= 8192").message(
        "spec.osdisksizegb must be between 1 and 8192 (GiB; the engine's default MaxBlockDiskSize)"
    ))]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub osdisksizegb: Option<i64>,

    /// The VM's network interfaces in order. Empty: keep the template's NICs.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub nics: Vec<Nic>,
}

/// oVirt VM type.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum VmType {
    #[default]
    Server,
    Desktop,
    HighPerformance,
}

impl VmType {
    /// The value oVirt uses on the wire.
    pub fn as_ovirt(self) -> &'static str {
        match self {
            VmType::Server => "server",
            VmType::Desktop => "desktop",
            VmType::HighPerformance => "high_performance",
        }
    }
}

/// CPU topology of the VM.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
pub struct CpuTopology {
    /// Number of sockets, at least 1.
    #[x_kube(validation = Rule::new("self >= 1 && self <= 16").message(
        "spec.cpu.sockets must be between 1 and 16 (the engine's default MaxNumOfVmSockets)"
    ))]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sockets: Option<i32>,

    /// Cores per socket, at least 1.
    #[x_kube(validation = Rule::new("self >= 1 && self <= 254").message(
        "spec.cpu.cores must be between 1 and 254 (the engine's default MaxNumOfCpuPerSocket)"
    ))]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cores: Option<i32>,

    /// Threads per core, at least 1.
    #[x_kube(validation = Rule::new("self >= 1 && self <= 8").message(
        "spec.cpu.threads must be between 1 and 8 (the engine's default MaxNumOfThreadsPerCpu)"
    ))]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub threads: Option<i32>,
}

/// Memory of the VM in MiB.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[x_kube(validation = Rule::new(
    "!has(self.guaranteedmb) || !has(self.sizemb) || self.guaranteedmb <= self.sizemb"
).message("spec.memory.guaranteedmb must not be larger than spec.memory.sizemb"))]
pub struct Memory {
    /// Memory size in MiB, at least 1.
    #[x_kube(validation = Rule::new("self >= 1 && self <= 6291456").message(
        "spec.memory.sizemb must be between 1 and 6291456 (MiB, 6 TiB: the engine's limit for 64-bit VMs)"
    ))]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sizemb: Option<i64>,

    /// Memory guaranteed to the VM in MiB; not more than sizemb.
    #[x_kube(validation = Rule::new("self >= 0 && self <= 6291456").message(
        "spec.memory.guaranteedmb must be between 0 and 6291456 (MiB, 6 TiB: the engine's limit for 64-bit VMs)"
    ))]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub guaranteedmb: Option<i64>,
}

/// One network interface of the VM.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
pub struct Nic {
    /// Name of the vNIC profile in oVirt (e.g. ovirtmgmt). Required.
    #[x_kube(validation = Rule::new("self != ''").message(
        "spec.nics[].vnicprofile must name a vNIC profile in oVirt, e.g. ovirtmgmt"
    ))]
    pub vnicprofile: String,

    /// Interface name in oVirt. Default: nic1, nic2, … by position.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
}

/// Observed state of the machine.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct OVirtMachineStatus {
    /// True once the VM first came up (CAPI v1beta1 contract); never reset.
    #[serde(default)]
    pub ready: bool,

    /// CAPI v1beta2 contract: provisioned is set once, when the VM first is up, and never reset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub initialization: Option<Initialization>,

    /// Addresses of the VM: reported IPs as InternalIP, the VM name as InternalDNS.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub addresses: Vec<MachineAddress>,

    /// CanConnectToOVirt, MachineCreated, MachineDiskResized, MachineNetworkSet, MachineOn, K8sProviderIDSetup,
    /// MachineDeleted, Ready and Paused.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[x_kube(merge_strategy = ListMerge::Map(vec!["type".into()]))]
    pub conditions: Vec<Condition>,

    /// Set only for errors that automatic retries cannot fix (OVirtEngineConnectionCritical). Fix the cause,
    /// then clear it: kubectl patch capovm NAME -n NS --subresource=status --type=merge
    /// -p '{"status":{"failureReason":null,"failureMessage":null}}'
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure_reason: Option<String>,

    /// Details of failureReason.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure_message: Option<String>,

    /// Last VM status seen in oVirt: image_locked, down, wait_for_launch, powering_up, up, …
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vm_status: Option<String>,
}

/// CAPI v1beta2 initialization status.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct Initialization {
    /// True once the infrastructure is provisioned; set once and never reset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provisioned: Option<bool>,
}

/// One address of the machine.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
pub struct MachineAddress {
    /// Hostname, ExternalIP, InternalIP, ExternalDNS or InternalDNS.
    #[serde(rename = "type")]
    pub type_: String,
    /// The address.
    pub address: String,
}
