//! The engine's one root error: every way a command of the front door can fail, each with its
//! cause nested, and what kind of failure it is (which decides the exit code a tool shows).

use crate::api_call::ApiCallError;
use crate::client::ClientError;
use crate::config_file::ConfigFileError;
use crate::connect::ConnectError;
use crate::convert::ConvertError;
use crate::manifests::ManifestsError;
use crate::plan::PlanError;
use crate::prepull::PrepullError;
use crate::upgrade::ExecuteError;

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

/// Why a command of the engine could not be carried out.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The kubeconfig cannot be used.
    #[error(transparent)]
    Kubeconfig(#[from] ClientError),
    /// The API server cannot be worked with.
    #[error(transparent)]
    Connect(#[from] ConnectError),
    /// A configuration file cannot be used.
    #[error(transparent)]
    ConfigFile(#[from] ConfigFileError),
    /// No plan could be made.
    #[error(transparent)]
    Plan(#[from] PlanError),
    /// The upgrade stopped after it began.
    #[error(transparent)]
    Upgrade(#[from] ExecuteError),
    /// A conversion could not be planned; nothing was changed.
    #[error(transparent)]
    Convert(#[from] ConvertError),
    /// A conversion stopped after it began.
    #[error(transparent)]
    ConversionStopped(ConvertError),
    /// An image prepull could not be carried out.
    #[error(transparent)]
    Prepull(#[from] PrepullError),
    /// Manifests could not be rendered.
    #[error(transparent)]
    Manifests(#[from] ManifestsError),
    /// An API call failed for good.
    #[error(transparent)]
    Api(#[from] ApiCallError),
}

impl Error {
    /// What kind of failure this is.
    pub fn kind(&self) -> ErrorKind {
        match self {
            Error::Kubeconfig(_) | Error::ConfigFile(_) | Error::Manifests(_) => {
                ErrorKind::BadInput
            }
            Error::Connect(e) if e.is_bad_input() => ErrorKind::BadInput,
            Error::Connect(_) => ErrorKind::Refused,
            Error::Convert(e) if e.is_bad_input() => ErrorKind::BadInput,
            Error::Convert(_) => ErrorKind::Refused,
            Error::Prepull(PrepullError::Cleanup { .. })
            | Error::Upgrade(_)
            | Error::ConversionStopped(_) => ErrorKind::NotRestored,
            Error::Plan(_) | Error::Prepull(_) | Error::Api(_) => ErrorKind::Failed,
        }
    }
}
