//! OVirtCluster: the infrastructure side of a CAPI Cluster on oVirt.

use std::collections::BTreeMap;

use kube::{CustomResource, KubeSchema};
use schemars::JsonSchema;
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
    /// Failure domains CAPI may place machines in, each an oVirt cluster, a set of hosts carrying an oVirt affinity
    /// label, another engine (an OVirtProvider), or several of them. CAPOV publishes them in status.failureDomains: KubeadmControlPlane spreads its machines over
    /// those with controlPlane true, a MachineDeployment names one in spec.template.spec.failureDomain.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 100))]
    #[x_kube(validation = Rule::new("self.all(d, self.exists_one(e, e.name == d.name))").message(
        "spec.failureDomains[].name must be unique: give each failure domain a name of its own"
    ))]
    pub failure_domains: Vec<FailureDomainSpec>,
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

/// One failure domain: where the VMs of the machines CAPI places in it run.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[x_kube(validation = Rule::new("has(self.ovirtcluster) || has(self.hostlabel) || has(self.provider)").message(
    "spec.failureDomains[] needs ovirtcluster (an oVirt cluster), hostlabel (an oVirt affinity label its hosts \
     carry), provider (an OVirtProvider, i.e. another engine), or several of them"
))]
#[serde(rename_all = "camelCase")]
pub struct FailureDomainSpec {
    /// The name CAPI uses (Machine.spec.failureDomain), e.g. rack-a: lower-case letters, digits and '-'.
    #[schemars(length(max = 63))]
    // No `$` anchor: clusterctl would take it for a variable in the released CRDs.
    #[x_kube(validation = Rule::new(
        "self != '' && !self.matches('[^-a-z0-9]') && !self.startsWith('-') && !self.endsWith('-')"
    ).message(
        "spec.failureDomains[].name must be a DNS label: lower-case letters, digits and '-', at most 63 characters, \
         starting and ending with a letter or digit, e.g. rack-a"
    ))]
    pub name: String,

    /// The oVirt cluster whose hosts make up the domain: a machine placed here gets its VM in this cluster instead of
    /// its spec.ovirtcluster. Omitted: the machine's spec.ovirtcluster.
    #[x_kube(validation = Rule::new("self != ''").message(
        "spec.failureDomains[].ovirtcluster must name a cluster in oVirt, or be left out"
    ))]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ovirtcluster: Option<String>,

    /// An oVirt affinity label carried by the domain's hosts: a machine placed here runs only on hosts with it
    /// (CAPOV puts its VM into an affinity group with a hard VM-to-host rule for the label).
    #[x_kube(validation = Rule::new("self != ''").message(
        "spec.failureDomains[].hostlabel must name an affinity label in oVirt, or be left out"
    ))]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hostlabel: Option<String>,

    /// The OVirtProvider (an engine) whose VMs make up the domain: a machine placed here gets its VM on that engine
    /// instead of its spec.provider's, and keeps it there (its spec.provider is set to this one before the VM is
    /// created). The provider must allow the cluster's namespace (its spec.allowedNamespaces), or the domain is not
    /// published. Omitted: the machine's spec.provider.
    #[x_kube(validation = Rule::new(
        "self != '' && !self.matches('[^-.a-z0-9]') && !self.startsWith('-') && !self.endsWith('-')"
    ).message(
        "spec.failureDomains[].provider must name an OVirtProvider (lower-case letters, digits, '-' and '.'), or be \
         left out"
    ))]
    #[schemars(length(max = 253))]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provider: Option<String>,

    /// The names that differ on this domain's engine: what a machine placed here uses instead of the
    /// OVirtMachineTemplate's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub overrides: Option<FailureDomainOverrides>,

    /// Whether control-plane machines may be placed here. Default true.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub control_plane: Option<bool>,
}

