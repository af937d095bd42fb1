//! Each CAPI Cluster's place in the fair queues (`crate::fair_share`): passes waiting for a reconcile permit, and
//! engine requests waiting for their provider's rate limit, with how long they waited. The `cluster` label is
//! `namespace/name` for the first [`MAX_CLUSTER_LABELS`] clusters this process sees and `other` for the rest, so the
//! number of series stays bounded however many clusters come and go; the provider's own requests (connection checks,
//! the batched searches) are `cluster="(provider)"`.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use prometheus::{HistogramOpts, HistogramVec, IntCounter, IntGaugeVec, Opts, Registry, exponential_buckets};

/// Clusters with a label of their own.
pub const MAX_CLUSTER_LABELS: usize = 50;
/// The label of every cluster past the first [`MAX_CLUSTER_LABELS`].
pub const OTHER_CLUSTERS: &str = "other";
/// The label of a provider's own requests.
pub const PROVIDER_ITSELF: &str = "(provider)";

#[derive(Clone)]
pub struct QueueMetrics {
    /// `capov_reconcile_queue_depth{cluster}`: machine passes waiting for a `--max-concurrent-reconciles` permit.
    reconcile_depth: IntGaugeVec,
    /// `capov_reconcile_queue_wait_seconds{cluster}`: how long each pass waited for its permit.
    reconcile_wait: HistogramVec,
    /// `capov_engine_queue_depth{provider,cluster}`: requests waiting for the provider's rate limit (sampled at each
    /// poll interval).
    engine_depth: IntGaugeVec,
    /// `capov_engine_queue_wait_seconds{provider,cluster}`: how long each engine request waited for it.
    engine_wait: HistogramVec,
    /// `capov_reconcile_permit_loans_total`: passes that handed their permit on while a management-cluster request
    /// hung (`runtime::permits`); a rising rate says the apiserver struggles.
    permit_loans: IntCounter,
    permit_loans_refused: IntCounter,
    labelled: Arc<Mutex<HashSet<String>>>,
}

impl QueueMetrics {
    pub fn new(registry: &Registry) -> QueueMetrics {
        let waits = exponential_buckets(0.01, 2.0, 14).expect("valid buckets");
        let gauge = |name: &str, help: &str, labels: &[&str]| {
            let metric = IntGaugeVec::new(Opts::new(name, help), labels).expect("valid metric");
            registry.register(Box::new(metric.clone())).expect("unique metric");
            metric
        };
        let histogram = |name: &str, help: &str, labels: &[&str]| {
            let opts = HistogramOpts::new(name, help).buckets(waits.clone());
            let metric = HistogramVec::new(opts, labels).expect("valid metric");
            registry.register(Box::new(metric.clone())).expect("unique metric");
            metric
        };
        QueueMetrics {
            reconcile_depth: gauge(
                "capov_reconcile_queue_depth",
                "Machine reconciles waiting for a --max-concurrent-reconciles permit, by CAPI Cluster.",
                &["cluster"],
            ),
            reconcile_wait: histogram(
                "capov_reconcile_queue_wait_seconds",
                "Time machine reconciles waited for a permit, by CAPI Cluster.",
                &["cluster"],
            ),
            engine_depth: gauge(
                "capov_engine_queue_depth",
                "Requests waiting for their OVirtProvider's rate limit, by provider and CAPI Cluster.",
                &["provider", "cluster"],
            ),
            engine_wait: histogram(
                "capov_engine_queue_wait_seconds",
                "Time requests waited for their OVirtProvider's rate limit, by provider and CAPI Cluster.",
                &["provider", "cluster"],
            ),
            permit_loans: {
                let help = "Machine reconciles that handed their permit on while a management-cluster request hung.";
                let metric = IntCounter::new("capov_reconcile_permit_loans_total", help).expect("valid metric");
                registry.register(Box::new(metric.clone())).expect("unique metric");
                metric
            },
            permit_loans_refused: {
                let help = "Machine reconciles whose management-cluster request hung and that kept their permit \
                            because every loan was out: while these grow, hung requests pace the batch.";
                let metric = IntCounter::new("capov_reconcile_permit_loans_refused_total", help).expect("valid metric");
                registry.register(Box::new(metric.clone())).expect("unique metric");
                metric
            },
            labelled: Arc::new(Mutex::new(HashSet::new())),
        }
    }

