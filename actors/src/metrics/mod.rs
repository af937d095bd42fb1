//! Every `capov_` Prometheus family, registered up front in one [`Metrics`] registry that the actors feed and the
//! operator's HTTPS endpoint serves, plus the process collector.
//!
//! Labels are bounded: actor or object *kind*, oVirt *provider* (an OVirtProvider name: a handful per cluster),
//! HTTP method, engine resource type, status code, result, and CAPI Cluster for the fair queues (at most
//! `queues::MAX_CLUSTER_LABELS` of them, the rest `other`). Never an object name.

pub mod census;
mod memory_limit;
mod process;
mod queues;

pub use queues::QueueMetrics;

use std::sync::Arc;

use prometheus::{
    Encoder, Gauge, Histogram, HistogramOpts, HistogramVec, IntCounter, IntCounterVec, IntGauge, IntGaugeVec, Opts,
    Registry, TextEncoder, exponential_buckets,
};

pub use census::{Census, Subject};

/// Content type of the Prometheus text format.
pub const TEXT_CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// `kind` label values of the actor metrics.
pub mod kind {
    pub const SUPERVISOR: &str = "supervisor";
    pub const PROVIDER: &str = "provider";
    pub const MACHINE: &str = "machine";
    pub const CLUSTER: &str = "cluster";
    pub const STATUS_WRITER: &str = "status-writer";
    /// The kinds that are actors (OVirtClusters are handled by the supervisor).
    pub const ACTORS: [&str; 4] = [SUPERVISOR, PROVIDER, MACHINE, STATUS_WRITER];
}

/// Result label values of [`Metrics::reconciles_total`].
pub mod result {
    /// The reconcile finished; nothing to retry.
    pub const SUCCESS: &str = "success";
    /// The reconcile asked to run again later (waiting for the engine, a dependency, …).
    pub const REQUEUE: &str = "requeue";
    /// The reconcile failed and will be retried with back-off.
    pub const ERROR: &str = "error";
    /// The reconcile failed for good (a failureReason was set).
    pub const TERMINAL: &str = "terminal";
}

/// Every CAPOV metric. Clone it freely: clones share the same registry and series.
///
/// Label names: `kind` (actor or object kind, e.g. `machine`, `provider`, `cluster`, `status-writer`,
/// `supervisor`), `result` (see [`result`]), `provider` (OVirtProvider name), `method` (HTTP method), `resource`
/// (engine resource type, e.g. `vms`, `disks`, `templates`), `code` (HTTP status code, or `error` when no response
/// came).
#[derive(Clone)]
pub struct Metrics {
    registry: Registry,
    /// `capov_build_info{version}`: always 1.
    pub build_info: IntGaugeVec,
    /// `capov_leader`: 1 while this replica holds the leader-election Lease (or runs without leader election).
    pub leader: IntGauge,
    /// `capov_actors_live{kind}`: actors running now.
    pub actors_live: IntGaugeVec,
    /// `capov_machines_dormant`: machines with nothing to do until something changes, kept as a record without an
    /// actor (`runtime::machine::dormant`); a machine is counted here or in `capov_actors_live{kind="machine"}`.
    pub machines_dormant: IntGauge,
    /// `capov_actor_messages_total{kind}`: messages handled.
    pub actor_messages_total: IntCounterVec,
    /// `capov_actor_mailbox_depth{kind}`: messages waiting, summed over the actors of a kind.
    pub actor_mailbox_depth: IntGaugeVec,
    /// `capov_actor_message_duration_seconds{kind}`: time to handle one message.
    pub actor_message_duration_seconds: HistogramVec,
    /// `capov_actor_restarts_total{kind}`: actors restarted by their supervisor after a panic or failure.
    pub actor_restarts_total: IntCounterVec,
    /// `capov_reconciles_total{kind,result}`.
    pub reconciles_total: IntCounterVec,
    /// `capov_reconcile_duration_seconds{kind}`.
    pub reconcile_duration_seconds: HistogramVec,
    /// `capov_engine_requests_total{provider,method,resource,code}`: requests to oVirt engines.
    pub engine_requests_total: IntCounterVec,
    /// `capov_engine_request_duration_seconds{provider,method,resource}`.
    pub engine_request_duration_seconds: HistogramVec,
    /// `capov_engine_rate_limit_wait_seconds{provider}`: time requests waited for the `--ovirt-qps/--ovirt-burst`
    /// limiter (observe only waits > 0; `_count` is then the number of delayed requests).
    pub engine_rate_limit_wait_seconds: HistogramVec,
    /// `capov_status_writes_total{kind,result}`: status patches sent (`result`: `success`, `conflict`, `error`).
    pub status_writes_total: IntCounterVec,
    /// `capov_status_updates_coalesced_total{kind}`: status updates merged into a later write instead of sent.
    pub status_updates_coalesced_total: IntCounterVec,
    /// `capov_events_dropped_total{cause}`: Kubernetes Events not written (`cause`: `budget`, a namespace's Events of
    /// steps over their budget; `queue`, the queue full; `failed`, refused or not answered in time).
    pub events_dropped_total: IntCounterVec,
    /// `capov_status_write_duration_seconds{kind}`: time one status write took, from sending it to its answer.
    pub status_write_duration_seconds: HistogramVec,
    /// `capov_status_writes_pending`: objects whose newest status waits to be written (held and failed ones included).
    pub status_writes_pending: IntGauge,
    /// `capov_status_writes_slow`: writes under way past a second, which no longer take one of the write slots.
    pub status_writes_slow: IntGauge,
    /// `capov_apiserver_outages_total`: times the management cluster's apiserver answered again after an outage (no
    /// answer to anything for 3 s or more) and the retries waiting for it were brought forward (`kube::pulse`).
    pub apiserver_outages_total: IntCounter,
    /// `capov_max_concurrent_reconciles`: the configured limit.
    pub max_concurrent_reconciles: Gauge,
    /// `capov_engine_rate_limit_qps`: the requests per second each provider's limiter lets through
    /// (`--ovirt-qps`, rounded up to a whole request).
    pub engine_rate_limit_qps: Gauge,
    /// `capov_engine_rate_limit_burst`: the requests above that rate it lets through at once (`--ovirt-burst`).
    pub engine_rate_limit_burst: Gauge,
    /// `capov_machine_time_to_ready_seconds`: from an OVirtMachine's creation until its Ready condition first
    /// turned True, observed once per machine (by the actor that saw it happen; not for machines that were
    /// provisioned before the operator started).
    pub machine_time_to_ready_seconds: Histogram,
    /// `capov_machines`, `capov_machines_longest_in_step_seconds`, `capov_provider_ready`: what the written statuses
    /// say, counted at each scrape ([`census`]).
    pub census: Arc<Census>,
    /// Each CAPI Cluster's queue depth and wait at the reconcile permits and the engine rate limits.
    pub queues: QueueMetrics,
}

