//! OVirtMachine: one virtual machine in oVirt, and the settings an OVirtMachineTemplate shares with it.

use kube::{CustomResource, KubeSchema};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::condition::Condition;
pub use crate::workload_tuning::{
    CpuMode, CpuPinningPolicy, CpuTuning, HighAvailability, Numa, NumaTuneMode, TemplateVersion, Vgpu,
};

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
    printcolumn(name = "Host", type_ = "string", json_path = ".status.host", priority = 1),
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
#[x_kube(validation = Rule::new(
    "!has(oldSelf.providerID) || (has(self.provider) ? self.provider : '') == \
     (has(oldSelf.provider) ? oldSelf.provider : '')"
).message(
    "spec.provider cannot change once the VM exists (spec.providerID is set): the VM lives on that OVirtProvider's \
     engine. To move the machine to another engine, delete this OVirtMachine and let CAPI create a new one"
))]
#[x_kube(validation = Rule::new(
    "!has(oldSelf.providerID) || (has(self.vmnametemplate) ? self.vmnametemplate : '') == \
     (has(oldSelf.vmnametemplate) ? oldSelf.vmnametemplate : '')"
).message(
    "spec.vmnametemplate cannot change once the VM exists (spec.providerID is set): CAPOV finds the VM by that name. \
     Change it in the OVirtMachineTemplate and roll the machines out instead"
))]
#[x_kube(validation = Rule::new("!has(self.providerID) || has(self.provider)").message(
    "spec.provider must be set with spec.providerID: it names the OVirtProvider whose engine holds the VM"
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
#[x_kube(validation = Rule::new(
    "!has(self.instancetype) || (!has(self.cpu) && !has(self.memory) && !has(self.highavailability))"
).message(
    "spec.instancetype sets the VM's CPUs, memory and high availability: leave spec.cpu, spec.memory and \
     spec.highavailability unset with it, or drop spec.instancetype"
))]
#[x_kube(validation = Rule::new(
    "!has(self.numa) || (has(self.cpu) && has(self.cpu.sockets) && has(self.cpu.cores) && has(self.cpu.threads) \
     && has(self.memory) && has(self.memory.sizemb))"
).message(
    "spec.numa needs spec.cpu (sockets, cores and threads) and spec.memory.sizemb: the NUMA nodes split them"
))]
#[x_kube(validation = Rule::new(
    "!has(self.numa) || !has(self.cpu) || !has(self.cpu.sockets) || !has(self.cpu.cores) || !has(self.cpu.threads) \
     || self.numa.nodes <= self.cpu.sockets * self.cpu.cores * self.cpu.threads"
).message(
    "spec.numa.nodes must not exceed the VM's vCPUs (sockets × cores × threads): each node needs one"
))]
#[x_kube(validation = Rule::new(
    "!has(self.numa) || !has(self.cputuning) || !has(self.cputuning.pinningpolicy) \
     || self.cputuning.pinningpolicy != 'resize_and_pin_numa'"
).message(
    "spec.numa and spec.cputuning.pinningpolicy resize_and_pin_numa exclude each other: with that policy the engine \
     gives the VM the host's NUMA nodes"
))]
pub struct MachineSettings {
    /// Name of the OVirtProvider (cluster-scoped) that connects to the engine. Omitted: the provider of the failure
    /// domain the machine is placed in (CAPOV then sets it before creating the VM); a machine in no such domain
    /// waits with NoProvider. Fixed once the VM exists.
    #[x_kube(validation = Rule::new("self != ''").message(
        "spec.provider must name an OVirtProvider, or be left out to take the failure domain's"
    ))]
    // Empty stands for omitted: the domain decides.
    #[serde(default, skip_serializing_if = "String::is_empty")]
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

    /// The VM's network interfaces in order, at most 16. Empty: keep the template's NICs.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 16))]
    pub nics: Vec<Nic>,

    /// Name servers and search domains for the guest, delivered with the initialization's network settings.
    /// Omitted: the guest's own (DHCP's) DNS settings.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dns: Option<Dns>,
    /// Disks created for the VM besides the template's, attached before its first start and deleted with it.
    #[x_kube(validation = Rule::new("self.all(d, self.exists_one(e, e.name == d.name))").message(
        "spec.datadisks[].name must be unique among the machine's data disks"
    ))]
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 16))]
    pub datadisks: Vec<DataDisk>,

    /// The VM's name in oVirt, built from `{name}` (the OVirtMachine's name), `{namespace}` and `{cluster}` (the
    /// CAPI cluster's name), e.g. `{namespace}-{name}`. Omitted: the OVirtMachine's name. A result longer than the
    /// engine's 64 characters is shortened to its first 53, `-` and 10 hex digits of its SHA-256. Fixed once the
    /// VM exists.
    #[x_kube(validation = Rule::new("self.contains('{name}')").message(
        "spec.vmnametemplate must contain {name}, so that every machine gets its own VM name, e.g. {namespace}-{name}"
    ))]
    #[x_kube(validation = Rule::new(
        "self.matches('^([A-Za-z0-9._-]|[{]name[}]|[{]namespace[}]|[{]cluster[}])+\\\\z')"
    ).message(
        "spec.vmnametemplate may hold only letters, digits, '.', '_', '-' and the placeholders {name}, {namespace} \
         and {cluster}, e.g. {cluster}-{name}"
    ))]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 253))]
    pub vmnametemplate: Option<String>,

    /// On deletion, ask the guest to shut down (ACPI) and power the VM off only if it is still running this many
    /// seconds after the deletion was requested. Omitted or 0: powered off at once.
    #[x_kube(validation = Rule::new("self >= 0 && self <= 3600").message(
        "spec.gracefulshutdowntimeoutseconds must be between 0 (power off at once) and 3600"
    ))]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gracefulshutdowntimeoutseconds: Option<i64>,

    /// Anti-affinity of the VMs of this machine's group. Default soft.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub antiaffinity: Option<AntiAffinity>,

    /// oVirt high availability: the engine restarts the VM on another host when its host is lost, optionally
    /// with a VM lease. Omitted: the template's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub highavailability: Option<HighAvailability>,

    /// The CPU the guest sees (mode and custom model) and how its vCPUs are pinned. Omitted: the template's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cputuning: Option<CpuTuning>,

    /// Back the VM's memory with hugepages of this size in KiB: 2048 (2 MiB) or 1048576 (1 GiB); the hosts must
    /// have them reserved. Omitted: no hugepages.
    #[x_kube(validation = Rule::new("self == 2048 || self == 1048576").message(
        "spec.hugepageskib must be 2048 (2 MiB pages) or 1048576 (1 GiB pages)"
    ))]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hugepageskib: Option<i64>,

    /// Virtual GPUs (mediated devices of the hosts' GPUs). Omitted: none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vgpu: Option<Vgpu>,

    /// Host devices passed through to the VM whole (PCI passthrough, e.g. a GPU or a NIC), by the name oVirt shows
    /// under a host's Host Devices (`pci_0000_3b_00_0`). CAPOV picks a host of the oVirt cluster that has every one
    /// of them free, pins the VM to that host (the engine requires it) and adds the devices before the first start.
    /// A name given twice counts once. Omitted: none.
    #[x_kube(validation = Rule::new("self.all(d, d.matches('^[a-z][a-z0-9_]{0,127}\\\\z'))").message(
        "spec.hostdevices[] must be host device names as oVirt shows them under a host's Host Devices, e.g. \
         pci_0000_3b_00_0 (lower-case letters, digits and '_')"
    ))]
    #[schemars(length(max = 8), inner(length(max = 128)))]
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub hostdevices: Vec<String>,

    /// Virtual NUMA nodes for guests that place work by NUMA node. The engine takes them only on a VM pinned to hosts,
    /// so the VM is pinned to the hosts of its oVirt cluster (as they are when it is created; the device's host with
    /// spec.hostdevices). Needs spec.cpu and spec.memory.sizemb, which the nodes split. Omitted: none (or the host's,
    /// with spec.cputuning.pinningpolicy resize_and_pin_numa).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub numa: Option<Numa>,

    /// An instance type of the engine (`/instancetypes`, e.g. `Large`), by name: the VM takes its CPUs, memory and
    /// high availability. Omitted: none (the template's, or spec.cpu and spec.memory).
    #[x_kube(validation = Rule::new("self != ''").message(
        "spec.instancetype must name an instance type of the engine (e.g. Large), or be omitted"
    ))]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instancetype: Option<String>,

    /// The version of spec.template to create VMs from. Omitted: the newest version in the cluster's data
    /// center, so that a new template version changes what new machines get.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub templateversion: Option<TemplateVersion>,
}

