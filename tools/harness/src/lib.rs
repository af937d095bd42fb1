//! A real Kubernetes control plane for CAPOV's tests: etcd + kube-apiserver (+ kube-controller-manager) started on
//! free loopback ports with generated certificates, built from Go modules by `tools/build-go-tools.sh` (or taken
//! from `KUBEBUILDER_ASSETS`).
//!
//! Every process is killed when its [`ControlPlane`] is dropped (also while a test panics), and also when the test
//! process itself dies: children are spawned with a parent-death signal from a launcher thread that lives as long
//! as the process.
//!
//! Around it, what the tests set up on it: the objects CAPI core and users create ([`objects`]), service accounts
//! with their RBAC ([`rbac`]), an engine simulator with the OVirtProvider pointing at it ([`Engine`]), and server-side
//! dry runs of manifests ([`ControlPlane::dry_run_apply`]), and apiserver trouble between an operator and its
//! apiserver ([`ApiserverProxy`]). What needs no Kubernetes is in `capov-testkit`.

mod apiserver_proxy;
mod assets;
mod capi;
mod certs;
mod control_plane;
mod crds;
mod dry_run;
mod engine;
mod error;
mod helm;
mod ipam;
mod kubeadm;
mod launcher;
mod node;
pub mod objects;
mod ports;
mod promtool;
pub mod rbac;

pub use apiserver_proxy::{ApiserverProxy, Counts as ProxyCounts, Trouble};
pub use assets::{binaries_dir, node_binaries_dir};
pub use capi::{
    CapiModule, capi_crd_dir, capi_module, capi_tools_dir, clusterctl, install_capi_crds, offline_clusterctl,
};
pub use control_plane::{ControlPlane, Options, shared};
pub use crds::{crd_chart_dir, install_crds};
pub use engine::{ADMIN_PASSWORD, ADMIN_USER, CREDENTIALS_SECRET, Engine, ProviderSpec, play_kubelets, trusting};
pub use error::HarnessError;
pub use helm::helm;
pub use ipam::{IPAM_PROVIDER_DIR_ENV, IpamProvider, apply_in_cluster_pool, in_cluster_ip_pool, ipam_provider_dir};
pub use kubeadm::play_kubeadm;
pub use node::{Node, routable_address};
pub use ports::free_port;
pub use promtool::promtool;
