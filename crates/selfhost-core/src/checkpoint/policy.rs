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

/// The shortest grace that tells a status the API kept from before it went down from a fresh
/// one: a condition's time is known to the second only.
pub const MIN_API_GRACE: Duration = Duration::from_secs(1);

impl CheckpointPolicy {
    /// The defaults on a clock `factor` times faster than real (a simulated cluster's), the
    /// grace no shorter than [`MIN_API_GRACE`].
    pub fn scaled(factor: u32) -> Self {
        let factor = factor.max(1);
        CheckpointPolicy {
            soak: DEFAULT_SOAK / factor,
            api_grace: (DEFAULT_API_GRACE / factor).max(MIN_API_GRACE),
        }
    }
}

impl Default for CheckpointPolicy {
    fn default() -> Self {
        CheckpointPolicy {
            soak: DEFAULT_SOAK,
            api_grace: DEFAULT_API_GRACE,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_scaled_policy_divides_the_defaults_but_keeps_a_whole_second_of_grace() {
        let rows = [
            (1, DEFAULT_SOAK, DEFAULT_API_GRACE),
            (0, DEFAULT_SOAK, DEFAULT_API_GRACE),
            (10, Duration::from_secs(1), Duration::from_secs(1)),
            (100, Duration::from_millis(100), MIN_API_GRACE),
        ];
        for (factor, soak, grace) in rows {
            let policy = CheckpointPolicy::scaled(factor);
            assert_eq!((policy.soak, policy.api_grace), (soak, grace), "{factor}");
        }
    }
}