/// One extra disk of the VM.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[x_kube(validation = Rule::new(
    "!has(self.sparse) || self.sparse || (has(self.format) && self.format == 'raw')"
).message(
    "spec.datadisks[]: a preallocated disk (sparse: false) needs format: raw; the engine refuses preallocated \
     copy-on-write disks"
))]
pub struct DataDisk {
    /// Name of the disk, unique in the machine; the disk's alias in oVirt is `<vm name>_<name>`.
    #[x_kube(validation = Rule::new("self.matches('^[a-z0-9]([a-z0-9_-]{0,30}[a-z0-9])?\\\\z')").message(
        "spec.datadisks[].name must be 1 to 32 lower-case letters, digits, '-' or '_', starting and ending with a \
         letter or digit, e.g. data or etcd-0"
    ))]
    #[schemars(length(max = 32))]
    pub name: String,

    /// Size in GiB.
    #[x_kube(validation = Rule::new("self >= 1 && self <= 8192").message(
        "spec.datadisks[].sizegb must be between 1 and 8192 (GiB; the engine's default MaxBlockDiskSize)"
    ))]
    pub sizegb: i64,

    /// Storage domain the disk is created on (e.g. data1).
    #[x_kube(validation = Rule::new("self != ''").message(
        "spec.datadisks[].storagedomainname must name a storage domain in oVirt, e.g. data1"
    ))]
    #[schemars(length(max = 255))]
    pub storagedomainname: String,

    /// How the guest sees the disk. Default: virtio_scsi.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interface: Option<DiskInterface>,

    /// Image format: cow (thin, qcow2) or raw. Default: cow.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub format: Option<DiskFormat>,

    /// Thin provisioned (true) or preallocated (false; needs format raw). Default: true. Block storage (iSCSI,
    /// FC) takes raw disks only preallocated.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sparse: Option<bool>,

    /// Disk profile of the storage domain (e.g. for a storage QoS). Omitted: the engine's choice.
    #[x_kube(validation = Rule::new("self != ''").message(
        "spec.datadisks[].diskprofile must name a disk profile of the storage domain, or be omitted"
    ))]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 255))]
    pub diskprofile: Option<String>,
}