/// Per-domain names of engine objects, for a domain whose engine names them differently.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
#[x_kube(validation = Rule::new(
    "has(self.template) || has(self.storagedomainname) || (has(self.vnicprofiles) && size(self.vnicprofiles) > 0)"
).message(
    "spec.failureDomains[].overrides needs template, storagedomainname or vnicprofiles (the names on this domain's \
     engine), or leave overrides out"
))]
pub struct FailureDomainOverrides {
    /// The oVirt template the VMs of this domain are created from, instead of the machine's spec.template.
    #[x_kube(validation = Rule::new("self != ''").message(
        "spec.failureDomains[].overrides.template must name a template on the domain's engine, or be left out"
    ))]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub template: Option<String>,

    /// The storage domain for the disks of this domain's VMs, instead of the machine's spec.storagedomainname.
    #[x_kube(validation = Rule::new("self != ''").message(
        "spec.failureDomains[].overrides.storagedomainname must name a storage domain on the domain's engine, or be \
         left out"
    ))]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub storagedomainname: Option<String>,

    /// vNIC profiles renamed on this domain's engine, e.g. [{from: ovirtmgmt, to: vm-net-c}]. A profile not listed
    /// keeps its name; of two entries for one name the first counts.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 16))]
    pub vnicprofiles: Vec<VnicProfileRename>,
}

/// A vNIC profile's name in spec.nics and on a failure domain's engine.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
pub struct VnicProfileRename {
    /// The name spec.nics[].vnicprofile gives.
    #[schemars(length(max = 255))]
    #[x_kube(validation = Rule::new("self != ''").message(
        "spec.failureDomains[].overrides.vnicprofiles[].from must be a spec.nics[].vnicprofile name, e.g. ovirtmgmt"
    ))]
    pub from: String,
    /// The vNIC profile's name on the domain's engine.
    #[schemars(length(max = 255))]
    #[x_kube(validation = Rule::new("self != ''").message(
        "spec.failureDomains[].overrides.vnicprofiles[].to must name a vNIC profile on the domain's engine, e.g. \
         vm-net-c"
    ))]
    pub to: String,
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

    /// CAPI v1beta2 contract: the failure domains of spec.failureDomains, which CAPI copies to the Cluster.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[x_kube(merge_strategy = ListMerge::Map(vec!["name".into()]))]
    pub failure_domains: Vec<FailureDomainStatus>,

    /// What the oVirt clusters and storage domains this cluster's machines use have free, as the engine reported it
    /// at the provider's last inventory poll.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub capacity: Option<ClusterCapacity>,
}

/// A failure domain as CAPI reads it.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct FailureDomainStatus {
    pub name: String,
    /// Whether control-plane machines may be placed here.
    pub control_plane: bool,
    /// Where the domain is in oVirt: provider, ovirtcluster and hostlabel, as set in spec.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub attributes: BTreeMap<String, String>,
}

/// Free capacity of the oVirt clusters and storage domains a cluster's machines use.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ClusterCapacity {
    /// The oVirt clusters of the machines and failure domains.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ovirt_clusters: Vec<OVirtClusterCapacity>,
    /// The data domains of those clusters' data centers.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub storage_domains: Vec<StorageDomainCapacity>,
}

/// What the hosts of one oVirt cluster can still take.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct OVirtClusterCapacity {
    /// The OVirtProvider whose engine holds the cluster.
    pub provider: String,
    pub name: String,
    pub hosts: i64,
    /// Hosts that are up: the only ones the engine starts VMs on.
    pub hosts_up: i64,
    /// Logical CPUs of the hosts that are up. oVirt shares CPUs among VMs; a VM with more vCPUs than
    /// largestHostCpus starts on no host.
    pub cpus: i64,
    pub largest_host_cpus: i64,
    /// Memory the engine may still give VMs on the hosts that are up (the sum of their max_scheduling_memory).
    pub free_memory_bytes: i64,
    /// The most one host can take: a VM with more memory starts on no host.
    pub largest_free_memory_bytes: i64,
    /// The vGPU instances the GPUs of the hosts that are up can still make, by mediated device type. Read only while
    /// machines of the cluster ask for vGPUs.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub free_vgpus: BTreeMap<String, i64>,
    /// For each device of spec.hostdevices that machines of the cluster ask for: how many of the hosts that are up and
    /// have it have it free (no running VM holds it); 0: all in use.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub free_host_devices: BTreeMap<String, i64>,
    /// The failure domains whose machines this oVirt cluster takes: those naming it (or its provider, with no oVirt
    /// cluster of their own). A domain of host labels only is a part of a cluster's hosts and is not listed.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub failure_domains: Vec<String>,
}

/// The space of one storage domain.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct StorageDomainCapacity {
    pub provider: String,
    pub name: String,
    pub available_bytes: i64,
    pub used_bytes: i64,
    /// Below this much available space the engine refuses new disks on the domain (critical_space_action_blocker).
    pub critical_space_bytes: i64,
}
