//! The phases towards static pods, and their undoing after a failure (the DaemonSet pod
//! back): the hand-over from the DaemonSet pod to a static pod on one node.

use super::front::{front_to_remove, front_to_start};
use super::node_component::NodeComponent;
use super::pod_start::stuck;
use super::step::ConvertStep;
use super::wait::{wait, why_not};
use crate::observation::DaemonSetObservation;

/// No DaemonSet: the node is static once its static pod serves; with no manifest either,
/// there is nothing to convert.
pub(super) fn no_daemonset(obs: &NodeComponent) -> ConvertStep {
    let node = &obs.node;
    let c = obs.component;
    if !obs.manifest_on_disk {
        return ConvertStep::Refuse {
            reason: format!("{node} has neither a static manifest of {c} nor its DaemonSet"),
            fix: "check --manifests-dir and --node".to_string(),
        };
    }
    match &obs.mirror_serving {
        Ok(()) => front_to_remove(obs).unwrap_or_else(|| ConvertStep::Done {
            summary: format!("{node} runs {c} as a static pod"),
        }),
        Err(why) => wait(
            obs,
            &format!("the static {c} pod on {node} to serve"),
            vec![why.clone()],
        ),
    }
}

/// The gated DaemonSet runs and no static manifest is on disk: write it, unless the node
/// runs neither.
pub(super) fn writing_manifest(obs: &NodeComponent) -> ConvertStep {
    let node = &obs.node;
    let c = obs.component;
    if !obs.node_gated() && obs.daemonset_pods_here().is_empty() {
        return ConvertStep::Refuse {
            reason: format!("{node} runs no {c} pod of the DaemonSet and has no static manifest"),
            fix: "run the conversion on a node that runs the control plane".to_string(),
        };
    }
    ConvertStep::WriteManifest
}

/// The static manifest is written and the node still labelled: the static pod starts beside
/// the DaemonSet pod, and once it serves, the label is removed.
pub(super) fn starting_static_pod(obs: &NodeComponent) -> ConvertStep {
    let node = &obs.node;
    let c = obs.component;
    if let Some(reason) = obs.mirror.as_ref().and_then(stuck) {
        return ConvertStep::Fail { reason };
    }
    if let Err(why) = &obs.mirror_serving {
        return wait(
            obs,
            &format!("the static {c} pod on {node} to serve beside the DaemonSet pod"),
            vec![why.clone()],
        );
    }
    // The static pod serves the node's API address beside the front: the front goes first,
    // while the DaemonSet pod still serves what the front passed on.
    front_to_remove(obs).unwrap_or(ConvertStep::UnlabelNode { node: node.clone() })
}

/// The node's label is removed: the DaemonSet controller retires its pod there, and the
/// DaemonSet is deleted once no node runs it; done once the static pod serves.
pub(super) fn retiring_daemonset_pod(
    obs: &NodeComponent,
    ds: &DaemonSetObservation,
) -> ConvertStep {
    let node = &obs.node;
    let c = obs.component;
    if let Some(reason) = obs.mirror.as_ref().and_then(stuck) {
        return ConvertStep::Fail { reason };
    }
    let pods_here = obs.daemonset_pods_here();
    if !pods_here.is_empty() {
        return wait(
            obs,
            &format!("the {c} DaemonSet pod on {node} to be retired"),
            pods_here
                .iter()
                .map(|p| format!("pod {} to go", p.name))
                .collect(),
        );
    }
    if let Some(step) = front_to_remove(obs) {
        return step;
    }
    if obs.gated_nodes.is_empty() && ds.pods.is_empty() && ds.deleting_since.is_none() {
        return ConvertStep::DeleteDaemonSet;
    }
    match &obs.mirror_serving {
        Ok(()) if ds.deleting_since.is_none() => ConvertStep::Done {
            summary: format!(
                "{node} runs {c} as a static pod; the DaemonSet still runs on {}",
                if obs.gated_nodes.is_empty() {
                    "no node (its last pods are going)".to_string()
                } else {
                    obs.gated_nodes.join(", ")
                }
            ),
        },
        Ok(()) => wait(
            obs,
            &format!("the DaemonSet {} to be deleted", ds.name),
            vec![],
        ),
        Err(why) => wait(
            obs,
            &format!("the static {c} pod on {node} to serve"),
            vec![why.clone()],
        ),
    }
}

/// The next step putting the DaemonSet pod back after a failure on the way to static.
pub(super) fn restore_self_hosted(obs: &NodeComponent, reason: &str) -> ConvertStep {
    let node = &obs.node;
    let c = obs.component;
    if obs.daemonset.is_some() && !obs.node_gated() {
        return ConvertStep::LabelNode { node: node.clone() };
    }
    if obs.daemonset.is_some() && obs.daemonset_pod_serving.is_err() {
        return wait(
            obs,
            &format!("the {c} DaemonSet pod on {node} to serve again"),
            why_not(&obs.daemonset_pod_serving),
        );
    }
    if obs.daemonset.is_some()
        && let Some(step) = front_to_start(obs)
    {
        return step;
    }
    if obs.manifest_on_disk && obs.daemonset.is_some() {
        return ConvertStep::RemoveManifest;
    }
    if let Some(mirror) = &obs.mirror
        && obs.daemonset.is_some()
    {
        return wait(
            obs,
            &format!("the static {c} pod on {node} to stop"),
            vec![format!("mirror pod {} to disappear", mirror.name)],
        );
    }
    ConvertStep::RolledBack {
        reason: reason.to_string(),
    }
}
