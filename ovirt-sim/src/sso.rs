//! `/ovirt-engine/sso/oauth/token` and `/ovirt-engine/services/sso-logout`.

use std::sync::Arc;
use std::time::Instant;

use serde_json::json;

use crate::server::{Incoming, Shared};
use crate::state::TokenRecord;
use crate::wire::Reply;

const GRANTED_SCOPE: &str = "ovirt-app-api ovirt-ext=token-info:authz-search ovirt-ext=token-info:public-authz-search ovirt-ext=token-info:validate ovirt-ext=token:password-access";

/// Which of the SSO's two error shapes to answer with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SsoErrorStyle {
    /// `{"error": code, "error_description": message}`
    #[default]
    Oauth,
    /// `{"error_code": code, "error": message}`
    Session,
}

/// How many issued tokens [`crate::Control::issued_tokens`] remembers.
pub(crate) const REMEMBERED_ISSUED_TOKENS: usize = 1000;

fn sso_error(style: SsoErrorStyle, code: &str, message: &str) -> Reply {
    let body = match style {
        SsoErrorStyle::Oauth => json!({"error": code, "error_description": message}),
        SsoErrorStyle::Session => json!({"error_code": code, "error": message}),
    };
    Reply::json(400, &body)
}

fn new_token() -> String {
    const ALPHABET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut token: String = (0..27)
        .map(|_| ALPHABET[fastrand::usize(..ALPHABET.len())] as char)
        .collect();
    token.push('=');
    token
}

pub fn token(shared: &Arc<Shared>, req: &Incoming) -> Reply {
    let style = shared.faults().sso_error_style;
    // The SSO insists on this exact Accept value.
    if req.header("accept") != Some("application/json") {
        return sso_error(style, "invalid_request", "Missing parameter: 'Accept Header'");
    }
    let form = req.form();
    let field = |name: &str| form.iter().find(|(k, _)| k == name).map(|(_, v)| v.as_str());
    match field("grant_type") {
        Some("password") => {}
        Some(other) => {
            return sso_error(
                style,
                "unsupported_grant_type",
                &format!("The grant type {other} is not supported."),
            );
        }
        None => return sso_error(style, "invalid_request", "Missing parameter: 'grant_type'"),
    }
    let Some(username) = field("username") else {
        return sso_error(style, "invalid_request", "Missing parameter: 'username'");
    };
    let Some(password) = field("password") else {
        return sso_error(style, "invalid_request", "Missing parameter: 'password'");
    };
    let (user, domain) = username.split_once('@').unwrap_or((username, "internal"));
    let mut state = shared.lock();
    if state.users.get(username).map(String::as_str) != Some(password) {
        return sso_error(
            style,
            "access_denied",
            &format!("Cannot authenticate user '{user}@{domain}': The username or password is incorrect.."),
        );
    }
    let ttl = shared.token_ttl();
    // Clients that never log out would otherwise grow the map forever.
    if state.tokens.len() >= 10_000 {
        let now = Instant::now();
        state
            .tokens
            .retain(|_, record| record.expires.is_none_or(|at| at > now));
    }
    let token = new_token();
    if state.issued_tokens.len() >= REMEMBERED_ISSUED_TOKENS {
        state.issued_tokens.pop_front();
    }
    state.issued_tokens.push_back(token.clone());
    state.tokens.insert(
        token.clone(),
        TokenRecord {
            // A TTL too large to represent means "never".
            expires: ttl.and_then(|d| Instant::now().checked_add(d)),
            user: username.to_string(),
        },
    );
    let exp = match ttl {
        Some(d) => crate::ids::now_millis()
            .saturating_add(i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
            .to_string(),
        None => i64::MAX.to_string(),
    };
    Reply::json(
        200,
        &json!({"access_token": token, "token_type": "bearer", "exp": exp, "scope": GRANTED_SCOPE}),
    )
}

pub fn logout(shared: &Arc<Shared>, req: &Incoming) -> Reply {
    let form = req.form();
    // An empty or unknown token is not an error (go-ovirt sends an empty one).
    if let Some((_, token)) = form.iter().find(|(k, _)| k == "token") {
        shared.lock().tokens.remove(token);
    }
    Reply::json(200, &json!({}))
}

/// Whether a bearer token is currently valid.
/// The user of a valid bearer token, None without one.
pub fn authorized(shared: &Arc<Shared>, req: &Incoming) -> Option<String> {
    let token = req.header("authorization").and_then(|h| h.strip_prefix("Bearer "))?;
    let mut state = shared.lock();
    match state.tokens.get(token.trim()) {
        Some(record) if record.expires.is_none_or(|at| at > Instant::now()) => Some(record.user.clone()),
        Some(_) => {
            state.tokens.remove(token.trim());
            None
        }
        None => None,
    }
}
