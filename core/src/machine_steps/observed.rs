//! What the machine actor saw before deciding: plain data, gathered from the stores, the provider actor and the
//! engine. The facts that cost a request and matter only at some steps are [`Fact`]s: not read until a decision
//! asks for one ([`super::Action::Read`]), the actor then reads it and decides again.

use std::time::Duration;

use capov_crds::MachineSettings;

use super::engine_lookups::{CreationFacts, DataDiskTarget, EngineLookup, Lookup, data_disk_target_unread};
use super::fact::Fact;
use crate::conditions::reasons;
use crate::network::addresses::{ReportedDevice, VmNic};
use crate::network::ip_claims::ClaimFact;
use crate::network::nics::NicAssessment;
use crate::placement::affinity_groups::{GroupFact, GroupOwner, WantedGroup};
use crate::placement::failure_domains::FailureDomainChoice;
use crate::policy::feature_gates::FeatureGates;
use crate::trust::identity::{EngineIdentity, OwnerIdentity, Ownership};
use crate::vm::bootstrap_payload::BootstrapFormat;

/// A fact of [`Observed`] that is [`Fact::NotRead`] and that the decision needs: the actor reads it,
/// fills it in, and decides again.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ReadRequest {
    /// The VM's NICs and the vNIC profiles of its data center, [`Observed::nics`].
    Nics,
    /// The affinity groups (and labels) of the VM's oVirt cluster, [`Observed::groups`].
    Groups,
    /// The workload cluster's Node of the VM (step 7), [`Observed::node`].
    Node,
    /// During deletion with the gate `disk-detach-when-node-gone`: the workload cluster's Node and the
    /// VolumeAttachments naming it, [`Observed::node_release`].
    NodeRelease,
    /// An engine lookup of the creation of the VM or of a data disk, [`Observed::creation`],
    /// [`Observed::data_disk_target`].
    Lookup(EngineLookup),
}

impl ReadRequest {
    /// Engine reads run with the pass's permit; workload-cluster reads without one, since a workload apiserver is
    /// the tenant's and may be slow or hung.
    pub fn needs_permit(&self) -> bool {
        match self {
            ReadRequest::Nics | ReadRequest::Groups | ReadRequest::Lookup(_) => true,
            ReadRequest::Node | ReadRequest::NodeRelease => false,
        }
    }
}

impl Observed {
    /// Whether a decision must ask for this fact before the action it would take: it is not read and it can matter
    /// (NICs only when spec.nics names some, groups only when the machine belongs in some).
    pub fn unread(&self, request: &ReadRequest) -> bool {
        match request {
            ReadRequest::Nics => self.nics == Fact::NotRead && !self.settings.nics.is_empty(),
            ReadRequest::Groups => self.groups == Fact::NotRead && !self.groups_wanted.is_empty(),
            ReadRequest::Node => self.node == Fact::NotRead,
            ReadRequest::NodeRelease => self.node_release == Fact::NotRead,
            ReadRequest::Lookup(lookup @ EngineLookup::DataDiskTarget { .. }) => {
                data_disk_target_unread(&self.data_disk_target, lookup)
            }
            ReadRequest::Lookup(EngineLookup::VmHostDevices { .. }) => self.vm_host_devices == Fact::NotRead,
            ReadRequest::Lookup(EngineLookup::VmNumaNodes { .. }) => self.vm_numa_nodes == Fact::NotRead,
            ReadRequest::Lookup(lookup) => self.creation.unread(lookup),
        }
    }

    /// Whether the object records a VM (spec.providerID or the created-VM annotation): its provider is fixed then.
    pub fn vm_recorded(&self) -> bool {
        self.provider_id.is_some() || self.created_vm.is_some()
    }

    /// The engine name of this machine's VM: the name CAPOV recorded when it created the VM, else the one
    /// spec.vmnametemplate renders now ([`crate::naming::vm_name`]). Once recorded, edits of the template or of the
    /// cluster-name label no longer change where the VM is looked for.
    pub fn vm_name(&self) -> String {
        match &self.recorded_vm_name {
            Some(recorded) => recorded.clone(),
            None => self.rendered_vm_name(),
        }
    }

    /// The VM name spec.vmnametemplate renders with the object's name, namespace and cluster now.
    pub fn rendered_vm_name(&self) -> String {
        let parts = crate::naming::vm_name::NameParts {
            name: &self.name,
            namespace: &self.namespace,
            cluster: self.cluster_name.as_deref().unwrap_or_default(),
        };
        crate::naming::vm_name::for_machine(self.settings.vmnametemplate.as_deref(), parts)
    }
}

