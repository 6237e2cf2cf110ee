//! The phases towards self-hosted, and their undoing after a failure (the static pod back):
//! the hand-over from the static pod to the DaemonSet pod on one node.

use super::front::{front_to_remove, front_to_start};
use super::node_component::NodeComponent;
use super::pod_start::{has_run, stuck};
use super::step::ConvertStep;
use super::wait::{wait, why_not};
use crate::observation::{DaemonSetObservation, PodObservation};

/// The DaemonSet's pod on the node that is not going away, if there is one.
fn pod_here(obs: &NodeComponent) -> Option<&PodObservation> {
    obs.daemonset_pods_here()
        .into_iter()
        .find(|p| !p.is_terminating())
}

/// The static manifest is on disk and no DaemonSet is there to take over: create it, once an
/// `old` one being deleted is gone.
pub(super) fn creating_daemonset(
    obs: &NodeComponent,
    old: Option<&DaemonSetObservation>,
) -> ConvertStep {
    match old {
        None => ConvertStep::CreateDaemonSet,
        Some(ds) => wait(
            obs,
            &format!("the old DaemonSet {} to be deleted", ds.name),
            vec![],
        ),
    }
}

/// The gated DaemonSet exists, and the node does not carry its gate label yet.
pub(super) fn labelling_node(obs: &NodeComponent) -> ConvertStep {
    ConvertStep::LabelNode {
        node: obs.node.clone(),
    }
}

/// The node is labelled: the DaemonSet pod starts beside the static pod, and once it serves
/// (and the node's checkpointer, where there is one, keeps it, and the node's API front, where
/// the pod listens behind one, runs), the static manifest moves aside. A static pod without port sharing is restarted with it first, once the DaemonSet
/// pod has shown its image is on the node.
pub(super) fn starting_daemonset_pod(obs: &NodeComponent) -> ConvertStep {
    let node = &obs.node;
    let c = obs.component;
    let Some(pod) = pod_here(obs) else {
        return wait(
            obs,
            &format!("the {c} DaemonSet pod on {node} to be created"),
            vec![format!("{node}: no pod yet")],
        );
    };
    if let Some(reason) = stuck(pod) {
        return ConvertStep::Fail { reason };
    }
    if obs.static_permits_port_sharing {
        match &obs.daemonset_pod_serving {
            // Without its checkpoint, a power cut after the move would leave the node with
            // neither pod to start.
            Ok(()) => match &obs.checkpoint_kept {
                Some(Err(why)) => wait(
                    obs,
                    &format!("the checkpointer on {node} to keep the {c} DaemonSet pod"),
                    vec![why.clone()],
                ),
                Some(Ok(())) | None => {
                    front_to_start(obs).unwrap_or(ConvertStep::MoveManifestAside)
                }
            },
            Err(why) if obs.static_port_sharing_added && !obs.mirror_permits_port_sharing => wait(
                obs,
                &format!("the static {c} pod on {node} to restart with port sharing"),
                vec![why.clone()],
            ),
            Err(why) => wait(
                obs,
                &format!("the {c} DaemonSet pod on {node} to serve beside the static pod"),
                vec![why.clone()],
            ),
        }
    } else if has_run(pod) {
        // Its port is held by the static pod, and its image is here: the static pod restarts
        // with port sharing (the only gap), and the hand-over goes on beside it.
        ConvertStep::AddPortSharing
    } else {
        wait(
            obs,
            &format!("the {c} DaemonSet pod on {node} to have its image and start once"),
            vec![format!("{node}: pod {} has not started yet", pod.name)],
        )
    }
}

/// The static manifest is moved aside: the mirror pod goes, and the DaemonSet pod serves
/// alone; done.
pub(super) fn retiring_static_pod(obs: &NodeComponent) -> ConvertStep {
    let node = &obs.node;
    let c = obs.component;
    if obs.daemonset_pod_serving.is_ok() && obs.mirror.is_none() {
        return ConvertStep::Done {
            summary: format!("{node} runs {c} from the DaemonSet"),
        };
    }
    if obs.daemonset.is_none() || !obs.node_gated() {
        return ConvertStep::Fail {
            reason: format!(
                "the static manifest of {c} was moved aside, but the DaemonSet or the label \
                 of {node} is gone"
            ),
        };
    }
    if let Some(reason) = pod_here(obs).and_then(stuck) {
        return ConvertStep::Fail { reason };
    }
    let mut pending = Vec::new();
    if let Some(mirror) = &obs.mirror {
        pending.push(format!("mirror pod {} to disappear", mirror.name));
    }
    pending.extend(why_not(&obs.daemonset_pod_serving));
    wait(
        obs,
        &format!("the {c} DaemonSet pod on {node} to serve alone"),
        pending,
    )
}

/// No static manifest, on disk or moved aside: the node is self-hosted already if the
/// DaemonSet pod serves alone there; otherwise there is nothing to convert.
pub(super) fn no_static_manifest(obs: &NodeComponent) -> ConvertStep {
    let node = &obs.node;
    let c = obs.component;
    if obs.daemonset_pod_serving.is_ok() && obs.mirror.is_none() {
        return ConvertStep::Done {
            summary: format!("{node} already runs {c} from the DaemonSet; skipped"),
        };
    }
    ConvertStep::Refuse {
        reason: format!("{node} has no static manifest of {c} and no serving {c} DaemonSet pod"),
        fix: "check --manifests-dir and --node".to_string(),
    }
}

/// The next step putting the static pod back after a failure on the way to self-hosted.
pub(super) fn restore_static(obs: &NodeComponent, reason: &str) -> ConvertStep {
    let node = &obs.node;
    let c = obs.component;
    let pods_here = obs.daemonset_pods_here();
    if !obs.manifest_on_disk && obs.manifest_in_backup {
        // An original without port sharing could not bind beside the DaemonSet pod: its
        // port-sharing rewrite goes first, the original once that pod has gone.
        if !obs.static_permits_port_sharing && pods_here.iter().any(|p| !p.is_terminating()) {
            return ConvertStep::AddPortSharing;
        }
        return ConvertStep::RestoreManifest;
    }
    if obs.node_gated() {
        return ConvertStep::UnlabelNode { node: node.clone() };
    }
    if let Some(ds) = &obs.daemonset
        && obs.gated_nodes.is_empty()
        && ds.pods.is_empty()
        && ds.deleting_since.is_none()
    {
        // Created for this node and used by no other: nothing is left behind.
        return ConvertStep::DeleteDaemonSet;
    }
    let mut pending: Vec<String> = pods_here
        .iter()
        .map(|p| format!("DaemonSet pod {} to go", p.name))
        .collect();
    if pending.is_empty() && obs.static_port_sharing_added {
        return ConvertStep::RestoreManifest;
    }
    if pending.is_empty()
        && let Some(step) = front_to_remove(obs)
    {
        return step;
    }
    if obs.manifest_on_disk {
        pending.extend(why_not(&obs.mirror_serving));
    }
    if pending.is_empty() {
        return ConvertStep::RolledBack {
            reason: reason.to_string(),
        };
    }
    wait(
        obs,
        &format!("the static {c} pod on {node} to serve again"),
        pending,
    )
}
