//! The DaemonSet's status as upstream `updateDaemonSetStatus` computes it, over the pods the
//! controller sees at the start of the sync (its informer cache lags its own writes too).
//!
//! Per node that should run a pod: `desiredNumberScheduled`; with a pod, `currentNumberScheduled`;
//! the oldest pod Ready → `numberReady`, available → `numberAvailable`, on the current template →
//! `updatedNumberScheduled`. Nodes that should not run one but do: `numberMisscheduled`.
//! `kubectl rollout status` is satisfied when `observedGeneration ≥ generation`,
//! `updatedNumberScheduled ≥ desired` and `numberAvailable ≥ desired`.

use k8s_openapi::api::apps::v1::DaemonSetStatus;

use super::Context;
use super::manage::sort_oldest_first;
use crate::controllers::objects::{self, is_pod_available};

/// Computes the status; conditions and the collision count are kept from the current status.
pub(super) fn compute(ctx: &Context<'_>) -> DaemonSetStatus {
    let mut status = ctx.ds.status.clone().unwrap_or_default();
    let (mut desired, mut current, mut misscheduled) = (0, 0, 0);
    let (mut ready, mut updated, mut available) = (0, 0, 0);
    for node in &ctx.nodes {
        let name = node.metadata.name.as_deref().unwrap_or_default();
        let should_run = super::template::placement(ctx.ds, node).should_run;
        let mut pods = ctx.pods_by_node.get(name).cloned().unwrap_or_default();
        if !should_run {
            if !pods.is_empty() {
                misscheduled += 1;
            }
            continue;
        }
        desired += 1;
        sort_oldest_first(&mut pods);
        let Some(oldest) = pods.first() else {
            continue;
        };
        current += 1;
        if objects::is_pod_ready(oldest) {
            ready += 1;
            if is_pod_available(oldest, ctx.min_ready_seconds, ctx.now) {
                available += 1;
            }
        }
        if ctx.is_updated(oldest) {
            updated += 1;
        }
    }
    status.observed_generation = ctx.ds.metadata.generation;
    status.desired_number_scheduled = desired;
    status.current_number_scheduled = current;
    status.number_misscheduled = misscheduled;
    status.number_ready = ready;
    status.updated_number_scheduled = Some(updated);
    status.number_available = Some(available);
    status.number_unavailable = Some(desired - available);
    status
}

/// Whether the computed status must be written (upstream skips identical counters when the
/// generation is already observed).
pub(super) fn differs(
    old: Option<&DaemonSetStatus>,
    new: &DaemonSetStatus,
    generation: Option<i64>,
) -> bool {
    let Some(old) = old else {
        return true;
    };
    let counters = |s: &DaemonSetStatus| {
        (
            s.desired_number_scheduled,
            s.current_number_scheduled,
            s.number_misscheduled,
            s.number_ready,
            s.updated_number_scheduled.unwrap_or(0),
            s.number_available.unwrap_or(0),
            s.number_unavailable.unwrap_or(0),
            s.collision_count,
        )
    };
    counters(old) != counters(new) || old.observed_generation.unwrap_or(0) < generation.unwrap_or(0)
}