/// Everything [`super::decide`] looks at. Comparable, so that the actor can tell an action that changed nothing
/// ([`super::without_effect`]).
#[derive(Clone, Debug, PartialEq)]
pub struct Observed {
    pub namespace: String,
    /// The OVirtMachine's name; the VM's name is [`Observed::vm_name`] (the same unless longer than the engine allows).
    pub name: String,
    /// Whose VM this machine may change: the marker it writes and expects ([`crate::trust::identity`]).
    pub owner: OwnerIdentity,
    /// `Cluster.spec.paused` or the `cluster.x-k8s.io/paused` annotation.
    pub paused: bool,
    /// `metadata.deletionTimestamp` is set.
    pub deletion_requested: bool,
    /// How long ago the deletion was requested (now − deletionTimestamp, zero when the clocks disagree); None
    /// without a deletion or without a graceful shutdown. The graceful shutdown's deadline counts from it.
    pub deletion_requested_for: Option<Duration>,
    /// The CAPI cluster's name (the `cluster.x-k8s.io/cluster-name` label, else the Machine's spec.clusterName).
    pub cluster_name: Option<String>,
    /// The annotation `clusterctl move` sets on the source's objects before deleting them: the object lives on in
    /// the target management cluster, and so does its VM.
    pub deleted_for_move: bool,
    pub has_finalizer: bool,
    /// An owner reference of kind Machine (group cluster.x-k8s.io) exists and the Machine was found.
    pub owner_machine_found: bool,
    /// The Cluster named by the `cluster.x-k8s.io/cluster-name` label was found.
    pub cluster_found: bool,
    /// `status.initialization.infrastructureProvisioned` (or v1beta1 `status.infrastructureReady`) of the Cluster.
    pub cluster_infrastructure_provisioned: bool,
    pub bootstrap: Bootstrap,
    pub connection: ProviderConnection,
    /// `spec.providerID` as written (may be malformed if a user set it).
    pub provider_id: Option<String>,
    /// The VM CAPOV created for this object and has not recorded in spec.providerID yet (the created-VM
    /// annotation, else what this actor created and could not record yet).
    pub created_vm: Option<String>,
    /// The VM name CAPOV recorded with the created VM (the vm-name annotation), when it is a name the engine could
    /// have given a VM; see [`Observed::vm_name`].
    pub recorded_vm_name: Option<String>,
    /// The release-vm annotation is set: a deletion held because the VM is this machine's under another
    /// management cluster lets the object go and leaves the VM.
    pub release_vm_requested: bool,
    pub failure: FailureState,
    /// `status.ready` / `status.initialization.provisioned`: the VM has been up once.
    pub provisioned: bool,
    /// The VM as found: by the id of `spec.providerID` when that is valid, else by exact name (during deletion
    /// also by name when the id is not found, so that "gone" is confirmed both ways). None = no VM.
    pub vm: Option<ObservedVm>,
    /// The engine annotation: where the VM of spec.providerID was created (`EngineIdentity::annotation`).
    pub recorded_engine: Option<String>,
    /// The engine and user of the provider's working connection; None without one.
    pub current_engine: Option<EngineIdentity>,
    /// The annotation `capov.infrastructure.cluster.x-k8s.io/system-disks` (disk ids); None = not recorded.
    pub system_disks: Option<Vec<String>>,
    /// The OVirtMachine's spec (without providerID).
    pub settings: MachineSettings,
    /// The OVirtProvider's defaults for placement.
    pub provider_defaults: ProviderDefaults,
    pub gates: FeatureGates,
    /// The VM's NICs compared with `spec.nics` ([`crate::network::nics::assess_nics`]). Read when a decision would
    /// start the VM for the first time (they matter only at that point): step 5 passes while they are not read, and
    /// the start asks for them ([`super::ActionClass::reads_first`]).
    pub nics: Fact<NicAssessment>,
    /// What the workload cluster says about the VM's Node: step 7 asks for it.
    pub node: Fact<NodeObservation>,
    /// During deletion with the gate `disk-detach-when-node-gone`: whether the workload cluster still has the
    /// machine's Node or VolumeAttachments naming it. Asked for when the decision reaches that point.
    pub node_release: Fact<NodeRelease>,
    /// Disks this actor detached from the VM during this deletion (ids), named in the conditions that follow.
    pub detached_disks: Vec<String>,
    /// `OVirtCluster.spec.controlPlaneEndpoint.host`, never reported as a machine address.
    pub control_plane_host: Option<String>,
    /// The IPAddressClaims of this object, or of the names it would give its claims, as the stores show them
    /// (static addresses, [`crate::network::ip_claims`]).
    pub ip_claims: Vec<ClaimFact>,
    /// Whether `ip_claims` can be trusted to be complete: the IPAddressClaims have been listed since the start (or
    /// CAPI's IPAM API is not served, so no claim can exist). Until then no claim is let go of, and no finalizer
    /// goes that would leave a claim behind.
    pub ip_claims_known: bool,
    /// `Machine.spec.failureDomain` among the OVirtCluster's spec.failureDomains.
    pub failure_domain: FailureDomainChoice,
    /// The OVirtProvider's `spec.tenantPlacement`: the host labels and oVirt clusters machines may ask for.
    pub tenant_placement: Option<capov_crds::TenantPlacement>,
    /// The affinity groups the VM belongs in ([`crate::placement::affinity_groups::wanted_groups`]): its machine group's
    /// anti-affinity group, its failure domain's host-label group.
    pub groups_wanted: Vec<WantedGroup>,
    /// Whose groups the machine's are (its namespace, CAPI cluster and management cluster).
    pub group_owner: GroupOwner,
    /// The affinity groups of the VM's oVirt cluster. Read when a decision would start the VM (joining its groups
    /// comes first) or stop or delete it (leaving them comes first): those actions ask for them
    /// ([`super::ActionClass::reads_first`]).
    pub groups: Fact<GroupsObservation>,
    /// The message of MachinePlacementSet when it said, before the first start, that a soft anti-affinity group
    /// could not be used: kept once the VM runs, when the groups are no longer read.
    pub placement_skipped: Option<String>,
    /// What creating the VM needs from the engine (its oVirt cluster, template, disk placement and room for a
    /// clone), asked for one after the other by the creation step.
    pub creation: CreationFacts,
    /// The storage domain and disk profile of the data disk the step is about to create.
    pub data_disk_target: Fact<Lookup<DataDiskTarget>>,
    /// The names of the host devices added to the VM (not the placeholders the engine adds beside them); read only
    /// before the first start of a VM that asks for some.
    pub vm_host_devices: Fact<Lookup<Vec<String>>>,
    /// The indexes of the VM's virtual NUMA nodes; read only before the first start of a VM with spec.numa.
    pub vm_numa_nodes: Fact<Lookup<Vec<u32>>>,
}

