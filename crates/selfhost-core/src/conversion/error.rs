//! Why a manifest or template cannot be converted.

use crate::component::Component;
use crate::daemonset::CertsError;

/// Why a manifest or template cannot be converted.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConversionError {
    /// The static pod manifest has no container.
    #[error("{component}: the static pod manifest has no container to run")]
    NoContainer {
        /// The component.
        component: Component,
    },
    /// The manifest runs another component than its file name says.
    #[error(
        "{component}: the static pod manifest runs {found:?} (its first container), not {component}"
    )]
    WrongComponent {
        /// The component the file is named after.
        component: Component,
        /// The first container's name.
        found: String,
    },
    /// The DaemonSet has no pod spec.
    #[error("{component}: the DaemonSet's pod template has no spec")]
    NoTemplate {
        /// The component.
        component: Component,
    },
    /// Certificates cannot be mounted from Secrets.
    #[error(transparent)]
    Certs(#[from] CertsError),
}
