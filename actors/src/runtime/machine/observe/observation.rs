//! What one observation hands to the pass: the facts for `decide` and the engine client to act with, or why
//! observing stopped early.

use std::sync::Arc;

use capov_ovirt::Client;

use crate::runtime::capi;
use capov_core::machine_steps::Observed;

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

/// Why observing stopped early: the actor should look again after a backoff, or once the provider's search has
/// delivered the VM.
pub struct ObserveError {
    pub message: String,
    /// A wait that is part of every start (the provider's first connection): not worth a warning. With thousands of
    /// machines each start would otherwise log hundreds of them.
    pub expected: bool,
    /// The VM (by id) the provider's next batched search should hand over, instead of this pass reading it.
    pub awaiting_search: Option<String>,
    /// A read from the management cluster's apiserver was cut, timed out or met an overloaded apiserver: retried
    /// soon (`Next::RetryApiserver`), not after a doubling backoff.
    pub apiserver: bool,
}

impl ObserveError {
    pub fn new(message: impl Into<String>) -> ObserveError {
        ObserveError {
            message: message.into(),
            expected: false,
            awaiting_search: None,
            apiserver: false,
        }
    }

    /// A read from the management cluster's apiserver that may well succeed when asked again soon.
    pub fn apiserver(message: impl Into<String>) -> ObserveError {
        ObserveError {
            apiserver: true,
            ..ObserveError::new(message)
        }
    }

    /// A wait that is part of every start: logged at debug.
    pub fn expected(message: impl Into<String>) -> ObserveError {
        ObserveError {
            expected: true,
            ..ObserveError::new(message)
        }
    }

    /// The VM `vm_id` is left to the provider's batched search.
    pub fn awaiting_search(vm_id: &str) -> ObserveError {
        ObserveError {
            awaiting_search: Some(vm_id.to_string()),
            ..ObserveError::expected("waiting for the provider's search to hand over the VM")
        }
    }
}