/// The affinity groups (and labels) of the VM's oVirt cluster.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum GroupsObservation {
    Read {
        groups: Vec<GroupFact>,
        /// Affinity label names to ids (read only when a host-label group is wanted).
        labels: std::collections::BTreeMap<String, String>,
    },
    /// The engine refused to list them (CAPOV's user lacks an administrative role on the cluster) or could not
    /// tell the VM's cluster.
    Unavailable { message: String },
}

/// The Machine's bootstrap data.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Bootstrap {
    /// `Machine.spec.bootstrap.dataSecretName` is not set yet (or its Secret not found).
    NotReady,
    Ready(BootstrapFormat),
    /// The Secret's `format` key holds something we cannot pass to the VM.
    Unsupported(String),
}

impl Bootstrap {
    /// From the bootstrap Secret's `format` key: missing or empty = cloud-config.
    pub fn from_format_key(format: Option<&str>) -> Bootstrap {
        match format.map(str::trim) {
            None | Some("") | Some("cloud-config") => Bootstrap::Ready(BootstrapFormat::CloudConfig),
            Some("ignition") => Bootstrap::Ready(BootstrapFormat::Ignition),
            Some(other) => Bootstrap::Unsupported(other.to_string()),
        }
    }
}

/// The provider actor's connection, as the machine sees it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ProviderConnection {
    /// `insecure_transport`: the engine URL is plain http (CanConnectToOVirt True with reason InsecureTransport).
    Ready { insecure_transport: bool },
    Failed {
        failure: ConnectionFailure,
        message: String,
        persisted_for: Duration,
    },
}

impl ProviderConnection {
    /// Connected over plain http.
    pub fn insecure_transport(&self) -> bool {
        matches!(
            self,
            ProviderConnection::Ready {
                insecure_transport: true
            }
        )
    }
}

/// Why there is no working connection (SPEC §2 step 2).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ConnectionFailure {
    ProviderNotFound,
    CredentialsNotFound,
    CredentialsInvalid,
    AuthenticationFailed,
    PermissionDenied,
    TlsVerificationFailed,
    InvalidCaBundle,
    EngineUnreachable,
    /// The OVirtProvider's spec.allowedNamespaces does not list the machine's namespace.
    NamespaceNotAllowed,
    InvalidEngineUrl,
    /// The OVirtProvider's management-cluster annotation is unusable: nothing is done through the provider.
    InvalidManagementClusterId,
}

