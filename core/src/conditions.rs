//! Condition names and the two rules every condition write follows (SPEC §1, §2):
//! - `lastTransitionTime` changes only when the status changes; reason, message and severity may change freely;
//! - a non-empty reason on every condition (True ones too), severity only on False ones — so CAPI v1beta1 and
//!   v1beta2 core both read them.
//!
//! `Ready` is the CAPI v1beta1 summary of the step conditions (worst severity wins). Everything here is pure:
//! the caller passes `now`.

use std::borrow::Cow;

use capov_crds::{Condition, ConditionStatus, Severity};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;

/// Condition types, one place for all of them.
pub mod types {
    pub const CAN_CONNECT_TO_OVIRT: &str = "CanConnectToOVirt";
    pub const MACHINE_CREATED: &str = "MachineCreated";
    pub const MACHINE_DISK_RESIZED: &str = "MachineDiskResized";
    pub const MACHINE_NETWORK_SET: &str = "MachineNetworkSet";
    /// The VM is in its failure domain's place and in the affinity groups of its machine group (issue #25).
    pub const MACHINE_PLACEMENT_SET: &str = "MachinePlacementSet";
    /// The host the VM runs on, and whether it is up (issue #27); not part of Ready: what it means for the VM
    /// shows on MachineOn.
    pub const HOST_READY: &str = "HostReady";
    pub const MACHINE_ON: &str = "MachineOn";
    pub const K8S_PROVIDER_ID_SETUP: &str = "K8sProviderIDSetup";
    pub const MACHINE_DELETED: &str = "MachineDeleted";
    pub const READY: &str = "Ready";
    pub const PAUSED: &str = "Paused";
    /// OVirtCluster: whether every failure domain that names a provider is published (issue 39).
    pub const FAILURE_DOMAINS_PUBLISHED: &str = "FailureDomainsPublished";
}

/// Condition reasons, one place for all of them. False reasons come from SPEC §2; True reasons (needed because
/// every condition carries a reason) are ours.
pub mod reasons {
    // True reasons (ours).
    pub const CONNECTED: &str = "Connected";
    /// Connected, but over plain http (CanConnectToOVirt stays True: it works, it is just not private).
    pub const INSECURE_TRANSPORT: &str = "InsecureTransport";
    pub const VM_CREATED: &str = "VMCreated";
    pub const DISKS_READY: &str = "DisksReady";
    pub const NETWORK_SET: &str = "NetworkSet";
    pub const VM_UP: &str = "VMUp";
    pub const PROVIDER_ID_SET: &str = "ProviderIDSet";
    pub const READY: &str = "Ready";
    pub const PAUSED: &str = "Paused";
    pub const NOT_PAUSED: &str = "NotPaused";
    /// A relevant condition has not been reported yet (Ready summary only).
    pub const NOT_YET_REPORTED: &str = "NotYetReported";
    /// Fallback when a caller passed an empty reason; should never be seen.
    pub const UNSPECIFIED: &str = "Unspecified";

    // CanConnectToOVirt.
    pub const PROVIDER_NOT_FOUND: &str = "ProviderNotFound";
    /// Neither spec.provider nor the machine's failure domain names an OVirtProvider (issue 39).
    pub const NO_PROVIDER: &str = "NoProvider";

    // OVirtCluster FailureDomainsPublished (issue 39).
    pub const ALL_FAILURE_DOMAINS_PUBLISHED: &str = "AllFailureDomainsPublished";
    pub const FAILURE_DOMAINS_LEFT_OUT: &str = "FailureDomainsLeftOut";
    pub const CREDENTIALS_NOT_FOUND: &str = "CredentialsNotFound";
    pub const CREDENTIALS_INVALID: &str = "CredentialsInvalid";
    pub const AUTHENTICATION_FAILED: &str = "AuthenticationFailed";
    pub const PERMISSION_DENIED: &str = "PermissionDenied";
    pub const TLS_VERIFICATION_FAILED: &str = "TLSVerificationFailed";
    pub const INVALID_CA_BUNDLE: &str = "InvalidCABundle";
    pub const ENGINE_UNREACHABLE: &str = "EngineUnreachable";
    pub const NAMESPACE_NOT_ALLOWED: &str = "NamespaceNotAllowed";
    /// spec.engine carries userinfo (`user:password@`), which the CRD rejects only for objects created after the
    /// rule.
    pub const INVALID_ENGINE_URL: &str = "InvalidEngineURL";
    /// The OVirtProvider's management-cluster annotation is not a list of usable ids
    /// ([`crate::trust::management_clusters`]).
    pub const INVALID_MANAGEMENT_CLUSTER_ID: &str = "InvalidManagementClusterID";

