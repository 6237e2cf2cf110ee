//! Whether each control-plane node runs the checkpointer, as its mirror pod shows it: what
//! `status` lists and the `checkpointers` preflight check judges.

use serde::Serialize;

/// A control-plane node's checkpointer, as its mirror pod shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct NodeCheckpointer {
    /// The node.
    pub node: String,
    /// Whether it runs.
    #[serde(flatten)]
    pub state: CheckpointerState,
}

/// Whether a node's checkpointer runs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "checkpointer", rename_all = "kebab-case")]
pub enum CheckpointerState {
    /// Its container is ready.
    Running,
    /// Its mirror pod is there, its container not ready.
    NotRunning {
        /// What the pod shows.
        why: String,
    },
    /// The node has none: a power cut of every control-plane node leaves the control plane
    /// down (`selfhost checkpoint install` on the node).
    None,
}

impl std::fmt::Display for CheckpointerState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CheckpointerState::Running => write!(f, "running"),
            CheckpointerState::NotRunning { why } => write!(f, "NOT running: {why}"),
            CheckpointerState::None => write!(
                f,
                "none: a power cut of every control-plane node leaves the control plane down \
                 (run `selfhost checkpoint install` on the node)"
            ),
        }
    }
}
