//! What CAPOV's test binaries share without needing Kubernetes (the harness adds what does): waiting until the
//! system under test reaches a state, the processes a test starts and the HTTP servers it asks, an SSO session on
//! the engine simulator, the engine samples the client and the simulator are checked against, and reading rendered
//! YAML manifests, the metric names PromQL expressions read, and progress on a terminal (demo, benchmark).

mod engine;
pub mod heap;
pub mod http;
pub mod manifests;
mod process;
pub mod promql;
mod samples;
mod sso;
pub mod terminal;
mod wait;

pub use engine::wait_vm_status;
pub use process::{TextOutput, WithLog, stdout_of, wait_exit, without_cargo_env};
pub use samples::{fixture, reference_sample, reference_samples_dir};
pub use sso::Session;
pub use wait::{Observation, TimedOut, eventually, until};
