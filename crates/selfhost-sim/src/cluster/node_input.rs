//! What a node agent is told: changes of its pods, of its machine, and processes that end
//! themselves.

use std::sync::Arc;

use serde_json::Value;

use crate::controllers::kubelet::{NodeState, ProcessId};

/// What a node's kubelet task is told.
#[derive(Debug, Clone)]
pub(crate) enum NodeInput {
    /// A pod bound to the node was added or changed.
    Pod(Arc<Value>),
    /// A pod bound to the node is gone from the API (its uid).
    Removed(String),
    /// Every pod bound to the node now (the watch fell behind and started over): pods the
    /// kubelet knows and that are not here are gone.
    Resync(Vec<Arc<Value>>),
    /// The machine changes state.
    SetState(NodeState),
    /// The kubelet process restarts; the machine and its containers stay up.
    RestartKubelet,
    /// A process ends itself (a leader that lost its Lease exits).
    ExitProcess {
        /// The process.
        process: ProcessId,
        /// Its exit code.
        code: i32,
        /// Its last words.
        message: String,
    },
}
