use std::path::PathBuf;

/// Why the test control plane could not be provided.
#[derive(Debug, thiserror::Error)]
pub enum HarnessError {
    #[error("cannot find or build the control-plane binaries: {0}")]
    Assets(String),
    #[error("I/O on {path}: {source}")]
    Io { path: PathBuf, source: std::io::Error },
    #[error("certificate generation failed: {0}")]
    Certs(#[from] rcgen::Error),
    #[error("{process} did not become ready within {seconds}s; last log lines:\n{log_tail}")]
    NotReady {
        process: &'static str,
        seconds: u64,
        log_tail: String,
    },
    #[error("{process} exited during start-up ({status}); last log lines:\n{log_tail}")]
    Exited {
        process: &'static str,
        status: String,
        log_tail: String,
    },
    #[error("Kubernetes client: {0}")]
    Kube(String),
    #[error("CRD manifest {path}: {message}")]
    Crd { path: PathBuf, message: String },
    #[error("the engine simulator did not start: {0}")]
    Simulator(String),
    #[error("the apiserver proxy: {0}")]
    Proxy(String),
    #[error("timed out waiting for {what}: {detail}")]
    TimedOut { what: String, detail: String },
}

impl HarnessError {
    pub(crate) fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        HarnessError::Io {
            path: path.into(),
            source,
        }
    }
}
