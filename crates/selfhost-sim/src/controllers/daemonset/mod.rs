//! The DaemonSet controller, as one pure reconcile over what the controller-manager would see
//! in its informer caches (upstream `syncDaemonSet`).
//!
//! Given a DaemonSet, the nodes, the pods and ControllerRevisions of its namespace and `now`,
//! [`reconcile`] returns the writes to make, in order: claims (adopt/release), history
//! (revisions), pod deletions and creations, history cleanup, and the status. The wiring applies
//! them and calls again on the next relevant event; as upstream, the rolling update runs only in
//! a sync where the core loop had nothing to do, so one node never gets two changes at once.
//!
//! The one piece of memory across syncs is the failed-pod back-off, which upstream also keeps
//! in memory: pass the same [`FailedPodBackoff`] every time.

mod claim;
pub mod history;
mod manage;
pub mod rollout;
mod status;
pub mod template;

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::apps::v1::{ControllerRevision, DaemonSet, DaemonSetStatus};
use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector as ApiLabelSelector;
use k8s_openapi::jiff::Timestamp;

pub use claim::{Claim, claim};
pub use manage::ControllerEvent;

use super::backoff::{Backoff, BackoffPolicy};
use super::objects::{self, CONTROLLER_REVISION_HASH_LABEL};
use super::{clock, objects::is_pod_ready};
use crate::selector::LabelSelector;

/// Upstream's cap on pod creations and deletions per sync.
pub const BURST_REPLICAS: usize = 250;

/// Back-off for replacing failed pods, keyed by DaemonSet uid, observed generation and node.
pub type FailedPodBackoff = Backoff<String>;

/// A fresh failed-pod back-off with the controller-manager's delays (1 s doubling to 15 min).
pub fn failed_pod_backoff() -> FailedPodBackoff {
    Backoff::new(BackoffPolicy::daemonset_failed_pods())
}

/// What the controller sees.
#[derive(Debug, Clone, Copy)]
pub struct DaemonSetView<'a> {
    /// The DaemonSet.
    pub daemon_set: &'a DaemonSet,
    /// Every node.
    pub nodes: &'a [Node],
    /// The pods of the DaemonSet's namespace (owned, orphaned and unrelated alike).
    pub pods: &'a [Pod],
    /// The ControllerRevisions of the DaemonSet's namespace.
    pub revisions: &'a [ControllerRevision],
}

/// Why a pod is deleted (for logs, events and tests).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DeleteReason {
    /// The pod failed; a new one will be created.
    Failed,
    /// The pod exited successfully, which a daemon must not do.
    Succeeded,
    /// More than one pod on the node.
    Surplus,
    /// The node no longer qualifies (selector, affinity, `NoExecute` taint).
    NodeNotEligible,
    /// The pod waits for a node that no longer exists.
    NodeGone,
    /// An old pod deleted by the rolling update (within `maxUnavailable`).
    RollingUpdate,
    /// An old pod whose surge replacement is available (or which is not ready anyway).
    Replaced,
}

/// One write, in the order the wiring should apply them.
#[derive(Debug, Clone, PartialEq)]
pub enum Action {
    /// Add the DaemonSet's controller reference to an orphan pod.
    AdoptPod {
        /// The pod's name.
        name: String,
    },
    /// Remove the DaemonSet's reference from a pod it no longer selects.
    ReleasePod {
        /// The pod's name.
        name: String,
    },
    /// Add the controller reference to an orphan revision.
    AdoptRevision {
        /// The revision's name.
        name: String,
    },
    /// Remove the controller reference from a revision no longer selected.
    ReleaseRevision {
        /// The revision's name.
        name: String,
    },
    /// Set the `controller-revision-hash` label of a revision that lacks it.
    LabelRevision {
        /// The revision's name.
        name: String,
        /// The label value.
        hash: String,
    },
    /// Create the revision of the current template.
    CreateRevision(Box<ControllerRevision>),
    /// Raise the current revision's number above every older one (after a rollback).
    SetRevisionNumber {
        /// The revision's name.
        name: String,
        /// The new number.
        revision: i64,
    },
    /// Delete a duplicate or expired revision.
    DeleteRevision {
        /// The revision's name.
        name: String,
    },
    /// Relabel a pod made from a duplicate revision.
    LabelPod {
        /// The pod's name.
        name: String,
        /// The new `controller-revision-hash`.
        hash: String,
    },
    /// Delete a pod (with its own grace period).
    DeletePod {
        /// The pod's name.
        name: String,
        /// Why.
        reason: DeleteReason,
    },
    /// Create a pod (`metadata.generateName` set; the apiserver names it).
    CreatePod(Box<Pod>),
    /// Write the status subresource.
    UpdateStatus(Box<DaemonSetStatus>),
}

/// The outcome of one sync.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Decision {
    /// The current template's hash (empty when the sync stopped early).
    pub hash: String,
    /// The writes, in order.
    pub actions: Vec<Action>,
    /// Events to record on the DaemonSet.
    pub events: Vec<ControllerEvent>,
    /// Sync again after this long even if nothing changes (min-ready and back-off timers).
    pub requeue_after: Option<Duration>,
    /// A rolling-update configuration the controller could not use; the rest of the sync
    /// (core loop and status) still happened, as upstream.
    pub rollout_error: Option<DaemonSetError>,
}

