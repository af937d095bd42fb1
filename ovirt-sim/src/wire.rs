//! Response bodies in the engine's formats: XML by default, JSON (scalars as strings, dates as
//! epoch milliseconds) on `Accept: application/json`.

use capov_ovirt::model::{Action, Fault, Ref};
use serde::Serialize;

use crate::engine::EngineError;
use crate::ids::parse_time;

/// A finished HTTP answer.
#[derive(Debug, Clone)]
pub struct Reply {
    pub status: u16,
    pub headers: Vec<(&'static str, String)>,
    pub body: Vec<u8>,
    /// Instead of `body`, filler generated as the client reads it (an oversized answer that the simulator never
    /// holds in memory).
    pub streamed: Option<Streamed>,
}

/// A body of filler made as the client reads it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Streamed {
    pub bytes: u64,
    /// After `bytes`, the connection stays open and nothing more comes: a read that ends only at its deadline.
    pub then_stall: bool,
}

impl Reply {
    pub fn empty(status: u16) -> Self {
        Self {
            status,
            headers: Vec::new(),
            body: Vec::new(),
            streamed: None,
        }
    }

    pub fn json(status: u16, value: &serde_json::Value) -> Self {
        Self {
            status,
            headers: vec![("Content-Type", "application/json".into())],
            body: value.to_string().into_bytes(),
            streamed: None,
        }
    }

    pub fn with_header(mut self, name: &'static str, value: impl Into<String>) -> Self {
        self.headers.push((name, value.into()));
        self
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    Xml,
    Json,
}

impl Format {
    pub fn from_accept(accept: Option<&str>) -> Self {
        match accept {
            Some(a) if a.contains("application/json") && !a.contains("application/xml") => Format::Json,
            _ => Format::Xml,
        }
    }
}

/// Serialises an engine object in the requested format.
pub fn object<T: Serialize>(status: u16, value: &T, format: Format) -> Reply {
    match format {
        Format::Xml => match capov_ovirt::xml::to_xml_document(value) {
            Ok(body) => Reply {
                status,
                headers: vec![("Content-Type", "application/xml;charset=UTF-8".into())],
                body: body.into_bytes(),
                streamed: None,
            },
            Err(e) => internal_error(&e.to_string()),
        },
        Format::Json => match serde_json::to_value(value) {
            Ok(value) => Reply::json(status, &engine_json(value, None)),
            Err(e) => internal_error(&e.to_string()),
        },
    }
}

fn internal_error(message: &str) -> Reply {
    tracing::error!(message, "cannot encode response");
    Reply::empty(500)
}

const DATE_KEYS: &[&str] = &["creation_time", "start_time", "stop_time", "time", "date"];

/// Rewrites serde's JSON of a model into the engine's JSON: attribute markers dropped, every
/// scalar a string, dates as numbers.
pub(crate) fn engine_json(value: serde_json::Value, key: Option<&str>) -> serde_json::Value {
    use serde_json::Value;
    match value {
        Value::Object(map) => Value::Object(
            map.into_iter()
                .map(|(k, v)| {
                    let k = k.trim_start_matches('@').to_string();
                    let v = engine_json(v, Some(&k));
                    (k, v)
                })
                .collect(),
        ),
        Value::Array(items) => Value::Array(items.into_iter().map(|v| engine_json(v, key)).collect()),
        Value::String(text) if key.is_some_and(|k| DATE_KEYS.contains(&k)) => parse_time(&text)
            .map(|ms| Value::Number(ms.into()))
            .unwrap_or(Value::String(text)),
        Value::Number(n) => Value::String(n.to_string()),
        Value::Bool(b) => Value::String(b.to_string()),
        other => other,
    }
}

/// An engine failure in its wire shape.
pub fn error(err: &EngineError, format: Format) -> Reply {
    match err {
        EngineError::NotFound => Reply::empty(404),
        EngineError::Fault { status, reason, detail } => object(
            *status,
            &Fault {
                reason: Some(reason.clone()),
                detail: Some(detail.clone()),
            },
            format,
        ),
        EngineError::ActionFailed { status, detail } => object(
            *status,
            &Action {
                fault: Some(Fault {
                    reason: Some("Operation Failed".into()),
                    detail: Some(detail.clone()),
                }),
                status: Some("failed".into()),
                ..Action::default()
            },
            format,
        ),
    }
}

/// A completed action echoing the request, as `POST …/start` and `DELETE` answer.
pub fn action_complete(request: &Action, vm_id: Option<&str>, format: Format) -> Reply {
    let job = crate::ids::new_id();
    let answer = Action {
        status: Some("complete".into()),
        job: Some(Ref::linked(format!("{}/jobs/{job}", crate::render::API), job)),
        vm: vm_id.map(|id| Ref::linked(format!("{}/vms/{id}", crate::render::API), id)),
        fault: None,
        ..request.clone()
    };
    object(200, &answer, format)
}

/// 400 for a body the engine cannot read (unknown or misplaced element, not XML): the fault of the engine's
/// `IOExceptionMapper`/`UsageFinder`, pointing at the API documentation of the method (`service/methods/name`).
pub fn usage_fault(host: &str, usage: &str, format: Format) -> Reply {
    object(
        400,
        &Fault {
            reason: Some("Request syntactically incorrect.".into()),
            detail: Some(format!(
                "For correct usage, see: https://{host}/ovirt-engine/apidoc#services/{usage}"
            )),
        },
        format,
    )
}

/// 400 for a boolean or number the model's parsers refuse (`IOExceptionMapper`, `InvalidValueException`).
pub fn invalid_value(detail: &str, format: Format) -> Reply {
    object(
        400,
        &Fault {
            reason: Some("Invalid value".into()),
            detail: Some(detail.to_string()),
        },
        format,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_scalars_become_strings_and_dates_numbers() {
        let value = serde_json::json!({"@id": "x", "memory": 1024, "stateless": false,
            "creation_time": "2022-10-06T15:05:04.618+00:00", "vm": [{"name": "a"}]});
        let out = engine_json(value, None);
        assert_eq!(out["id"], "x");
        assert_eq!(out["memory"], "1024");
        assert_eq!(out["stateless"], "false");
        assert_eq!(out["creation_time"], 1_665_068_704_618i64);
        assert_eq!(out["vm"][0]["name"], "a");
    }
}
