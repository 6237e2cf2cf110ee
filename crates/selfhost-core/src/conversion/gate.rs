//! The node label that lets a self-hosted component run on a node: converting a node labels
//! it, converting back removes the label.

use crate::component::Component;

/// Prefix of the node labels that let a self-hosted component run on a node.
pub const NODE_GATE_PREFIX: &str = "selfhost.dev/self-hosted-";
/// Value of a node gate label.
pub const NODE_GATE_VALUE: &str = "true";

/// The node label that lets the self-hosted DaemonSet of `component` run on a node:
/// `selfhost.dev/self-hosted-<component>=true`.
pub fn node_gate_label(component: Component) -> String {
    format!("{NODE_GATE_PREFIX}{}", component.name())
}