    // MachineCreated.
    pub const WAITING_FOR_BOOTSTRAP_DATA: &str = "WaitingForBootstrapData";
    pub const UNSUPPORTED_BOOTSTRAP_FORMAT: &str = "UnsupportedBootstrapFormat";
    /// The template's OS type gets the other guest initialization from oVirt (cloud-init vs Ignition): the VM
    /// would boot without its bootstrap data. No VM is created ([`crate::vm::bootstrap_payload`]).
    pub const BOOTSTRAP_FORMAT_MISMATCH: &str = "BootstrapFormatMismatch";
    /// The bootstrap data has a form oVirt's rewrite would break (other jinja than the host name, user-data that is
    /// not cloud-config, Ignition without a version); nothing was sent.
    pub const UNSUPPORTED_BOOTSTRAP_DATA: &str = "UnsupportedBootstrapData";
    pub const INVALID_PROVIDER_ID: &str = "InvalidProviderID";
    pub const VM_NOT_FOUND: &str = "VMNotFound";
    pub const VM_NAME_CONFLICT: &str = "VMNameConflict";
    pub const VM_NOT_OWNED: &str = "VMNotOwned";
    /// Event: deletion released the OVirtMachine without touching a VM that is not its own.
    pub const VM_LEFT_ALONE: &str = "VMLeftAlone";
    pub const ENGINE_CHANGED: &str = "EngineChanged";
    /// MachineDeleted: the VM carries this very machine's marker written by another management cluster (a
    /// `clusterctl move` onto a cluster whose OVirtProvider already existed); the deletion waits for an admin to
    /// adopt it or for the release-vm annotation.
    pub const VM_OF_ANOTHER_MANAGEMENT_CLUSTER: &str = "VMOfAnotherManagementCluster";
    pub const VM_MARKER_UPGRADED: &str = "VMMarkerUpgraded";
    pub const CLUSTER_NOT_FOUND: &str = "ClusterNotFound";
    pub const TEMPLATE_NOT_FOUND: &str = "TemplateNotFound";
    pub const TEMPLATE_NOT_READY: &str = "TemplateNotReady";
    pub const TEMPLATE_VERSION_NOT_FOUND: &str = "TemplateVersionNotFound";
    pub const INSTANCE_TYPE_NOT_FOUND: &str = "InstanceTypeNotFound";
    /// No host of the oVirt cluster has every device of spec.hostdevices (Error), or each that has them has one in use
    /// (Warning, a wait).
    pub const NO_FREE_HOST_DEVICE: &str = "NoFreeHostDevice";
    /// The VM's host devices are being added, before its first start (MachinePlacementSet, Info).
    pub const ATTACHING_HOST_DEVICES: &str = "AttachingHostDevices";
    /// The VM's virtual NUMA nodes are being added, before its first start (MachinePlacementSet, Info).
    pub const ADDING_NUMA_NODES: &str = "AddingNumaNodes";
    /// spec.numa needs the VM pinned to hosts, and its oVirt cluster has none (MachineCreated, Warning).
    pub const NO_HOST_TO_PIN: &str = "NoHostToPin";
    /// A setting of the spec that the connected engine's release does not have (e.g. CPU pinning policies before 4.5).
    pub const NOT_SUPPORTED_BY_ENGINE: &str = "NotSupportedByEngine";
    pub const STORAGE_DOMAIN_NOT_FOUND: &str = "StorageDomainNotFound";
    pub const STORAGE_DOMAIN_NOT_AVAILABLE: &str = "StorageDomainNotAvailable";
    pub const STORAGE_DOMAIN_REQUIRES_CLONE: &str = "StorageDomainRequiresClone";
    pub const CREATE_FAILED: &str = "CreateFailed";
    /// A name from the spec holds a character the engine's search refuses (`capov_ovirt_model::search`); nothing was sent.
    pub const UNSEARCHABLE_NAME: &str = "UnsearchableName";
    /// CAPOV's finalizer could not be added to (or removed from) the object; retried with backoff.
    pub const FINALIZER_WRITE_FAILED: &str = "FinalizerWriteFailed";
    /// An engine request of a step after creation failed; the message carries the engine's detail.
    pub const ENGINE_ERROR: &str = "EngineError";
    pub const VM_IMAGE_LOCKED: &str = "VMImageLocked";
    /// The engine shows the VM without `<status>` (ImageIllegal): its disk images are illegal.
    pub const VM_IMAGE_ILLEGAL: &str = "VMImageIllegal";
    /// Static addresses (spec.nics[].addressesFromPools): an IPAddressClaim has no address yet (`crate::network::ip_claims`).
    pub const WAITING_FOR_IP_ADDRESS: &str = "WaitingForIPAddress";
    /// An IPAddressClaim of the name CAPOV would use exists and is not the object's.
    pub const IP_ADDRESS_CLAIM_CONFLICT: &str = "IPAddressClaimConflict";
    /// An IPAddress the IPAM provider gave cannot be used (no IP, prefix out of range, gateway of the other family).
    pub const INVALID_IP_ADDRESS: &str = "InvalidIPAddress";
    /// One NIC got two addresses of one family.
    pub const IP_ADDRESS_FAMILY_CONFLICT: &str = "IPAddressFamilyConflict";
    /// Creating or releasing an IPAddressClaim failed (e.g. CAPI's IPAM API is not installed, or RBAC).
    pub const IP_ADDRESS_CLAIM_FAILED: &str = "IPAddressClaimFailed";
    /// MachineDeleted: the VM is gone (or left alone); the machine's IPAddressClaims are being released.
    pub const RELEASING_IP_ADDRESSES: &str = "ReleasingIPAddresses";
    /// MachineDeleted: right after a restart, the IPAddressClaims are not listed yet; the finalizer waits for them.
    pub const WAITING_FOR_IP_CLAIMS: &str = "WaitingForIPAddressClaims";

    // OVirtCluster Ready (spec.controlPlaneEndpointFromPool).
    /// The control-plane endpoint's claim has no address yet.
    pub const WAITING_FOR_CONTROL_PLANE_ENDPOINT: &str = "WaitingForControlPlaneEndpoint";
    /// spec.controlPlaneEndpoint.host was set to another address than the pool gave.
    pub const CONTROL_PLANE_ENDPOINT_MISMATCH: &str = "ControlPlaneEndpointMismatch";

    // MachineDiskResized.
    pub const WAITING_FOR_DISK_RESIZE: &str = "WaitingForDiskResize";
    pub const DISK_SHRINK_NOT_ALLOWED: &str = "DiskShrinkNotAllowed";
    pub const NO_BOOTABLE_DISK: &str = "NoBootableDisk";
    pub const INVALID_DISK_SIZE: &str = "InvalidDiskSize";
    /// A data disk of spec.datadisks is being created.
    pub const WAITING_FOR_DATA_DISKS: &str = "WaitingForDataDisks";
    /// A data disk's image could not be created (the engine shows it illegal).
    pub const DATA_DISK_FAILED: &str = "DataDiskFailed";
    /// spec.datadisks[].diskprofile names no disk profile of the disk's storage domain.
    pub const DISK_PROFILE_NOT_FOUND: &str = "DiskProfileNotFound";

    // MachineNetworkSet.
    pub const VNIC_PROFILE_NOT_FOUND: &str = "VnicProfileNotFound";
    pub const VNIC_PROFILE_AMBIGUOUS: &str = "VnicProfileAmbiguous";

    /// The Machine's spec.failureDomain names a domain the OVirtCluster's spec.failureDomains does not define.
    pub const FAILURE_DOMAIN_NOT_FOUND: &str = "FailureDomainNotFound";
    /// The machine asks for a host label or an oVirt cluster its OVirtProvider's spec.tenantPlacement does not list
    /// (MachineCreated before the VM is created, MachinePlacementSet before a host-label group is joined).
    pub const PLACEMENT_NOT_ALLOWED: &str = "PlacementNotAllowed";
    /// The clone would not fit its storage domain (CAPOV's preflight); the engine was not asked.
    pub const INSUFFICIENT_STORAGE: &str = "InsufficientStorage";
    /// The engine refused the create for low disk space on a storage domain (its threshold or the room needed).
    pub const LOW_DISK_SPACE: &str = "LowDiskSpace";