/// The interface a data disk is attached with.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum DiskInterface {
    #[default]
    VirtioScsi,
    Virtio,
    Sata,
}

impl DiskInterface {
    /// The value oVirt uses on the wire.
    pub fn as_ovirt(self) -> &'static str {
        match self {
            DiskInterface::VirtioScsi => "virtio_scsi",
            DiskInterface::Virtio => "virtio",
            DiskInterface::Sata => "sata",
        }
    }
}

/// The image format of a data disk.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum DiskFormat {
    #[default]
    Cow,
    Raw,
}

impl DiskFormat {
    /// The value oVirt uses on the wire.
    pub fn as_ovirt(self) -> &'static str {
        match self {
            DiskFormat::Cow => "cow",
            DiskFormat::Raw => "raw",
        }
    }
}

/// Keep the VMs of one group (a control plane, or a MachineDeployment) on different hosts, through an oVirt
/// affinity group CAPOV creates per group and oVirt cluster: soft (the default: the engine prefers other hosts but
/// stacks VMs when it must), hard (a VM that no host can take without a sibling stays down, with a condition saying
/// so), or none.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum AntiAffinity {
    /// The engine prefers hosts without a sibling, and uses one when no other host can take the VM.
    #[default]
    Soft,
    /// The engine starts a VM only on a host without a sibling.
    Hard,
    /// No affinity group.
    None,
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

    /// IPAM pools this NIC takes its addresses from, at most one IPv4 and one IPv6 address: CAPOV claims one
    /// address from each pool (an IPAddressClaim owned by the OVirtMachine, released when it is deleted) and hands
    /// them to the guest as static addresses with the pool's gateway and prefix. Empty: DHCP.
    #[serde(rename = "addressesFromPools", default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 4))]
    #[x_kube(validation = Rule::new("size(self) <= 2").message(
        "spec.nics[].addressesFromPools takes at most two pools, one IPv4 and one IPv6: oVirt configures one \
         address of each family per NIC"
    ))]
    pub addresses_from_pools: Vec<crate::ipam::IpPoolRef>,

    /// The interface's name inside the guest, which the static addresses are configured on (oVirt's "in-guest
    /// network interface name"). Default: eth0, eth1, … by position. Only read with addressesFromPools.
    #[serde(rename = "guestInterfaceName", default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 64))]
    #[x_kube(validation = Rule::new(
        "size(self) <= 15 && self != '.' && self != '..' && self.matches('^[A-Za-z0-9_.:-]+\\\\z')"
    ).message(
        "spec.nics[].guestInterfaceName must be a Linux interface name as the guest sees it, 1 to 15 letters, \
         digits, '_', '.', ':' or '-', e.g. eth0 or enp1s0"
    ))]
    pub guest_interface_name: Option<String>,
}

/// DNS settings the guest gets with its static addresses.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Dns {
    /// Name servers (IPv4 or IPv6 addresses), at most 3 (cloud-init's limit).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 8))]
    #[schemars(inner(length(max = 64)))]
    #[x_kube(validation = Rule::new("size(self) <= 3 && self.all(server, isIP(server))").message(
        "spec.dns.servers takes at most 3 name servers, each an IPv4 or IPv6 address such as 10.0.0.2"
    ))]
    pub servers: Vec<String>,

    /// Search domains, at most 6 (cloud-init's limit).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 12))]
    #[schemars(inner(length(max = 253)))]
    #[x_kube(validation = Rule::new(
        "size(self) <= 6 && self.all(domain, \
         domain.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*\\\\z'))"
    ).message(
        "spec.dns.searchDomains takes at most 6 domains, each a lower-case DNS name such as example.com"
    ))]
    pub search_domains: Vec<String>,
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

    /// The data disks of spec.datadisks as created in oVirt.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub data_disks: Vec<DataDiskStatus>,

    /// The host the VM runs on (kept current when it migrates); absent while it is not running.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host: Option<String>,

    /// The failure domain the VM was placed in (the Machine's spec.failureDomain).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure_domain: Option<String>,
}

/// One data disk in oVirt.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DataDiskStatus {
    /// The name in spec.datadisks.
    pub name: String,
    /// The disk's id in oVirt.
    #[serde(rename = "diskID")]
    pub disk_id: String,
    /// The disk's alias in oVirt.
    pub alias: String,
    /// Provisioned size in bytes.
    pub size_bytes: u64,
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
