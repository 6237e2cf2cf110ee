//! What one decision returns: one step of a conversion, with its stable name for events and
//! its description for people.

use std::fmt;

use serde::Serialize;

use super::LeaseHandOver;

/// One step of a conversion.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case", tag = "step")]
pub enum ConvertStep {
    /// Create the self-hosted DaemonSet from the static manifest on disk.
    CreateDaemonSet,
    /// Add the node gate to a DaemonSet that lacks it (with `OnDelete`, see
    /// [`crate::conversion::gate_daemonset`]).
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
    /// Write the node's API front's static manifest.
    WriteFront,
    /// Remove the node's API front's static manifest.
    RemoveFront,
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
            ConvertStep::WriteFront => "write-front",
            ConvertStep::RemoveFront => "remove-front",
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
            ConvertStep::WriteFront => f.write_str(
                "write the static manifest of the node's API front, which takes the node's API \
                 address and passes connections to the kube-apiserver that serves",
            ),
            ConvertStep::RemoveFront => f.write_str(
                "remove the static manifest of the node's API front: the static kube-apiserver \
                 serves the node's API address again",
            ),
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
