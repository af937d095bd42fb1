//! The one next thing a machine does, in families by what it touches, and [`Action::class`]: the one place that says,
//! for every action, whether it writes the engine, needs a reconcile permit, destroys, or asks for a read. Every
//! match here is exhaustive: a new action does not compile until its class and its family's executor say what it
//! does.

use std::collections::BTreeMap;
use std::time::Duration;

use crate::network::ip_claims::WantedClaim;
use crate::network::nics::NicChange;

use super::decision::{CreateVmPlan, CreatedVmRecord, DataDiskPlan, JoinGroup, LeaveGroup, Requeue};
use super::observed::VmDisk;

/// The one next thing to do. The first three do nothing outside the object's status (the wait family); the others
/// are families, each with its executor in the runtime.
#[derive(Clone, Debug, PartialEq)]
pub enum Action {
    /// Paused: write only the Paused condition; no engine calls, no finalizer changes.
    WritePausedOnly,
    /// Nothing to do now; look again per `Requeue`.
    Wait(Requeue),
    /// Every step is done; keep addresses current per `Requeue`.
    Done(Requeue),
    /// The VM's creation, ownership marker, power and removal.
    Vm(VmAction),
    /// Changes to a VM that was never started, before its first start.
    Prepare(PrepareAction),
    /// Writes to the OVirtMachine (and its IPAddressClaims) in the management cluster.
    Bookkeeping(BookkeepingAction),
    /// The VM's affinity groups.
    Groups(GroupAction),
    /// Writes to the VM's Node in the workload cluster.
    Workload(WorkloadAction),
    /// A fact the decision needs was not read in this pass: the actor reads it and decides again.
    Read(ReadRequest),
}

/// The VM's creation, ownership marker, power and removal.
#[derive(Clone, Debug, PartialEq)]
pub enum VmAction {
    Create(Box<CreateVmPlan>),
    /// Rewrite a legacy marker (`capov:<ns>/<name>`) of the VM of spec.providerID in the current format, so that
    /// from now on the VM is tied to this object's UID and management cluster.
    UpgradeMarker {
        vm_id: String,
        description: String,
    },
    Start {
        use_ignition: bool,
    },
    /// `POST /vms/{id}/shutdown` (ACPI through the guest); the forced stop follows if the VM is still running
    /// `deadline_in` from now.
    Shutdown {
        vm_id: String,
        deadline_in: Duration,
    },
    /// Detach these disks from the VM (`DELETE /vms/{vm}/diskattachments/{id}?detach_only=true`): the engine keeps
    /// each on its storage domain. Only ever decided for disks CAPOV did not create, of a VM proven its own, once the
    /// workload cluster shows the Node gone and no VolumeAttachment naming it.
    DetachDisks {
        vm_id: String,
        disks: Vec<VmDisk>,
    },
    /// `POST /vms/{id}/stop` with `force=true`.
    StopForce {
        vm_id: String,
    },
    Delete {
        vm_id: String,
    },
}

/// The changes to a VM that was never started, before its first start.
#[derive(Clone, Debug, PartialEq)]
pub enum PrepareAction {
    /// Assign these tags to the VM, creating those the engine does not have ([`crate::naming::vm_tags`]).
    Tag(Vec<String>),
    /// Create one data disk of spec.datadisks on the VM.
    AddDataDisk(Box<DataDiskPlan>),
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
}

/// Writes to the OVirtMachine (and its IPAddressClaims) in the management cluster.
#[derive(Clone, Debug, PartialEq)]
pub enum BookkeepingAction {
    AddFinalizer,
    /// Set `status.failureReason`/`failureMessage` (SPEC §2.4); creation steps stop until it is cleared.
    SetFailure {
        reason: &'static str,
        message: String,
    },
    /// The spec changed since the failure: clear failureReason/failureMessage and go on.
    ClearFailure,
    /// Adopt a VM carrying this object's marker: write `spec.providerID` (with the engine and owner-UID
    /// annotations).
    WriteProviderId(String),
    /// Record the id of the VM created for this object (the created-VM annotation) while its disks are copied and
    /// spec.providerID must wait: until then it is the only record of the VM on the object. The VM's name and
    /// engine are recorded with it.
    RecordCreatedVm(Box<CreatedVmRecord>),
    /// Record where the VM of spec.providerID lives (the engine annotation), for machines that predate it.
    RecordEngine(String),
    /// Record the VM's disks in the system-disks annotation (before the first start).
    RecordSystemDisks(Vec<String>),
    /// Create these IPAddressClaims (owned by the OVirtMachine, with CAPOV's finalizer).
    CreateIpClaims(Vec<WantedClaim>),
    /// Let these IPAddressClaims of the OVirtMachine go: CAPOV's finalizer removed, the claim deleted.
    ReleaseIpClaims(Vec<String>),
    /// Release the OVirtMachine. `left_alone`: a VM that is not this object's was found and not touched; the
    /// actor records a Warning Event with this explanation.
    RemoveFinalizer {
        left_alone: Option<String>,
    },
}

/// The VM's affinity groups.
#[derive(Clone, Debug, PartialEq)]
pub enum GroupAction {
    /// Put the VM into one of its affinity groups, creating the group (with the VM in it) when there is none yet.
    Join(Box<JoinGroup>),
    /// Take the VM out of one of its affinity groups before it goes; the last member removes the group.
    Leave(Box<LeaveGroup>),
}

/// Writes to the VM's Node in the workload cluster.
#[derive(Clone, Debug, PartialEq)]
pub enum WorkloadAction {
    SetNodeProviderId {
        node_name: String,
        provider_id: String,
    },
    /// Set CAPOV's topology labels on the VM's Node ([`crate::placement::node_topology`]).
    SetNodeLabels {
        node_name: String,
        labels: BTreeMap<String, String>,
    },
}

