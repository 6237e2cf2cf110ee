//! Waiting on one node: for what the kubelet and the controllers do by themselves, until the
//! conversion's deadline.

use super::node_component::NodeComponent;
use super::step::ConvertStep;

/// Waits for `condition`, with what is still `pending`; fails once the deadline has passed.
pub(super) fn wait(obs: &NodeComponent, condition: &str, pending: Vec<String>) -> ConvertStep {
    if obs.timed_out() {
        let detail = if pending.is_empty() {
            String::new()
        } else {
            format!(" ({})", pending.join("; "))
        };
        return ConvertStep::Fail {
            reason: format!("{condition} did not happen in time{detail}"),
        };
    }
    ConvertStep::Wait {
        condition: condition.to_string(),
        pending,
    }
}

/// Why a pod does not serve, as a pending line.
pub(super) fn why_not(serving: &Result<(), String>) -> Vec<String> {
    serving.as_ref().err().cloned().into_iter().collect()
}
