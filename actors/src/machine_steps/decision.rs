//! What [`super::decide`] returns: one action for the actor to execute, the conditions to write, and status
//! fields to update. After a successful action the actor observes and decides again at once; on failure it backs
//! off (crate::backoff). `Wait` and `Done` say when to look again.

use std::time::Duration;

use capov_crds::{CpuTopology, DataDiskStatus, DiskFormat, DiskInterface, MachineAddress, Memory, VmType};

use crate::affinity_groups::{Leave, WantedGroup};
use crate::bootstrap_payload::BootstrapFormat;
use crate::conditions::ConditionUpdate;
use crate::guest_network::GuestNetwork;
use crate::ip_claims::WantedClaim;
use crate::nics::NicChange;
use crate::placement::PlacementChoice;

use super::observed::VmDisk;

/// One reconcile's outcome.
#[derive(Clone, Debug, PartialEq)]
pub struct Decision {
    pub action: Action,
    /// Conditions to set, in step order; Ready is recomputed from them by the caller
    /// ([`crate::conditions::ready_summary`]).
    pub conditions: Vec<ConditionUpdate>,
    pub status: StatusChange,
}

/// Status fields to update besides the conditions; None / false = leave as is.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct StatusChange {
    /// Set `status.ready` and `status.initialization.provisioned` to true (never reset).
    pub mark_provisioned: bool,
    pub addresses: Option<Vec<MachineAddress>>,
    pub vm_status: Option<String>,
    /// `status.dataDisks`: the data disks as created.
    pub data_disks: Option<Vec<DataDiskStatus>>,
    /// `status.host`: Some(None) clears it (the VM is not running).
    pub host: Option<Option<String>>,
    /// `status.failureDomain`.
    pub failure_domain: Option<String>,
}

/// What is recorded on an OVirtMachine about the VM CAPOV created for it, before spec.providerID can be.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CreatedVmRecord {
    pub vm_id: String,
    /// The name the VM was created under (the vm-name annotation, kept for good).
    pub vm_name: String,
    /// The engine annotation's value, when the provider's connection is known.
    pub engine: Option<String>,
}

/// When to reconcile again without an event.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Requeue {
    /// Only when something changes (a watch event, a provider message, the periodic resync).
    OnChange,
    /// 5 s doubling to 5 min ([`crate::backoff::backoff_delay`]), counting consecutive backoffs.
    Backoff,
    /// The VM is in a transition: register for the provider's batched 5 s poll.
    PollVm,
    /// Every step is done and the VM has an address: the provider's batched search keeps watching the VM's
    /// status (a change wakes the actor) and a full pass runs once per sync period to refresh the addresses.
    Steady,
    After(Duration),
    /// As `PollVm`, and a pass at the latest after this long even if the VM does not change (a deadline such as
    /// the graceful shutdown's).
    PollVmWithin(Duration),
}

/// The one next thing to do.
#[derive(Clone, Debug, PartialEq)]
pub enum Action {
    /// Paused: write only the Paused condition; no engine calls, no finalizer changes.
    WritePausedOnly,
    AddFinalizer,
    /// Nothing to do now; look again per `Requeue`.
    Wait(Requeue),
    /// Set `status.failureReason`/`failureMessage` (SPEC §2.4); creation steps stop until it is cleared.
    SetFailure {
        reason: &'static str,
        message: String,
    },
    /// The spec changed since the failure: clear failureReason/failureMessage and go on.
    ClearFailure,
    CreateVm(Box<CreateVmPlan>),
    /// Adopt a VM carrying this object's marker: write `spec.providerID` (with the engine and owner-UID
    /// annotations).
    WriteProviderId(String),
    /// Record the id of the VM created for this object (the created-VM annotation) while its disks are copied and
    /// spec.providerID must wait: until then it is the only record of the VM on the object. The VM's name and
    /// engine are recorded with it.
    RecordCreatedVm(Box<CreatedVmRecord>),
    /// Record where the VM of spec.providerID lives (the engine annotation), for machines that predate it.
    RecordEngine(String),
    /// Rewrite a legacy marker (`capov:<ns>/<name>`) of the VM of spec.providerID in the current format, so that
    /// from now on the VM is tied to this object's UID and management cluster.
    UpgradeMarker {
        vm_id: String,
        description: String,
    },
    /// Assign these tags to the VM, creating those the engine does not have ([`crate::vm_tags`]).
    TagVm(Vec<String>),
    /// Create one data disk of spec.datadisks on the VM (before the first start).
    AddDataDisk(Box<DataDiskPlan>),
    /// Record the VM's disks in the system-disks annotation (before the first start).
    RecordSystemDisks(Vec<String>),
    ResizeDisk {
        attachment_id: String,
        disk_id: String,
        size_bytes: u64,
    },
    RenameDiskAlias {
        disk_id: String,
        new_alias: String,
    },
    SyncNics(Vec<NicChange>),
    /// Create these IPAddressClaims (owned by the OVirtMachine, with CAPOV's finalizer).
    CreateIpClaims(Vec<WantedClaim>),
    /// Let these IPAddressClaims of the OVirtMachine go: CAPOV's finalizer removed, the claim deleted.
    ReleaseIpClaims(Vec<String>),
    /// Put the VM into one of its affinity groups, creating the group (with the VM in it) when there is none yet.
    JoinAffinityGroup(Box<JoinGroup>),
    /// Take the VM out of one of its affinity groups before it goes; the last member removes the group.
    LeaveAffinityGroup(Box<LeaveGroup>),
    StartVm {
        use_ignition: bool,
    },
    /// Step 7 is reached and the workload cluster's Node has not been read in this pass
    /// ([`super::NodeObservation::NotRead`]): the actor reads it and decides again. It reads it without holding a
    /// reconcile permit, since a workload apiserver is the tenant's and may be slow or hung.
    ReadNode,
    SetNodeProviderId {
        node_name: String,
        provider_id: String,
    },
    /// `POST /vms/{id}/shutdown` (ACPI through the guest); the forced stop follows if the VM is still running
    /// `deadline_in` from now.
    ShutdownVm {
        vm_id: String,
        deadline_in: Duration,
    },
    /// Deletion with the gate `disk-detach-when-node-gone`: the VM still has disks CAPOV did not create and the
    /// workload cluster's Node and VolumeAttachments have not been read in this pass
    /// ([`super::NodeRelease::NotRead`]). The actor reads them without a reconcile permit and decides again.
    ReadNodeRelease,
    /// Detach these disks from the VM (`DELETE /vms/{vm}/diskattachments/{id}?detach_only=true`): the engine keeps
    /// each on its storage domain. Only ever decided for disks CAPOV did not create, of a VM proven its own, once the
    /// workload cluster shows the Node gone and no VolumeAttachment naming it.
    DetachDisks {
        vm_id: String,
        disks: Vec<VmDisk>,
    },
    /// Set CAPOV's topology labels on the VM's Node ([`crate::node_topology`]).
    SetNodeLabels {
        node_name: String,
        labels: std::collections::BTreeMap<String, String>,
    },
    /// `POST /vms/{id}/stop` with `force=true`.
    StopVmForce {
        vm_id: String,
    },
    DeleteVm {
        vm_id: String,
    },
    /// Release the OVirtMachine. `left_alone`: a VM that is not this object's was found and not touched; the
    /// actor records a Warning Event with this explanation.
    RemoveFinalizer {
        left_alone: Option<String>,
    },
    /// Every step is done; keep addresses current per `Requeue`.
    Done(Requeue),
}

