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
//! [`lease_hand_over`]: crate::pivot::lease_hand_over

use std::fmt;

use k8s_openapi::jiff::Timestamp;
use serde::Serialize;

use crate::component::Component;
use crate::observation::{DaemonSetObservation, PodObservation};

pub use super::leadership::LeaseHandOver;

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

/// Everything one decision needs about one component on one node.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct NodeComponent {
    /// The component.
    pub component: Component,
    /// The node this run converts.
    pub node: String,
    /// When the observation was made.
    pub now: Timestamp,
    /// When waiting stops being reasonable; a wait past it fails.
    pub deadline: Timestamp,
    /// Whether the component's manifest is in the node's manifests directory.
    pub manifest_on_disk: bool,
    /// Whether a manifest moved aside by a conversion is in the backup directory.
    pub manifest_in_backup: bool,
    /// Whether the static manifest in the manifests directory (or, when it is not there, the
    /// one in the backup directory) permits port sharing.
    pub static_permits_port_sharing: bool,
    /// Whether the manifest in the manifests directory is the backed-up one with port sharing
    /// added (see [`ConvertStep::AddPortSharing`]): the original is in the backup directory.
    pub static_port_sharing_added: bool,
    /// Whether the static pod that runs (its mirror pod) permits port sharing.
    pub mirror_permits_port_sharing: bool,
    /// The self-hosted DaemonSet, with its pods.
    pub daemonset: Option<DaemonSetObservation>,
    /// Whether the DaemonSet's pods require the node gate.
    pub daemonset_gated: bool,
    /// The nodes that carry the component's gate label.
    pub gated_nodes: Vec<String>,
    /// The mirror pod of the static pod on the node.
    pub mirror: Option<PodObservation>,
    /// Whether the static pod serves (`Err`: why not).
    pub mirror_serving: Result<(), String>,
    /// Whether the DaemonSet pod on the node serves (`Err`: why not).
    pub daemonset_pod_serving: Result<(), String>,
    /// The component's leader Lease, when its holder's process is confirmed gone.
    pub lease_hand_over: Option<LeaseHandOver>,
    /// Whether a live leader holds the component's Lease (`Ok` for the apiserver, and when
    /// leader election is off; `Err`: why not).
    pub leader: Result<(), String>,
}

impl NodeComponent {
    fn node_gated(&self) -> bool {
        self.gated_nodes.contains(&self.node)
    }

    /// The DaemonSet's pods on the node (terminating ones included).
    pub fn daemonset_pods_here(&self) -> Vec<&PodObservation> {
        self.daemonset
            .iter()
            .flat_map(|ds| ds.pods_on(&self.node))
            .collect()
    }

    fn timed_out(&self) -> bool {
        self.now >= self.deadline
    }
}

/// One step of a conversion.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case", tag = "step")]
pub enum ConvertStep {
    /// Create the self-hosted DaemonSet from the static manifest on disk.
    CreateDaemonSet,
    /// Add the node gate to a DaemonSet that lacks it (with `OnDelete`, see
    /// [`super::gate_daemonset`]).
    GateDaemonSet,
    /// Label a node with the component's gate.
    LabelNode {
        /// The node.
        node: String,
    },
    /// Remove the component's gate label from a node.
    UnlabelNode {
        /// The node.
        node: String,
    },
    /// Rewrite the static manifest with `--permit-port-sharing=true`, the original kept in
    /// the backup directory (or write that rewrite of the backup when the manifest was moved
    /// aside); the kubelet restarts the static pod, which then shares its port.
    AddPortSharing,
    /// Move the static manifest from the manifests directory to the backup directory.
    MoveManifestAside,
    /// Copy the backed-up manifest back into the manifests directory.
    RestoreManifest,
    /// Write the static manifest (and files from Secrets missing on disk).
    WriteManifest,
    /// Remove a static manifest this conversion wrote.
    RemoveManifest,
    /// Delete the DaemonSet, orphaning anything it still owns.
    DeleteDaemonSet,
    /// Hand the leader Lease of a process that is gone over to the standbys.
    HandOverLease(LeaseHandOver),
    /// Wait for the cluster or the kubelet.
    Wait {
        /// What for.
        condition: String,
        /// What is still missing.
        pending: Vec<String>,
    },
    /// Something failed: undo this node's conversion.
    Fail {
        /// What failed.
        reason: String,
    },
    /// The component is where the direction leads.
    Done {
        /// What was found, in words.
        summary: String,
    },
    /// Refused before changing anything.
    Refuse {
        /// Why.
        reason: String,
        /// What to do.
        fix: String,
    },
    /// The node is back as it was after a failure.
    RolledBack {
        /// What failed.
        reason: String,
    },
}

impl ConvertStep {
    /// The step's stable name, for events.
    pub fn name(&self) -> &'static str {
        match self {
            ConvertStep::CreateDaemonSet => "create-daemonset",
            ConvertStep::GateDaemonSet => "gate-daemonset",
            ConvertStep::LabelNode { .. } => "label-node",
            ConvertStep::UnlabelNode { .. } => "unlabel-node",
            ConvertStep::AddPortSharing => "add-port-sharing",
            ConvertStep::MoveManifestAside => "move-manifest-aside",
            ConvertStep::RestoreManifest => "restore-manifest",
            ConvertStep::WriteManifest => "write-manifest",
            ConvertStep::RemoveManifest => "remove-manifest",
            ConvertStep::DeleteDaemonSet => "delete-daemonset",
            ConvertStep::HandOverLease(_) => "hand-over-lease",
            ConvertStep::Wait { .. } => "wait",
            ConvertStep::Fail { .. } => "fail",
            ConvertStep::Done { .. } => "done",
            ConvertStep::Refuse { .. } => "refuse",
            ConvertStep::RolledBack { .. } => "rolled-back",
        }
    }
}

