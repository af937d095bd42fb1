//! One actor per OVirtProvider: owns the engine connection (client, token, TLS, rate limiter), reports the
//! provider's status, tells the machines using it when the connection changes, and answers the VM status of every
//! machine waiting on the engine with one search request per poll interval.
//!
//! Engine I/O never runs inside the actor's handler: checks and polls run as tasks that report back, at most one
//! of each at a time, so a machine asking for the connection never waits behind a slow engine. The connection is
//! re-checked every [`RECHECK_INTERVAL`] while it works and soon after any request of this provider fails with a
//! transport error, a 5xx or a 401, so that an outage or a password changed on the engine shows on the provider
//! and its machines, and both recover by themselves.

mod actor;
mod check;
pub mod connection;
pub mod finalizers;
pub mod inventory;
pub mod lookups;
pub mod placements;
mod poll;
pub mod restart;
mod state;

pub use self::actor::{ProviderActor, ProviderArgs};
pub use self::state::RECHECK_INTERVAL;
