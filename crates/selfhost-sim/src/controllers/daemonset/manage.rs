//! The core loop (upstream `manage` and `podsShouldBeOnNode`): one pod on every node that
//! should run one, none elsewhere; failed and succeeded pods replaced (failed ones under a
//! back-off); surplus pods pruned.
//!
//! A Terminating pod still occupies its node: without surge no replacement is created until it
//! is gone from the API. That is what deadlocks a single-node self-hosted control plane.

use std::time::Duration;

use super::{Context, DeleteReason, FailedPodBackoff};
use crate::controllers::objects::is_pod_available;
use crate::controllers::objects::{self, CONTROLLER_REVISION_HASH_LABEL, phase};
use k8s_openapi::api::core::v1::Pod;

/// An event the controller records on the DaemonSet.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ControllerEvent {
    /// `Warning` rather than `Normal`.
    pub warning: bool,
    /// The reason, e.g. `FailedDaemonPod`.
    pub reason: &'static str,
    /// The message.
    pub message: String,
}

/// What the core loop wants done.
#[derive(Debug, Default)]
pub(super) struct Manage {
    pub creates: Vec<String>,
    pub deletes: Vec<(String, DeleteReason)>,
    pub events: Vec<ControllerEvent>,
    pub requeue_after: Option<Duration>,
}

/// Scheduled pods first, then oldest, then by name (upstream `podByCreationTimestampAndPhase`).
pub(super) fn sort_oldest_first(pods: &mut [&Pod]) {
    pods.sort_by(|a, b| {
        let scheduled = |p: &Pod| {
            p.spec
                .as_ref()
                .and_then(|s| s.node_name.as_deref())
                .is_some_and(|n| !n.is_empty())
        };
        scheduled(b)
            .cmp(&scheduled(a))
            .then_with(|| objects::created_at(&a.metadata).cmp(&objects::created_at(&b.metadata)))
            .then_with(|| a.metadata.name.cmp(&b.metadata.name))
    });
}

fn pod_name(pod: &Pod) -> String {
    pod.metadata.name.clone().unwrap_or_default()
}

pub(super) fn manage(ctx: &Context<'_>, backoff: &mut FailedPodBackoff) -> Manage {
    let mut out = Manage::default();
    for node in &ctx.nodes {
        let node_name = node.metadata.name.as_deref().unwrap_or_default();
        let placement = super::template::placement(ctx.ds, node);
        let pods = ctx.pods_by_node.get(node_name);
        match pods {
            None if placement.should_run => out.creates.push(node_name.to_string()),
            Some(pods) if placement.should_continue_running => {
                node_with_pods(
                    ctx,
                    node_name,
                    pods,
                    placement.should_run,
                    backoff,
                    &mut out,
                );
            }
            Some(pods) => {
                for pod in pods
                    .iter()
                    .filter(|p| !objects::is_terminating(&p.metadata))
                {
                    out.deletes
                        .push((pod_name(pod), DeleteReason::NodeNotEligible));
                }
            }
            None => {}
        }
    }
    // Pods waiting for a node that no longer exists would wait forever (the pod GC only
    // collects bound pods).
    for (node_name, pods) in &ctx.pods_by_node {
        if ctx.node(node_name).is_some() {
            continue;
        }
        for pod in pods {
            let bound = pod
                .spec
                .as_ref()
                .and_then(|s| s.node_name.as_deref())
                .is_some_and(|n| !n.is_empty());
            if !bound {
                out.deletes.push((pod_name(pod), DeleteReason::NodeGone));
            }
        }
    }
    out.creates.truncate(super::BURST_REPLICAS);
    out.deletes.truncate(super::BURST_REPLICAS);
    out
}

fn node_with_pods(
    ctx: &Context<'_>,
    node_name: &str,
    pods: &[&Pod],
    should_run: bool,
    backoff: &mut FailedPodBackoff,
    out: &mut Manage,
) {
    let mut running: Vec<&Pod> = Vec::new();
    for pod in pods
        .iter()
        .filter(|p| !objects::is_terminating(&p.metadata))
    {
        let namespaced = format!(
            "{}/{}",
            pod.metadata.namespace.as_deref().unwrap_or_default(),
            pod_name(pod)
        );
        match objects::pod_phase(pod) {
            phase::FAILED => {
                // The kubelet may keep rejecting the pod; do not hot-loop on replacing it.
                let key = ctx.failed_pod_backoff_key(node_name);
                if backoff.in_backoff_since_update(&key, ctx.now) {
                    let delay = backoff.delay(&key);
                    out.requeue_after = Some(out.requeue_after.map_or(delay, |d| d.min(delay)));
                    continue;
                }
                backoff.step(&key, ctx.now, ctx.now);
                out.events.push(ControllerEvent {
                    warning: true,
                    reason: "FailedDaemonPod",
                    message: format!(
                        "Found failed daemon pod {namespaced} on node {node_name}, will try to kill it"
                    ),
                });
                out.deletes.push((pod_name(pod), DeleteReason::Failed));
            }
            phase::SUCCEEDED => {
                out.events.push(ControllerEvent {
                    warning: false,
                    reason: "SucceededDaemonPod",
                    message: format!(
                        "Found succeeded daemon pod {namespaced} on node {node_name}, will try to delete it"
                    ),
                });
                out.deletes.push((pod_name(pod), DeleteReason::Succeeded));
            }
            _ => running.push(pod),
        }
    }
    sort_oldest_first(&mut running);
    if !ctx.allows_surge {
        // Without surge: at most one pod per node, the oldest stays. Nothing is created while
        // any pod, even a Terminating one, is on the node.
        for pod in running.iter().skip(1) {
            out.deletes.push((pod_name(pod), DeleteReason::Surplus));
        }
        return;
    }
    if running.is_empty() {
        if should_run {
            out.creates.push(node_name.to_string());
        }
        return;
    }
    if running.len() == 1 {
        return;
    }
    // With surge: keep the oldest new pod and the oldest old pod while the new one is not yet
    // available and the old one is still ready; delete everything else.
    let mut oldest_new: Option<&Pod> = None;
    let mut oldest_old: Option<&Pod> = None;
    for pod in &running {
        let is_new = objects::labels(&pod.metadata)
            .get(CONTROLLER_REVISION_HASH_LABEL)
            .is_some_and(|h| *h == ctx.hash);
        let slot = if is_new {
            &mut oldest_new
        } else {
            &mut oldest_old
        };
        if slot.is_none() {
            *slot = Some(pod);
        } else {
            out.deletes.push((pod_name(pod), DeleteReason::Surplus));
        }
    }
    if let (Some(new), Some(old)) = (oldest_new, oldest_old)
        && (!objects::is_pod_ready(old) || is_pod_available(new, ctx.min_ready_seconds, ctx.now))
    {
        out.deletes.push((pod_name(old), DeleteReason::Replaced));
    }
}
