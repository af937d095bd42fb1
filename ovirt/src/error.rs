//! Typed client errors and their stable classification for conditions and metrics.

use crate::model::Fault;

/// Everything a call can fail with. Messages carry engine texts and paths, never credentials.
#[derive(Debug, Clone, thiserror::Error)]
pub enum Error {
    /// The configured CA bundle holds no parseable PEM certificate.
    #[error("invalid CA bundle: {0}")]
    InvalidCaBundle(String),
    /// The configuration cannot produce a client (bad URL, zero rate).
    #[error("invalid client configuration: {0}")]
    InvalidConfig(String),
    /// The SSO refused the credentials, or the engine answered 401 to a freshly issued token.
    #[error("authentication failed ({code}): {message}")]
    AuthenticationFailed { code: String, message: String },
    /// The SSO answered with an error that is not about the credentials (`server_error`,
    /// `invalid_request`, …) or with a body that is not an SSO answer.
    #[error("SSO error ({code}): {message}")]
    Sso { code: String, message: String },
    /// 403, or the engine's 400 for a filtered request to an admin-only query ("Query execution failed due to
    /// insufficient permissions."); the detail names the refused request.
    #[error("permission denied: {detail}")]
    PermissionDenied { detail: String },
    /// The server certificate did not verify against the configured trust.
    #[error("TLS verification failed: {0}")]
    Tls(String),
    /// Connection refused/reset, DNS failure and other transport problems.
    #[error("engine unreachable: {0}")]
    Transport(String),
    /// Connect or request timeout.
    #[error("request timed out: {0}")]
    Timeout(String),
    /// 404: the object does not exist (the engine sends an empty body).
    #[error("not found: {0}")]
    NotFound(String),
    /// 409: locked objects, operations in progress, wrong VM state, name in use.
    #[error("conflict: {detail}")]
    Conflict { reason: String, detail: String },
    /// 400 with the engine's fault.
    #[error("bad request: {reason}: {detail}")]
    BadRequest { reason: String, detail: String },
    /// 5xx.
    #[error("engine error {status}: {detail}")]
    Server { status: u16, detail: String },
    /// Any other status the engine is not documented to send.
    #[error("unexpected status {status}: {detail}")]
    UnexpectedStatus { status: u16, detail: String },
    /// A body that does not decode as the expected object (not XML, truncated, wrong fields).
    #[error("unexpected response body: {0}")]
    UnexpectedBody(String),
    /// A 2xx body whose root element is not the one the call expects: an HTML page of a proxy or login portal in
    /// front of the engine, or another object. Decoding it anyway would read it as an empty object or list.
    #[error("unexpected response to {what}: root element <{found}>, expected <{expected}>")]
    UnexpectedRoot {
        what: String,
        expected: &'static str,
        found: String,
    },
    /// The answer was larger than any engine answer CAPOV needs ([`crate::MAX_BODY_BYTES`]); reading stopped at the
    /// limit, so the client's memory stays bounded. Not transient: the same request gets the same answer, so it is
    /// reported (an engine returning far more than asked, or something in front of it) rather than retried quietly.
    #[error("the engine's answer to {what} exceeds {limit} bytes; reading stopped there")]
    BodyTooLarge { what: String, limit: usize },
    /// The answers being read at once, across every client of the process, came to more than
    /// [`crate::MAX_BODY_BYTES_IN_FLIGHT`]: this one was stopped so that several large answers together cannot come
    /// near the operator's memory limit. Another try reads it when fewer large answers are in flight.
    #[error(
        "the engine's answer to {what} was stopped: the answers being read at once exceeded {limit} bytes together"
    )]
    AnswersTooLarge { what: String, limit: usize },
    /// The answer fit the byte cap but its lists would decode into more than [`crate::xml::MAX_DECODED_ITEM_BYTES`]
    /// (millions of empty elements): decoding stopped there, so memory stays bounded by what is decoded, not only by
    /// what is read. Not transient, as [`Error::BodyTooLarge`].
    #[error("the engine's answer to {what} {detail}")]
    TooManyItems { what: String, detail: String },
    /// A value the engine's search language cannot carry (see [`crate::search`]); nothing was sent.
    #[error(
        "{field} {value:?} contains {character:?}, which the engine's search refuses (no oVirt name holds any of \
         ' ; \" \\ < > & ^ # !); check the spelling"
    )]
    UnsearchableValue {
        field: String,
        value: String,
        character: char,
    },
    /// The client's [`crate::WriteGate`] refused a write; nothing was sent.
    #[error("engine writes are stopped: {0}")]
    WritesStopped(String),
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Turns a 404 into `Ok(None)`, for callers that treat "not found" as "absent".
pub fn found<T>(result: Result<T>) -> Result<Option<T>> {
    match result {
        Ok(value) => Ok(Some(value)),
        Err(Error::NotFound(_)) => Ok(None),
        Err(err) => Err(err),
    }
}

