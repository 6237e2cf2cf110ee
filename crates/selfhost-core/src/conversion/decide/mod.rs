//! What to do next on one node for one component, in either direction, from what the cluster
//! and the node's disk show now. Nothing is remembered between decisions except which way the
//! run is going (converting, or restoring after a failure), so a run stopped anywhere is
//! continued by running the command again.
//!
//! To self-hosted, per component on node N:
//! create the DaemonSet (gated) → label N → the DaemonSet pod starts beside the static pod →
//! when it *serves* (and the node's checkpointer keeps it, where one is installed, and, for a
//! kube-apiserver behind the node's API front, the front runs) → move the static manifest aside → the mirror pod disappears → the DaemonSet pod serves → done.
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
//! beside the DaemonSet pod and serves → the node's API front, if any, is removed → unlabel N → the DaemonSet controller retires its pod
//! there → when no node is labelled any more and the DaemonSet has no pod, delete it (orphan
//! policy, so that nothing it might still own is taken down with it) → done.
//!
//! Both ways, a controller-manager or scheduler that stopped keeps its leader Lease until it
//! expires. Once its process is confirmed gone (the upgrade's rule, [`lease_hand_over`]),
//! the Lease is handed over before anything else, and a component is done only when a leader
//! holds its Lease again.
//!
//! # Phases
//!
//! Every observation is in exactly one [`ConvertPhase`] ([`phase()`]), and each phase has one
//! decision. This file classifies the observation (`locate`, in the order above) and
//! dispatches to the phase's decision with one `match`; leadership comes after, around
//! whatever the phase decided (`leader.rs`).
//!
//! | direction | phase | what is true on the node |
//! |---|---|---|
//! | to self-hosted | [`NoStaticManifest`](ConvertPhase::NoStaticManifest) | no static manifest, on disk or moved aside |
//! | | [`RetiringStaticPod`](ConvertPhase::RetiringStaticPod) | the static manifest is moved aside |
//! | | [`CreatingDaemonSet`](ConvertPhase::CreatingDaemonSet) | no DaemonSet, or an old one being deleted |
//! | either | [`GatingDaemonSet`](ConvertPhase::GatingDaemonSet) | the DaemonSet is not gated |
//! | to self-hosted | [`LabellingNode`](ConvertPhase::LabellingNode) | the node is not labelled |
//! | | [`StartingDaemonSetPod`](ConvertPhase::StartingDaemonSetPod) | the node is labelled, the static pod still runs |
//! | | [`RestoringStatic`](ConvertPhase::RestoringStatic) | a failure: undoing |
//! | to static | [`NoDaemonSet`](ConvertPhase::NoDaemonSet) | no DaemonSet |
//! | | [`WritingManifest`](ConvertPhase::WritingManifest) | no static manifest on disk |
//! | | [`StartingStaticPod`](ConvertPhase::StartingStaticPod) | the manifest is written, the node still labelled |
//! | | [`RetiringDaemonSetPod`](ConvertPhase::RetiringDaemonSetPod) | the node is unlabelled |
//! | | [`RestoringSelfHosted`](ConvertPhase::RestoringSelfHosted) | a failure: undoing |
//!
//! What a decision reads, what it returns and how it judges a pod are beside this file
//! (`node_component.rs`, `step.rs`, `pod_start.rs`); the phases' decisions, each direction
//! with its undoing, are in `to_self_hosted.rs` and `to_static.rs`.
//!
//! [`lease_hand_over`]: crate::pivot::lease_hand_over

mod front;
mod leader;
mod node_component;
mod phase;
mod pod_start;
mod step;
mod to_self_hosted;
mod to_static;
mod wait;

use serde::Serialize;

use crate::observation::DaemonSetObservation;
use leader::with_leader;
use to_self_hosted::{
    creating_daemonset, labelling_node, no_static_manifest, restore_static, retiring_static_pod,
    starting_daemonset_pod,
};
use to_static::{
    no_daemonset, restore_self_hosted, retiring_daemonset_pod, starting_static_pod,
    writing_manifest,
};

pub use super::leadership::LeaseHandOver;
pub use node_component::{NodeComponent, NodeFront};
pub use phase::ConvertPhase;
pub use pod_start::stuck;
pub use step::ConvertStep;

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

/// Whether the node is where `direction` leads in everything this tool changes (files,
/// DaemonSet, labels), so that a wait decided now waits only for what the kubelet, the
/// controllers and leader election do by themselves: a mirror pod to go, a pod to be judged
/// serving, a leader to take the Lease. A run started then has nothing to do but that wait.
pub fn awaits_only_the_cluster(direction: Direction, obs: &NodeComponent) -> bool {
    match direction {
        Direction::ToSelfHosted => {
            obs.front
                .as_ref()
                .is_none_or(|f| !f.wanted || f.manifest_on_disk)
                && !obs.manifest_on_disk
                && obs.daemonset.is_some()
                && obs.daemonset_gated
                && obs.node_gated()
                && obs
                    .daemonset_pods_here()
                    .into_iter()
                    .all(|p| stuck(p).is_none())
        }
        Direction::ToStatic => {
            obs.front.as_ref().is_none_or(|f| !f.manifest_on_disk)
                && obs.daemonset.is_none()
                && obs.manifest_on_disk
                && obs.mirror.as_ref().is_none_or(|p| stuck(p).is_none())
        }
    }
}