impl Default for Metrics {
    fn default() -> Self {
        Metrics::new()
    }
}

impl Metrics {
    /// A fresh registry with every family registered, plus the process collector.
    pub fn new() -> Metrics {
        let registry = Registry::new();
        let latency = exponential_buckets(0.005, 2.0, 14).expect("valid buckets");
        let engine_latency = exponential_buckets(0.01, 2.0, 12).expect("valid buckets");
        let waits = exponential_buckets(0.01, 2.0, 10).expect("valid buckets");

        let metrics = Metrics {
            build_info: int_gauge_vec(
                &registry,
                "capov_build_info",
                "Build information; always 1.",
                &["version"],
            ),
            leader: int_gauge(&registry, "capov_leader", "1 while this replica is the leader, else 0."),
            actors_live: int_gauge_vec(
                &registry,
                "capov_actors_live",
                "Actors running now, by kind.",
                &["kind"],
            ),
            machines_dormant: int_gauge(
                &registry,
                "capov_machines_dormant",
                "Machines kept as a record without an actor until something changes for them.",
            ),
            actor_messages_total: counter_vec(
                &registry,
                "capov_actor_messages_total",
                "Messages handled by actors, by kind.",
                &["kind"],
            ),
            actor_mailbox_depth: int_gauge_vec(
                &registry,
                "capov_actor_mailbox_depth",
                "Messages waiting in actor mailboxes, summed by kind.",
                &["kind"],
            ),
            actor_message_duration_seconds: histogram_vec(
                &registry,
                "capov_actor_message_duration_seconds",
                "Time an actor took to handle one message, by kind.",
                &["kind"],
                latency.clone(),
            ),
            actor_restarts_total: counter_vec(
                &registry,
                "capov_actor_restarts_total",
                "Actors restarted by their supervisor, by kind.",
                &["kind"],
            ),
            reconciles_total: counter_vec(
                &registry,
                "capov_reconciles_total",
                "Reconciles finished, by kind and result (success, requeue, error, terminal).",
                &["kind", "result"],
            ),
            reconcile_duration_seconds: histogram_vec(
                &registry,
                "capov_reconcile_duration_seconds",
                "Time one reconcile took, by kind.",
                &["kind"],
                latency.clone(),
            ),
            engine_requests_total: counter_vec(
                &registry,
                "capov_engine_requests_total",
                "Requests to oVirt engines, by provider, method, resource and status code.",
                &["provider", "method", "resource", "code"],
            ),
            engine_request_duration_seconds: histogram_vec(
                &registry,
                "capov_engine_request_duration_seconds",
                "Latency of requests to oVirt engines, by provider, method and resource.",
                &["provider", "method", "resource"],
                engine_latency,
            ),
            engine_rate_limit_wait_seconds: histogram_vec(
                &registry,
                "capov_engine_rate_limit_wait_seconds",
                "Time requests to oVirt engines waited for the client-side rate limit, by provider.",
                &["provider"],
                waits,
            ),
            status_writes_total: counter_vec(
                &registry,
                "capov_status_writes_total",
                "Status writes sent to the API server, by kind and result (success, conflict, error).",
                &["kind", "result"],
            ),
            status_updates_coalesced_total: counter_vec(
                &registry,
                "capov_status_updates_coalesced_total",
                "Status updates merged into a later write instead of being sent, by kind.",
                &["kind"],
            ),
            events_dropped_total: counter_vec(
                &registry,
                "capov_events_dropped_total",
                "Kubernetes Events not written, by cause (budget, queue, failed).",
                &["cause"],
            ),
            status_write_duration_seconds: histogram_vec(
                &registry,
                "capov_status_write_duration_seconds",
                "Time one status write took, from sending it to the API server's answer, by kind.",
                &["kind"],
                latency,
            ),
            status_writes_pending: int_gauge(
                &registry,
                "capov_status_writes_pending",
                "Objects whose newest status waits in the status writer's queue to be written.",
            ),
            status_writes_slow: int_gauge(
                &registry,
                "capov_status_writes_slow",
                "Status writes unanswered for over a second; they no longer hold up the writes behind them.",
            ),
            apiserver_outages_total: {
                let help = "Outages of the management cluster's apiserver (no answer for 3 s or more) that ended; \
                            the retries waiting for it were sent when it answered again.";
                let metric = IntCounter::new("capov_apiserver_outages_total", help).expect("valid metric");
                registry.register(Box::new(metric.clone())).expect("unique metric");
                metric
            },
            max_concurrent_reconciles: {
                let gauge = Gauge::with_opts(Opts::new(
                    "capov_max_concurrent_reconciles",
                    "The configured number of OVirtMachines reconciled at the same time.",
                ))
                .expect("valid metric");
                registry.register(Box::new(gauge.clone())).expect("unique metric");
                gauge
            },
            engine_rate_limit_qps: gauge(
                &registry,
                "capov_engine_rate_limit_qps",
                "Requests per second the client-side rate limiter lets through to each oVirt engine (--ovirt-qps).",
            ),
            engine_rate_limit_burst: gauge(
                &registry,
                "capov_engine_rate_limit_burst",
                "Requests to each oVirt engine the rate limiter lets through at once above that rate (--ovirt-burst).",
            ),
            machine_time_to_ready_seconds: {
                let opts = HistogramOpts::new(
                    "capov_machine_time_to_ready_seconds",
                    "Time from an OVirtMachine's creation until its Ready condition first turned True.",
                )
                .buckets(exponential_buckets(15.0, 2.0, 10).expect("valid buckets"));
                let histogram = Histogram::with_opts(opts).expect("valid metric");
                registry.register(Box::new(histogram.clone())).expect("unique metric");
                histogram
            },
            census: Arc::new(Census::new()),
            queues: QueueMetrics::new(&registry),
            registry,
        };
        metrics
            .registry
            .register(Box::new(SharedCollector(metrics.census.clone())))
            .expect("unique census metrics");
        metrics
            .build_info
            .with_label_values(&[env!("CARGO_PKG_VERSION")])
            .set(1);
        metrics
            .registry
            .register(Box::new(process::ProcessCollector::new()))
            .expect("unique process metrics");
        for kind in kind::ACTORS {
            metrics.init_kind(kind);
        }
        // The status families at zero, so that dashboards show them before the first write (or coalesced update).
        for kind in [kind::PROVIDER, kind::CLUSTER, kind::MACHINE] {
            metrics.status_updates_coalesced_total.with_label_values(&[kind]);
            metrics.status_writes_total.with_label_values(&[kind, "success"]);
        }
        use crate::runtime::status::events::cause;
        for cause in [cause::BUDGET, cause::QUEUE, cause::FAILED] {
            metrics.events_dropped_total.with_label_values(&[cause]);
        }
        metrics
    }

