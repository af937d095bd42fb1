//! Which part of the simulator answers a request (the engine's API, its SSO, or the control interface), with what
//! every engine request goes through on the way: counters, correlation ids, latency, outages, authentication and
//! injected faults.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::Method;

use crate::control::{self, Control};
use crate::faults::{fault_matches, faulty_body};
use crate::request::Incoming;
use crate::shared::{Shared, WriteRecord};
use crate::wire::{Format, Reply};
use crate::{api, api_placement, control_hosts, sso};

/// Where the engine's REST API lives.
pub const API_PREFIX: &str = "/ovirt-engine/api";

/// How many correlation ids the simulator remembers.
const REMEMBERED_CORRELATION_IDS: usize = 1000;

/// `GET /vms/{id}/nics` style key: every second segment is an id.
fn endpoint_key(method: &Method, path: &str) -> String {
    let pattern: Vec<&str> = path
        .split('/')
        .filter(|s| !s.is_empty())
        .enumerate()
        .map(|(i, s)| if i % 2 == 1 { "{id}" } else { s })
        .collect();
    format!("{method} /{}", pattern.join("/"))
}

fn api_path(path: &str) -> Option<&str> {
    let rest = path.strip_prefix(API_PREFIX)?;
    let rest = rest
        .strip_prefix("/v4")
        .filter(|r| r.is_empty() || r.starts_with('/'))
        .unwrap_or(rest);
    (rest.is_empty() || rest.starts_with('/')).then_some(rest)
}

/// Answers one request: the control interface under `/sim/`, else the engine, with its counts, records and faults.
pub async fn respond(shared: Arc<Shared>, req: Incoming) -> Reply {
    if let Some(rest) = req.path.strip_prefix("/sim/") {
        let path: Vec<&str> = rest.split('/').filter(|s| !s.is_empty()).collect();
        let control = Control { shared: shared.clone() };
        if control_hosts::handles(&path) {
            return control_hosts::handle(&control, &req, &path);
        }
        return control::handle(&control, &req, &path);
    }
    let correlation_id = req
        .header("correlation-id")
        .or_else(|| req.param("correlation_id"))
        .map(str::to_string);
    if let Some(id) = &correlation_id {
        let mut seen = shared.correlation_ids.lock().unwrap_or_else(|e| e.into_inner());
        if seen.len() == REMEMBERED_CORRELATION_IDS {
            seen.pop_front();
        }
        seen.push_back(id.clone());
    }
    let reply = engine_reply(&shared, &req).await;
    shared
        .response_bytes
        .fetch_add(reply.body.len() as u64, std::sync::atomic::Ordering::Relaxed);
    if let Some(slow) = shared.faults().slow_replies
        && slow.matches(req.method.as_str(), &req.path)
    {
        tokio::time::sleep(Duration::from_millis(slow.delay_ms)).await;
    }
    match correlation_id {
        Some(id) => reply.with_header("Correlation-Id", id),
        None => reply,
    }
}

async fn engine_reply(shared: &Arc<Shared>, req: &Incoming) -> Reply {
    let faults = shared.faults();
    let api_rest = api_path(&req.path);
    let key = match (api_rest, req.path.as_str()) {
        (Some(rest), _) => endpoint_key(&req.method, rest),
        (None, path @ ("/ovirt-engine/sso/oauth/token" | "/ovirt-engine/services/sso-logout")) => {
            format!("{} {path}", req.method)
        }
        // Arbitrary paths must not grow the counter map without bound.
        (None, _) => format!("{} (other)", req.method),
    };
    shared.count(key);
    if faults.latency_ms > 0 {
        tokio::time::sleep(Duration::from_millis(faults.latency_ms)).await;
    }
    if faults.outage {
        return Reply::empty(503);
    }
    match (&req.method, req.path.as_str(), api_rest) {
        (&Method::POST, "/ovirt-engine/sso/oauth/token", _) => sso::token(shared, req),
        (&Method::POST, "/ovirt-engine/services/sso-logout", _) => sso::logout(shared, req),
        (_, _, Some(rest)) => {
            let Some(user) = sso::authorized(shared, req) else {
                return Reply::empty(401).with_header("WWW-Authenticate", "Basic realm=\"RESTAPI\"");
            };
            let caller = api::Caller::of(shared, req, user);
            let format = Format::from_accept(req.header("accept"));
            let injection_armed = faults.fail_next > 0 || faults.error_rate > 0.0;
            if let Some(injected) = injection_armed.then(|| shared.injected_error(req, format)).flatten() {
                return injected;
            }
            let segments: Vec<&str> = rest.split('/').filter(|s| !s.is_empty()).collect();
            let received_ms = u64::try_from(crate::ids::now_millis()).unwrap_or_default();
            let matching = (faults.body_fault.is_some() || faults.writes_without_effect) && fault_matches(&faults, req);
            let write = matches!(req.method, Method::PUT | Method::POST | Method::DELETE);
            let handle = if api_placement::handles(&segments) {
                api_placement::handle
            } else {
                api::handle
            };
            let reply = if matching && faults.writes_without_effect && write {
                let read = Incoming {
                    method: Method::GET,
                    path: req.path.clone(),
                    query: Vec::new(),
                    headers: req.headers.clone(),
                    body: Bytes::new(),
                };
                handle(shared, &read, &segments, format, &caller)
            } else {
                handle(shared, req, &segments, format, &caller)
            };
            if write {
                shared.record_write(WriteRecord {
                    received_ms,
                    method: req.method.to_string(),
                    path: req.path.clone(),
                    user_agent: req.header("user-agent").unwrap_or_default().to_string(),
                    status: reply.status,
                });
            }
            match faults.body_fault.as_ref().filter(|_| matching) {
                Some(fault) => faulty_body(fault, reply),
                None => reply,
            }
        }
        _ => Reply::empty(404),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn endpoint_keys_hide_ids() {
        assert_eq!(
            endpoint_key(&Method::GET, "/vms/abc/nics/def"),
            "GET /vms/{id}/nics/{id}"
        );
        assert_eq!(endpoint_key(&Method::POST, "/vms/abc/start"), "POST /vms/{id}/start");
        assert_eq!(endpoint_key(&Method::GET, ""), "GET /");
    }

    #[test]
    fn api_prefix_with_and_without_version() {
        assert_eq!(api_path("/ovirt-engine/api/vms"), Some("/vms"));
        assert_eq!(api_path("/ovirt-engine/api/v4/vms"), Some("/vms"));
        assert_eq!(api_path("/ovirt-engine/api"), Some(""));
        assert_eq!(api_path("/ovirt-engine/apix"), None);
    }
}
