//! What to do next on one node for one component, in either direction, from what the cluster
//! and the node's disk show now. Nothing is remembered between decisions except which way the
//! run is going (converting, or restoring after a failure), so a run stopped anywhere is
//! continued by running the command again.
//!
//! To self-hosted, per component on node N:
//! create the DaemonSet (gated) → label N → the DaemonSet pod starts beside the static pod →
//! when it *serves* → move the static manifest aside → the mirror pod disappears → the
//! DaemonSet pod serves → done.
//!
//! A static pod without port sharing holds its port alone: the DaemonSet pod cannot bind it
//! and crashes, which proves its image is on the node. Then the static manifest is rewritten
//! with `--permit-port-sharing=true` (the original kept in the backup directory), the kubelet
//! restarts the static pod from the image it has — the only gap, one pod start — and the
//! hand-over goes on as with port sharing. Undoing that (a failure) puts the original back
//! once the DaemonSet pod has left the node.
//!
//! To static, per component on node N:
//! gate the DaemonSet if it is not → write the static manifest → the static pod starts
//! beside the DaemonSet pod and serves → unlabel N → the DaemonSet controller retires its pod
//! there → when no node is labelled any more and the DaemonSet has no pod, delete it (orphan
//! policy, so that nothing it might still own is taken down with it) → done.
//!
//! Both ways, a controller-manager or scheduler that stopped keeps its leader Lease until it
//! expires. Once its process is confirmed gone (the upgrade's rule, [`lease_hand_over`]),
//! the Lease is handed over before anything else, and a component is done only when a leader
//! holds its Lease again.
//!
//! The decision is in this file; what it reads, what it returns and how it judges a pod are
//! beside it (`node_component.rs`, `step.rs`, `pod_start.rs`), and the two directions, each
//! with its undoing, in `to_self_hosted.rs` and `to_static.rs`.
//!
//! [`lease_hand_over`]: crate::pivot::lease_hand_over

mod node_component;
mod pod_start;
mod step;
mod to_self_hosted;
mod to_static;

use serde::Serialize;

use crate::observation::DaemonSetObservation;

pub use super::leadership::LeaseHandOver;
pub use node_component::NodeComponent;
pub use pod_start::stuck;
pub use step::ConvertStep;
use to_self_hosted::{restore_static, to_self_hosted};
use to_static::{restore_self_hosted, to_static};

/// Which way a conversion goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Direction {
    /// kubeadm static pods → self-hosted DaemonSets.
    ToSelfHosted,
    /// Self-hosted DaemonSets → static pods.
    ToStatic,
}

/// Whether the run is converting or undoing its own work after a failure.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case", tag = "mode")]
pub enum Mode {
    /// Moving towards the direction's end state.
    Forward,
    /// Putting the node back as it was, because of `reason`.
    Restore {
        /// What failed.
        reason: String,
    },
}

fn wait(obs: &NodeComponent, condition: &str, pending: Vec<String>) -> ConvertStep {
    if obs.timed_out() {
        let detail = if pending.is_empty() {
            String::new()
        } else {
            format!(" ({})", pending.join("; "))
        };
        return ConvertStep::Fail {
            reason: format!("{condition} did not happen in time{detail}"),
        };
    }
    ConvertStep::Wait {
        condition: condition.to_string(),
        pending,
    }
}

fn why_not(serving: &Result<(), String>) -> Vec<String> {
    serving.as_ref().err().cloned().into_iter().collect()
}