    /// Creates the series of an actor kind at zero, so that dashboards show it before the first event.
    pub fn init_kind(&self, kind: &str) {
        self.actors_live.with_label_values(&[kind]);
        self.actor_messages_total.with_label_values(&[kind]);
        self.actor_mailbox_depth.with_label_values(&[kind]);
        self.actor_restarts_total.with_label_values(&[kind]);
    }

    /// The underlying registry (to register more collectors).
    pub fn registry(&self) -> &Registry {
        &self.registry
    }

    /// Everything in the Prometheus text format.
    pub fn render(&self) -> String {
        let mut buffer = Vec::new();
        if let Err(err) = TextEncoder::new().encode(&self.registry.gather(), &mut buffer) {
            tracing::warn!(error = %err, "encoding metrics failed");
        }
        String::from_utf8(buffer).unwrap_or_default()
    }
}

fn counter_vec(registry: &Registry, name: &str, help: &str, labels: &[&str]) -> IntCounterVec {
    let metric = IntCounterVec::new(Opts::new(name, help), labels).expect("valid metric");
    registry.register(Box::new(metric.clone())).expect("unique metric");
    metric
}

fn int_gauge_vec(registry: &Registry, name: &str, help: &str, labels: &[&str]) -> IntGaugeVec {
    let metric = IntGaugeVec::new(Opts::new(name, help), labels).expect("valid metric");
    registry.register(Box::new(metric.clone())).expect("unique metric");
    metric
}

