//! `convert to-self-hosted` and `convert to-static`: one node at a time, one component at a
//! time, each decision taken afresh from the cluster and the node's disk by
//! [`selfhost_core::conversion::decide::next_step`], so that a run stopped anywhere is
//! continued by running it again.
//!
//! The tool runs on the node it converts (as kubeadm's did): it reads and writes the kubelet's
//! manifests directory directly, and moves manifests aside into a backup directory beside it
//! instead of deleting them.

mod action;
mod checkpointer;
pub mod config;
pub mod conversion_view;
mod dry_run;
mod figures;
mod front;
mod preflight;
mod run;
mod to_self_hosted;
mod to_static;

use std::path::PathBuf;
use std::time::Duration;

use selfhost_core::Component;
use selfhost_core::config::ClusterConfig;
use selfhost_core::conversion::ConversionError;
use selfhost_core::conversion::decide::Direction;
use serde::Serialize;

pub use figures::ComponentFigures;
pub use front::FrontRequest;
pub use preflight::{ComponentPlan, ConversionPlan, plan, secrets_to_read};
pub use run::convert;

use crate::api_call::ApiCallError;
use crate::checkpoint::install::{CheckpointerInstall, CheckpointerOutcome, InstallError};
use crate::cluster_view::ViewTimeout;
use crate::node_files::FilesError;
use crate::outcome::ComponentOutcome;
use crate::retry::RetryPolicy;
use crate::target::TargetError;

/// Default of `--timeout`: how long one component may take to hand over.
pub const DEFAULT_DEADLINE: Duration = Duration::from_secs(300);

/// What to convert, and how.
#[derive(Debug, Clone)]
pub struct ConvertRequest {
    /// Which way.
    pub direction: Direction,
    /// The node this run converts (the one it runs on).
    pub node: String,
    /// The kubelet's static pod directory on this node.
    pub manifests_dir: PathBuf,
    /// To self-hosted: store certificates and kubeconfigs in Secrets and mount them from there.
    pub certs_in_secrets: bool,
    /// Prefix of every host path read or written for certificates and kubeconfigs (`/` on a
    /// real node; tests point it at a scratch directory).
    pub host_root: PathBuf,
    /// `--config FILE`, read: the configuration to check what runs against. Without it, the
    /// cluster's `kube-system/kubeadm-config` is read (see [`config`]).
    pub config_file: Option<(PathBuf, ClusterConfig)>,
    /// Make every API write as a server-side dry run (`dryRun=All`), describe the waits and
    /// the file moves instead of making them, and change nothing.
    pub dry_run: bool,
    /// How long each component may take; a wait past it fails (and restores).
    pub deadline: Duration,
    /// Retries of every API call.
    pub retry: RetryPolicy,
    /// To self-hosted: the checkpointer to install before any component is converted, which
    /// then keeps each DaemonSet pod before its static manifest moves aside (`None`: none).
    /// To static pods, the checkpointer is removed whatever this says.
    pub checkpointer: Option<CheckpointerInstall>,
    /// The node's API front: to self-hosted, the kube-apiserver DaemonSet listens behind it
    /// and its static pod is written before the static kube-apiserver leaves (`None`: no
    /// front, unless the DaemonSet already listens behind one, which refuses). To static pods,
    /// the front is removed whatever this says; it lends its image when going to static fails
    /// and the front comes back.
    pub front: Option<FrontRequest>,
    /// A certificate of what runs that expires within this warns; an expired one refuses.
    pub certificate_warning: Duration,
}

impl ConvertRequest {
    /// A request with the defaults: no certificates in Secrets, host root `/`, the default
    /// deadline and retries.
    pub fn new(direction: Direction, node: &str, manifests_dir: impl Into<PathBuf>) -> Self {
        ConvertRequest {
            direction,
            node: node.to_string(),
            manifests_dir: manifests_dir.into(),
            certs_in_secrets: false,
            host_root: PathBuf::from("/"),
            config_file: None,
            dry_run: false,
            deadline: DEFAULT_DEADLINE,
            retry: RetryPolicy::default(),
            checkpointer: None,
            front: None,
            certificate_warning: selfhost_core::preflight::DEFAULT_CERTIFICATE_WARNING,
        }
    }
}