/// An affinity group the VM joins.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct JoinGroup {
    pub group: WantedGroup,
    /// The VM's oVirt cluster, where the group lives.
    pub cluster_id: String,
    pub vm_id: String,
}

/// An affinity group the VM leaves.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LeaveGroup {
    pub cluster_id: String,
    pub vm_id: String,
    pub leave: Leave,
}

/// What the create request needs from the spec; the executor resolves cluster, template and storage domain in
/// the engine and checks the placement with [`crate::placement::plan_placement`].
#[derive(Clone, Debug, PartialEq)]
pub struct CreateVmPlan {
    pub name: String,
    /// The ownership marker ([`crate::identity::OwnerIdentity::marker`]).
    pub description: String,
    pub ovirt_cluster: String,
    /// The failure domain `ovirt_cluster` comes from; None: from spec.ovirtcluster (what ClusterNotFound says to fix).
    pub ovirt_cluster_domain: Option<String>,
    pub template: String,
    pub vm_type: VmType,
    pub cpu: Option<CpuTopology>,
    pub memory: Option<Memory>,
    pub placement: PlacementChoice,
    pub bootstrap_format: BootstrapFormat,
    /// Static addresses and DNS for the VM's initialization (empty: DHCP, nothing sent).
    pub network: GuestNetwork,
}

/// One data disk to create: the executor resolves the storage domain and disk profile by name.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DataDiskPlan {
    /// `<vm name>_<spec name>`: how the VM's disks show which data disk is which.
    pub alias: String,
    pub size_bytes: u64,
    pub storage_domain_name: String,
    pub interface: DiskInterface,
    pub format: DiskFormat,
    pub sparse: bool,
    pub disk_profile_name: Option<String>,
}

impl Action {
    /// Whether this action talks only to the workload cluster (or to nothing): the actor carries it out without a
    /// reconcile permit. Everything else (engine and management-cluster calls) runs with one.
    pub fn needs_permit(&self) -> bool {
        !matches!(
            self,
            Action::WritePausedOnly
                | Action::Wait(_)
                | Action::Done(_)
                | Action::ReadNode
                | Action::ReadNodeRelease
                | Action::SetNodeProviderId { .. }
                | Action::SetNodeLabels { .. }
        )
    }
}

impl Action {
    /// Whether this action changes a VM in the engine: what was seen of the VM before it no longer holds, and the
    /// next pass reads it again or waits for the poll to show the change.
    pub fn writes_engine(&self) -> bool {
        matches!(
            self,
            Action::CreateVm(_)
                | Action::UpgradeMarker { .. }
                | Action::ResizeDisk { .. }
                | Action::RenameDiskAlias { .. }
                | Action::SyncNics(_)
                | Action::TagVm(_)
                | Action::AddDataDisk(_)
                | Action::JoinAffinityGroup(_)
                | Action::LeaveAffinityGroup(_)
                | Action::StartVm { .. }
                | Action::ShutdownVm { .. }
                | Action::StopVmForce { .. }
                | Action::DetachDisks { .. }
                | Action::DeleteVm { .. }
        )
    }
}

impl Decision {
    pub fn new(action: Action, conditions: Vec<ConditionUpdate>) -> Self {
        Decision {
            action,
            conditions,
            status: StatusChange::default(),
        }
    }

    /// The condition of one type in this decision, if any.
    pub fn condition(&self, type_: &str) -> Option<&ConditionUpdate> {
        self.conditions.iter().find(|c| c.type_ == type_)
    }
}
