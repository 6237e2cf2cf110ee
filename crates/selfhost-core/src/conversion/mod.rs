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
mod error;
mod gate;
mod leadership;
mod manifest;
mod to_daemonset;
mod to_static;

#[cfg(test)]
mod tests;

pub use error::ConversionError;
pub use gate::{NODE_GATE_PREFIX, NODE_GATE_VALUE, node_gate_label};
pub use manifest::{ManifestError, parse_manifest};
pub use to_daemonset::{
    gate_daemonset, is_gated, permits_port_sharing, self_hosted_daemonset, with_port_sharing,
};
pub use to_static::{SecretFile, secret_files, static_pod_from_template};
