//! CAPOV's operator process: command line and configuration, logging, health probes and the metrics endpoint.
//! The `manager` binary (`src/main.rs`) puts them together with the actors of `capov-actors`.

pub mod check_engine;
pub mod cli;
pub mod fence;
pub mod health;
pub mod idle;
pub mod leader;
pub mod lease_timing;
pub mod logging;
pub mod metrics;
pub mod server;
pub mod wget;

pub use cli::{Config, LogFormat};
pub use health::Readiness;
pub use metrics::Metrics;
