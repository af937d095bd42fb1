//! CAPOV's pure core: the decisions of the OVirtMachine lifecycle (SPEC §2, §3) and the rules they use, with no
//! I/O. It depends on the API types (`capov-crds`) and the engine's objects (`capov-ovirt-model`), never on an async
//! runtime, an HTTP client or Kubernetes' client: the compiler keeps it pure. The actor runtime (`capov-actors`)
//! observes, feeds these decisions and carries out what they return.

pub mod conditions;
pub mod machine_steps;
pub mod naming;
pub mod network;
pub mod placement;
pub mod policy;
pub mod trust;
pub mod vm;