impl ConvertRequest {
    /// Where the node's checkpointer keeps its checkpoints, when one is to keep each
    /// DaemonSet pod before its static manifest moves aside: to self-hosted, with a
    /// checkpointer.
    pub(crate) fn checkpoint_keeper(&self) -> Option<crate::checkpoint::NodeDisk> {
        (self.direction == Direction::ToSelfHosted && self.checkpointer.is_some()).then(|| {
            crate::checkpoint::NodeDisk {
                checkpoint_dir: crate::checkpoint::install::checkpoint_dir(&self.host_root),
                manifests_dir: self.manifests_dir.clone(),
            }
        })
    }

    /// Whether the checkpointer is not yet as the request leaves it: to self-hosted, asked for
    /// and its static pod not written; to static pods, its static pod or checkpoints still on
    /// the node.
    pub fn checkpointer_pending(&self) -> bool {
        let manifest = self
            .manifests_dir
            .join(selfhost_core::checkpoint::CHECKPOINTER_MANIFEST);
        match self.direction {
            Direction::ToSelfHosted => self.checkpointer.is_some() && !manifest.exists(),
            Direction::ToStatic => {
                manifest.exists()
                    || crate::checkpoint::install::checkpoint_dir(&self.host_root).exists()
            }
        }
    }
}

/// The result of a run.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ConvertReport {
    /// Each component worked on, in order, with its outcome.
    pub components: Vec<(Component, ComponentOutcome)>,
    /// Where static manifests moved aside are kept.
    pub backup_dir: PathBuf,
    /// What became of the checkpointer: to self-hosted, installed before the first component
    /// (when it does not run, nothing is converted); to static pods, removed once every
    /// component ended done.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub checkpointer: Option<CheckpointerOutcome>,
}

impl ConvertReport {
    /// The first component that did not end done (or, in a dry run, dry-run), if any.
    pub fn first_problem(&self) -> Option<&(Component, ComponentOutcome)> {
        self.components.iter().find(|(_, o)| !o.succeeded())
    }

    /// Whether the node ended as asked: every component done (or dry-run) and the
    /// checkpointer, where one was to run, running.
    pub fn succeeded(&self) -> bool {
        self.first_problem().is_none()
            && self
                .checkpointer
                .as_ref()
                .is_none_or(CheckpointerOutcome::succeeded)
    }
}

/// Why a conversion could not run.
#[derive(Debug, thiserror::Error)]
pub enum ConvertError {
    /// The node's files are missing or unusable (nothing was changed when preflight says so).
    #[error(transparent)]
    Files(#[from] FilesError),
    /// The checkpointer could not be installed or removed: its files, or its node's access to
    /// the Leases of kube-system.
    #[error(transparent)]
    Checkpointer(Box<InstallError>),
    /// No node of that name.
    #[error(
        "the cluster has no node named {0:?}; pass --node with this host's node name (kubectl get nodes)"
    )]
    UnknownNode(String),
    /// A manifest or template cannot be converted.
    #[error(transparent)]
    Conversion(#[from] ConversionError),
    /// An API call failed for good.
    #[error(transparent)]
    Api(#[from] ApiCallError),
    /// The cluster's kubeadm configuration cannot be read or used.
    #[error(transparent)]
    Config(#[from] TargetError),
    /// The watches did not list in time.
    #[error(transparent)]
    View(#[from] ViewTimeout),
    /// The kube-apiserver DaemonSet's front annotation cannot be read.
    #[error("{0}; fix the annotation on DaemonSet kube-system/self-hosted-kube-apiserver")]
    FrontLayout(String),
    /// The static kube-apiserver names no address to put the node's API front on.
    #[error(
        "the static kube-apiserver manifest {} has no literal --advertise-address to put the \
         node's API front on; set one, or pass --no-front",
        path.display()
    )]
    NoApiAddress {
        /// The manifest.
        path: PathBuf,
    },
    /// A Secret the static pod needs a file from is missing, or lacks the key.
    #[error("Secret kube-system/{secret} has no key {key:?}; cannot write {path}")]
    MissingSecretData {
        /// The Secret.
        secret: String,
        /// The key.
        key: String,
        /// The file it was to be written to.
        path: String,
    },
}

impl ConvertError {
    /// Whether the error is the user's input (exit 2) rather than the cluster's state.
    pub fn is_bad_input(&self) -> bool {
        match self {
            ConvertError::Files(_) | ConvertError::UnknownNode(_) | ConvertError::Conversion(_) => {
                true
            }
            ConvertError::Checkpointer(e) => matches!(**e, InstallError::Files(_)),
            _ => false,
        }
    }
}

impl From<InstallError> for ConvertError {
    fn from(cause: InstallError) -> Self {
        ConvertError::Checkpointer(Box::new(cause))
    }
}