impl Decision {
    /// The pods to create.
    pub fn pods_to_create(&self) -> impl Iterator<Item = &Pod> {
        self.actions.iter().filter_map(|a| match a {
            Action::CreatePod(pod) => Some(pod.as_ref()),
            _ => None,
        })
    }

    /// The pods to delete, with the reason.
    pub fn pods_to_delete(&self) -> impl Iterator<Item = (&str, DeleteReason)> {
        self.actions.iter().filter_map(|a| match a {
            Action::DeletePod { name, reason } => Some((name.as_str(), *reason)),
            _ => None,
        })
    }

    /// The status to write, if it changed.
    pub fn status(&self) -> Option<&DaemonSetStatus> {
        self.actions.iter().find_map(|a| match a {
            Action::UpdateStatus(status) => Some(status.as_ref()),
            _ => None,
        })
    }
}

/// Why the controller cannot work on a DaemonSet.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DaemonSetError {
    /// The object has no spec.
    #[error("DaemonSet has no spec")]
    MissingSpec,
    /// The selector cannot be evaluated.
    #[error("invalid label selector: {0}")]
    InvalidSelector(String),
    /// `maxSurge` is neither an integer nor a percentage.
    #[error("invalid value for MaxSurge: {0}")]
    InvalidMaxSurge(String),
    /// `maxUnavailable` is neither an integer nor a percentage.
    #[error("invalid value for MaxUnavailable: {0}")]
    InvalidMaxUnavailable(String),
}

/// What one sync knows, shared by the core loop, the rolling update and the status.
pub(crate) struct Context<'a> {
    ds: &'a DaemonSet,
    /// Nodes sorted by name (upstream iterates a map; sorting makes the choice reproducible).
    nodes: Vec<&'a Node>,
    /// Claimed pods by target node, without pods that are both deleted and terminal.
    pods_by_node: BTreeMap<String, Vec<&'a Pod>>,
    hash: String,
    generation: Option<i64>,
    min_ready_seconds: i32,
    allows_surge: bool,
    now: Timestamp,
}

impl<'a> Context<'a> {
    fn node(&self, name: &str) -> Option<&'a Node> {
        self.nodes
            .iter()
            .find(|n| n.metadata.name.as_deref() == Some(name))
            .copied()
    }

    fn desired_nodes(&self) -> Vec<&'a str> {
        self.nodes
            .iter()
            .filter(|n| template::placement(self.ds, n).should_run)
            .map(|n| n.metadata.name.as_deref().unwrap_or_default())
            .collect()
    }

    fn is_updated(&self, pod: &Pod) -> bool {
        template::is_pod_updated(pod, &self.hash, self.generation)
    }

    fn failed_pod_backoff_key(&self, node: &str) -> String {
        let observed = self
            .ds
            .status
            .as_ref()
            .and_then(|s| s.observed_generation)
            .unwrap_or(0);
        format!(
            "{}/{observed}/{node}",
            self.ds.metadata.uid.as_deref().unwrap_or_default()
        )
    }
}

fn name_of(meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta) -> String {
    meta.name.clone().unwrap_or_default()
}