    // MachinePlacementSet.
    /// True: the VM is in its groups (or needs none); the message names them.
    pub const PLACEMENT_SET: &str = "PlacementSet";
    /// True: a soft anti-affinity group could not be used (no permission, a foreign group of its name); the VM
    /// starts without it and the message says why.
    pub const ANTI_AFFINITY_SKIPPED: &str = "AntiAffinitySkipped";
    pub const JOINING_AFFINITY_GROUP: &str = "JoiningAffinityGroup";
    /// A group of the name CAPOV uses exists but is not CAPOV's (no marker, or another's): never touched.
    pub const AFFINITY_GROUP_CONFLICT: &str = "AffinityGroupConflict";
    /// The engine does not let CAPOV's user list or change affinity groups (it needs an administrative role on the
    /// cluster) or labels.
    pub const AFFINITY_GROUP_UNAVAILABLE: &str = "AffinityGroupUnavailable";
    /// The failure domain's host label is not an affinity label of the engine.
    pub const AFFINITY_LABEL_NOT_FOUND: &str = "AffinityLabelNotFound";

    // HostReady.
    pub const HOST_UP: &str = "HostUp";
    pub const HOST_PREPARING_FOR_MAINTENANCE: &str = "HostPreparingForMaintenance";
    pub const HOST_IN_MAINTENANCE: &str = "HostInMaintenance";
    /// The VM's state is unknown: CAPOV changes nothing on it until the host is back or fenced.
    pub const HOST_NON_RESPONSIVE: &str = "HostNonResponsive";
    /// Any other state of the host (connecting, non_operational, reboot, …).
    pub const HOST_NOT_UP: &str = "HostNotUp";
    /// The engine shows the VM on a host CAPOV's user cannot see, or before the first inventory poll.
    pub const HOST_UNKNOWN: &str = "HostUnknown";

    // MachineOn.
    /// The engine found no host that satisfies the scheduling constraints (hard anti-affinity, memory, the
    /// failure domain's hosts); the start is retried with backoff.
    pub const NO_SCHEDULABLE_HOST: &str = "NoSchedulableHost";
    pub const VM_POWERING_UP: &str = "VMPoweringUp";
    pub const VM_DOWN: &str = "VMDown";
    pub const VM_NOT_RESPONDING: &str = "VMNotResponding";
    pub const VM_TRANSITIONING: &str = "VMTransitioning";

    // K8sProviderIDSetup.
    pub const WAITING_FOR_NODE: &str = "WaitingForNode";
    pub const WORKLOAD_CLUSTER_UNREACHABLE: &str = "WorkloadClusterUnreachable";
    pub const PROVIDER_ID_MISMATCH: &str = "ProviderIDMismatch";
    /// The `<cluster>-kubeconfig` Secret holds a field that would make CAPOV read files, run programs or use a
    /// proxy (or is otherwise not inline data); nothing was sent to its server.
    pub const WORKLOAD_KUBECONFIG_REJECTED: &str = "WorkloadKubeconfigRejected";

    // MachineDeleted.
    pub const VM_HAS_NON_SYSTEM_DISK: &str = "VMHasNonSystemDisk";
    pub const VM_LOCKED: &str = "VMLocked";
    pub const VM_STOPPING: &str = "VMStopping";
    /// spec.gracefulshutdowntimeoutseconds: the guest was asked to shut down (ACPI) and has until the deadline.
    pub const VM_SHUTTING_DOWN: &str = "VMShuttingDown";
    pub const VM_DELETING: &str = "VMDeleting";
    /// Taking the VM out of its affinity groups (removing a group it is the last member of) before deleting it.
    pub const LEAVING_AFFINITY_GROUP: &str = "LeavingAffinityGroup";
    /// The VM is `unknown`, `saving_state` or `restoring_state`: the engine refuses stop and remove until it leaves.
    pub const VM_STATE_BLOCKS_DELETION: &str = "VMStateBlocksDeletion";
    /// The Node is gone and no VolumeAttachment names it: the disks CAPOV did not create are being detached (never
    /// deleted) before the VM is deleted (gate disk-detach-when-node-gone).
    pub const DETACHING_VOLUMES: &str = "DetachingVolumes";
    /// Event: a disk CAPOV did not create was detached from the VM being deleted and kept on its storage domain.
    pub const VOLUME_DETACHED: &str = "VolumeDetached";
    /// clusterctl move deletes the source's copy of a moved object; its VM stays with the target's copy.
    pub const DELETED_FOR_MOVE: &str = "DeletedForMove";

    // An OVirtCluster's Ready while it is deleted.
    pub const DELETING: &str = "Deleting";
    /// Releasing the endpoint's address or removing the finalizer failed; retried.
    pub const DELETION_BLOCKED: &str = "DeletionBlocked";
}

/// The message of a True CanConnectToOVirt with reason InsecureTransport.
pub const INSECURE_TRANSPORT_MESSAGE: &str = "connected over plain http: the engine credentials, session tokens and \
     bootstrap data cross the network unencrypted; use an https:// engine URL (spec.engine)";

/// The True condition `type_` (CanConnectToOVirt, or a provider's Ready) of something whose engine answered: reason
/// InsecureTransport with [`INSECURE_TRANSPORT_MESSAGE`] over plain http, else Connected. True either way, so the
/// Ready summary is not held back by a working connection.
pub fn connected(type_: &'static str, insecure_transport: bool) -> ConditionUpdate {
    if insecure_transport {
        ConditionUpdate::true_(type_, reasons::INSECURE_TRANSPORT).with_message(INSECURE_TRANSPORT_MESSAGE)
    } else {
        ConditionUpdate::true_(type_, reasons::CONNECTED)
    }
}

/// The machine's failureReason for connection errors that retrying cannot fix (SPEC §2.4).
pub const FAILURE_ENGINE_CONNECTION_CRITICAL: &str = "OVirtEngineConnectionCritical";

