//! A stateful, in-memory oVirt Engine speaking the real REST wire protocol (XML by default, JSON
//! with the engine's scalars-as-strings convention), over HTTP or HTTPS with its own CA.
//!
//! ```no_run
//! # async fn demo() -> std::io::Result<()> {
//! let sim = capov_ovirt_sim::Simulator::builder().start().await?;
//! println!("engine at {} (CA: {:?})", sim.api_url(), sim.ca_pem());
//! sim.control().expire_tokens();
//! # Ok(()) }
//! ```

mod api;
mod api_placement;
mod api_workload;
mod body;
mod control;
mod control_hosts;
mod engine;
mod engine_only;
mod faults;
mod guest_network;
mod ids;
mod inventory;
mod render;
mod render_placement;
mod request;
mod routes;
mod schema;
mod search;
mod server;
mod shared;
mod sso;
mod state;
/// The throw-away CA and server certificate, also for tests that stand up TLS peers of their own.
pub mod tls;
mod wire;

pub use control::Control;
pub use control_hosts::HostDeviceSnapshot;
pub use engine::Timings;
pub use faults::{BodyFault, FaultInjection, SlowReplies, SsoErrorStyle};
pub use inventory::{
    AffinityGroupSeed, AffinityLabelSeed, ClusterSeed, DataCenterSeed, GIB, HostDeviceSeed, HostSeed, InstanceTypeSeed,
    Inventory, MdevTypeSeed, NetworkSeed, StorageDomainSeed, TemplateDiskSeed, TemplateNicSeed, TemplateSeed, VmSeed,
    VnicProfileSeed, default_inventory, predefined_instance_types,
};
pub use server::{Simulator, SimulatorBuilder, SimulatorHandle};
pub use shared::WriteRecord;
pub use state::{
    AffinityGroupSnapshot, Delivered, DiskSnapshot, EngineVersion, HighAvailability, HostSnapshot, InitNetwork,
    InitNic, NicSnapshot, Protocol, Rule, Transition, VmSnapshot, device_id,
};
