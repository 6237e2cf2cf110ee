//! How long the checkpointer waits before it keeps a pod or activates a checkpoint.

use std::time::Duration;

/// Default soak: how long a DaemonSet pod must have served before it is kept. Long enough
/// that a pod which serves once and then crashes (a bad flag found on the first request, a
/// failing post-start hook) is not kept.
pub const DEFAULT_SOAK: Duration = Duration::from_secs(10);
/// Default grace: how long the API must be unreachable before a checkpoint is activated.
/// Longer than one kube-apiserver restart on the node (3.5–4 s from start to serving), so
/// that an ordinary restart or an upgrade's hand-over never activates a checkpoint.
pub const DEFAULT_API_GRACE: Duration = Duration::from_secs(10);

/// The checkpointer's waits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CheckpointPolicy {
    /// How long a DaemonSet pod must have served before it is kept.
    pub soak: Duration,
    /// How long the API must be unreachable before a checkpoint is activated.
    pub api_grace: Duration,
}

impl Default for CheckpointPolicy {
    fn default() -> Self {
        CheckpointPolicy {
            soak: DEFAULT_SOAK,
            api_grace: DEFAULT_API_GRACE,
        }
    }
}