/// The machine's Ready. While it is being deleted (MachineDeleted is set only then), the deletion's progress: False
/// with MachineDeleted's severity, reason and message, as CAPI's contract asks Ready to describe the whole life,
/// deletion included (CAPI mirrors it into the Machine's InfrastructureReady). Else the summary of
/// [`MACHINE_READY_INPUTS`].
pub fn machine_ready(conditions: &[Condition]) -> ConditionUpdate {
    match conditions.iter().find(|c| c.type_ == types::MACHINE_DELETED) {
        Some(deleted) => ConditionUpdate {
            type_: types::READY,
            state: State::False(deleted.severity.unwrap_or(Severity::Info)),
            reason: static_reason(&deleted.reason),
            message: summary_message(deleted),
        },
        None => ready_summary(conditions, MACHINE_READY_INPUTS),
    }
}

/// The condition types the machine's Ready summarises, in step order.
pub const MACHINE_READY_INPUTS: &[&str] = &[
    types::CAN_CONNECT_TO_OVIRT,
    types::MACHINE_CREATED,
    types::MACHINE_DISK_RESIZED,
    types::MACHINE_NETWORK_SET,
    types::MACHINE_PLACEMENT_SET,
    types::MACHINE_ON,
    types::K8S_PROVIDER_ID_SETUP,
];

/// A condition's status with the severity bound to False, so a True or Unknown condition cannot carry one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum State {
    True,
    False(Severity),
    Unknown,
}

/// A condition to write, without its time stamps.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConditionUpdate {
    pub type_: &'static str,
    pub state: State,
    pub reason: &'static str,
    pub message: String,
}

impl ConditionUpdate {
    pub fn true_(type_: &'static str, reason: &'static str) -> Self {
        ConditionUpdate {
            type_,
            state: State::True,
            reason,
            message: String::new(),
        }
    }

    pub fn false_(type_: &'static str, reason: &'static str, severity: Severity, message: impl Into<String>) -> Self {
        ConditionUpdate {
            type_,
            state: State::False(severity),
            reason,
            message: message.into(),
        }
    }

    pub fn unknown(type_: &'static str, reason: &'static str, message: impl Into<String>) -> Self {
        ConditionUpdate {
            type_,
            state: State::Unknown,
            reason,
            message: message.into(),
        }
    }

    pub fn with_message(mut self, message: impl Into<String>) -> Self {
        self.message = message.into();
        self
    }
}

/// Whether a condition's change is recorded as an Event (SPEC §4: an Event for each step reached and each failure):
/// the condition reached True, is a failure (False with severity Warning or Error), or left True or a failure; and
/// every change of `MachineDeleted`, whose reasons are the steps of a deletion (it never turns True: the object goes
/// away). A wait on the way to a step (False with severity Info, or Unknown) that follows no condition or another
/// wait is not: the condition itself shows it, and at 10,000 machines such waits were a fifth of all Events
/// (docs/decisions.md). `before` is the condition of the same type before the change, if there was one.
pub fn change_recorded_as_event(before: Option<&Condition>, after: &Condition) -> bool {
    let notable = |c: &Condition| {
        c.status == ConditionStatus::True
            || matches!(c.severity, Some(Severity::Warning | Severity::Error))
            || c.type_ == types::MACHINE_DELETED
    };
    let changed = before.is_none_or(|b| b.status != after.status || b.reason != after.reason);
    changed && (notable(after) || before.is_some_and(notable))
}

/// Writes `update` into `conditions`, replacing the condition of the same type, its message cut to
/// [`crate::trust::bounded_text::MAX_MESSAGE_BYTES`]. The transition time is kept when the status is unchanged, and set to
/// `now` otherwise. `observed_generation` is the object's metadata.generation.
pub fn set_condition(
    conditions: &mut Vec<Condition>,
    update: &ConditionUpdate,
    now: Timestamp,
    observed_generation: Option<i64>,
) {
    let (status, severity) = match update.state {
        State::True => (ConditionStatus::True, None),
        State::False(severity) => (ConditionStatus::False, Some(severity)),
        State::Unknown => (ConditionStatus::Unknown, None),
    };
    let reason = if update.reason.is_empty() {
        reasons::UNSPECIFIED
    } else {
        update.reason
    };
    let existing = conditions.iter().position(|c| c.type_ == update.type_);
    let last_transition_time = match existing.map(|at| &conditions[at]) {
        Some(old) if old.status == status => old.last_transition_time.clone(),
        _ => Time(now),
    };
    let condition = Condition {
        type_: Cow::Borrowed(update.type_),
        status,
        severity,
        reason: Cow::Borrowed(reason),
        // Messages carry text from outside (engine fault details, workload apiserver errors).
        message: crate::trust::bounded_text::message(&update.message),
        last_transition_time,
        observed_generation,
    };
    match existing {
        Some(at) => conditions[at] = condition,
        None => {
            conditions.push(condition);
            // Held by every machine for its life: room for eight where five are set is 300 bytes a machine.
            conditions.shrink_to_fit();
        }
    }
    // Also puts a list written in another order (by an earlier version) in this one. Stable, and without allocating
    // for lists this short.
    conditions.sort_by_key(|c| reading_rank(&c.type_));
}

/// The order conditions are listed in, the order people read them: `Ready`, the summary, first (as CAPI's own
/// objects list theirs), so that the first lines of `kubectl describe` under "Conditions" show what holds the object
/// up; then the steps in the order a machine goes through them; then HostReady, the deletion and Paused. Types CAPOV
/// does not write go last, in the order they came.
pub const READING_ORDER: &[&str] = &[
    types::READY,
    types::CAN_CONNECT_TO_OVIRT,
    types::MACHINE_CREATED,
    types::MACHINE_DISK_RESIZED,
    types::MACHINE_NETWORK_SET,
    types::MACHINE_PLACEMENT_SET,
    types::MACHINE_ON,
    types::K8S_PROVIDER_ID_SETUP,
    types::HOST_READY,
    types::MACHINE_DELETED,
    types::PAUSED,
];

fn reading_rank(type_: &str) -> usize {
    READING_ORDER
        .iter()
        .position(|t| *t == type_)
        .unwrap_or(READING_ORDER.len())
}