impl fmt::Display for ConvertStep {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ConvertStep::CreateDaemonSet => {
                f.write_str("create the self-hosted DaemonSet from the static manifest")
            }
            ConvertStep::GateDaemonSet => f.write_str(
                "make the DaemonSet run only on labelled nodes (update strategy OnDelete)",
            ),
            ConvertStep::LabelNode { node } => write!(f, "label node {node}"),
            ConvertStep::UnlabelNode { node } => write!(f, "remove the label of node {node}"),
            ConvertStep::AddPortSharing => f.write_str(
                "restart the static pod with --permit-port-sharing=true (the original manifest \
                 kept in the backup directory)",
            ),
            ConvertStep::MoveManifestAside => {
                f.write_str("move the static manifest into the backup directory")
            }
            ConvertStep::RestoreManifest => {
                f.write_str("copy the backed-up static manifest back into the manifests directory")
            }
            ConvertStep::WriteManifest => f.write_str("write the static manifest"),
            ConvertStep::RemoveManifest => f.write_str("remove the static manifest written"),
            ConvertStep::DeleteDaemonSet => {
                f.write_str("delete the DaemonSet (orphan policy): no node runs it any more")
            }
            ConvertStep::HandOverLease(h) => write!(
                f,
                "hand Lease {} over: its holder {} is gone ({})",
                h.lease, h.holder, h.why
            ),
            ConvertStep::Wait { condition, .. } => write!(f, "wait for {condition}"),
            ConvertStep::Fail { reason } => write!(f, "failed: {reason}"),
            ConvertStep::Done { summary } => f.write_str(summary),
            ConvertStep::Refuse { reason, fix } => write!(f, "{reason}; {fix}"),
            ConvertStep::RolledBack { reason } => write!(f, "restored after: {reason}"),
        }
    }
}

/// Waiting reasons of a container that will not start without someone changing something.
const STUCK_REASONS: [&str; 6] = [
    "ErrImagePull",
    "ImagePullBackOff",
    "InvalidImageName",
    "ErrImageNeverPull",
    "CreateContainerConfigError",
    "CreateContainerError",
];

/// Why the pod cannot start, if it is stuck (a pull that fails, a bad configuration).
pub fn stuck(pod: &PodObservation) -> Option<String> {
    pod.containers.iter().find_map(|c| {
        let reason = c.state.waiting_reason()?;
        STUCK_REASONS.contains(&reason).then(|| {
            let node = pod.node.as_deref().unwrap_or("(unscheduled)");
            format!("{node}: pod {} cannot start: {reason}", pod.name)
        })
    })
}

/// Whether the pod's image is on the node: its container has run at least once.
fn has_run(pod: &PodObservation) -> bool {
    pod.containers.iter().any(|c| {
        c.restart_count > 0
            || c.last_termination.is_some()
            || !matches!(
                c.state,
                crate::observation::ContainerState::Waiting { .. }
                    | crate::observation::ContainerState::Unknown
            )
    })
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
    match (&step, &obs.leader) {
        (ConvertStep::Done { .. } | ConvertStep::RolledBack { .. }, Err(why)) => wait(
            obs,
            &format!("a leader of {}", obs.component),
            vec![why.clone()],
        ),
        _ => step,
    }
}

fn to_self_hosted(obs: &NodeComponent) -> ConvertStep {
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

fn restore_static(obs: &NodeComponent, reason: &str) -> ConvertStep {
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

fn to_static(obs: &NodeComponent) -> ConvertStep {
    let node = &obs.node;
    let c = obs.component;
    let Some(ds) = &obs.daemonset else {
        if !obs.manifest_on_disk {
            return ConvertStep::Refuse {
                reason: format!("{node} has neither a static manifest of {c} nor its DaemonSet"),
                fix: "check --manifests-dir and --node".to_string(),
            };
        }
        return match &obs.mirror_serving {
            Ok(()) => ConvertStep::Done {
                summary: format!("{node} runs {c} as a static pod"),
            },
            Err(why) => wait(
                obs,
                &format!("the static {c} pod on {node} to serve"),
                vec![why.clone()],
            ),
        };
    };
    let pods_here = obs.daemonset_pods_here();
    if !obs.daemonset_gated {
        return gate(obs, ds);
    }
    if !obs.manifest_on_disk {
        if !obs.node_gated() && pods_here.is_empty() {
            return ConvertStep::Refuse {
                reason: format!(
                    "{node} runs no {c} pod of the DaemonSet and has no static manifest"
                ),
                fix: "run the conversion on a node that runs the control plane".to_string(),
            };
        }
        return ConvertStep::WriteManifest;
    }
    if let Some(reason) = obs.mirror.as_ref().and_then(stuck) {
        return ConvertStep::Fail { reason };
    }
    if obs.node_gated() {
        if let Err(why) = &obs.mirror_serving {
            return wait(
                obs,
                &format!("the static {c} pod on {node} to serve beside the DaemonSet pod"),
                vec![why.clone()],
            );
        }
        return ConvertStep::UnlabelNode { node: node.clone() };
    }
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

fn restore_self_hosted(obs: &NodeComponent, reason: &str) -> ConvertStep {
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