/// Condition reasons the operator writes; one per error class.
pub mod reason {
    pub const INVALID_CA_BUNDLE: &str = "InvalidCABundle";
    pub const INVALID_CONFIG: &str = "InvalidConfiguration";
    pub const AUTHENTICATION_FAILED: &str = "AuthenticationFailed";
    pub const PERMISSION_DENIED: &str = "PermissionDenied";
    pub const TLS_VERIFICATION_FAILED: &str = "TLSVerificationFailed";
    pub const ENGINE_UNREACHABLE: &str = "EngineUnreachable";
    pub const NOT_FOUND: &str = "NotFound";
    pub const CONFLICT: &str = "Conflict";
    pub const BAD_REQUEST: &str = "BadRequest";
    pub const UNEXPECTED_BODY: &str = "UnexpectedResponse";
    pub const UNSEARCHABLE_NAME: &str = "UnsearchableName";
    pub const WRITES_STOPPED: &str = "EngineWritesStopped";
}

impl Error {
    /// The condition reason for this error (stable; see [`reason`]).
    pub fn reason(&self) -> &'static str {
        match self {
            Error::InvalidCaBundle(_) => reason::INVALID_CA_BUNDLE,
            Error::InvalidConfig(_) => reason::INVALID_CONFIG,
            Error::AuthenticationFailed { .. } => reason::AUTHENTICATION_FAILED,
            Error::PermissionDenied { .. } => reason::PERMISSION_DENIED,
            Error::Tls(_) => reason::TLS_VERIFICATION_FAILED,
            Error::Sso { .. } | Error::Transport(_) | Error::Timeout(_) | Error::Server { .. } => {
                reason::ENGINE_UNREACHABLE
            }
            Error::NotFound(_) => reason::NOT_FOUND,
            Error::Conflict { .. } => reason::CONFLICT,
            Error::BadRequest { .. } => reason::BAD_REQUEST,
            Error::UnexpectedStatus { .. }
            | Error::UnexpectedBody(_)
            | Error::UnexpectedRoot { .. }
            | Error::BodyTooLarge { .. }
            | Error::AnswersTooLarge { .. }
            | Error::TooManyItems { .. } => reason::UNEXPECTED_BODY,
            Error::UnsearchableValue { .. } => reason::UNSEARCHABLE_NAME,
            Error::WritesStopped(_) => reason::WRITES_STOPPED,
        }
    }

    /// A short snake_case label per variant, for metrics (low cardinality).
    pub fn label(&self) -> &'static str {
        match self {
            Error::InvalidCaBundle(_) => "invalid_ca_bundle",
            Error::InvalidConfig(_) => "invalid_config",
            Error::AuthenticationFailed { .. } => "auth_failed",
            Error::Sso { .. } => "sso_error",
            Error::PermissionDenied { .. } => "permission_denied",
            Error::Tls(_) => "tls",
            Error::Transport(_) => "transport",
            Error::Timeout(_) => "timeout",
            Error::NotFound(_) => "not_found",
            Error::Conflict { .. } => "conflict",
            Error::BadRequest { .. } => "bad_request",
            Error::Server { .. } => "server_error",
            Error::UnexpectedStatus { .. } => "unexpected_status",
            Error::UnexpectedBody(_) => "unexpected_body",
            Error::UnexpectedRoot { .. } => "unexpected_root",
            Error::BodyTooLarge { .. } => "body_too_large",
            Error::AnswersTooLarge { .. } => "answers_too_large",
            Error::TooManyItems { .. } => "too_many_items",
            Error::UnsearchableValue { .. } => "unsearchable_value",
            Error::WritesStopped(_) => "writes_stopped",
        }
    }

    /// The engine's fault detail (409/400/403/5xx), if any.
    pub fn detail(&self) -> Option<&str> {
        match self {
            Error::Conflict { detail, .. }
            | Error::BadRequest { detail, .. }
            | Error::PermissionDenied { detail }
            | Error::Server { detail, .. } => Some(detail),
            _ => None,
        }
    }

    pub fn is_not_found(&self) -> bool {
        matches!(self, Error::NotFound(_))
    }

    /// Worth retrying later unchanged: transport trouble, 5xx, locks.
    pub fn is_transient(&self) -> bool {
        matches!(
            self,
            Error::Transport(_) | Error::Timeout(_) | Error::Server { .. } | Error::Sso { .. }
        ) || self.is_locked()
    }

    /// 409 because the object is locked or a related operation runs.
    pub fn is_locked(&self) -> bool {
        self.conflict_contains(&["locked", "related operation is currently in progress"])
    }

    /// 409 "VM is running" (start of a running VM, remove of a running VM).
    pub fn is_vm_running(&self) -> bool {
        self.conflict_contains(&["vm is running"])
    }

    /// 409 "VM is not running" (stop/shutdown of a stopped VM).
    pub fn is_vm_not_running(&self) -> bool {
        self.conflict_contains(&["vm is not running"])
    }

    /// 409 "The specified Tag name already exists." (`TAGS_SPECIFY_TAG_IS_IN_USE`).
    pub fn is_tag_name_taken(&self) -> bool {
        self.conflict_contains(&["tag name already exists"])
    }

    /// 409 name already in use on add.
    pub fn is_name_in_use(&self) -> bool {
        self.conflict_contains(&["name is already in use"])
    }

    /// 409 `ACTION_TYPE_FAILED_DISK_SPACE_LOW_ON_STORAGE_DOMAIN`: "Low disk space on Storage Domain …" (add VM, add
    /// disk).
    pub fn is_low_disk_space(&self) -> bool {
        self.conflict_contains(&["low disk space on storage domain"])
    }

    /// 409 from the scheduler on run or migrate: no host passed its filters (`SCHEDULING_ALL_HOSTS_FILTERED_OUT`), or
    /// the cluster has no host that is up (`SCHEDULING_NO_HOSTS`).
    pub fn is_no_host_to_run(&self) -> bool {
        self.conflict_contains(&[
            "no host that satisfies current scheduling constraints",
            "there are no hosts to use",
        ])
    }

    /// 400 `ACTION_TYPE_FAILED_AFFINITY_GROUP_NAME_EXISTS`: affinity group names are unique in the whole engine.
    pub fn is_affinity_group_name_taken(&self) -> bool {
        self.bad_request_contains(&["affinity group name already exists"])
    }

    /// 400 `ACTION_TYPE_FAILED_DUPLICATE_ENTITY_IN_AFFINITY_GROUP`: the VM is a member already.
    pub fn is_already_a_member(&self) -> bool {
        self.bad_request_contains(&["duplicate vm"])
    }

    fn bad_request_contains(&self, needles: &[&str]) -> bool {
        match self {
            Error::BadRequest { detail, .. } => {
                let detail = detail.to_ascii_lowercase();
                needles.iter().any(|needle| detail.contains(needle))
            }
            _ => false,
        }
    }

    fn conflict_contains(&self, needles: &[&str]) -> bool {
        match self {
            Error::Conflict { detail, .. } => {
                let detail = detail.to_ascii_lowercase();
                needles.iter().any(|needle| detail.contains(needle))
            }
            _ => false,
        }
    }

    pub(crate) fn from_fault(status: u16, fault: Option<Fault>, what: &str) -> Error {
        let fault = fault.unwrap_or_default();
        // A fault's texts reach conditions, Events and logs: an engine (or what answers in its place) decides their
        // length, up to the whole body cap.
        let reason = bounded(&fault.reason.unwrap_or_default());
        let detail = fault.detail.unwrap_or_default();
        // Validation failures come as "[message]": strip the Java list brackets.
        let detail = bounded(strip_brackets(&detail));
        match status {
            // A user without an administrative role: every request is filtered and admin-only queries fail with
            // a 400 (`QueriesCommandBase.validatePermissions`), not a 403.
            400 | 403 if detail.to_ascii_lowercase().contains("insufficient permissions") || status == 403 => {
                Error::PermissionDenied {
                    detail: format!("{} (refused: {what})", non_empty(detail, &reason)),
                }
            }
            400 => Error::BadRequest { reason, detail },
            404 => Error::NotFound(what.to_string()),
            409 => Error::Conflict { reason, detail },
            500..=599 => Error::Server {
                status,
                detail: non_empty(detail, &reason),
            },
            _ => Error::UnexpectedStatus {
                status,
                detail: non_empty(detail, &reason),
            },
        }
    }
}

