//! How a decision judges whether a pod will start: stuck until someone changes something, or
//! started at least once (so its image is on the node).

use crate::observation::PodObservation;
pub use crate::rollout::stuck;

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
