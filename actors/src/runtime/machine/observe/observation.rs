//! What one observation hands to the pass: the facts for `decide` and the engine client to act with, or why
//! observing stopped early.

use std::sync::Arc;

use capov_ovirt::Client;

use crate::machine_steps::Observed;
use crate::runtime::capi;

/// The engine connection found while observing, for the executor.
pub struct Engine {
    pub client: Client,
}

/// What one observation found: the facts for `decide`, and what the executor needs to act on them.
pub struct Observation {
    pub observed: Observed,
    pub engine: Option<Engine>,
    pub cluster: Option<Arc<capi::Cluster>>,
}

/// Why observing stopped early: the actor should look again after a backoff.
pub struct ObserveError {
    pub message: String,
    /// A wait that is part of every start (the provider's first connection): not worth a warning. With thousands of
    /// machines each start would otherwise log hundreds of them.
    pub expected: bool,
}

impl ObserveError {
    pub fn new(message: impl Into<String>) -> ObserveError {
        ObserveError {
            message: message.into(),
            expected: false,
        }
    }
}
