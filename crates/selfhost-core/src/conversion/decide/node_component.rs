//! What one decision reads: one component on one node, as the cluster and the node's disk
//! show it now.

use k8s_openapi::jiff::Timestamp;
use serde::Serialize;

use crate::component::Component;
use crate::observation::{DaemonSetObservation, PodObservation};

use super::LeaseHandOver;

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
    /// added (see [`ConvertStep::AddPortSharing`](super::ConvertStep::AddPortSharing)): the
    /// original is in the backup directory.
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
    /// Whether the node's checkpointer keeps a checkpoint of that DaemonSet pod's revision
    /// (`None`: no checkpointer is to keep one; `Err`: why not yet).
    pub checkpoint_kept: Option<Result<(), String>>,
    /// The component's leader Lease, when its holder's process is confirmed gone.
    pub lease_hand_over: Option<LeaseHandOver>,
    /// Whether a live leader holds the component's Lease (`Ok` for the apiserver, and when
    /// leader election is off; `Err`: why not).
    pub leader: Result<(), String>,
    /// When the holder of the component's leader Lease acquired it, if that holder may run
    /// on this node: its identity's host part is this node, or tells no single node
    /// ([`crate::observation::Observation::host_may_be`]).
    pub leader_here_acquired: Option<Timestamp>,
    /// The node's API front, for the kube-apiserver (`None`: no front is wanted on the node
    /// and none is there).
    pub front: Option<NodeFront>,
}

/// The node's API front, as the kube-apiserver's conversion reads it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct NodeFront {
    /// Whether the node's kube-apiserver DaemonSet pod listens behind it (the DaemonSet
    /// carries the front's layout): then the node's API address has no other listener once
    /// the static pod is gone, and the front must run for as long as the DaemonSet pod does.
    pub wanted: bool,
    /// Whether its manifest is in the node's manifests directory.
    pub manifest_on_disk: bool,
    /// Its mirror pod.
    pub mirror: Option<PodObservation>,
    /// Whether it runs (`Err`: why not).
    pub running: Result<(), String>,
}

impl NodeComponent {
    pub(super) fn node_gated(&self) -> bool {
        self.gated_nodes.contains(&self.node)
    }

    /// The DaemonSet's pods on the node (terminating ones included).
    pub fn daemonset_pods_here(&self) -> Vec<&PodObservation> {
        self.daemonset
            .iter()
            .flat_map(|ds| ds.pods_on(&self.node))
            .collect()
    }

    pub(super) fn timed_out(&self) -> bool {
        self.now >= self.deadline
    }
}
