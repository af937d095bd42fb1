//! The workload clusters: their clients, bounded and taking turns (`clients`), and the servers a tenant's kubeconfig
//! may not point at (`targets`).

pub mod clients;
pub mod targets;
