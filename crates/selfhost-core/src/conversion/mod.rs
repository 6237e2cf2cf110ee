//! Converting a control plane between kubeadm's static pods and self-hosted DaemonSets, the
//! pure part: the manifests both ways, the files certificates-in-Secrets need on a node, and
//! the decision of what to do next on one node (see [`decide`]).
//!
//! Which nodes run a self-hosted component is decided by a node label per component,
//! [`node_gate_label`], that the DaemonSets created here require in their `nodeSelector`.
//! Converting a node labels it, so the DaemonSet pod starts there *beside* the static pod (and
//! nowhere else: the other nodes still run their static pods on the same ports); converting
//! back removes the label, so the DaemonSet controller retires its pod there. Nothing else can
//! place or remove one DaemonSet pod on one node without changing the template, and a
//! template change rolls every node at once — the very deadlock the pivot exists to avoid.

pub mod decide;
mod leadership;
mod to_daemonset;
mod to_static;

#[cfg(test)]
mod tests;

pub use to_daemonset::{
    gate_daemonset, is_gated, permits_port_sharing, self_hosted_daemonset, with_port_sharing,
};
pub use to_static::{SecretFile, secret_files, static_pod_from_template};

use crate::component::Component;
use crate::daemonset::CertsError;

/// Prefix of the node labels that let a self-hosted component run on a node.
pub const NODE_GATE_PREFIX: &str = "selfhost.dev/self-hosted-";
/// Value of a node gate label.
pub const NODE_GATE_VALUE: &str = "true";

/// The node label that lets the self-hosted DaemonSet of `component` run on a node:
/// `selfhost.dev/self-hosted-<component>=true`.
pub fn node_gate_label(component: Component) -> String {
    format!("{NODE_GATE_PREFIX}{}", component.name())
}

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

/// Why a static pod manifest cannot be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ManifestError {
    /// Not YAML (or JSON).
    #[error("not YAML: {0}")]
    NotYaml(String),
    /// Another kind of object.
    #[error(
        "expected apiVersion v1 and kind Pod, found apiVersion {api_version:?} and kind {kind:?}"
    )]
    NotAPod {
        /// Its apiVersion.
        api_version: String,
        /// Its kind.
        kind: String,
    },
    /// A Pod whose fields do not have the types a Pod's have.
    #[error("not a valid Pod: {0}")]
    Invalid(String),
}

/// Parses a static pod manifest as the kubelet reads it: YAML (or JSON), apiVersion v1, kind
/// Pod.
pub fn parse_manifest(text: &str) -> Result<k8s_openapi::api::core::v1::Pod, ManifestError> {
    let value: serde_json::Value =
        serde_saphyr::from_str(text).map_err(|e| ManifestError::NotYaml(e.to_string()))?;
    let field = |name: &str| {
        value
            .get(name)
            .and_then(|v| v.as_str())
            .unwrap_or_default()
            .to_string()
    };
    let (api_version, kind) = (field("apiVersion"), field("kind"));
    if api_version != "v1" || kind != "Pod" {
        return Err(ManifestError::NotAPod { api_version, kind });
    }
    serde_json::from_value(value).map_err(|e| ManifestError::Invalid(e.to_string()))
}
