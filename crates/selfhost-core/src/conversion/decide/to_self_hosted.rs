//! The decisions towards self-hosted, and their undoing after a failure (the static pod back):
//! the hand-over from the static pod to the DaemonSet pod on one node.

use super::pod_start::{has_run, stuck};
use super::{ConvertStep, NodeComponent, gate, wait, why_not};

/// The next step towards self-hosted.
pub(super) fn to_self_hosted(obs: &NodeComponent) -> ConvertStep {
    let node = &obs.node;
    let c = obs.component;
    let pod_here = obs
        .daemonset_pods_here()
        .into_iter()
        .find(|p| !p.is_terminating());
    if !obs.manifest_on_disk {
        // Handed over already, by this run or an earlier one.
        if obs.daemonset_pod_serving.is_ok() && obs.mirror.is_none() {
            let summary = if obs.manifest_in_backup {
                format!("{node} runs {c} from the DaemonSet")
            } else {
                format!("{node} already runs {c} from the DaemonSet; skipped")
            };
            return ConvertStep::Done { summary };
        }
        if !obs.manifest_in_backup {
            return ConvertStep::Refuse {
                reason: format!(
                    "{node} has no static manifest of {c} and no serving {c} DaemonSet pod"
                ),
                fix: "check --manifests-dir and --node".to_string(),
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
        if let Some(reason) = pod_here.and_then(stuck) {
            return ConvertStep::Fail { reason };
        }
        let mut pending = Vec::new();
        if let Some(mirror) = &obs.mirror {
            pending.push(format!("mirror pod {} to disappear", mirror.name));
        }
        pending.extend(why_not(&obs.daemonset_pod_serving));
        return wait(
            obs,
            &format!("the {c} DaemonSet pod on {node} to serve alone"),
            pending,
        );
    }
    let Some(ds) = &obs.daemonset else {
        return ConvertStep::CreateDaemonSet;
    };
    if ds.deleting_since.is_some() {
        return wait(
            obs,
            &format!("the old DaemonSet {} to be deleted", ds.name),
            vec![],
        );
    }
    if !obs.daemonset_gated {
        return gate(obs, ds);
    }
    if !obs.node_gated() {
        return ConvertStep::LabelNode { node: node.clone() };
    }
    let Some(pod) = pod_here else {
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
            Ok(()) => ConvertStep::MoveManifestAside,
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
