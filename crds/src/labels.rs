//! Well-known names shared by the CRDs, the operator and the charts.

/// The API group of every CAPOV kind.
pub const GROUP: &str = "infrastructure.cluster.x-k8s.io";
/// The one served and stored version.
pub const VERSION: &str = "v1beta1";

/// Finalizer on OVirtCluster and OVirtMachine (the name the product documents give).
pub const MACHINE_FINALIZER: &str = "capovmachine.infrastructure.cluster.x-k8s.io";
/// Finalizer on OVirtProvider: released only when no OVirtMachine references the provider.
pub const PROVIDER_FINALIZER: &str = "capovprovider.infrastructure.cluster.x-k8s.io";

/// Annotation that pauses reconciliation of one object.
pub const PAUSED_ANNOTATION: &str = "cluster.x-k8s.io/paused";
/// Annotation marking an OVirtCluster as managed by someone else.
pub const MANAGED_BY_ANNOTATION: &str = "cluster.x-k8s.io/managed-by";
/// Label naming the CAPI Cluster an object belongs to.
pub const CLUSTER_NAME_LABEL: &str = "cluster.x-k8s.io/cluster-name";
/// Label CAPI's control-plane providers put on control-plane Machines and their infrastructure machines.
pub const CONTROL_PLANE_LABEL: &str = "cluster.x-k8s.io/control-plane";
/// Label selecting the objects one operator instance handles (`--watch-filter`).
pub const WATCH_FILTER_LABEL: &str = "cluster.x-k8s.io/watch-filter";
/// Annotation recording the disks a VM received from its template, before its first start.
pub const SYSTEM_DISKS_ANNOTATION: &str = "capov.infrastructure.cluster.x-k8s.io/system-disks";

/// Annotation recording the UID an OVirtMachine had when CAPOV created (or adopted) its VM: the VM's ownership
/// marker names that UID, and `clusterctl move` re-creates the object with a new one but keeps annotations.
pub const OWNER_UID_ANNOTATION: &str = "capov.infrastructure.cluster.x-k8s.io/owner-uid";
/// Annotation recording the id of the VM CAPOV created for an OVirtMachine until spec.providerID records it (the
/// VM's disks are still being copied): a machine whose access is revoked meanwhile is not released while its VM
/// exists. Removed when spec.providerID is written.
pub const CREATED_VM_ANNOTATION: &str = "capov.infrastructure.cluster.x-k8s.io/created-vm";
/// Annotation recording the name CAPOV gave the VM it created (or adopted) for an OVirtMachine, written with the
/// created-VM annotation and kept: from then on the VM is looked for under this name, whatever later edits of
/// spec.vmnametemplate or the cluster-name label would render (issue 35: such an edit made a second VM).
pub const VM_NAME_ANNOTATION: &str = "capov.infrastructure.cluster.x-k8s.io/vm-name";
/// Annotation a user sets on an OVirtMachine being deleted to let it go while its VM, which carries this machine's
/// marker written by another management cluster, stays in oVirt (after `clusterctl move` onto a cluster whose
/// OVirtProvider already existed). Without it such a deletion waits, so that no VM is left behind unnoticed.
pub const RELEASE_VM_ANNOTATION: &str = "capov.infrastructure.cluster.x-k8s.io/release-vm";
/// Annotation a user sets (any value, e.g. the time) on an OVirtMachine to have it looked at again at once, e.g. after
/// detaching a CSI disk from its VM in oVirt instead of waiting for the next retry. Other annotations and labels
/// CAPOV does not read are not even decoded (issue 35), so changing them wakes nothing.
pub const RECONCILE_REQUESTED_ANNOTATION: &str = "capov.infrastructure.cluster.x-k8s.io/reconcile-requested-at";
/// Annotation recording the engine (URL and user) where the VM of spec.providerID lives, written with it.
pub const ENGINE_ANNOTATION: &str = "capov.infrastructure.cluster.x-k8s.io/engine";
/// Annotation on an OVirtProvider: the management cluster id(s) its VMs' ownership markers name, comma-separated,
/// the first for new markers. Written by CAPOV when absent; carried along by `clusterctl move` with the provider.
pub const MANAGEMENT_CLUSTER_ANNOTATION: &str = "capov.infrastructure.cluster.x-k8s.io/management-cluster";
/// Annotation `clusterctl move` sets on each source object right before deleting it: its copy lives on in the
/// target management cluster.
pub const DELETE_FOR_MOVE_ANNOTATION: &str = "clusterctl.cluster.x-k8s.io/delete-for-move";

/// Labels every CAPOV CRD carries: the CAPI contract versions it implements (older and current CAPI core find the
/// version through them) and the clusterctl inventory labels.
pub const CRD_LABELS: &[(&str, &str)] = &[
    ("cluster.x-k8s.io/v1beta1", VERSION),
    ("cluster.x-k8s.io/v1beta2", VERSION),
    ("cluster.x-k8s.io/provider", "infrastructure-ovirt"),
    ("clusterctl.cluster.x-k8s.io", ""),
];

/// Extra label on the OVirtProvider CRD so that `clusterctl move` carries providers (and their Secrets).
pub const MOVE_HIERARCHY_LABEL: &str = "clusterctl.cluster.x-k8s.io/move-hierarchy";
