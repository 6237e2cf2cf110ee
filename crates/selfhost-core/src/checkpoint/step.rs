//! What one decision returns: one step of the checkpointer for one component, with its stable
//! name for events and one line for people.

use std::fmt;

use k8s_openapi::jiff::Timestamp;
use serde::Serialize;

/// What the checkpointer does next for one component on the node.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case", tag = "step")]
pub enum CheckpointStep {
    /// Write a checkpoint of this node's DaemonSet pod to the node's disk, replacing the one
    /// stored.
    Keep {
        /// The pod to write it from; a pod with another uid is not written.
        pod_uid: String,
        /// The pod's DaemonSet revision.
        revision: String,
        /// The pod's image.
        image: String,
    },
    /// Put the stored checkpoint into the kubelet's manifests directory, so that the kubelet
    /// runs it as a static pod.
    Activate {
        /// The checkpoint's DaemonSet revision.
        revision: String,
        /// The checkpoint's image.
        image: String,
    },
    /// Remove the active copy from the manifests directory: the DaemonSet pod serves.
    Retire {
        /// The copy's DaemonSet revision.
        revision: String,
    },
    /// Release the leader Lease whose holder ran on this node and has stopped (write it back
    /// with an empty holder, on condition that it is still the one read), so that a standby
    /// takes it at its next retry instead of after the lease duration.
    HandOver {
        /// The Lease's name.
        lease: String,
        /// Its holder identity.
        holder: String,
        /// Its resourceVersion as read: the release's precondition.
        resource_version: String,
    },
    /// Nothing to do until the observation changes, or until `recheck_at`.
    Wait {
        /// What the checkpointer waits for, in words.
        reason: String,
        /// When the decision changes if nothing else does (a soak or a grace ending).
        recheck_at: Option<Timestamp>,
    },
    /// All is as it should be: the serving DaemonSet pod is kept.
    Nothing {
        /// What was found, in words.
        summary: String,
    },
}

impl CheckpointStep {
    /// The step's stable name, for events.
    pub fn name(&self) -> &'static str {
        match self {
            CheckpointStep::Keep { .. } => "keep",
            CheckpointStep::Activate { .. } => "activate",
            CheckpointStep::Retire { .. } => "retire",
            CheckpointStep::HandOver { .. } => "hand-over",
            CheckpointStep::Wait { .. } => "wait",
            CheckpointStep::Nothing { .. } => "nothing",
        }
    }

    /// Whether the step changes the node's manifests directory, and so which pods the kubelet
    /// runs.
    pub fn changes_static_pods(&self) -> bool {
        matches!(
            self,
            CheckpointStep::Activate { .. } | CheckpointStep::Retire { .. }
        )
    }
}

impl fmt::Display for CheckpointStep {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CheckpointStep::Keep {
                revision, image, ..
            } => write!(
                f,
                "keep a checkpoint of the DaemonSet pod (revision {revision}, {image})"
            ),
            CheckpointStep::Activate { revision, image } => write!(
                f,
                "activate the checkpoint of revision {revision} ({image}) as a static pod"
            ),
            CheckpointStep::Retire { revision } => write!(
                f,
                "retire the static copy of revision {revision}: the DaemonSet pod serves"
            ),
            CheckpointStep::HandOver { lease, holder, .. } => write!(
                f,
                "release the Lease {lease}: its holder {holder} ran on this node and has stopped"
            ),
            CheckpointStep::Wait { reason, .. } => write!(f, "wait: {reason}"),
            CheckpointStep::Nothing { summary } => f.write_str(summary),
        }
    }
}