/// The CAPI v1beta1 Ready summary of `relevant` condition types:
/// - any False → False with the worst severity (Error > Warning > Info; the first in `relevant` order among
///   equals), reason and message from that condition;
/// - else any absent or Unknown → Unknown, reason and message from the first such one (absent: NotYetReported);
/// - else (all True) → True, reason Ready.
pub fn ready_summary(conditions: &[Condition], relevant: &[&str]) -> ConditionUpdate {
    let found: Vec<(&str, Option<&Condition>)> = relevant
        .iter()
        .map(|&t| (t, conditions.iter().find(|c| c.type_ == t)))
        .collect();

    let worst_false = found
        .iter()
        .filter_map(|(_, c)| c.filter(|c| c.status == ConditionStatus::False))
        .enumerate()
        .max_by_key(|(index, c)| (c.severity.unwrap_or(Severity::Info), std::cmp::Reverse(*index)))
        .map(|(_, c)| c);
    if let Some(worst) = worst_false {
        return ConditionUpdate {
            type_: types::READY,
            state: State::False(worst.severity.unwrap_or(Severity::Info)),
            reason: static_reason(&worst.reason),
            message: summary_message(worst),
        };
    }

    let first_not_true = found
        .iter()
        .find(|(_, c)| c.is_none_or(|c| c.status != ConditionStatus::True));
    match first_not_true {
        Some((type_, None)) => ConditionUpdate::unknown(
            types::READY,
            reasons::NOT_YET_REPORTED,
            format!("{type_} not yet reported"),
        ),
        Some((_, Some(c))) => ConditionUpdate {
            type_: types::READY,
            state: State::Unknown,
            reason: static_reason(&c.reason),
            message: summary_message(c),
        },
        None => ConditionUpdate::true_(types::READY, reasons::READY),
    }
}

fn summary_message(c: &Condition) -> String {
    if c.message.is_empty() {
        format!("{}: {}", c.type_, c.reason)
    } else {
        c.message.clone()
    }
}

/// Maps a reason read back from a condition onto our `&'static str` constants; reasons we did not write (someone
/// else edited the status) become Unspecified rather than being leaked.
fn static_reason(reason: &str) -> &'static str {
    ALL_REASONS
        .iter()
        .copied()
        .find(|r| *r == reason)
        .unwrap_or(reasons::UNSPECIFIED)
}

const ALL_REASONS: &[&str] = &[
    reasons::CONNECTED,
    reasons::INSECURE_TRANSPORT,
    reasons::VM_CREATED,
    reasons::DISKS_READY,
    reasons::NETWORK_SET,
    reasons::VM_UP,
    reasons::PROVIDER_ID_SET,
    reasons::READY,
    reasons::PAUSED,
    reasons::NOT_PAUSED,
    reasons::NOT_YET_REPORTED,
    reasons::UNSPECIFIED,
    reasons::PROVIDER_NOT_FOUND,
    reasons::NO_PROVIDER,
    reasons::ALL_FAILURE_DOMAINS_PUBLISHED,
    reasons::FAILURE_DOMAINS_LEFT_OUT,
    reasons::CREDENTIALS_NOT_FOUND,
    reasons::CREDENTIALS_INVALID,
    reasons::AUTHENTICATION_FAILED,
    reasons::PERMISSION_DENIED,
    reasons::TLS_VERIFICATION_FAILED,
    reasons::INVALID_CA_BUNDLE,
    reasons::ENGINE_UNREACHABLE,
    reasons::NAMESPACE_NOT_ALLOWED,
    reasons::INVALID_ENGINE_URL,
    reasons::INVALID_MANAGEMENT_CLUSTER_ID,
    reasons::WAITING_FOR_BOOTSTRAP_DATA,
    reasons::UNSUPPORTED_BOOTSTRAP_FORMAT,
    reasons::BOOTSTRAP_FORMAT_MISMATCH,
    reasons::UNSUPPORTED_BOOTSTRAP_DATA,
    reasons::INVALID_PROVIDER_ID,
    reasons::VM_NOT_FOUND,
    reasons::VM_NAME_CONFLICT,
    reasons::VM_NOT_OWNED,
    reasons::VM_LEFT_ALONE,
    reasons::ENGINE_CHANGED,
    reasons::VM_OF_ANOTHER_MANAGEMENT_CLUSTER,
    reasons::VM_MARKER_UPGRADED,
    reasons::CLUSTER_NOT_FOUND,
    reasons::TEMPLATE_NOT_FOUND,
    reasons::TEMPLATE_NOT_READY,
    reasons::TEMPLATE_VERSION_NOT_FOUND,
    reasons::INSTANCE_TYPE_NOT_FOUND,
    reasons::NOT_SUPPORTED_BY_ENGINE,
    reasons::NO_FREE_HOST_DEVICE,
    reasons::ATTACHING_HOST_DEVICES,
    reasons::ADDING_NUMA_NODES,
    reasons::NO_HOST_TO_PIN,
    reasons::STORAGE_DOMAIN_NOT_FOUND,
    reasons::STORAGE_DOMAIN_NOT_AVAILABLE,
    reasons::STORAGE_DOMAIN_REQUIRES_CLONE,
    reasons::CREATE_FAILED,
    reasons::UNSEARCHABLE_NAME,
    reasons::FINALIZER_WRITE_FAILED,
    reasons::ENGINE_ERROR,
    reasons::VM_IMAGE_LOCKED,
    reasons::VM_IMAGE_ILLEGAL,
    reasons::WAITING_FOR_IP_ADDRESS,
    reasons::IP_ADDRESS_CLAIM_CONFLICT,
    reasons::INVALID_IP_ADDRESS,
    reasons::IP_ADDRESS_FAMILY_CONFLICT,
    reasons::IP_ADDRESS_CLAIM_FAILED,
    reasons::RELEASING_IP_ADDRESSES,
    reasons::WAITING_FOR_IP_CLAIMS,
    reasons::WAITING_FOR_CONTROL_PLANE_ENDPOINT,
    reasons::CONTROL_PLANE_ENDPOINT_MISMATCH,
    reasons::WAITING_FOR_DISK_RESIZE,
    reasons::DISK_SHRINK_NOT_ALLOWED,
    reasons::NO_BOOTABLE_DISK,
    reasons::INVALID_DISK_SIZE,
    reasons::WAITING_FOR_DATA_DISKS,
    reasons::DATA_DISK_FAILED,
    reasons::DISK_PROFILE_NOT_FOUND,
    reasons::VNIC_PROFILE_NOT_FOUND,
    reasons::VNIC_PROFILE_AMBIGUOUS,
    reasons::VM_POWERING_UP,
    reasons::VM_DOWN,
    reasons::VM_NOT_RESPONDING,
    reasons::VM_TRANSITIONING,
    reasons::WAITING_FOR_NODE,
    reasons::WORKLOAD_CLUSTER_UNREACHABLE,
    reasons::PROVIDER_ID_MISMATCH,
    reasons::WORKLOAD_KUBECONFIG_REJECTED,
    reasons::VM_HAS_NON_SYSTEM_DISK,
    reasons::VM_LOCKED,
    reasons::VM_STOPPING,
    reasons::VM_SHUTTING_DOWN,
    reasons::VM_DELETING,
    reasons::VM_STATE_BLOCKS_DELETION,
    reasons::DETACHING_VOLUMES,
    reasons::VOLUME_DETACHED,
    reasons::DELETED_FOR_MOVE,
    reasons::DELETING,
    reasons::DELETION_BLOCKED,
    reasons::FAILURE_DOMAIN_NOT_FOUND,
    reasons::PLACEMENT_NOT_ALLOWED,
    reasons::INSUFFICIENT_STORAGE,
    reasons::LOW_DISK_SPACE,
    reasons::PLACEMENT_SET,
    reasons::ANTI_AFFINITY_SKIPPED,
    reasons::JOINING_AFFINITY_GROUP,
    reasons::AFFINITY_GROUP_CONFLICT,
    reasons::AFFINITY_GROUP_UNAVAILABLE,
    reasons::AFFINITY_LABEL_NOT_FOUND,
    reasons::HOST_UP,
    reasons::HOST_PREPARING_FOR_MAINTENANCE,
    reasons::HOST_IN_MAINTENANCE,
    reasons::HOST_NON_RESPONSIVE,
    reasons::HOST_NOT_UP,
    reasons::HOST_UNKNOWN,
    reasons::NO_SCHEDULABLE_HOST,
    reasons::LEAVING_AFFINITY_GROUP,
];

