//! Request bodies: each checked against the engine's model for its root type before it is decoded, refused with
//! the engine's usage fault when it is not one.

use std::sync::Arc;

use crate::request::Incoming;
use crate::schema;
use crate::shared::Shared;
use crate::wire::{self, Format, Reply};

/// What a request body must be: the model type of its root and the usage link the engine names when it is not.
pub(crate) struct BodyOf {
    /// Model type (`Vm`, `Nic`, …; `Action` for actions).
    pub(crate) root: &'static str,
    /// `service/methods/method` of the engine's API documentation (`UsageFinder`).
    pub(crate) usage: &'static str,
}

/// Checks the body against the engine's model (see [`crate::schema`]), then decodes it.
pub(crate) fn decode<T: serde::de::DeserializeOwned>(
    shared: &Arc<Shared>,
    req: &Incoming,
    format: Format,
    body: &BodyOf,
    action: Option<&str>,
) -> Result<T, Reply> {
    let version = shared.lock().engine_version;
    let usage = match action {
        Some(verb) => format!("vm/methods/{verb}"),
        None => body.usage.to_string(),
    };
    let host = req.header("host").unwrap_or("engine");
    if let Err(rejection) = schema::check(&req.body, body.root, version) {
        tracing::info!(?rejection, path = %req.path, "request body refused");
        shared.count_rejected_body(&usage);
        return Err(match rejection {
            schema::Rejection::Syntax { .. } => wire::usage_fault(host, &usage, format),
            schema::Rejection::InvalidValue { detail } => wire::invalid_value(&detail, format),
        });
    }
    capov_ovirt::xml::from_xml(&req.body).map_err(|e| {
        tracing::info!(error = %e, path = %req.path, "request body passed the model check but does not decode");
        shared.count_rejected_body(&usage);
        wire::usage_fault(host, &usage, format)
    })
}
