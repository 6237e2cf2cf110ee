//! The node's API front in a kube-apiserver's conversion: it comes before the static pod
//! leaves, and goes once the static pod serves the node's API address again.

use super::node_component::NodeComponent;
use super::pod_start::stuck;
use super::step::ConvertStep;
use super::wait::wait;

/// Where the DaemonSet pod listens behind a front: the step that starts the front, or `None`
/// once it runs. The static pod must not leave before: it is the only listener on the node's
/// API address until the front is.
pub(super) fn front_to_start(obs: &NodeComponent) -> Option<ConvertStep> {
    let front = obs.front.as_ref().filter(|f| f.wanted)?;
    if !front.manifest_on_disk {
        return Some(ConvertStep::WriteFront);
    }
    let why = front.running.as_ref().err()?;
    if let Some(reason) = front.mirror.as_ref().and_then(stuck) {
        return Some(ConvertStep::Fail {
            reason: format!("the API front does not start: {reason}"),
        });
    }
    Some(wait(
        obs,
        &format!("the API front on {} to run", obs.node),
        vec![why.clone()],
    ))
}

/// Where the node runs static pods again: the step that removes the front, or `None` when it
/// is gone from the manifests directory.
pub(super) fn front_to_remove(obs: &NodeComponent) -> Option<ConvertStep> {
    obs.front
        .as_ref()
        .filter(|f| f.manifest_on_disk)
        .map(|_| ConvertStep::RemoveFront)
}
