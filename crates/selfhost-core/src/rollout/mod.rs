//! Rollout predicates: has a DaemonSet finished rolling, is this template the one we want, and
//! is the rollout failing.
//!
//! kubeadm's waits passed on pod phase `Running`, which stays true while a container
//! crash-loops. Here a rollout is complete only when the DaemonSet's own status has converged
//! *and* every pod is on the current template, Ready, and not terminating — and what "the
//! template we want" means is decided semantically (see [`template`]), because the API server
//! fills in defaults that the rendered template does not spell out.

mod budget;
mod placement;
mod signals;
pub mod template;
#[cfg(test)]
mod tests;

use serde::Serialize;

pub use budget::{AvailabilityBudget, BudgetOverrun};
pub use placement::places_on;
pub use signals::{
    CRASH_LOOP_REASONS, FailureSignal, IMAGE_FAILURE_REASONS, OUTAGE_SETTLE, SignalPolicy,
    exits_count_after, failure_signals, stuck,
};
pub use template::{
    TemplateDifference, first_difference, normalize, template_hash, templates_equal,
};

use crate::observation::{DaemonSetObservation, Observation};

/// kubectl's rule for `kubectl rollout status daemonset`: the controller has observed the
/// latest spec, and at least as many pods are updated and available as are desired.
///
/// `Ok(())` when complete; otherwise kubectl's kind of message saying what is missing.
pub fn kubectl_rollout_complete(ds: &DaemonSetObservation) -> Result<(), String> {
    let status = &ds.status;
    let generation = ds.generation.unwrap_or(0);
    if status.observed_generation.unwrap_or(0) < generation {
        return Err(format!(
            "waiting for the DaemonSet controller to observe generation {generation} of {}",
            ds.name
        ));
    }
    if status.updated < status.desired {
        return Err(format!(
            "{} of {} new pods of {} have been updated",
            status.updated, status.desired, ds.name
        ));
    }
    if status.available < status.desired {
        return Err(format!(
            "{} of {} updated pods of {} are available",
            status.available, status.desired, ds.name
        ));
    }
    Ok(())
}

/// Our stricter reading of the DaemonSet's status: observed, and every desired pod updated,
/// Ready and available, none unavailable or misscheduled.
pub fn status_converged(ds: &DaemonSetObservation) -> Result<(), String> {
    kubectl_rollout_complete(ds)?;
    let status = &ds.status;
    if status.ready < status.desired {
        return Err(format!(
            "{} of {} pods of {} are Ready",
            status.ready, status.desired, ds.name
        ));
    }
    if status.unavailable > 0 {
        return Err(format!(
            "{} pods of {} are unavailable",
            status.unavailable, ds.name
        ));
    }
    if status.misscheduled > 0 {
        return Err(format!(
            "{} pods of {} run on nodes they should not",
            status.misscheduled, ds.name
        ));
    }
    Ok(())
}

/// Why one pod does not count as rolled out, or `None` if it does: on the current template,
/// Ready, not terminating, and on a Ready control-plane node.
pub fn pod_not_rolled_out(
    obs: &Observation,
    ds: &DaemonSetObservation,
    pod: &crate::observation::PodObservation,
) -> Option<String> {
    let node = pod.node.as_deref().unwrap_or("(unscheduled)");
    if pod.is_terminating() {
        return Some(format!("{node}: pod {} is terminating", pod.name));
    }
    if !ds.is_current(pod) {
        return Some(format!(
            "{node}: pod {} runs the previous template",
            pod.name
        ));
    }
    if !obs.node_is_ready(node) {
        return Some(format!("{node}: node is not Ready"));
    }
    if !pod.ready {
        return Some(format!("{node}: pod {} is not Ready", pod.name));
    }
    None
}

/// The complete, strict rollout check of a DaemonSet: [`status_converged`] plus every pod
/// rolled out ([`pod_not_rolled_out`]), at least one pod, and exactly one pod per node.
pub fn rollout_progress(obs: &Observation, ds: &DaemonSetObservation) -> Progress {
    let mut pending = Vec::new();
    if let Err(reason) = status_converged(ds) {
        pending.push(reason);
    }
    if ds.pods.is_empty() {
        pending.push(format!("{} has no pods", ds.name));
    }
    if usize::try_from(ds.status.desired).ok() != Some(ds.pods.len()) {
        pending.push(format!(
            "{} has {} pods for {} desired",
            ds.name,
            ds.pods.len(),
            ds.status.desired
        ));
    }
    pending.extend(
        ds.pods
            .iter()
            .filter_map(|pod| pod_not_rolled_out(obs, ds, pod)),
    );
    pending.extend(nodes_without_a_pod(obs, ds));
    Progress { pending }
}

/// The control-plane nodes `ds`'s template is meant to run on where it has no pod at all.
/// While a node is not Ready the DaemonSet's status leaves it out (see [`places_on`]), so a
/// rollout is complete only once every such node has its pod again.
fn nodes_without_a_pod(obs: &Observation, ds: &DaemonSetObservation) -> Vec<String> {
    obs.nodes
        .iter()
        .filter(|node| places_on(&ds.template, node))
        .filter(|node| ds.pods_on(&node.name).next().is_none())
        .map(|node| {
            if obs.node_is_ready(&node.name) {
                format!("{}: no pod of {} yet", node.name, ds.name)
            } else {
                format!(
                    "{}: no pod of {}, and the node is not Ready (the DaemonSet controller \
                     places none there until it is)",
                    node.name, ds.name
                )
            }
        })
        .collect()
}

/// What still keeps a rollout from being complete; complete when nothing does.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Progress {
    /// One line per missing piece, naming the node or object.
    pub pending: Vec<String>,
}

impl Progress {
    /// Whether nothing is missing.
    pub fn is_complete(&self) -> bool {
        self.pending.is_empty()
    }
}
