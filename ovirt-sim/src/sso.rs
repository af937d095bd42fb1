//! `/ovirt-engine/sso/oauth/token` and `/ovirt-engine/services/sso-logout`.

use std::sync::Arc;
use std::time::Instant;

use serde_json::json;

use crate::faults::SsoErrorStyle;
use crate::request::Incoming;
use crate::shared::Shared;
use crate::state::TokenRecord;
use crate::wire::Reply;

const GRANTED_SCOPE: &str = "ovirt-app-api ovirt-ext=token-info:authz-search ovirt-ext=token-info:public-authz-search ovirt-ext=token-info:validate ovirt-ext=token:password-access";

/// The REST API scope (`SsoConstants.OVIRT_APP_API_SCOPE`).
const REST_API_SCOPE: &str = "ovirt-app-api";

fn is_rest_api_scope(scope: Option<&str>) -> bool {
    let scopes: Vec<&str> = scope.unwrap_or_default().split_whitespace().collect();
    scopes.contains(&REST_API_SCOPE) && !scopes.contains(&"ovirt-app-admin") && !scopes.contains(&"ovirt-app-portal")
}

/// How many issued tokens [`crate::Control::issued_tokens`] remembers.
pub(crate) const REMEMBERED_ISSUED_TOKENS: usize = 1000;

fn sso_error(style: SsoErrorStyle, code: &str, message: &str) -> Reply {
    let body = match style {
        SsoErrorStyle::Oauth | SsoErrorStyle::ByScope => json!({"error": code, "error_description": message}),
        SsoErrorStyle::Session => json!({"error_code": code, "error": message}),
    };
    Reply::json(400, &body)
}

/// `AppMessages.properties` `USER_FAILED_TO_AUTHENTICATE`: what the internal profile's authn answers for a wrong
/// password and for an unknown user alike (`AuthnMessageMapper`: CREDENTIALS_INVALID/INCORRECT).
const USER_FAILED_TO_AUTHENTICATE: &str =
    "Unable to log in. Verify your login information or contact the system administrator.";
/// `NO_VALID_PROFILE_IN_CREDENTIALS`: a user name without `@profile`, or with a profile the engine does not have.
const NO_VALID_PROFILE: &str = "No valid profile found in credentials.";

fn new_token() -> String {
    const ALPHABET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut token: String = (0..27)
        .map(|_| ALPHABET[fastrand::usize(..ALPHABET.len())] as char)
        .collect();
    token.push('=');
    token
}

/// `OAuthTokenServlet` for the password grant, with the engine's order of checks and its messages
/// (`SsoConstants`, `AppMessages.properties`).
pub fn token(shared: &Arc<Shared>, req: &Incoming) -> Reply {
    let form = req.form();
    let field = |name: &str| form.iter().find(|(k, _)| k == name).map(|(_, v)| v.as_str());
    let style = match shared.faults().sso_error_style {
        SsoErrorStyle::ByScope if is_rest_api_scope(field("scope")) => SsoErrorStyle::Session,
        SsoErrorStyle::ByScope => SsoErrorStyle::Oauth,
        forced => forced,
    };
    // A missing grant_type reads as the literal "grant_type" (`getRequestParameter` with that default), which no
    // case matches.
    if field("grant_type") != Some("password") {
        return sso_error(
            style,
            "unsupported_grant_type",
            "The authorization grant type is not supported by the authorization server.",
        );
    }
    let Some(username) = field("username") else {
        return sso_error(style, "invalid_request", "Missing parameter: 'username'");
    };
    let Some(password) = field("password") else {
        return sso_error(style, "invalid_request", "Missing parameter: 'password'");
    };
    // `SsoService.translateUser`: the profile is what follows the last `@`.
    let (user, profile) = match username.rsplit_once('@') {
        Some((user, profile)) if !profile.is_empty() => (user, Some(profile)),
        Some((user, _)) => (user, None),
        None => (username, None),
    };
    let mut state = shared.lock();
    let known_profile = profile.is_some_and(|profile| {
        profile == "internal"
            || state
                .users
                .keys()
                .any(|known| known.rsplit_once('@').is_some_and(|(_, p)| p == profile))
    });
    // `OAuthTokenServlet.issueTokenForPasswd` wraps every authentication failure in
    // `CANNOT_AUTHENTICATE_USER_IN_DOMAIN` ("Cannot authenticate user '%1$s@%2$s': %3$s.", the profile N/A when
    // absent) under the code `access_denied`.
    let refused = |why: &str| {
        sso_error(
            style,
            "access_denied",
            &format!("Cannot authenticate user '{user}@{}': {why}.", profile.unwrap_or("N/A")),
        )
    };
    if user.is_empty() {
        return refused("No user name found in credentials.");
    }
    if !known_profile {
        return refused(NO_VALID_PROFILE);
    }
    if state.users.get(username).map(String::as_str) != Some(password) {
        return refused(USER_FAILED_TO_AUTHENTICATE);
    }
    // The SSO checks the Accept header only once the user is authenticated (`handleIssueTokenForPasswd`).
    if req.header("accept") != Some("application/json") {
        return sso_error(style, "invalid_request", "Missing parameter: 'Accept Header'");
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