/// Whether the node is where `direction` leads in everything this tool changes (files,
/// DaemonSet, labels), so that a wait decided now waits only for what the kubelet, the
/// controllers and leader election do by themselves: a mirror pod to go, a pod to be judged
/// serving, a leader to take the Lease. A run started then has nothing to do but that wait.
pub fn awaits_only_the_cluster(direction: Direction, obs: &NodeComponent) -> bool {
    match direction {
        Direction::ToSelfHosted => {
            !obs.manifest_on_disk
                && obs.daemonset.is_some()
                && obs.daemonset_gated
                && obs.node_gated()
                && obs
                    .daemonset_pods_here()
                    .into_iter()
                    .all(|p| stuck(p).is_none())
        }
        Direction::ToStatic => {
            obs.daemonset.is_none()
                && obs.manifest_on_disk
                && obs.mirror.as_ref().is_none_or(|p| stuck(p).is_none())
        }
    }
}

/// The next step of `direction` in `mode` for `obs`.
pub fn next_step(direction: Direction, mode: &Mode, obs: &NodeComponent) -> ConvertStep {
    let step = match (direction, mode) {
        (Direction::ToSelfHosted, Mode::Forward) => to_self_hosted(obs),
        (Direction::ToSelfHosted, Mode::Restore { reason }) => restore_static(obs, reason),
        (Direction::ToStatic, Mode::Forward) => to_static(obs),
        (Direction::ToStatic, Mode::Restore { reason }) => restore_self_hosted(obs, reason),
    };
    with_leader(obs, step)
}

/// Leadership comes first: a Lease whose holder is confirmed gone is handed over before any
/// other step but a refusal (every moment it stays held is a moment without a leader, and
/// the DaemonSet controller and garbage collector this run relies on are the leader's), and
/// nothing is done (or put back) while no leader holds the Lease.
fn with_leader(obs: &NodeComponent, step: ConvertStep) -> ConvertStep {
    if matches!(step, ConvertStep::Refuse { .. }) {
        return step;
    }
    if let Some(hand_over) = &obs.lease_hand_over {
        return ConvertStep::HandOverLease(hand_over.clone());
    }
    if let Some(wait) = leader_too_new_to_stop(obs, &step) {
        return wait;
    }
    match (&step, &obs.leader) {
        (ConvertStep::Done { .. } | ConvertStep::RolledBack { .. }, Err(why)) => wait(
            obs,
            &format!("a leader of {}", obs.component),
            vec![why.clone()],
        ),
        _ => step,
    }
}

/// A step that stops a process of the component on the node waits while the leader there
/// acquired its Lease within the current second. The kubelet reports container start times
/// in whole seconds, so a process started in that same second could not be told from the
/// holder, and the Lease of a holder that is not proven gone is never handed over: stopping
/// it now would leave the Lease to expire (a whole lease duration without a leader). From the
/// next second on, any process that starts is provably newer.
fn leader_too_new_to_stop(obs: &NodeComponent, step: &ConvertStep) -> Option<ConvertStep> {
    let stops_a_process = matches!(
        step,
        ConvertStep::AddPortSharing
            | ConvertStep::MoveManifestAside
            | ConvertStep::RestoreManifest
            | ConvertStep::RemoveManifest
            | ConvertStep::UnlabelNode { .. }
    );
    let acquired = obs.leader_here_acquired?;
    if !stops_a_process || acquired.as_second() != obs.now.as_second() {
        return None;
    }
    Some(wait(
        obs,
        &format!(
            "the {} leader on {} to hold its Lease into the next second before it is stopped",
            obs.component, obs.node
        ),
        vec![format!(
            "it acquired the Lease at {acquired}: a process started within that second could not \
             be told from it by whole-second start times, and its Lease would be left to expire"
        )],
    ))
}

/// Gates a DaemonSet that is not: every node that runs one of its pods is labelled first, so
/// that gating the template keeps those pods where they are.
fn gate(obs: &NodeComponent, ds: &DaemonSetObservation) -> ConvertStep {
    let unlabelled = ds
        .nodes()
        .into_iter()
        .find(|n| !obs.gated_nodes.iter().any(|g| g == n));
    match unlabelled {
        Some(node) => ConvertStep::LabelNode {
            node: node.to_string(),
        },
        None => ConvertStep::GateDaemonSet,
    }
}
