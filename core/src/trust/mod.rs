//! Trust and ownership: whose VM a VM is, which management clusters and tenants may use a provider, where a
//! workload kubeconfig may send CAPOV, and what of a tenant's answers and texts CAPOV keeps.

pub mod bounded_text;
pub mod identity;
pub mod management_clusters;
pub mod tenancy;
pub mod workload_answers;
pub mod workload_target;
