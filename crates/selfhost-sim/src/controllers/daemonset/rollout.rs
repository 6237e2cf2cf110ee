//! `RollingUpdate` (upstream `rollingUpdate`, `updatedDesiredNodeCounts`, `SurgeCount`,
//! `UnavailableCount`).
//!
//! Without surge, old pods are deleted while the number of unavailable nodes stays within
//! `maxUnavailable`; the core loop creates the replacement once the old pod is gone. With
//! surge, a new pod is created next to an available old one (at most `maxSurge` at a time) and
//! the old one is deleted once the new one is available.

use k8s_openapi::api::apps::v1::{DaemonSet, RollingUpdateDaemonSet};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use super::{Context, DaemonSetError, DeleteReason};
use crate::controllers::objects::{self, is_pod_available};

/// `intstr.GetScaledValueFromIntOrPercent`: an integer as is, or `"N%"` of `total`, rounded up
/// or down.
pub fn scaled_value(value: &IntOrString, total: i32, round_up: bool) -> Result<i32, String> {
    match value {
        IntOrString::Int(n) => Ok(*n),
        IntOrString::String(s) => {
            let percent: i64 = s
                .strip_suffix('%')
                .and_then(|p| p.parse().ok())
                .ok_or_else(|| format!("invalid value for IntOrString: invalid type: string is not a percentage: {s:?}"))?;
            let product = percent * i64::from(total);
            let scaled = if round_up {
                product.div_euclid(100) + i64::from(product.rem_euclid(100) != 0)
            } else {
                product.div_euclid(100)
            };
            i32::try_from(scaled).map_err(|_| format!("percentage {s:?} is out of range"))
        }
    }
}

fn rolling_update_params(ds: &DaemonSet) -> Option<&RollingUpdateDaemonSet> {
    ds.spec
        .as_ref()?
        .update_strategy
        .as_ref()?
        .rolling_update
        .as_ref()
}

/// Whether the update strategy is `RollingUpdate` (the default when unset).
pub fn is_rolling_update(ds: &DaemonSet) -> bool {
    let strategy = ds
        .spec
        .as_ref()
        .and_then(|s| s.update_strategy.as_ref())
        .and_then(|u| u.type_.as_deref());
    strategy.is_none_or(|t| t == "RollingUpdate")
}

/// `maxSurge` scaled to `desired` pods, rounded up (zero unless RollingUpdate with a surge).
///
/// # Errors
/// `maxSurge` is a string that is not a percentage.
pub fn surge_count(ds: &DaemonSet, desired: i32) -> Result<i32, DaemonSetError> {
    let Some(max_surge) = rolling_update_params(ds).and_then(|r| r.max_surge.as_ref()) else {
        return Ok(0);
    };
    if !is_rolling_update(ds) {
        return Ok(0);
    }
    scaled_value(max_surge, desired, true).map_err(DaemonSetError::InvalidMaxSurge)
}

/// `maxUnavailable` scaled to `desired` pods, rounded up (the apiserver's default of 1 when
/// unset; zero unless RollingUpdate).
///
/// # Errors
/// `maxUnavailable` is a string that is not a percentage.
pub fn unavailable_count(ds: &DaemonSet, desired: i32) -> Result<i32, DaemonSetError> {
    if !is_rolling_update(ds) {
        return Ok(0);
    }
    let default = IntOrString::Int(1);
    let max_unavailable = rolling_update_params(ds)
        .and_then(|r| r.max_unavailable.as_ref())
        .unwrap_or(&default);
    scaled_value(max_unavailable, desired, true).map_err(DaemonSetError::InvalidMaxUnavailable)
}

/// The one new and one old non-terminating pod on a node; `None` when there are more (the core
/// loop prunes those first).
fn updated_and_old<'p>(
    ctx: &Context<'_>,
    pods: &[&'p Pod],
) -> Option<(Option<&'p Pod>, Option<&'p Pod>)> {
    let (mut new, mut old) = (None, None);
    for pod in pods
        .iter()
        .filter(|p| !objects::is_terminating(&p.metadata))
    {
        let slot = if ctx.is_updated(pod) {
            &mut new
        } else {
            &mut old
        };
        if slot.is_some() {
            return None;
        }
        *slot = Some(*pod);
    }
    Some((new, old))
}

fn name(pod: &Pod) -> String {
    pod.metadata.name.clone().unwrap_or_default()
}

