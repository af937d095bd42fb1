//! CAPOV's actors: the pure decision logic of the OVirtMachine lifecycle (SPEC §2, §3), with no I/O, and the actor
//! runtime (`runtime`) that observes, acts through the oVirt client and the Kubernetes API, and reports.

pub mod addresses;
pub mod affinity_groups;
pub mod backoff;
pub mod bootstrap_payload;
pub mod bounded_text;
pub mod capacity;
pub mod conditions;
pub mod control_plane_endpoint;
pub mod disk_alias;
pub mod engine_names;
pub mod engine_refusals;
pub mod failure_domains;
pub mod fair_share;
pub mod feature_gates;
pub mod guest_network;
pub mod identity;
pub mod ip_claims;
pub mod machine_steps;
pub mod management_clusters;
pub mod metrics;
pub mod nics;
pub mod node_topology;
pub mod placement;
pub mod runtime;
pub mod template_capacity;
pub mod tenancy;
pub mod vm_name;
pub mod vm_snapshot;
pub mod vm_tags;
pub mod workload_answers;
pub mod workload_kubeconfig;
pub mod workload_target;