/// A fact of [`super::Observed`] that is [`super::Fact::NotRead`] and that the decision needs: the actor reads it,
/// fills it in, and decides again.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReadRequest {
    /// The VM's NICs and the vNIC profiles of its data center, [`super::Observed::nics`].
    Nics,
    /// The affinity groups (and labels) of the VM's oVirt cluster, [`super::Observed::groups`].
    Groups,
    /// The workload cluster's Node of the VM (step 7), [`super::Observed::node`].
    Node,
    /// During deletion with the gate `disk-detach-when-node-gone`: the workload cluster's Node and the
    /// VolumeAttachments naming it, [`super::Observed::node_release`].
    NodeRelease,
}

/// What carrying out an action means, as the actor's pass must know it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ActionClass {
    /// It changes a VM in the engine: what was seen of the VM before no longer holds, and the next pass reads it
    /// again or waits for the poll to show the change.
    pub writes_engine: bool,
    /// It runs with a reconcile permit. Actions that talk only to the workload cluster (a tenant's apiserver, which
    /// may be slow or hung) or to nothing run without one.
    pub needs_permit: bool,
    /// It stops, removes or takes disks from the VM: decided only on the VM as read in this pass, never on a held
    /// snapshot of the provider's poll, which can miss the last change (a VM that just went `unknown`).
    pub destroys: bool,
    /// A fact the decision needs; the actor reads it and decides again instead of executing anything.
    pub reads: Option<ReadRequest>,
    /// The facts that must be read before this action is taken ([`super::decide`] asks for the first one that is
    /// not): a first start checks the NICs and joins the groups first, a stop or a removal leaves the groups first.
    pub reads_first: &'static [ReadRequest],
}

impl ActionClass {
    const NOTHING: ActionClass = ActionClass {
        writes_engine: false,
        needs_permit: false,
        destroys: false,
        reads: None,
        reads_first: &[],
    };
    /// An engine write on the VM.
    const ENGINE: ActionClass = ActionClass {
        writes_engine: true,
        needs_permit: true,
        ..ActionClass::NOTHING
    };
    const DESTROYS: ActionClass = ActionClass {
        destroys: true,
        ..ActionClass::ENGINE
    };
    /// A management-cluster write.
    const MANAGEMENT: ActionClass = ActionClass {
        needs_permit: true,
        ..ActionClass::NOTHING
    };
}

impl Action {
    /// What this action is, for the pass: the one classification of every action.
    pub fn class(&self) -> ActionClass {
        match self {
            Action::WritePausedOnly | Action::Wait(_) | Action::Done(_) => ActionClass::NOTHING,
            Action::Vm(action) => match action {
                VmAction::Create(_) | VmAction::UpgradeMarker { .. } => ActionClass::ENGINE,
                VmAction::Start { .. } => ActionClass {
                    reads_first: &[ReadRequest::Nics, ReadRequest::Groups],
                    ..ActionClass::ENGINE
                },
                VmAction::Shutdown { .. } | VmAction::DetachDisks { .. } => ActionClass::DESTROYS,
                VmAction::StopForce { .. } | VmAction::Delete { .. } => ActionClass {
                    reads_first: &[ReadRequest::Groups],
                    ..ActionClass::DESTROYS
                },
            },
            Action::Prepare(action) => match action {
                PrepareAction::Tag(_)
                | PrepareAction::AddDataDisk(_)
                | PrepareAction::ResizeDisk { .. }
                | PrepareAction::RenameDiskAlias { .. }
                | PrepareAction::SyncNics(_) => ActionClass::ENGINE,
            },
            Action::Bookkeeping(action) => match action {
                BookkeepingAction::AddFinalizer
                | BookkeepingAction::SetFailure { .. }
                | BookkeepingAction::ClearFailure
                | BookkeepingAction::WriteProviderId(_)
                | BookkeepingAction::RecordCreatedVm(_)
                | BookkeepingAction::RecordEngine(_)
                | BookkeepingAction::RecordSystemDisks(_)
                | BookkeepingAction::CreateIpClaims(_)
                | BookkeepingAction::ReleaseIpClaims(_)
                | BookkeepingAction::RemoveFinalizer { .. } => ActionClass::MANAGEMENT,
            },
            Action::Groups(action) => match action {
                GroupAction::Join(_) | GroupAction::Leave(_) => ActionClass::ENGINE,
            },
            Action::Workload(action) => match action {
                WorkloadAction::SetNodeProviderId { .. } | WorkloadAction::SetNodeLabels { .. } => ActionClass::NOTHING,
            },
            Action::Read(request) => ActionClass {
                reads: Some(*request),
                needs_permit: request.needs_permit(),
                ..ActionClass::NOTHING
            },
        }
    }

    /// Whether the actor carries this action out with a reconcile permit ([`ActionClass::needs_permit`]).
    pub fn needs_permit(&self) -> bool {
        self.class().needs_permit
    }

    /// Whether this action changes a VM in the engine ([`ActionClass::writes_engine`]).
    pub fn writes_engine(&self) -> bool {
        self.class().writes_engine
    }
}

impl ReadRequest {
    /// Engine reads run with the pass's permit; workload-cluster reads without one, since a workload apiserver is
    /// the tenant's and may be slow or hung.
    pub fn needs_permit(self) -> bool {
        match self {
            ReadRequest::Nics | ReadRequest::Groups => true,
            ReadRequest::Node | ReadRequest::NodeRelease => false,
        }
    }
}