impl ConnectionFailure {
    pub(crate) const ALL: [ConnectionFailure; 11] = [
        ConnectionFailure::ProviderNotFound,
        ConnectionFailure::CredentialsNotFound,
        ConnectionFailure::CredentialsInvalid,
        ConnectionFailure::AuthenticationFailed,
        ConnectionFailure::PermissionDenied,
        ConnectionFailure::TlsVerificationFailed,
        ConnectionFailure::InvalidCaBundle,
        ConnectionFailure::EngineUnreachable,
        ConnectionFailure::NamespaceNotAllowed,
        ConnectionFailure::InvalidEngineUrl,
        ConnectionFailure::InvalidManagementClusterId,
    ];

    /// The CanConnectToOVirt reason.
    pub fn reason(self) -> &'static str {
        match self {
            ConnectionFailure::ProviderNotFound => reasons::PROVIDER_NOT_FOUND,
            ConnectionFailure::CredentialsNotFound => reasons::CREDENTIALS_NOT_FOUND,
            ConnectionFailure::CredentialsInvalid => reasons::CREDENTIALS_INVALID,
            ConnectionFailure::AuthenticationFailed => reasons::AUTHENTICATION_FAILED,
            ConnectionFailure::PermissionDenied => reasons::PERMISSION_DENIED,
            ConnectionFailure::TlsVerificationFailed => reasons::TLS_VERIFICATION_FAILED,
            ConnectionFailure::InvalidCaBundle => reasons::INVALID_CA_BUNDLE,
            ConnectionFailure::EngineUnreachable => reasons::ENGINE_UNREACHABLE,
            ConnectionFailure::NamespaceNotAllowed => reasons::NAMESPACE_NOT_ALLOWED,
            ConnectionFailure::InvalidEngineUrl => reasons::INVALID_ENGINE_URL,
            ConnectionFailure::InvalidManagementClusterId => reasons::INVALID_MANAGEMENT_CLUSTER_ID,
        }
    }

    /// From a reason string, e.g. the provider actor's condition reason.
    pub fn from_reason(reason: &str) -> Option<ConnectionFailure> {
        Self::ALL.into_iter().find(|f| f.reason() == reason)
    }

    /// After how long this failure makes a not-yet-provisioned machine fail for good (SPEC §2.4); None = never,
    /// it is retried forever.
    pub fn critical_after(self) -> Option<Duration> {
        match self {
            ConnectionFailure::AuthenticationFailed
            | ConnectionFailure::TlsVerificationFailed
            | ConnectionFailure::InvalidCaBundle => Some(Duration::ZERO),
            ConnectionFailure::ProviderNotFound | ConnectionFailure::CredentialsNotFound => {
                Some(crate::policy::backoff::CRITICAL_GRACE)
            }
            // InvalidEngineUrl: only objects older than the CRD rule get here, on an operator upgrade; their
            // machines wait for the provider to be fixed instead of failing for good. So do those of a provider
            // whose management-cluster annotation a platform admin got wrong.
            ConnectionFailure::CredentialsInvalid
            | ConnectionFailure::PermissionDenied
            | ConnectionFailure::EngineUnreachable
            | ConnectionFailure::NamespaceNotAllowed
            | ConnectionFailure::InvalidEngineUrl
            | ConnectionFailure::InvalidManagementClusterId => None,
        }
    }

    /// Severity while not critical: Error when a user must fix something, Warning when it may heal by itself
    /// (a provider or Secret that GitOps has not applied yet, a network outage).
    pub fn severity(self) -> capov_crds::Severity {
        match self {
            ConnectionFailure::ProviderNotFound
            | ConnectionFailure::CredentialsNotFound
            | ConnectionFailure::EngineUnreachable => capov_crds::Severity::Warning,
            _ => capov_crds::Severity::Error,
        }
    }
}

/// `status.failureReason` of the machine.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FailureState {
    Clear,
    /// Set; `spec_changed_since` = metadata.generation is newer than the generation the failure was recorded at
    /// (the CanConnectToOVirt condition's observedGeneration).
    Set {
        spec_changed_since: bool,
    },
}