/// One sync of one DaemonSet at `now`.
///
/// # Errors
/// A DaemonSet without spec or with a selector that cannot be evaluated: nothing can be decided.
pub fn reconcile(
    view: &DaemonSetView<'_>,
    now: Timestamp,
    backoff: &mut FailedPodBackoff,
) -> Result<Decision, DaemonSetError> {
    let ds = view.daemon_set;
    let spec = ds.spec.as_ref().ok_or(DaemonSetError::MissingSpec)?;
    let mut decision = Decision::default();
    if spec.selector == ApiLabelSelector::default() {
        decision.events.push(ControllerEvent {
            warning: true,
            reason: "SelectingAll",
            message: "This daemon set is selecting all pods. A non-empty selector is required."
                .into(),
        });
        return Ok(decision);
    }
    // The garbage collector handles a DaemonSet being deleted; its status cannot be trusted.
    if objects::is_terminating(&ds.metadata) {
        return Ok(decision);
    }
    let selector_json = serde_json::to_value(&spec.selector)
        .map_err(|e| DaemonSetError::InvalidSelector(e.to_string()))?;
    let selector = LabelSelector::from_label_selector_json(&selector_json)
        .map_err(|e| DaemonSetError::InvalidSelector(e.to_string()))?;
    let namespace = ds.metadata.namespace.as_deref().unwrap_or_default();
    let in_namespace = |meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta| {
        meta.namespace.as_deref().unwrap_or_default() == namespace
    };

    let mut revisions = Vec::new();
    for revision in view.revisions.iter().filter(|r| in_namespace(&r.metadata)) {
        let name = name_of(&revision.metadata);
        match claim(&ds.metadata, &selector, &revision.metadata) {
            Claim::Adopt => decision.actions.push(Action::AdoptRevision { name }),
            Claim::Release => decision.actions.push(Action::ReleaseRevision { name }),
            Claim::Owned | Claim::Ignore => {}
        }
        if claim(&ds.metadata, &selector, &revision.metadata).is_claimed() {
            revisions.push(revision);
        }
    }
    let mut pods = Vec::new();
    for pod in view.pods.iter().filter(|p| in_namespace(&p.metadata)) {
        let name = name_of(&pod.metadata);
        let claimed = claim(&ds.metadata, &selector, &pod.metadata);
        match claimed {
            Claim::Adopt => decision.actions.push(Action::AdoptPod { name }),
            Claim::Release => decision.actions.push(Action::ReleasePod { name }),
            Claim::Owned | Claim::Ignore => {}
        }
        if claimed.is_claimed() {
            pods.push(pod);
        }
    }

    let pod_hashes: Vec<(String, String)> = pods
        .iter()
        .filter_map(|p| {
            let hash = objects::labels(&p.metadata).get(CONTROLLER_REVISION_HASH_LABEL)?;
            Some((name_of(&p.metadata), hash.clone()))
        })
        .collect();
    let (hash, old_revisions) =
        match history::construct(ds, &revisions, view.revisions, &pod_hashes) {
            history::History::Collision { collision_count } => {
                // Upstream bumps the count and fails the sync; the next one hashes again.
                let mut status = ds.status.clone().unwrap_or_default();
                status.collision_count = Some(collision_count);
                decision
                    .actions
                    .push(Action::UpdateStatus(Box::new(status)));
                decision.requeue_after = Some(Duration::ZERO);
                return Ok(decision);
            }
            history::History::Current { hash, old, actions } => {
                decision.actions.extend(actions);
                (hash, old)
            }
        };
    decision.hash.clone_from(&hash);

    let mut nodes: Vec<&Node> = view.nodes.iter().collect();
    nodes.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
    let mut pods_by_node: BTreeMap<String, Vec<&Pod>> = BTreeMap::new();
    for pod in &pods {
        if objects::is_pod_terminal(pod) && objects::is_terminating(&pod.metadata) {
            continue;
        }
        if let Some(node) = template::target_node(pod) {
            pods_by_node.entry(node.to_string()).or_default().push(pod);
        }
    }
    let mut ctx = Context {
        ds,
        nodes,
        pods_by_node,
        hash: hash.clone(),
        generation: template::template_generation(ds),
        min_ready_seconds: spec.min_ready_seconds.unwrap_or(0),
        allows_surge: false,
        now,
    };
    ctx.allows_surge = rollout::surge_count(ds, 1).is_ok_and(|n| n > 0);

    let managed = manage::manage(&ctx, backoff);
    decision.events.extend(managed.events);
    decision.requeue_after = managed.requeue_after;
    let (mut creates, mut deletes) = (managed.creates, managed.deletes);
    if creates.is_empty() && deletes.is_empty() && rollout::is_rolling_update(ds) {
        match rollout::rolling_update(&ctx) {
            Ok(wave) => (creates, deletes) = (wave.creates, wave.deletes),
            Err(error) => decision.rollout_error = Some(error),
        }
    }
    for (name, reason) in deletes {
        decision.actions.push(Action::DeletePod { name, reason });
    }
    if !creates.is_empty() {
        let template = template::pod_template(ds, &hash);
        for node in creates {
            let pod = template::new_pod(ds, &template, &node);
            decision.actions.push(Action::CreatePod(Box::new(pod)));
        }
    }

    let live_hashes: Vec<&str> = pod_hashes.iter().map(|(_, h)| h.as_str()).collect();
    decision
        .actions
        .extend(history::cleanup(ds, &old_revisions, &live_hashes));

    let status = status::compute(&ctx);
    if status::differs(ds.status.as_ref(), &status, ds.metadata.generation) {
        decision
            .actions
            .push(Action::UpdateStatus(Box::new(status)));
    }
    decision.requeue_after = clock_min(decision.requeue_after, next_availability(&ctx));
    Ok(decision)
}

fn clock_min(a: Option<Duration>, b: Option<Duration>) -> Option<Duration> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, None) => a,
        (None, b) => b,
    }
}

/// When a Ready pod will become available (upstream re-syncs `minReadySeconds + 1s` after a pod
/// turns Ready).
fn next_availability(ctx: &Context<'_>) -> Option<Duration> {
    if ctx.min_ready_seconds <= 0 {
        return None;
    }
    let min_ready = clock::seconds(i64::from(ctx.min_ready_seconds)) + Duration::from_secs(1);
    ctx.pods_by_node
        .values()
        .flatten()
        .filter(|p| {
            is_pod_ready(p) && !objects::is_pod_available(p, ctx.min_ready_seconds, ctx.now)
        })
        .filter_map(|p| {
            objects::pod_condition(p, objects::condition::READY)?
                .last_transition_time
                .as_ref()
        })
        .map(|since| clock::elapsed(ctx.now, clock::after(since.0, min_ready)))
        .min()
}

#[cfg(test)]
mod tests;
