//! Misbehaviour the simulator injects into engine traffic on request (latency, errors, outages, broken bodies,
//! failing disk copies), and what each does to a request and its answer.

use serde::{Deserialize, Serialize};

use crate::request::Incoming;
use crate::wire::{Reply, Streamed};

/// Misbehaviour to inject into engine traffic (`/ovirt-engine/...`; the control API is exempt).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct FaultInjection {
    /// Added before every engine answer.
    pub latency_ms: u64,
    /// Slow answers to work that was done; see [`SlowReplies`].
    pub slow_replies: Option<SlowReplies>,
    /// Fraction (0..=1) of matching API requests answered with `error_status`.
    pub error_rate: f64,
    /// The next N matching API requests fail with `error_status` (deterministic; counts down).
    pub fail_next: u32,
    pub error_status: u16,
    /// Body of injected errors: a fault with reason `Operation Failed` and this detail (wrapped
    /// in `[...]` as the engine does); empty body when None.
    pub error_detail: Option<String>,
    /// Injected errors only hit request paths containing this text…
    pub path_contains: Option<String>,
    /// …and only this HTTP method (e.g. `POST`).
    pub method: Option<String>,
    /// Every engine request, SSO included, gets 503 (an engine behind a proxy that is down).
    pub outage: bool,
    pub sso_error_style: SsoErrorStyle,
    /// Replaces the answer to matching API requests (`path_contains` and `method` apply as for injected errors),
    /// whatever it would have been; see [`BodyFault`].
    pub body_fault: Option<BodyFault>,
    /// The next N accepted `POST /vms` (202) fail in their disk copy, and the engine then deletes the VM: it is 404
    /// once `image_locked` would have ended.
    pub vanishing_creates: u32,
    /// The next N accepted `POST /vms` fail in their disk copy and leave the VM `ImageIllegal` (no `<status>`).
    pub illegal_creates: u32,
    /// Matching write requests (`PUT`, `POST`, `DELETE`; `path_contains` and `method` apply) are answered as if
    /// they had been carried out, without changing anything: the answer is that of a `GET` of the same path (an
    /// engine that accepts an update and drops it).
    pub writes_without_effect: bool,
}

/// The engine carries out matching requests at once and holds their answers back for `delay_ms`: a client that
/// gives up first does not know that its create, start or delete happened.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SlowReplies {
    pub delay_ms: u64,
    /// Only this HTTP method (e.g. `POST`); None: every method.
    pub method: Option<String>,
    /// Only paths containing this text; None: every path.
    pub path_contains: Option<String>,
}

impl SlowReplies {
    pub(crate) fn matches(&self, method: &str, path: &str) -> bool {
        self.method.as_deref().is_none_or(|m| m.eq_ignore_ascii_case(method))
            && self.path_contains.as_deref().is_none_or(|p| path.contains(p))
    }
}

/// A broken answer body, for clients that must refuse it with a typed error instead of misreading it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub enum BodyFault {
    /// A 200 whose body is `bytes` long, generated in chunks as the client reads it (the simulator holds one chunk,
    /// whatever the size). `announce_length`: with a Content-Length header (else chunked, the length unknown until
    /// the end).
    Oversized { bytes: u64, announce_length: bool },
    /// A 200 that sends `bytes` of its body and then nothing more, its connection left open: a read that can end
    /// only at its deadline, holding what it got until then.
    Stalled { bytes: u64 },
    /// A 200 with a well-formed XML document whose root element is `root` (e.g. `fault` for a `GET /vms`).
    ForeignRoot { root: String },
    /// A 200 HTML page, as a proxy or login portal in front of the engine answers.
    Html,
    /// The real answer with its body cut in the middle.
    Truncated,
    /// A 200 with a well-formed list of `count` empty `<child/>` elements in `<root>`: small on the wire, huge
    /// once decoded into whole objects.
    EmptyElements { root: String, child: String, count: usize },
}

impl Default for FaultInjection {
    fn default() -> Self {
        Self {
            latency_ms: 0,
            slow_replies: None,
            error_rate: 0.0,
            fail_next: 0,
            error_status: 503,
            error_detail: None,
            path_contains: None,
            method: None,
            outage: false,
            sso_error_style: SsoErrorStyle::ByScope,
            body_fault: None,
            writes_without_effect: false,
            vanishing_creates: 0,
            illegal_creates: 0,
        }
    }
}

/// Which of the SSO's two error shapes to answer with. The engine picks by the request's scope
/// (`SsoService.sendJsonDataWithMessage`/`isRestApiScope`): `{"error_code": code, "error": message}` when the scope
/// holds `ovirt-app-api` (and neither `ovirt-app-admin` nor `ovirt-app-portal`), as every REST API client's does,
/// else the OAuth shape. Both are HTTP 400.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SsoErrorStyle {
    /// As the engine: by the request's scope.
    #[default]
    ByScope,
    /// Always `{"error": code, "error_description": message}`.
    Oauth,
    /// Always `{"error_code": code, "error": message}`.
    Session,
}

/// Whether injected faults apply to this request (`path_contains`, `method`).
pub(crate) fn fault_matches(faults: &FaultInjection, req: &Incoming) -> bool {
    faults.path_contains.as_deref().is_none_or(|p| req.path.contains(p))
        && faults
            .method
            .as_deref()
            .is_none_or(|m| m.eq_ignore_ascii_case(req.method.as_str()))
}

/// The answer a [`BodyFault`] puts in place of `reply`.
pub(crate) fn faulty_body(fault: &BodyFault, reply: Reply) -> Reply {
    let xml = |body: String| Reply {
        status: 200,
        headers: vec![("Content-Type", "application/xml;charset=UTF-8".into())],
        body: body.into_bytes(),
        streamed: None,
    };
    match fault {
        BodyFault::Oversized { bytes, announce_length } => {
            let mut headers = vec![("Content-Type", "application/xml;charset=UTF-8".to_string())];
            if *announce_length {
                headers.push(("Content-Length", bytes.to_string()));
            }
            Reply {
                status: 200,
                headers,
                body: Vec::new(),
                streamed: Some(Streamed {
                    bytes: *bytes,
                    then_stall: false,
                }),
            }
        }
        BodyFault::Stalled { bytes } => Reply {
            status: 200,
            headers: vec![("Content-Type", "application/xml;charset=UTF-8".into())],
            body: Vec::new(),
            streamed: Some(Streamed {
                bytes: *bytes,
                then_stall: true,
            }),
        },
        BodyFault::ForeignRoot { root } => xml(format!(
            "{}\n<{root}>\n    <detail>not what was asked for</detail>\n</{root}>\n",
            capov_ovirt::xml::XML_DECLARATION
        )),
        BodyFault::Html => Reply {
            status: 200,
            headers: vec![("Content-Type", "text/html;charset=UTF-8".into())],
            body: b"<!DOCTYPE html>\n<html><head><title>Sign in</title></head><body><h1>Sign in</h1></body></html>\n"
                .to_vec(),
            streamed: None,
        },
        BodyFault::EmptyElements { root, child, count } => xml(format!(
            "{}\n<{root}>{}</{root}>\n",
            capov_ovirt::xml::XML_DECLARATION,
            format!("<{child}/>").repeat(*count)
        )),
        BodyFault::Truncated => {
            let mut reply = reply;
            let keep = reply.body.len() / 2;
            reply.body.truncate(keep);
            reply
        }
    }
}