    pub fn permit_lent(&self) {
        self.permit_loans.inc();
    }

    pub fn permit_loan_refused(&self) {
        self.permit_loans_refused.inc();
    }

    pub fn reconcile_depth(&self, tenant: &str, depth: usize) {
        let depth = i64::try_from(depth).unwrap_or(i64::MAX);
        self.reconcile_depth
            .with_label_values(&[&self.label(tenant)])
            .set(depth);
    }

    #[cfg(test)]
    pub fn reconcile_depth_of(&self, tenant: &str) -> i64 {
        self.reconcile_depth.with_label_values(&[&self.label(tenant)]).get()
    }

    pub fn reconcile_waited(&self, tenant: &str, waited: Duration) {
        self.reconcile_wait
            .with_label_values(&[&self.label(tenant)])
            .observe(waited.as_secs_f64());
    }

    pub fn engine_depth(&self, provider: &str, tenant: &str, depth: usize) {
        let depth = i64::try_from(depth).unwrap_or(i64::MAX);
        self.engine_depth
            .with_label_values(&[provider, &self.label(tenant)])
            .set(depth);
    }

    pub fn engine_waited(&self, provider: &str, tenant: &str, waited: Duration) {
        self.engine_wait
            .with_label_values(&[provider, &self.label(tenant)])
            .observe(waited.as_secs_f64());
    }

    /// The `cluster` label of a tenant (`namespace/name`, or the provider's own).
    pub fn label(&self, tenant: &str) -> String {
        if tenant == capov_ovirt::PROVIDER_TENANT {
            return PROVIDER_ITSELF.to_string();
        }
        let mut labelled = self.labelled.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        if labelled.contains(tenant) {
            return tenant.to_string();
        }
        if labelled.len() < MAX_CLUSTER_LABELS {
            labelled.insert(tenant.to_string());
            return tenant.to_string();
        }
        OTHER_CLUSTERS.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cluster_labels_are_bounded() {
        let metrics = QueueMetrics::new(&Registry::new());
        for n in 0..MAX_CLUSTER_LABELS {
            assert_eq!(metrics.label(&format!("ns/c-{n}")), format!("ns/c-{n}"));
        }
        assert_eq!(metrics.label("ns/one-too-many"), OTHER_CLUSTERS);
        assert_eq!(metrics.label("ns/c-0"), "ns/c-0", "a labelled cluster keeps its label");
        assert_eq!(metrics.label(capov_ovirt::PROVIDER_TENANT), PROVIDER_ITSELF);
    }

    #[test]
    fn depths_and_waits_are_recorded_per_cluster() {
        let registry = Registry::new();
        let metrics = QueueMetrics::new(&registry);
        metrics.reconcile_depth("ns/a", 3);
        metrics.reconcile_waited("ns/a", Duration::from_millis(200));
        metrics.engine_depth("engine", "ns/b", 7);
        metrics.engine_waited("engine", "", Duration::from_millis(50));
        metrics.permit_lent();
        metrics.permit_loan_refused();
        let text = {
            let mut buffer = Vec::new();
            prometheus::Encoder::encode(&prometheus::TextEncoder::new(), &registry.gather(), &mut buffer)
                .expect("encode");
            String::from_utf8(buffer).expect("utf-8")
        };
        for line in [
            "capov_reconcile_queue_depth{cluster=\"ns/a\"} 3",
            "capov_reconcile_queue_wait_seconds_count{cluster=\"ns/a\"} 1",
            "capov_engine_queue_depth{cluster=\"ns/b\",provider=\"engine\"} 7",
            "capov_engine_queue_wait_seconds_count{cluster=\"(provider)\",provider=\"engine\"} 1",
            "capov_reconcile_permit_loans_total 1",
            "capov_reconcile_permit_loans_refused_total 1",
        ] {
            assert!(text.contains(line), "missing {line} in\n{text}");
        }
    }
}