#[cfg(test)]
mod tests {
    use super::*;

    fn t(seconds: i64) -> Timestamp {
        Timestamp::from_second(seconds).unwrap()
    }

    /// The condition `update` becomes when written into no condition of its type.
    fn written(update: &ConditionUpdate) -> Condition {
        let mut conditions = Vec::new();
        set_condition(&mut conditions, update, t(0), None);
        conditions.remove(0)
    }

    /// A wait (False, Info) of `type_` as written.
    fn waiting(type_: &'static str, reason: &'static str) -> Condition {
        written(&ConditionUpdate::false_(type_, reason, Severity::Info, "waiting"))
    }

    #[test]
    fn a_step_reached_and_a_failure_are_recorded_as_events_and_a_wait_is_not() {
        let powering_up = waiting(types::MACHINE_ON, reasons::VM_POWERING_UP);
        let reached = written(&ConditionUpdate::true_(types::MACHINE_ON, reasons::VM_UP));
        let failed = written(&ConditionUpdate::false_(
            types::MACHINE_ON,
            reasons::NO_SCHEDULABLE_HOST,
            Severity::Warning,
            "no host",
        ));
        let image_locked = waiting(types::MACHINE_ON, reasons::VM_IMAGE_LOCKED);
        // Waits on the way to a step: none.
        assert!(!change_recorded_as_event(None, &powering_up));
        assert!(!change_recorded_as_event(Some(&image_locked), &powering_up));
        // The step reached, a failure, and leaving either: one each.
        assert!(change_recorded_as_event(None, &reached));
        assert!(change_recorded_as_event(Some(&powering_up), &reached));
        assert!(change_recorded_as_event(Some(&powering_up), &failed));
        assert!(change_recorded_as_event(Some(&failed), &powering_up));
        assert!(change_recorded_as_event(Some(&reached), &powering_up));
        // No change of status or reason: none, whatever the condition says.
        assert!(!change_recorded_as_event(Some(&reached), &reached));
        assert!(!change_recorded_as_event(Some(&failed), &failed));
        // A deletion's steps are Info and never end True: each is recorded.
        let stopping = waiting(types::MACHINE_DELETED, reasons::VM_SHUTTING_DOWN);
        let deleting = waiting(types::MACHINE_DELETED, reasons::VM_DELETING);
        assert!(change_recorded_as_event(None, &stopping));
        assert!(change_recorded_as_event(Some(&stopping), &deleting));
    }

    /// Every condition the machine's Ready summarises, True.
    fn every_step_true() -> Vec<ConditionUpdate> {
        MACHINE_READY_INPUTS
            .iter()
            .map(|t| ConditionUpdate::true_(t, reasons::READY))
            .collect()
    }

    fn with(updates: &[ConditionUpdate]) -> Vec<Condition> {
        let mut conditions = vec![];
        for u in updates {
            set_condition(&mut conditions, u, t(1), Some(1));
        }
        conditions
    }

    #[test]
    fn set_adds_a_new_condition_with_now_as_transition_time() {
        let mut conditions = vec![];
        set_condition(
            &mut conditions,
            &ConditionUpdate::true_(types::MACHINE_ON, reasons::VM_UP),
            t(10),
            Some(3),
        );
        assert_eq!(conditions.len(), 1);
        assert_eq!(conditions[0].status, ConditionStatus::True);
        assert_eq!(conditions[0].reason, "VMUp");
        assert_eq!(conditions[0].last_transition_time, Time(t(10)));
        assert_eq!(conditions[0].observed_generation, Some(3));
    }

    #[test]
    fn set_keeps_transition_time_when_status_is_unchanged() {
        let mut conditions = vec![];
        let waiting = ConditionUpdate::false_(
            types::MACHINE_ON,
            reasons::VM_POWERING_UP,
            Severity::Info,
            "powering up",
        );
        set_condition(&mut conditions, &waiting, t(10), Some(1));
        let down = ConditionUpdate::false_(types::MACHINE_ON, reasons::VM_DOWN, Severity::Warning, "down");
        set_condition(&mut conditions, &down, t(20), Some(2));
        assert_eq!(conditions.len(), 1);
        assert_eq!(conditions[0].last_transition_time, Time(t(10)));
        assert_eq!(conditions[0].reason, "VMDown");
        assert_eq!(conditions[0].severity, Some(Severity::Warning));
        assert_eq!(conditions[0].observed_generation, Some(2));
    }

