//! How a decision judges whether a pod will start: stuck until someone changes something, or
//! started at least once (so its image is on the node).

use crate::observation::PodObservation;
// Waiting reasons of a container that will not start without someone changing something: the
// same that make a rollout fail at once.
use crate::rollout::IMAGE_FAILURE_REASONS;

/// Why the pod cannot start, if it is stuck (a pull that fails, a bad configuration).
pub fn stuck(pod: &PodObservation) -> Option<String> {
    pod.containers.iter().find_map(|c| {
        let reason = c.state.waiting_reason()?;
        IMAGE_FAILURE_REASONS.contains(&reason).then(|| {
            let node = pod.node.as_deref().unwrap_or("(unscheduled)");
            format!("{node}: pod {} cannot start: {reason}", pod.name)
        })
    })
}

/// Whether the pod's image is on the node: its container has run at least once.
pub(super) fn has_run(pod: &PodObservation) -> bool {
    pod.containers.iter().any(|c| {
        c.restart_count > 0
            || c.last_termination.is_some()
            || !matches!(
                c.state,
                crate::observation::ContainerState::Waiting { .. }
                    | crate::observation::ContainerState::Unknown
            )
    })
}
