//! The engine's SSO: password grant, error shapes, logout.

use serde::Deserialize;

use crate::error::Error;

pub(crate) const TOKEN_PATH: &str = "/ovirt-engine/sso/oauth/token";
pub(crate) const LOGOUT_PATH: &str = "/ovirt-engine/services/sso-logout";
pub(crate) const SCOPE: &str = "ovirt-app-api";

/// Both error shapes the SSO uses, plus the success field.
#[derive(Deserialize, Default)]
struct SsoAnswer {
    access_token: Option<String>,
    error: Option<String>,
    error_description: Option<String>,
    error_code: Option<String>,
}

/// Turns the SSO token endpoint's answer into a token or a classified error.
pub(crate) fn parse_token_answer(status: u16, body: &[u8]) -> Result<String, Error> {
    let answer = parse_answer(body);
    match (status, answer) {
        (
            200,
            Some(SsoAnswer {
                access_token: Some(token),
                ..
            }),
        ) if !token.is_empty() => Ok(token),
        (401, _) => Err(Error::AuthenticationFailed {
            code: "unauthorized".to_string(),
            message: "the SSO answered 401".to_string(),
        }),
        (500..=599, _) => Err(Error::Server {
            status,
            detail: "SSO token endpoint failed".to_string(),
        }),
        (_, Some(answer)) => {
            // OAuth shape: error + error_description; session shape: error_code + error.
            let (code, message) = match answer.error_description {
                Some(description) => (answer.error.unwrap_or_default(), description),
                None => (answer.error_code.unwrap_or_default(), answer.error.unwrap_or_default()),
            };
            if code.is_empty() && message.is_empty() {
                return Err(Error::Sso {
                    code: "invalid_response".to_string(),
                    message: format!("SSO answered {status} without a token"),
                });
            }
            if matches!(code.as_str(), "access_denied" | "invalid_grant") {
                Err(Error::AuthenticationFailed { code, message })
            } else {
                Err(Error::Sso { code, message })
            }
        }
        (_, None) => Err(Error::Sso {
            code: "invalid_response".to_string(),
            message: format!("SSO answered {status} with a body that is not SSO JSON"),
        }),
    }
}

fn parse_answer(body: &[u8]) -> Option<SsoAnswer> {
    // go-ovirt has seen the SSO wrap its answer in an array; accept that too.
    match serde_json::from_slice::<serde_json::Value>(body).ok()? {
        serde_json::Value::Array(items) => items
            .into_iter()
            .next()
            .and_then(|first| serde_json::from_value(first).ok()),
        value @ serde_json::Value::Object(_) => serde_json::from_value(value).ok(),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_token() {
        let body = br#"{"access_token":"abc","token_type":"bearer","exp":"9223372036854775807","scope":""}"#;
        assert_eq!(parse_token_answer(200, body).unwrap(), "abc");
    }

    #[test]
    fn oauth_shape_access_denied_is_authentication_failure() {
        let body = br#"{"error":"access_denied","error_description":"Cannot authenticate user 'a@internal': bad."}"#;
        let err = parse_token_answer(400, body).unwrap_err();
        assert!(matches!(err, Error::AuthenticationFailed { ref code, .. } if code == "access_denied"));
    }

    /// What the engine answers a REST API client (scope `ovirt-app-api`) for a wrong password or an unknown user
    /// (`OAuthTokenServlet`, `AppMessages.properties`).
    #[test]
    fn session_shape_access_denied_is_authentication_failure_with_the_engines_text() {
        let body = br#"{"error_code":"access_denied","error":"Cannot authenticate user 'a@internal': Unable to log in. Verify your login information or contact the system administrator.."}"#;
        let err = parse_token_answer(400, body).unwrap_err();
        assert!(
            matches!(&err, Error::AuthenticationFailed { code, message }
                if code == "access_denied" && message.contains("Unable to log in")),
            "{err:?}"
        );
    }

    #[test]
    fn session_shape_invalid_grant_is_authentication_failure() {
        let body = br#"{"error_code":"invalid_grant","error":"The provided authorization grant has expired."}"#;
        let err = parse_token_answer(400, body).unwrap_err();
        assert!(matches!(err, Error::AuthenticationFailed { ref code, .. } if code == "invalid_grant"));
    }

    #[test]
    fn other_sso_errors_are_engine_side() {
        let body = br#"{"error":"server_error","error_description":"boom"}"#;
        let err = parse_token_answer(400, body).unwrap_err();
        assert_eq!(err.reason(), crate::error::reason::ENGINE_UNREACHABLE);
    }

    #[test]
    fn array_wrapped_answer_is_accepted() {
        assert_eq!(parse_token_answer(200, br#"[{"access_token":"t"}]"#).unwrap(), "t");
    }

    #[test]
    fn garbage_is_a_typed_error() {
        assert!(parse_token_answer(200, b"<html>").is_err());
        assert!(parse_token_answer(400, b"").is_err());
    }
}