/// What the rolling update wants done in this sync.
#[derive(Debug, Default)]
pub(super) struct Wave {
    /// Nodes that get a new pod (surge only).
    pub creates: Vec<String>,
    /// Pods to delete.
    pub deletes: Vec<(String, DeleteReason)>,
}

/// The rolling update's deletions and (with surge) creations.
pub(super) fn rolling_update(ctx: &Context<'_>) -> Result<Wave, DaemonSetError> {
    let desired = ctx.desired_nodes().len();
    let desired_i32 = i32::try_from(desired).unwrap_or(i32::MAX);
    let max_surge = surge_count(ctx.ds, desired_i32)?;
    let mut max_unavailable = unavailable_count(ctx.ds, desired_i32)?;
    if desired > 0 && max_unavailable == 0 && max_surge == 0 {
        // An impossible configuration; upstream falls back to accepting one unavailable pod.
        max_unavailable = 1;
    }
    let available = |pod: &Pod| is_pod_available(pod, ctx.min_ready_seconds, ctx.now);
    // Every node that has pods, plus every node that should have one.
    let mut node_names: Vec<&str> = ctx.pods_by_node.keys().map(String::as_str).collect();
    node_names.extend(ctx.desired_nodes());
    node_names.sort_unstable();
    node_names.dedup();
    let no_pods: Vec<&Pod> = Vec::new();
    let pods_on = |node: &str| ctx.pods_by_node.get(node).unwrap_or(&no_pods);

    if max_surge == 0 {
        let mut unavailable = 0;
        let mut replacements = Vec::new();
        let mut candidates = Vec::new();
        for node in &node_names {
            let Some((new, old)) = updated_and_old(ctx, pods_on(node)) else {
                unavailable += 1;
                continue;
            };
            match (new, old) {
                (None, None) | (Some(_), Some(_)) => unavailable += 1,
                (Some(new), None) => {
                    if !available(new) {
                        unavailable += 1;
                    }
                }
                (None, Some(old)) => {
                    if !available(old) {
                        replacements.push(name(old));
                        unavailable += 1;
                    } else if unavailable < max_unavailable {
                        candidates.push(name(old));
                    }
                }
            }
        }
        let room = usize::try_from(max_unavailable.saturating_sub(unavailable)).unwrap_or(0);
        let deletes = replacements
            .into_iter()
            .chain(candidates.into_iter().take(room))
            .map(|n| (n, DeleteReason::RollingUpdate))
            .collect();
        return Ok(Wave {
            creates: Vec::new(),
            deletes,
        });
    }

    let mut deletes = Vec::new();
    let mut sunset = Vec::new();
    let mut candidates = Vec::new();
    let mut allowed = Vec::new();
    let (mut surging, mut available_nodes) = (0_i32, 0_usize);
    for node in &node_names {
        let Some((new, old)) = updated_and_old(ctx, pods_on(node)) else {
            surging += 1;
            continue;
        };
        if old.or(new).is_some_and(available) {
            available_nodes += 1;
        }
        let should_run = ctx
            .node(node)
            .is_some_and(|n| super::template::placement(ctx.ds, n).should_run);
        match (new, old) {
            (_, None) => {}
            (None, Some(old)) if !available(old) => {
                if should_run {
                    allowed.push(node.to_string());
                } else {
                    deletes.push((name(old), DeleteReason::RollingUpdate));
                }
            }
            (None, Some(old)) => {
                if !should_run {
                    sunset.push(name(old));
                } else if surging < max_surge {
                    candidates.push(node.to_string());
                }
            }
            (Some(new), Some(old)) => {
                if available(new) {
                    deletes.push((name(old), DeleteReason::Replaced));
                } else {
                    surging += 1;
                }
            }
        }
    }
    // With surge the owner expects full availability: an old pod on a node that no longer
    // qualifies goes only when enough pods elsewhere are available.
    let spare = available_nodes.saturating_sub(desired);
    deletes.extend(
        sunset
            .into_iter()
            .take(spare)
            .map(|n| (n, DeleteReason::NodeNotEligible)),
    );
    let room = usize::try_from(max_surge.saturating_sub(surging)).unwrap_or(0);
    let creates = allowed
        .into_iter()
        .chain(candidates.into_iter().take(room))
        .collect();
    Ok(Wave { creates, deletes })
}
