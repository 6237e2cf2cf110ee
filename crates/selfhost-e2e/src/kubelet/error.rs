//! The kubelet's one error type.

use std::path::PathBuf;
use std::time::Duration;

/// What can go wrong in the process kubelet. API failures never end the kubelet: its loops log
/// them and try again on their next tick; only a bad command line, kubeconfig or root fails
/// [`super::run`].
#[derive(Debug, thiserror::Error)]
pub enum KubeletError {
    /// The kubeconfig could not be read or understood.
    #[error("cannot load the kubeconfig {}: {source}", path.display())]
    Kubeconfig {
        /// The file.
        path: PathBuf,
        /// kube's complaint.
        source: Box<kube::config::KubeconfigError>,
    },
    /// No API client could be built from the kubeconfig.
    #[error("cannot build an API client: {0}")]
    Client(#[source] Box<kube::Error>),
    /// An API request failed.
    #[error("{what}: {source}")]
    Api {
        /// What was being done.
        what: String,
        /// kube's error.
        source: Box<kube::Error>,
    },
    /// An API request got no answer in time.
    #[error("{what}: no answer from the API within {timeout:?}")]
    ApiTimeout {
        /// What was being done.
        what: String,
        /// How long it waited.
        timeout: Duration,
    },
    /// A file operation failed.
    #[error("cannot {action} {}: {source}", path.display())]
    Io {
        /// What was attempted (`read`, `create`, …).
        action: &'static str,
        /// The file or directory.
        path: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
    /// A container record is not what this kubelet writes.
    #[error("the container record {} is unreadable: {source}", path.display())]
    Record {
        /// The record file.
        path: PathBuf,
        /// The parser's complaint.
        source: serde_json::Error,
    },
    /// A container's process could not be started.
    #[error("cannot start {program}: {source}")]
    Spawn {
        /// The executable.
        program: String,
        /// The OS error.
        source: std::io::Error,
    },
    /// A volume could not be set up.
    #[error("volume {volume:?}: {reason}")]
    Volume {
        /// The volume's name in the pod.
        volume: String,
        /// What is wrong.
        reason: String,
    },
    /// The kubelet cannot listen for its own termination signals.
    #[error("cannot watch for SIGTERM/SIGINT: {0}")]
    Signals(#[source] std::io::Error),
}

impl KubeletError {
    /// A file operation on `path` failed.
    pub(crate) fn io(
        action: &'static str,
        path: impl Into<PathBuf>,
        source: std::io::Error,
    ) -> Self {
        KubeletError::Io {
            action,
            path: path.into(),
            source,
        }
    }

    /// An API request failed while doing `what`.
    pub(crate) fn api(what: impl Into<String>, source: kube::Error) -> Self {
        KubeletError::Api {
            what: what.into(),
            source: Box::new(source),
        }
    }

    /// The HTTP status the API answered with, if it answered at all.
    pub(crate) fn api_status(&self) -> Option<u16> {
        match self {
            KubeletError::Api { source, .. } => match source.as_ref() {
                kube::Error::Api(status) => Some(status.code),
                _ => None,
            },
            _ => None,
        }
    }
}
