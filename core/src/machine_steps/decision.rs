//! What [`super::decide`] returns: one action for the actor to execute, the conditions to write, and status
//! fields to update. After a successful action the actor observes and decides again at once; on failure it backs
//! off (crate::policy::backoff). `Wait` and `Done` say when to look again.

use std::time::Duration;

use capov_crds::{CpuTopology, DataDiskStatus, DiskFormat, DiskInterface, MachineAddress, Memory, VmType};

use crate::conditions::ConditionUpdate;
use crate::network::guest_network::GuestNetwork;
use crate::placement::PlacementChoice;
use crate::placement::affinity_groups::{Leave, WantedGroup};
use crate::vm::bootstrap_payload::BootstrapFormat;

use super::action::Action;

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
    /// 5 s doubling to 5 min ([`crate::policy::backoff::backoff_delay`]), counting consecutive backoffs.
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