    #[test]
    fn set_moves_transition_time_when_status_changes() {
        let mut conditions = vec![];
        let waiting = ConditionUpdate::false_(types::MACHINE_ON, reasons::VM_POWERING_UP, Severity::Info, "");
        set_condition(&mut conditions, &waiting, t(10), None);
        set_condition(
            &mut conditions,
            &ConditionUpdate::true_(types::MACHINE_ON, reasons::VM_UP),
            t(20),
            None,
        );
        assert_eq!(conditions[0].last_transition_time, Time(t(20)));
        assert_eq!(conditions[0].severity, None, "severity only on False");
    }

    #[test]
    fn set_never_writes_an_empty_reason() {
        let mut conditions = vec![];
        set_condition(
            &mut conditions,
            &ConditionUpdate::true_(types::MACHINE_ON, ""),
            t(1),
            None,
        );
        assert_eq!(conditions[0].reason, reasons::UNSPECIFIED);
    }

    #[test]
    fn conditions_are_listed_ready_first_then_in_step_order_whatever_order_they_are_set_in() {
        let mut conditions = Vec::new();
        let deleting = ConditionUpdate::false_(
            types::MACHINE_DELETED,
            reasons::VM_HAS_NON_SYSTEM_DISK,
            Severity::Warning,
            "VM has non system disk, cannot delete",
        );
        // The order a deletion pass sets them in: Paused first, the steps, the deletion, Ready last.
        let mut updates = vec![ConditionUpdate::false_(
            types::PAUSED,
            reasons::NOT_PAUSED,
            Severity::Info,
            "",
        )];
        updates.extend(every_step_true());
        updates.push(deleting);
        for update in &updates {
            set_condition(&mut conditions, update, t(0), Some(1));
        }
        let ready = machine_ready(&conditions);
        set_condition(&mut conditions, &ready, t(0), Some(1));
        let types: Vec<&str> = conditions.iter().map(|c| c.type_.as_ref()).collect();
        assert_eq!(
            types,
            [
                types::READY,
                types::CAN_CONNECT_TO_OVIRT,
                types::MACHINE_CREATED,
                types::MACHINE_DISK_RESIZED,
                types::MACHINE_NETWORK_SET,
                types::MACHINE_PLACEMENT_SET,
                types::MACHINE_ON,
                types::K8S_PROVIDER_ID_SETUP,
                types::MACHINE_DELETED,
                types::PAUSED,
            ]
        );
        assert_eq!(conditions[0].reason, reasons::VM_HAS_NON_SYSTEM_DISK);

        // A list an earlier version wrote (Paused first, a foreign type in between) is put in order at the next
        // write; the foreign type goes last. Setting the same conditions again changes nothing.
        let mut old = with(&[ConditionUpdate::true_(types::PAUSED, reasons::PAUSED)]);
        old.push(Condition {
            type_: "SomethingElse".into(),
            ..old[0].clone()
        });
        for update in &updates {
            set_condition(&mut old, update, t(0), Some(1));
        }
        let ready = machine_ready(&old);
        set_condition(&mut old, &ready, t(0), Some(1));
        let mut expected = conditions.clone();
        expected.push(Condition {
            type_: "SomethingElse".into(),
            ..with(&[ConditionUpdate::true_(types::PAUSED, reasons::PAUSED)])[0].clone()
        });
        assert_eq!(old, expected);
        let again = old.clone();
        for update in &updates {
            set_condition(&mut old, update, t(5), Some(1));
        }
        let ready = machine_ready(&old);
        set_condition(&mut old, &ready, t(5), Some(1));
        assert_eq!(
            old, again,
            "an unchanged status stays byte for byte the same (no write)"
        );
    }

