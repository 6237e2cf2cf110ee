//! A test bed of real Kubernetes control-plane processes on one machine, and what selfhost's
//! end-to-end suite needs to drive it. Never a dependency of the product.
//!
//! - [`binaries`]: where the Kubernetes binaries built by `scripts/build-kubernetes.sh` live.
//! - [`kubelet`]: the process kubelet, a node agent that runs pods as real processes.
//! - [`pki`]: the cluster's certificates and keys.
//! - [`bed`]: a control plane of real processes on one or several nodes, started as kubeadm
//!   leaves it (static pods), which the suite converts and upgrades with selfhost.

use std::path::{Path, PathBuf};

pub mod bed;
pub mod binaries;
pub mod kubelet;
pub mod pki;

/// What can go wrong setting up or driving the bed.
#[derive(Debug, thiserror::Error)]
pub enum BedError {
    /// The Kubernetes binaries are not built.
    #[error(
        "no built Kubernetes binaries found (looked in ${} or the cache {}); build them with \
         crates/selfhost-e2e/scripts/build-kubernetes.sh, or point ${} at its output",
        binaries::BIN_DIR_ENV,
        binaries::DEFAULT_CACHE,
        binaries::BIN_DIR_ENV
    )]
    NoBinaries,
    /// A file operation failed.
    #[error("{}: {source}", path.display())]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
    /// A program could not be started.
    #[error("cannot start {program}: {source}")]
    Spawn {
        /// The program.
        program: String,
        /// The OS error.
        source: std::io::Error,
    },
    /// A process of the bed exited.
    #[error("{name} exited ({status}); the end of its log:\n{log_tail}")]
    Exited {
        /// Which process.
        name: String,
        /// How it ended.
        status: String,
        /// The end of its log.
        log_tail: String,
    },
    /// Minting a certificate or key failed.
    #[error("cannot mint a certificate: {0}")]
    Certificate(#[from] rcgen::Error),
    /// A document could not be rendered.
    #[error("cannot render {what}: {reason}")]
    Render {
        /// What was rendered.
        what: String,
        /// Why not.
        reason: String,
    },
    /// A kube client could not be made or a request failed.
    #[error("{what}: {source}")]
    Kube {
        /// What was being done.
        what: String,
        /// kube's error.
        source: Box<kube::Error>,
    },
    /// Something did not happen in time.
    #[error(
        "timed out after {seconds} s waiting for {what}{}",
        detail_suffix(detail)
    )]
    Timeout {
        /// What was awaited.
        what: String,
        /// How long.
        seconds: u64,
        /// The last thing seen, to say why.
        detail: String,
    },
    /// The process kubelet failed (reading or stopping a node's containers).
    #[error(transparent)]
    Kubelet(#[from] kubelet::KubeletError),
    /// No free loopback slot for a bed.
    #[error("no free loopback addresses for a bed: {0}")]
    NoAddress(String),
}

fn detail_suffix(detail: &str) -> String {
    if detail.is_empty() {
        String::new()
    } else {
        format!(" (last seen: {detail})")
    }
}

impl BedError {
    /// An I/O error on `path`.
    pub fn io(path: &Path, source: std::io::Error) -> BedError {
        BedError::Io {
            path: path.to_path_buf(),
            source,
        }
    }

    /// A kube error while doing `what`.
    pub fn kube(what: impl Into<String>, source: kube::Error) -> BedError {
        BedError::Kube {
            what: what.into(),
            source: Box::new(source),
        }
    }
}
