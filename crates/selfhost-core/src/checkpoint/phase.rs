//! The phases of one component on one node, read from one observation.

use serde::{Serialize, Serializer};

/// Where one component stands on the node, and so which step the checkpointer takes
/// ([`super::next_step`], classified by [`super::phase()`]).
///
/// In ordinary operation a component goes [`Unserved`](CheckpointPhase::Unserved) →
/// [`Soaking`](CheckpointPhase::Soaking) → [`Keeping`](CheckpointPhase::Keeping) →
/// [`Kept`](CheckpointPhase::Kept), and again from `Unserved` with each upgrade. When the API
/// goes: [`InGrace`](CheckpointPhase::InGrace) → [`Orphaned`](CheckpointPhase::Orphaned)
/// (after [`AwaitingApiServer`](CheckpointPhase::AwaitingApiServer) for the controllers) →
/// [`Activated`](CheckpointPhase::Activated) → [`TakingOver`](CheckpointPhase::TakingOver) →
/// back to keeping.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CheckpointPhase {
    /// A copy is active, and kubeadm's static pod of the component is in the manifests
    /// directory (a conversion back to static pods went on while the copy ran): the static
    /// pod takes its place, and the copy is retired.
    Superseded,
    /// A copy is active, the API answers and this node's DaemonSet pod serves: the DaemonSet
    /// pod has taken over, and the copy is retired.
    TakingOver,
    /// A copy is active, and the API is unreachable or the DaemonSet pod does not serve yet:
    /// the copy stays.
    Activated,
    /// No copy is active, the API answers, and the leader Lease of the controller-manager or
    /// scheduler is held by a process of this node that has stopped (a retired copy): the
    /// Lease is handed over rather than left to expire.
    HolderGone,
    /// No copy is active, the API answers, and this node's DaemonSet pod is absent or does
    /// not serve (starting, failing, or replaced by an upgrade): there is nothing to keep.
    Unserved,
    /// The API answers and the DaemonSet pod serves, for less than the soak yet.
    Soaking,
    /// The DaemonSet pod has served for the soak, and no checkpoint of its revision is
    /// stored: it is kept.
    Keeping,
    /// The DaemonSet pod has served for the soak, and the checkpoint is of its revision.
    Kept,
    /// No copy is active, the API is unreachable, and kubeadm's static pod of the component
    /// is in the manifests directory: the component is not self-hosted on this node (or not
    /// yet), and its checkpoint is never activated.
    StaticOnNode,
    /// The API is unreachable, and a process of the component serves on the node (its
    /// DaemonSet pod, still run by the kubelet, or a static pod): activating would only
    /// start a second one.
    ServedLocally,
    /// The API is unreachable, nothing of the component serves on the node, and no
    /// checkpoint is stored: there is nothing to activate.
    Unkept,
    /// The API is unreachable for less than the grace: it may be one restart.
    InGrace,
    /// The controller-manager or scheduler would be activated, but no kube-apiserver copy is
    /// active and none serves on the node: without one they cannot work.
    AwaitingApiServer,
    /// The API has been unreachable for the grace, nothing of the component serves on the
    /// node, and a checkpoint is stored: it is activated.
    Orphaned,
}

impl CheckpointPhase {
    /// Every phase, in the order `decide.rs` tells them apart.
    pub const ALL: [CheckpointPhase; 14] = [
        CheckpointPhase::Superseded,
        CheckpointPhase::TakingOver,
        CheckpointPhase::Activated,
        CheckpointPhase::HolderGone,
        CheckpointPhase::Unserved,
        CheckpointPhase::Soaking,
        CheckpointPhase::Keeping,
        CheckpointPhase::Kept,
        CheckpointPhase::StaticOnNode,
        CheckpointPhase::ServedLocally,
        CheckpointPhase::Unkept,
        CheckpointPhase::InGrace,
        CheckpointPhase::AwaitingApiServer,
        CheckpointPhase::Orphaned,
    ];

    /// A stable kebab-case name, for events and reports.
    pub fn name(self) -> &'static str {
        match self {
            CheckpointPhase::Superseded => "superseded",
            CheckpointPhase::TakingOver => "taking-over",
            CheckpointPhase::Activated => "activated",
            CheckpointPhase::HolderGone => "holder-gone",
            CheckpointPhase::Unserved => "unserved",
            CheckpointPhase::Soaking => "soaking",
            CheckpointPhase::Keeping => "keeping",
            CheckpointPhase::Kept => "kept",
            CheckpointPhase::StaticOnNode => "static-on-node",
            CheckpointPhase::ServedLocally => "served-locally",
            CheckpointPhase::Unkept => "unkept",
            CheckpointPhase::InGrace => "in-grace",
            CheckpointPhase::AwaitingApiServer => "awaiting-apiserver",
            CheckpointPhase::Orphaned => "orphaned",
        }
    }

    /// A few words an operator reads: what the checkpointer is doing for the component.
    pub fn describe(self) -> &'static str {
        match self {
            CheckpointPhase::Superseded => "kubeadm's static pod is back: retiring the copy",
            CheckpointPhase::TakingOver => "the DaemonSet pod serves again: retiring the copy",
            CheckpointPhase::Activated => "the checkpoint runs as a static pod",
            CheckpointPhase::HolderGone => "the leader stopped here: handing its Lease over",
            CheckpointPhase::Unserved => "no serving DaemonSet pod to keep",
            CheckpointPhase::Soaking => "the DaemonSet pod serves: soaking before keeping it",
            CheckpointPhase::Keeping => "keeping a checkpoint of the DaemonSet pod",
            CheckpointPhase::Kept => "the DaemonSet pod serves and is kept",
            CheckpointPhase::StaticOnNode => "kubeadm's static pod runs it here",
            CheckpointPhase::ServedLocally => "the API is unreachable; the component serves here",
            CheckpointPhase::Unkept => "the API is unreachable and nothing is kept",
            CheckpointPhase::InGrace => "the API is unreachable: waiting out a restart",
            CheckpointPhase::AwaitingApiServer => "waiting for a kube-apiserver on the node",
            CheckpointPhase::Orphaned => "the API is gone: activating the checkpoint",
        }
    }
}

/// Serialised as its [`name`](CheckpointPhase::name).
impl Serialize for CheckpointPhase {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.name())
    }
}
