//! What carrying out an action came to ([`Executed`]), the condition a failed one reports ([`Failure`]), and
//! [`on_engine`], which every action that calls the engine goes through.

use std::future::Future;

use capov_crds::Severity;
use capov_ovirt::Client;

use capov_core::conditions::reasons;
use capov_core::machine_steps::Requeue;

/// A failed action, as the condition to report (or only a retry, e.g. for the engine's 409 "locked").
#[derive(Debug)]
pub struct Failure {
    pub reason: &'static str,
    pub severity: Severity,
    pub message: String,
}

impl Failure {
    pub fn error(reason: &'static str, message: impl Into<String>) -> Self {
        Failure {
            reason,
            severity: Severity::Error,
            message: message.into(),
        }
    }

    /// Retry with backoff, reason unchanged.
    pub fn retry() -> Self {
        Failure {
            reason: "",
            severity: Severity::Info,
            message: String::new(),
        }
    }

    /// An engine error: 409 "locked"/"related operation in progress" only retries; transient errors are Warnings;
    /// the rest carry the engine's fault detail as an Error.
    pub fn engine(err: &capov_ovirt::Error) -> Self {
        // Writes stopped by the leader election: this replica is about to stop; nothing for the user to act on.
        if err.is_locked() || matches!(err, capov_ovirt::Error::WritesStopped(_)) {
            return Failure::retry();
        }
        let severity = if err.is_transient() {
            Severity::Warning
        } else {
            Severity::Error
        };
        let message = err.detail().map(str::to_string).unwrap_or_else(|| err.to_string());
        let reason = match err {
            // Nothing was sent: the message names the value and the character.
            capov_ovirt::Error::UnsearchableValue { .. } => {
                return Failure::error(reasons::UNSEARCHABLE_NAME, err.to_string());
            }
            // The engine user lacks a role: the message names the refused request (docs/engine-permissions.md).
            capov_ovirt::Error::PermissionDenied { .. } => reasons::PERMISSION_DENIED,
            _ => reasons::ENGINE_ERROR,
        };
        Failure {
            reason,
            severity,
            message,
        }
    }

    pub fn is_retry_only(&self) -> bool {
        self.reason.is_empty()
    }
}

/// An engine error an action does not take as done is reported as [`Failure::engine`].
impl From<capov_ovirt::Error> for Failure {
    fn from(err: capov_ovirt::Error) -> Self {
        Failure::engine(&err)
    }
}

pub enum Executed {
    /// Done; observe and decide again at once.
    Continue,
    /// Look again later.
    Requeue(Requeue),
    /// A request to the management cluster's apiserver was cut, timed out or met an overloaded apiserver: retry
    /// soon (`Next::RetryApiserver`).
    RetryApiserver,
    /// Report `failure` on condition `type_` and back off.
    Failed { type_: &'static str, failure: Failure },
}

/// Carries out an action that calls the engine. Without an engine client (observing found no working connection)
/// the action backs off; an error the action returns is reported on condition `type_`. The errors an action takes as
/// done (a VM already gone, already running …) are the action's own to handle before it returns.
pub async fn on_engine<'a, F, Fut, E>(client: Option<&'a Client>, type_: &'static str, action: F) -> Executed
where
    F: FnOnce(&'a Client) -> Fut,
    Fut: Future<Output = Result<Executed, E>>,
    E: Into<Failure>,
{
    let Some(client) = client else {
        return Executed::Requeue(Requeue::Backoff);
    };
    match action(client).await {
        Ok(executed) => executed,
        Err(err) => Executed::Failed {
            type_,
            failure: err.into(),
        },
    }
}