/// The phase `obs` is in, going `direction` in `mode`: what [`next_step`] decides by.
pub fn phase(direction: Direction, mode: &Mode, obs: &NodeComponent) -> ConvertPhase {
    locate(direction, mode, obs).phase()
}

/// The next step of `direction` in `mode` for `obs`: the step its phase's decision gives,
/// unless leadership comes first.
pub fn next_step(direction: Direction, mode: &Mode, obs: &NodeComponent) -> ConvertStep {
    let step = match locate(direction, mode, obs) {
        Located::CreatingDaemonSet { old } => creating_daemonset(obs, old),
        Located::GatingDaemonSet { ds } => gating_daemonset(obs, ds),
        Located::LabellingNode => labelling_node(obs),
        Located::StartingDaemonSetPod => starting_daemonset_pod(obs),
        Located::RetiringStaticPod => retiring_static_pod(obs),
        Located::NoStaticManifest => no_static_manifest(obs),
        Located::RestoringStatic { reason } => restore_static(obs, reason),
        Located::NoDaemonSet => no_daemonset(obs),
        Located::WritingManifest => writing_manifest(obs),
        Located::StartingStaticPod => starting_static_pod(obs),
        Located::RetiringDaemonSetPod { ds } => retiring_daemonset_pod(obs, ds),
        Located::RestoringSelfHosted { reason } => restore_self_hosted(obs, reason),
    };
    with_leader(obs, step)
}

/// A [`ConvertPhase`], with what its decision reads.
enum Located<'a> {
    CreatingDaemonSet {
        /// An old DaemonSet being deleted, to wait for.
        old: Option<&'a DaemonSetObservation>,
    },
    GatingDaemonSet {
        ds: &'a DaemonSetObservation,
    },
    LabellingNode,
    StartingDaemonSetPod,
    RetiringStaticPod,
    NoStaticManifest,
    RestoringStatic {
        /// What failed.
        reason: &'a str,
    },
    NoDaemonSet,
    WritingManifest,
    StartingStaticPod,
    RetiringDaemonSetPod {
        ds: &'a DaemonSetObservation,
    },
    RestoringSelfHosted {
        /// What failed.
        reason: &'a str,
    },
}

impl Located<'_> {
    fn phase(&self) -> ConvertPhase {
        match self {
            Located::CreatingDaemonSet { .. } => ConvertPhase::CreatingDaemonSet,
            Located::GatingDaemonSet { .. } => ConvertPhase::GatingDaemonSet,
            Located::LabellingNode => ConvertPhase::LabellingNode,
            Located::StartingDaemonSetPod => ConvertPhase::StartingDaemonSetPod,
            Located::RetiringStaticPod => ConvertPhase::RetiringStaticPod,
            Located::NoStaticManifest => ConvertPhase::NoStaticManifest,
            Located::RestoringStatic { .. } => ConvertPhase::RestoringStatic,
            Located::NoDaemonSet => ConvertPhase::NoDaemonSet,
            Located::WritingManifest => ConvertPhase::WritingManifest,
            Located::StartingStaticPod => ConvertPhase::StartingStaticPod,
            Located::RetiringDaemonSetPod { .. } => ConvertPhase::RetiringDaemonSetPod,
            Located::RestoringSelfHosted { .. } => ConvertPhase::RestoringSelfHosted,
        }
    }
}

/// Where the node stands, going `direction` in `mode`.
fn locate<'a>(direction: Direction, mode: &'a Mode, obs: &'a NodeComponent) -> Located<'a> {
    match (direction, mode) {
        (Direction::ToSelfHosted, Mode::Forward) => towards_self_hosted(obs),
        (Direction::ToSelfHosted, Mode::Restore { reason }) => Located::RestoringStatic { reason },
        (Direction::ToStatic, Mode::Forward) => towards_static(obs),
        (Direction::ToStatic, Mode::Restore { reason }) => Located::RestoringSelfHosted { reason },
    }
}

/// Towards self-hosted: first whether the static manifest is still on disk, then how far the
/// DaemonSet has come.
fn towards_self_hosted(obs: &NodeComponent) -> Located<'_> {
    if !obs.manifest_on_disk {
        // Handed over already, by this run or an earlier one — or nothing to convert.
        return if obs.manifest_in_backup {
            Located::RetiringStaticPod
        } else {
            Located::NoStaticManifest
        };
    }
    let Some(ds) = &obs.daemonset else {
        return Located::CreatingDaemonSet { old: None };
    };
    if ds.deleting_since.is_some() {
        return Located::CreatingDaemonSet { old: Some(ds) };
    }
    if !obs.daemonset_gated {
        return Located::GatingDaemonSet { ds };
    }
    if !obs.node_gated() {
        return Located::LabellingNode;
    }
    Located::StartingDaemonSetPod
}

/// Towards static: first whether the DaemonSet exists, then how far the static pod has come.
fn towards_static(obs: &NodeComponent) -> Located<'_> {
    let Some(ds) = &obs.daemonset else {
        return Located::NoDaemonSet;
    };
    if !obs.daemonset_gated {
        return Located::GatingDaemonSet { ds };
    }
    if !obs.manifest_on_disk {
        return Located::WritingManifest;
    }
    if obs.node_gated() {
        Located::StartingStaticPod
    } else {
        Located::RetiringDaemonSetPod { ds }
    }
}

/// Gates a DaemonSet that is not: every node that runs one of its pods is labelled first, so
/// that gating the template keeps those pods where they are.
fn gating_daemonset(obs: &NodeComponent, ds: &DaemonSetObservation) -> ConvertStep {
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
