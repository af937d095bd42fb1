//! CAPOV's actor runtime (`runtime`): it observes, feeds the pure decisions of `capov-core`, acts through the oVirt
//! client and the Kubernetes API, and reports; with the `capov_` metrics registry (`metrics`) and the rules that
//! need the client's types (`fair_share`, `workload_kubeconfig`).

pub mod fair_share;
pub mod metrics;
pub mod runtime;
pub mod workload_kubeconfig;
