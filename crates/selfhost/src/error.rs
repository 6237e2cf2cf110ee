//! The engine's one root error: every way a command of the front door can fail, each with its
//! cause nested, and what kind of failure it is (which decides the exit code a tool shows).

use crate::checkpoint::install::InstallError;
use crate::client::ClientError;
use crate::config_file::ConfigFileError;
use crate::connect::ConnectError;
use crate::convert::ConvertError;
use crate::etcd_snapshot::SnapshotError;
use crate::front::FrontError;
use crate::front::install::FrontInstallError;
use crate::manifests::ManifestsError;
use crate::node_files::FilesError;
use crate::plan::PlanError;
use crate::prepull::PrepullError;
use crate::recover::RecoverError;
use crate::releases::ReleaseError;
use crate::upgrade::ExecuteError;
use selfhost_core::chain::ChainError;

/// What kind of failure an [`Error`] is, for the exit code and the words around the message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorKind {
    /// The user's input is wrong (a flag, a file, a kubeconfig); nothing was changed.
    BadInput,
    /// The cluster is not fit to work with, or the credentials lack a permission; nothing was
    /// changed.
    Refused,
    /// The command stopped before its first change of the cluster.
    Failed,
    /// The command stopped after changing the cluster, without putting it back.
    NotRestored,
}

/// Why a command of the engine could not be carried out. Each cause is boxed, so the error
/// stays a tag and a pointer however large a cause is, and results are cheap to return.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The kubeconfig cannot be used.
    #[error(transparent)]
    Kubeconfig(Box<ClientError>),
    /// The API server cannot be worked with.
    #[error(transparent)]
    Connect(Box<ConnectError>),
    /// A configuration file cannot be used.
    #[error(transparent)]
    ConfigFile(Box<ConfigFileError>),
    /// No plan could be made.
    #[error(transparent)]
    Plan(Box<PlanError>),
    /// The upgrade stopped after it began.
    #[error(transparent)]
    Upgrade(Box<ExecuteError>),
    /// A conversion could not be planned; nothing was changed.
    #[error(transparent)]
    Convert(Box<ConvertError>),
    /// A conversion stopped after it began.
    #[error(transparent)]
    ConversionStopped(Box<ConvertError>),
    /// An image prepull could not be carried out.
    #[error(transparent)]
    Prepull(Box<PrepullError>),
    /// Manifests could not be rendered.
    #[error(transparent)]
    Manifests(Box<ManifestsError>),
    /// A recovery refused, or stopped after writing.
    #[error(transparent)]
    Recover(Box<RecoverError>),
    /// The checkpointer could not be installed or removed: its files on the node, or its
    /// node's access to the Leases of kube-system.
    #[error(transparent)]
    Checkpointer(Box<InstallError>),
    /// The node-local API front cannot start.
    #[error(transparent)]
    Front(Box<FrontError>),
    /// The node's API front could not be installed or removed.
    #[error(transparent)]
    FrontPlacement(Box<FrontInstallError>),
    /// `--etcd-snapshot` took no snapshot; nothing was changed.
    #[error(transparent)]
    EtcdSnapshot(Box<SnapshotError>),
    /// The hops of a chained upgrade cannot be made from `--via`.
    #[error(transparent)]
    Chain(Box<ChainError>),
    /// The newest patch of a minor a chain passes is not known.
    #[error(transparent)]
    Release(Box<ReleaseError>),
}

impl Error {
    /// What kind of failure this is.
    pub fn kind(&self) -> ErrorKind {
        match self {
            Error::Manifests(e) if matches!(**e, ManifestsError::Refused { .. }) => {
                ErrorKind::Refused
            }
            Error::Kubeconfig(_) | Error::ConfigFile(_) | Error::Manifests(_) | Error::Front(_) => {
                ErrorKind::BadInput
            }
            Error::Connect(e) if e.is_bad_input() => ErrorKind::BadInput,
            Error::Connect(_) => ErrorKind::Refused,
            Error::Convert(e) if e.is_bad_input() => ErrorKind::BadInput,
            Error::Convert(_) => ErrorKind::Refused,
            Error::Prepull(e) if matches!(**e, PrepullError::Cleanup { .. }) => {
                ErrorKind::NotRestored
            }
            Error::Upgrade(_) | Error::ConversionStopped(_) => ErrorKind::NotRestored,
            Error::Recover(e) if e.is_bad_input() => ErrorKind::BadInput,
            Error::Recover(e) if e.changed_the_node() => ErrorKind::NotRestored,
            Error::Recover(_) => ErrorKind::Refused,
            Error::Checkpointer(e)
                if matches!(**e, InstallError::Files(FilesError::NoManifestsDir { .. })) =>
            {
                ErrorKind::BadInput
            }
            Error::Checkpointer(e) if matches!(**e, InstallError::ActiveCopies { .. }) => {
                ErrorKind::Refused
            }
            Error::FrontPlacement(e) => match **e {
                FrontInstallError::Files(FilesError::NoManifestsDir { .. }) => ErrorKind::BadInput,
                FrontInstallError::Files(_) | FrontInstallError::Api(_) => ErrorKind::Failed,
                _ => ErrorKind::Refused,
            },
            Error::Plan(e) if matches!(**e, PlanError::EtcdAccess(_)) => ErrorKind::BadInput,
            Error::EtcdSnapshot(e) => match **e {
                SnapshotError::Access(_) | SnapshotError::NoEndpoint => ErrorKind::BadInput,
                SnapshotError::Directory { .. } | SnapshotError::Failed { .. } => {
                    ErrorKind::Refused
                }
            },
            Error::Chain(_) => ErrorKind::BadInput,
            Error::Release(e) if matches!(**e, ReleaseError::Url { .. }) => ErrorKind::BadInput,
            Error::Release(_) => ErrorKind::Refused,
            Error::Plan(_) | Error::Prepull(_) | Error::Checkpointer(_) => ErrorKind::Failed,
        }
    }
}

/// `?` on a cause gives the root error.
macro_rules! caused_by {
    ($($cause:ty => $variant:ident),* $(,)?) => {
        $(impl From<$cause> for Error {
            fn from(cause: $cause) -> Self {
                Error::$variant(Box::new(cause))
            }
        })*
    };
}

caused_by! {
    ClientError => Kubeconfig,
    ConnectError => Connect,
    ConfigFileError => ConfigFile,
    PlanError => Plan,
    ExecuteError => Upgrade,
    ConvertError => Convert,
    PrepullError => Prepull,
    ManifestsError => Manifests,
    RecoverError => Recover,
    InstallError => Checkpointer,
    FrontError => Front,
    FrontInstallError => FrontPlacement,
    SnapshotError => EtcdSnapshot,
    ChainError => Chain,
    ReleaseError => Release,
}

impl From<FilesError> for Error {
    fn from(cause: FilesError) -> Self {
        InstallError::from(cause).into()
    }
}