    /// The book's troubleshooting page has a section, with its cause and fix, for every reason CAPOV writes.
    #[test]
    fn the_book_explains_every_reason() {
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../docs/book/src/troubleshooting/conditions.md"
        );
        let page = std::fs::read_to_string(path).expect("the conditions page");
        let missing: Vec<&str> = ALL_REASONS
            .iter()
            .copied()
            .filter(|reason| !page.contains(&format!("\n### {reason}\n")))
            .collect();
        assert!(missing.is_empty(), "no section in {path} for {missing:?}");
    }

    #[test]
    fn set_leaves_other_conditions_alone() {
        let mut conditions = with(&[ConditionUpdate::true_(types::MACHINE_CREATED, reasons::VM_CREATED)]);
        set_condition(
            &mut conditions,
            &ConditionUpdate::true_(types::MACHINE_ON, reasons::VM_UP),
            t(5),
            None,
        );
        assert_eq!(conditions.len(), 2);
        assert_eq!(conditions[0].type_, types::MACHINE_CREATED);
    }

    #[test]
    fn ready_is_true_only_when_every_relevant_condition_is_true() {
        let all_true = every_step_true();
        let ready = ready_summary(&with(&all_true), MACHINE_READY_INPUTS);
        assert_eq!(ready.state, State::True);
        assert_eq!(ready.reason, reasons::READY);
    }

    #[test]
    fn ready_of_a_machine_being_deleted_is_its_deletion() {
        let mut updates = every_step_true();
        updates.push(ConditionUpdate::false_(
            types::MACHINE_DELETED,
            reasons::VM_STOPPING,
            Severity::Info,
            "stopping the VM",
        ));
        let ready = machine_ready(&with(&updates));
        assert_eq!(ready.state, State::False(Severity::Info));
        assert_eq!(ready.reason, reasons::VM_STOPPING);
        assert_eq!(ready.message, "stopping the VM");
    }

    #[test]
    fn ready_of_a_machine_not_being_deleted_summarises_its_steps() {
        let all_true = every_step_true();
        assert_eq!(machine_ready(&with(&all_true)).state, State::True);
    }

    #[test]
    fn ready_worst_severity_wins() {
        let conditions = with(&[
            ConditionUpdate::true_(types::CAN_CONNECT_TO_OVIRT, reasons::CONNECTED),
            ConditionUpdate::false_(
                types::MACHINE_ON,
                reasons::VM_POWERING_UP,
                Severity::Info,
                "powering up",
            ),
            ConditionUpdate::false_(
                types::MACHINE_DISK_RESIZED,
                reasons::DISK_SHRINK_NOT_ALLOWED,
                Severity::Error,
                "shrink",
            ),
            ConditionUpdate::false_(
                types::K8S_PROVIDER_ID_SETUP,
                reasons::WORKLOAD_CLUSTER_UNREACHABLE,
                Severity::Warning,
                "w",
            ),
        ]);
        let ready = ready_summary(&conditions, MACHINE_READY_INPUTS);
        assert_eq!(ready.state, State::False(Severity::Error));
        assert_eq!(ready.reason, reasons::DISK_SHRINK_NOT_ALLOWED);
        assert_eq!(ready.message, "shrink");
    }

    #[test]
    fn ready_among_equal_severities_the_earlier_step_wins() {
        let conditions = with(&[
            ConditionUpdate::false_(
                types::K8S_PROVIDER_ID_SETUP,
                reasons::WAITING_FOR_NODE,
                Severity::Info,
                "node",
            ),
            ConditionUpdate::false_(
                types::MACHINE_ON,
                reasons::VM_POWERING_UP,
                Severity::Info,
                "powering up",
            ),
        ]);
        let ready = ready_summary(&conditions, MACHINE_READY_INPUTS);
        assert_eq!(ready.reason, reasons::VM_POWERING_UP);
    }

    #[test]
    fn ready_is_unknown_while_a_relevant_condition_is_missing() {
        let conditions = with(&[ConditionUpdate::true_(types::CAN_CONNECT_TO_OVIRT, reasons::CONNECTED)]);
        let ready = ready_summary(&conditions, MACHINE_READY_INPUTS);
        assert_eq!(ready.state, State::Unknown);
        assert_eq!(ready.reason, reasons::NOT_YET_REPORTED);
        assert!(ready.message.contains(types::MACHINE_CREATED));
    }

    #[test]
    fn ready_ignores_conditions_that_are_not_relevant() {
        let conditions = with(&[
            ConditionUpdate::true_(types::CAN_CONNECT_TO_OVIRT, reasons::CONNECTED),
            ConditionUpdate::false_(types::MACHINE_DELETED, reasons::VM_LOCKED, Severity::Error, ""),
        ]);
        assert_eq!(
            ready_summary(&conditions, &[types::CAN_CONNECT_TO_OVIRT]).state,
            State::True
        );
    }

    #[test]
    fn insecure_transport_is_true_and_leaves_ready_true() {
        let mut updates = every_step_true();
        updates[0] = connected(types::CAN_CONNECT_TO_OVIRT, true);
        let conditions = with(&updates);
        assert_eq!(conditions[0].reason, reasons::INSECURE_TRANSPORT);
        assert_eq!(conditions[0].status, ConditionStatus::True);
        assert_eq!(conditions[0].severity, None);
        assert!(conditions[0].message.contains("unencrypted"));
        let ready = ready_summary(&conditions, MACHINE_READY_INPUTS);
        assert_eq!((ready.state, ready.reason), (State::True, reasons::READY));
        assert_eq!(
            connected(types::CAN_CONNECT_TO_OVIRT, false),
            ConditionUpdate::true_(types::CAN_CONNECT_TO_OVIRT, reasons::CONNECTED)
        );
    }

    #[test]
    fn ready_message_falls_back_to_type_and_reason() {
        let conditions = with(&[ConditionUpdate::false_(
            types::MACHINE_ON,
            reasons::VM_DOWN,
            Severity::Warning,
            "",
        )]);
        assert_eq!(
            ready_summary(&conditions, &[types::MACHINE_ON]).message,
            "MachineOn: VMDown"
        );
    }

    #[test]
    fn ready_does_not_leak_foreign_reasons() {
        let mut conditions = with(&[ConditionUpdate::false_(
            types::MACHINE_ON,
            reasons::VM_DOWN,
            Severity::Warning,
            "x",
        )]);
        conditions[0].reason = "SomethingElse".into();
        assert_eq!(
            ready_summary(&conditions, &[types::MACHINE_ON]).reason,
            reasons::UNSPECIFIED
        );
    }

    /// Every reason declared in `reasons` is one Ready may carry: a reason missing from the list made Ready say
    /// Unspecified while the step said why (VMNotOwned, issue 23).
    #[test]
    fn ready_knows_every_declared_reason() {
        let source = include_str!("conditions.rs");
        let start = source.find("pub mod reasons {").expect("the reasons module");
        let end = start + source[start..].find("\n}\n").expect("its end");
        let declared: Vec<&str> = source[start..end]
            .lines()
            .filter_map(|line| line.trim().strip_prefix("pub const "))
            .filter_map(|line| line.split('"').nth(1))
            .collect();
        assert!(declared.len() > 50, "{declared:?}");
        for reason in declared {
            assert!(ALL_REASONS.contains(&reason), "{reason} is missing from ALL_REASONS");
        }
    }

    #[test]
    fn ready_carries_the_reason_that_blocks_it() {
        let conditions = with(&[
            ConditionUpdate::true_(types::CAN_CONNECT_TO_OVIRT, reasons::CONNECTED),
            ConditionUpdate::false_(
                types::MACHINE_CREATED,
                reasons::VM_NOT_OWNED,
                Severity::Error,
                "not ours",
            ),
        ]);
        let ready = ready_summary(&conditions, MACHINE_READY_INPUTS);
        assert_eq!(
            (ready.reason, ready.message.as_str()),
            (reasons::VM_NOT_OWNED, "not ours")
        );
    }

    #[test]
    fn a_message_from_outside_is_cut_to_the_bound() {
        let huge = "e".repeat(8 << 20);
        let conditions = with(&[ConditionUpdate::false_(
            types::MACHINE_ON,
            reasons::ENGINE_ERROR,
            Severity::Error,
            huge,
        )]);
        assert_eq!(
            conditions[0].message.len(),
            crate::trust::bounded_text::MAX_MESSAGE_BYTES
        );
    }
}
