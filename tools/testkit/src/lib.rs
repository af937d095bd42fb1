//! What CAPOV's test binaries share without needing Kubernetes (the harness adds what does): waiting until the
//! system under test reaches a state, the processes a test starts, an SSO session on the engine simulator, and the
//! engine samples the client and the simulator are checked against.

mod process;
mod samples;
mod sso;
mod wait;

pub use process::{TextOutput, WithLog, wait_exit};
pub use samples::{fixture, reference_sample, reference_samples_dir};
pub use sso::Session;
pub use wait::{Observation, TimedOut, eventually, until};