/// Longest fault reason or detail kept, in bytes; the engine's own texts are a few hundred.
const MAX_FAULT_TEXT: usize = 1024;

/// `text` cut to [`MAX_FAULT_TEXT`] bytes on a character boundary, ending in `…` when cut.
fn bounded(text: &str) -> String {
    if text.len() <= MAX_FAULT_TEXT {
        return text.to_string();
    }
    let mut end = MAX_FAULT_TEXT - '…'.len_utf8();
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &text[..end])
}

fn strip_brackets(detail: &str) -> &str {
    let trimmed = detail.trim();
    trimmed
        .strip_prefix('[')
        .and_then(|s| s.strip_suffix(']'))
        .unwrap_or(trimmed)
}

fn non_empty(detail: String, reason: &str) -> String {
    if detail.is_empty() { reason.to_string() } else { detail }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_huge_fault_detail_is_cut_and_still_classified() {
        let fault = Fault {
            reason: Some("Operation Failed".into()),
            detail: Some(format!(
                "[Cannot add VM. The VM name is already in use. {}]",
                "x".repeat(8 << 20)
            )),
        };
        let err = Error::from_fault(409, Some(fault), "POST /vms");
        let detail = err.detail().expect("detail");
        assert!(detail.len() <= MAX_FAULT_TEXT, "{}", detail.len());
        assert!(detail.ends_with('…'));
        assert!(err.is_name_in_use());
        assert!(err.to_string().len() < 2 * MAX_FAULT_TEXT);
    }

    #[test]
    fn an_ordinary_fault_detail_is_kept_whole() {
        let fault = Fault {
            reason: Some("Operation Failed".into()),
            detail: Some("[Cannot run VM. VM is running.]".into()),
        };
        let err = Error::from_fault(409, Some(fault), "POST /vms/1/start");
        assert_eq!(err.detail(), Some("Cannot run VM. VM is running."));
    }
}