/// The OVirtProvider's placement defaults.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ProviderDefaults {
    pub diskclone: Option<bool>,
    pub storagedomainname: Option<String>,
    /// `spec.vmtags`: None = false.
    pub vmtags: Option<bool>,
    /// The engine's version as its `GET /api` reported it (`4.5.4-1.el8`); empty when it did not.
    pub engine_version: String,
}

/// The VM as the engine shows it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ObservedVm {
    pub id: String,
    /// The engine's `vm_status`: image_locked, down, wait_for_launch, powering_up, up, …
    pub status: String,
    /// What the VM's description says about its owner ([`crate::trust::identity::ownership`]).
    pub ownership: Ownership,
    /// How the VM was found.
    pub found_by: FoundBy,
    /// The management cluster id the VM's marker names, when the marker names this very object (namespace, name
    /// and its UID or recorded owner UID) but a management cluster CAPOV does not accept here
    /// ([`crate::trust::identity::NotOwned::MovedFromElsewhere`]).
    pub foreign_management_cluster: Option<String>,
    /// The VM was started at least once (e.g. the engine reports a `start_time`, or we sent a start).
    pub ever_started: bool,
    /// The VM's OS type (`<os><type>`), which decides what guest initialization a start delivers; None = not shown.
    pub os_type: Option<String>,
    /// Read only when a step can need them: before the first start and at deletion; else empty.
    pub disks: Vec<VmDisk>,
    /// The id of the VM's oVirt cluster (where its affinity groups live).
    pub cluster_id: Option<String>,
    /// Where the VM runs; None while it is not running.
    pub host: Option<VmHost>,
    pub nics: Vec<VmNic>,
    pub reported_devices: Vec<ReportedDevice>,
    /// Names of the tags assigned to the VM; read only before the first start when the provider tags VMs, else
    /// None.
    pub tags: Option<Vec<String>>,
}

/// The host a VM runs on.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct VmHost {
    pub id: String,
    /// None until the provider's inventory poll showed the host (or when CAPOV's user may not see it).
    pub name: Option<String>,
    /// The engine's `host_status` (up, preparing_for_maintenance, maintenance, non_responsive, …), with the same
    /// proviso.
    pub status: Option<String>,
    /// Whether the provider had read its host inventory when the VM was seen. Before that (the first seconds after a
    /// restart) name and status are None for want of a poll, not because the host is hidden: what the machine's
    /// status says of the host stands until the poll shows it.
    pub inventoried: bool,
}

/// How the observed VM was found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FoundBy {
    /// The id of spec.providerID.
    ProviderId,
    /// The id of the created-VM annotation: no providerID yet, the VM's disks were being copied.
    CreatedVm,
    /// Its exact name (no providerID, or the providerID's id was not found during deletion).
    Name,
}

/// One attached disk.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct VmDisk {
    pub attachment_id: String,
    pub disk_id: String,
    pub alias: String,
    pub bootable: bool,
    /// Bytes.
    pub provisioned_size: u64,
    /// The disk's status: ok, locked, illegal.
    pub status: String,
}

/// The VM's Node in the workload cluster.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum NodeObservation {
    /// The kubeconfig Secret is missing or the API server did not answer.
    Unreachable { message: String },
    /// The kubeconfig asks for something CAPOV refuses to do (`capov_actors::workload_kubeconfig`); no request was
    /// made. The message names the field and what to write instead.
    Rejected { message: String },
    /// No Node with the VM's id as systemUUID or the VM's name.
    NotFound,
    Found {
        name: String,
        provider_id: Option<String>,
        /// Its labels CAPOV keeps ([`crate::placement::node_topology::KEYS`]).
        labels: std::collections::BTreeMap<String, String>,
    },
}

/// What the workload cluster says about the Node of a machine being deleted whose VM still has disks CAPOV did not
/// create, with the gate `disk-detach-when-node-gone` on: only a cluster that answers, without the Node and without a
/// VolumeAttachment naming it, lets those disks be detached.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum NodeRelease {
    /// The Cluster or its kubeconfig Secret is missing, or the apiserver did not answer (in time, within bounds):
    /// nothing shows the Node gone.
    Unreachable { message: String },
    /// The kubeconfig asks for something CAPOV refuses to do; nothing was sent.
    Rejected { message: String },
    /// The Node (by the Machine's nodeRef, the VM's name or the VM id as systemUUID) still exists.
    NodeExists { name: String },
    /// The Node is gone but VolumeAttachments still name it: `names` (the first few) of `total`.
    VolumeAttachments {
        node: String,
        names: Vec<String>,
        total: usize,
    },
    /// The Node is gone and no VolumeAttachment names it.
    Released { node: String },
}