fn gauge(registry: &Registry, name: &str, help: &str) -> Gauge {
    let metric = Gauge::with_opts(Opts::new(name, help)).expect("valid metric");
    registry.register(Box::new(metric.clone())).expect("unique metric");
    metric
}

/// Registers a collector that the [`Metrics`] keep a handle on.
struct SharedCollector<C>(Arc<C>);

impl<C: prometheus::core::Collector> prometheus::core::Collector for SharedCollector<C> {
    fn desc(&self) -> Vec<&prometheus::core::Desc> {
        self.0.desc()
    }

    fn collect(&self) -> Vec<prometheus::proto::MetricFamily> {
        self.0.collect()
    }
}

fn int_gauge(registry: &Registry, name: &str, help: &str) -> IntGauge {
    let metric = IntGauge::with_opts(Opts::new(name, help)).expect("valid metric");
    registry.register(Box::new(metric.clone())).expect("unique metric");
    metric
}

fn histogram_vec(registry: &Registry, name: &str, help: &str, labels: &[&str], buckets: Vec<f64>) -> HistogramVec {
    let metric = HistogramVec::new(HistogramOpts::new(name, help).buckets(buckets), labels).expect("valid metric");
    registry.register(Box::new(metric.clone())).expect("unique metric");
    metric
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn families_are_registered_and_prefixed() {
        let metrics = Metrics::new();
        metrics.init_kind("machine");
        metrics
            .reconciles_total
            .with_label_values(&["machine", result::SUCCESS])
            .inc();
        metrics
            .engine_requests_total
            .with_label_values(&["ovirt-prod", "GET", "vms", "200"])
            .inc();
        metrics
            .engine_request_duration_seconds
            .with_label_values(&["ovirt-prod", "GET", "vms"])
            .observe(0.02);
        let text = metrics.render();
        for family in [
            "capov_build_info",
            "capov_leader",
            "capov_actors_live{kind=\"machine\"} 0",
            "capov_reconciles_total{kind=\"machine\",result=\"success\"} 1",
            "capov_engine_requests_total{code=\"200\",method=\"GET\",provider=\"ovirt-prod\",resource=\"vms\"} 1",
            "capov_engine_request_duration_seconds_bucket",
            "capov_process_resident_memory_bytes",
            "capov_process_cpu_seconds_total",
            "capov_process_open_fds",
            "capov_status_updates_coalesced_total{kind=\"machine\"} 0",
            "capov_status_writes_total{kind=\"provider\",result=\"success\"} 0",
            "capov_events_dropped_total{cause=\"budget\"} 0",
        ] {
            assert!(text.contains(family), "missing {family} in\n{text}");
        }
        for family in metrics.registry().gather() {
            assert!(family.name().starts_with("capov_"), "{}", family.name());
        }
    }

    #[test]
    fn clones_share_series() {
        let metrics = Metrics::new();
        let clone = metrics.clone();
        clone.actor_restarts_total.with_label_values(&["provider"]).inc();
        assert_eq!(metrics.actor_restarts_total.with_label_values(&["provider"]).get(), 1);
    }
}
