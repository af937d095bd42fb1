//! Settings of the actor runtime that come from the operator's flags.

use std::time::Duration;

#[derive(Clone, Debug)]
pub struct RuntimeSettings {
    /// Namespace of the credential Secrets (and the Lease).
    pub credentials_namespace: String,
    /// Namespace whose CAPI objects are handled; None = all.
    pub watch_namespace: Option<String>,
    /// Only objects with this `cluster.x-k8s.io/watch-filter` label value; None = all.
    pub watch_filter: Option<String>,
    /// How many machine reconciles run at once across all machine actors.
    pub max_concurrent_reconciles: usize,
    pub ovirt_qps: u32,
    pub ovirt_burst: u32,
    /// How often the provider actors read the status of VMs in transition.
    pub poll_interval: Duration,
    /// Full resync of every machine even without events.
    pub sync_period: Duration,
    pub gates: capov_core::policy::feature_gates::FeatureGates,
    /// Identity of this management cluster in the ownership marker of every VM (`--management-cluster-id`);
    /// empty: the UID of the `kube-system` namespace, read at start.
    pub management_cluster_id: String,
    /// Engine writes are sent only while this gate is open (the leader election's fence); None: always.
    pub engine_write_gate: Option<EngineWriteGate>,
    /// This replica's name in the engine client's User-Agent (the pod name).
    pub instance: Option<String>,
    /// How long one engine request may take, answer included, before the client gives up on it.
    pub engine_request_timeout: Duration,
    /// `--allow-internal-workload-servers`: workload kubeconfigs may point at loopback, link-local and the management
    /// cluster's own apiserver and service network (tests and demos).
    pub allow_internal_workload_servers: bool,
    /// The management cluster's apiserver and service networks, refused as workload apiservers unless allowed; read
    /// when the runtime starts.
    pub internal_targets: capov_core::trust::workload_target::InternalTargets,
    /// The least time between two status writes of one object whose change is only progress
    /// (`status::writer::Pace::Spaced`); Ready, failures, warnings, errors and pause are written at once.
    pub status_spacing: Duration,
}

/// [`RuntimeSettings::status_spacing`] of the operator: a machine's progress shows at most this late, and a batch
/// writes about two statuses per machine (its first and its Ready) instead of one per step.
pub const STATUS_SPACING: Duration = Duration::from_secs(20);

/// The gate every engine client of the runtime consults before a write (see [`capov_ovirt::WriteGate`]).
#[derive(Clone)]
pub struct EngineWriteGate(pub std::sync::Arc<dyn capov_ovirt::WriteGate>);

impl std::fmt::Debug for EngineWriteGate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("EngineWriteGate")
    }
}

impl Default for RuntimeSettings {
    fn default() -> Self {
        RuntimeSettings {
            credentials_namespace: "capov-system".into(),
            watch_namespace: None,
            watch_filter: None,
            max_concurrent_reconciles: 10,
            ovirt_qps: 10,
            ovirt_burst: 20,
            poll_interval: Duration::from_secs(5),
            sync_period: Duration::from_secs(600),
            gates: Default::default(),
            management_cluster_id: String::new(),
            engine_write_gate: None,
            instance: None,
            engine_request_timeout: capov_ovirt::ClientConfig::DEFAULT_REQUEST_TIMEOUT,
            allow_internal_workload_servers: false,
            internal_targets: Default::default(),
            status_spacing: STATUS_SPACING,
        }
    }
}
