//! The one next thing a machine does, in families by what it touches, and [`Action::class`]: the one place that says,
//! for every action, whether it writes the engine, needs a reconcile permit, destroys, or asks for a read. Every
//! match here is exhaustive: a new action does not compile until its class and its family's executor say what it
//! does.

use std::collections::BTreeMap;
use std::time::Duration;

use capov_crds::{
    CpuTopology, CpuTuning, DiskFormat, DiskInterface, HighAvailability, Memory, TemplateVersion, Vgpu, VmType,
};

use crate::network::guest_network::GuestNetwork;
use crate::network::ip_claims::WantedClaim;
use crate::network::nics::NicChange;
use crate::placement::affinity_groups::{Leave, WantedGroup};
use crate::placement::{DiskPlacement, PlacementChoice};
use crate::vm::bootstrap_payload::BootstrapFormat;

use super::observed::{ReadRequest, VmDisk};

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
    /// Add these host devices (by name) to the VM, pinned to the host that has them (spec.hostdevices).
    AttachHostDevices {
        vm_id: String,
        names: Vec<String>,
    },
    /// Add these virtual NUMA nodes to the VM, pinned to its hosts (spec.numa).
    AddNumaNodes {
        vm_id: String,
        nodes: Vec<crate::vm::numa_layout::NumaNodePlan>,
    },
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
    /// Set spec.provider to the OVirtProvider of the machine's failure domain before any VM is created (issue 39):
    /// from then on the machine uses it, and keeps it once spec.providerID is set.
    SetProvider(String),
    /// Adopt a VM carrying this object's marker: write `spec.providerID` (with the engine and owner-UID
    /// annotations), and the system-disks annotation with it when its disks are already all there (`system_disks`).
    WriteProviderId {
        provider_id: String,
        system_disks: Option<Vec<String>>,
    },
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
    /// Set the Node's spec.providerID, and in the same write the topology labels it lacks: one request to a
    /// workload apiserver that all of a cluster's machines take turns on.
    SetNodeProviderId {
        node_name: String,
        provider_id: String,
        labels: BTreeMap<String, String>,
    },
    /// Set CAPOV's topology labels on the VM's Node ([`crate::placement::node_topology`]) when they change after
    /// the providerID was set (a migration to another host).
    SetNodeLabels {
        node_name: String,
        labels: BTreeMap<String, String>,
    },
}

/// What carrying out an action means, as the actor's pass must know it.
#[derive(Clone, Debug, PartialEq, Eq)]
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
                | PrepareAction::SyncNics(_)
                | PrepareAction::AttachHostDevices { .. }
                | PrepareAction::AddNumaNodes { .. } => ActionClass::ENGINE,
            },
            Action::Bookkeeping(action) => match action {
                BookkeepingAction::AddFinalizer
                | BookkeepingAction::SetFailure { .. }
                | BookkeepingAction::ClearFailure
                | BookkeepingAction::SetProvider(_)
                | BookkeepingAction::WriteProviderId { .. }
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
                reads: Some(request.clone()),
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
    /// 5 s doubling to 5 min ([`crate::policy::backoff::backoff_delay`]), counting consecutive backoffs.
    Backoff,
    /// Waiting for a kubelet to register the VM's Node: as `Backoff`, but no wait longer than
    /// [`crate::policy::backoff::NODE_WAIT_CEILING`] during the first [`crate::policy::backoff::NODE_WAIT_WINDOW`]
    /// of retries, so that a Node which registers while the VM boots is seen within seconds, not after a wait that
    /// doubled while the VM was booting.
    AwaitNode,
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
    /// The ownership marker ([`crate::trust::identity::OwnerIdentity::marker`]).
    pub description: String,
    pub ovirt_cluster: String,
    /// The failure domain `ovirt_cluster` comes from; None: from spec.ovirtcluster (what ClusterNotFound says to fix).
    pub ovirt_cluster_domain: Option<String>,
    pub template: String,
    /// Where spec.template came from, what TemplateNotFound says to fix: spec.template, or a failure domain's
    /// overrides.template.
    pub template_fix: String,
    /// What StorageDomainNotFound says to fix when a failure domain's overrides.storagedomainname named it.
    pub storage_domain_fix: Option<String>,
    pub vm_type: VmType,
    pub cpu: Option<CpuTopology>,
    pub memory: Option<Memory>,
    pub placement: PlacementChoice,
    pub bootstrap_format: BootstrapFormat,
    /// Static addresses and DNS for the VM's initialization (empty: DHCP, nothing sent).
    pub network: GuestNetwork,
    /// spec.highavailability, spec.cputuning, spec.hugepageskib, spec.vgpu and spec.templateversion (issue 38).
    pub high_availability: Option<HighAvailability>,
    pub cpu_tuning: Option<CpuTuning>,
    pub hugepages_kib: Option<i64>,
    pub vgpu: Option<Vgpu>,
    pub template_version: Option<TemplateVersion>,
    /// spec.instancetype, by name.
    pub instance_type: Option<String>,
    /// spec.hostdevices.
    pub host_devices: Vec<String>,
    /// spec.numa: the VM is pinned to the hosts of its oVirt cluster.
    pub numa: Option<capov_crds::Numa>,
    /// Where the engine's lookups put the VM; filled by the creation step once it has read them.
    pub targets: CreateTargets,
}

/// The engine's objects a VM is created with, as the creation step resolved them from its lookups.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CreateTargets {
    pub cluster_id: String,
    pub template_id: String,
    /// The create request's `clone=` parameter.
    pub clone: bool,
    /// Where each template disk goes; empty: the engine puts the disks with the template's.
    pub disk_attachments: Vec<DiskPlacement>,
    /// The storage domain of the VM's lease.
    pub lease_domain_id: Option<String>,
    /// The instance type spec.instancetype names.
    pub instance_type_id: Option<String>,
    /// The host the VM is pinned to because it has every device of spec.hostdevices free.
    pub device_host: Option<crate::placement::host_devices::DeviceHost>,
    /// The hosts the VM is pinned to for its virtual NUMA nodes (spec.numa without spec.hostdevices): the oVirt
    /// cluster's.
    pub numa_hosts: Vec<String>,
}

/// One data disk to create, on the storage domain and with the disk profile the step's lookup resolved by name.
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
    pub storage_domain_id: String,
    pub disk_profile_id: Option<String>,
}
