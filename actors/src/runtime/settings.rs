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
    pub gates: crate::feature_gates::FeatureGates,
    /// Identity of this management cluster in the ownership marker of every VM (`--management-cluster-id`);
    /// empty: the UID of the `kube-system` namespace, read at start.
    pub management_cluster_id: String,
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
        }
    }
}
