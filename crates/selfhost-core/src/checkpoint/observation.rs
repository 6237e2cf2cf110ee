//! What one decision reads: one node's components, as the API, the node's disk and its local
//! ports show them now.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::jiff::Timestamp;
use serde::Serialize;

use crate::component::Component;
use crate::observation::{ContainerState, IdentitySighting, LeaderLease, NodeObservation, time};

/// Everything the checkpointer knows about one node, read once per decision.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct NodeCheckpoints {
    /// When the observation was made (the agent's clock, which every time here is read with).
    pub now: Timestamp,
    /// Whether an API server answers through the cluster's address.
    pub api: Api,
    /// Each component on the node; one that is absent is seen with nothing at all (no pod, no
    /// checkpoint, no copy, no process).
    pub components: BTreeMap<Component, ComponentOnNode>,
    /// The kube-system Leases, read while the API answers; `None` when the agent may not read
    /// them. Without them a Ready kube-apiserver pod counts as serving, and no leader Lease
    /// is handed over.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub leases: Option<NodeLeases>,
}

/// The Leases that say which processes serve and lead, with what places their holders.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct NodeLeases {
    /// The name of the node the agent runs on.
    pub node: String,
    /// The control-plane nodes, which a holder's host name is placed among
    /// ([`place_host`](crate::observation::place_host)).
    pub control_plane: Vec<NodeObservation>,
    /// Every fresh kube-apiserver identity, with when the agent saw each holder take its Lease
    /// over (the agent watches the identity Leases for that).
    pub identities: Vec<IdentitySighting>,
    /// The leader Leases of the controller-manager and the scheduler, by component.
    pub leaders: BTreeMap<Component, LeaderLease>,
}

/// Whether an API server answers through the cluster's address.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case", tag = "state")]
pub enum Api {
    /// An API server answers.
    Answers,
    /// None answers, and none has since `since`: the first observation that found it
    /// unreachable after the last that found it answering (or the agent's start, when it has
    /// never seen it answer).
    Unreachable {
        /// When it was first seen unreachable.
        since: Timestamp,
    },
}

/// One component on the node.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct ComponentOnNode {
    /// This node's pod of the component's self-hosted DaemonSet, as the API shows it; `None`
    /// when there is none, or when the API is unreachable.
    pub daemonset_pod: Option<RunningPod>,
    /// The checkpoint stored on the node's disk.
    pub checkpoint: Option<Checkpoint>,
    /// The checkpoint's copy activated as a static pod in the kubelet's manifests directory.
    pub active: Option<ActiveCopy>,
    /// Whether a process of the component takes connections on its port on this node
    /// ([`local_endpoint`](super::local_endpoint)), whichever pod it belongs to: a copy
    /// started now would only be a second one.
    pub local_process_serving: bool,
    /// Whether kubeadm's static pod of the component is in the kubelet's manifests directory:
    /// the component is not self-hosted on this node (a conversion back to static pods wrote
    /// it, or this node was never converted).
    pub static_manifest: bool,
    /// The component's process in every other pod the API shows on this node (a backup's, an
    /// active copy's or kubeadm's mirror pod), as its kubelet reports it.
    pub other_processes: Vec<OtherProcess>,
}

/// A process of the component on this node in a pod other than its DaemonSet's.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct OtherProcess {
    /// The pod's name.
    pub pod: String,
    /// The component's container in it.
    pub state: ContainerState,
}

/// This node's pod of a self-hosted DaemonSet, as the API shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RunningPod {
    /// The pod's uid: the checkpoint is written from this pod and no other.
    pub uid: String,
    /// The DaemonSet's revision the pod runs (its `controller-revision-hash` label).
    pub revision: String,
    /// The component's container image.
    pub image: String,
    /// Since when the pod has been Ready, as the agent saw it begin; `None` while it is not.
    /// A Ready condition may come from a probe another process answered on a shared port:
    /// the kube-apiserver serves only once its own identity proves it too
    /// ([`serving_since`](super::serving_since)).
    pub ready_since: Option<Timestamp>,
    /// The component's container, as its kubelet reports it.
    pub process: ContainerState,
}

/// A checkpoint stored on the node's disk.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Checkpoint {
    /// The DaemonSet revision it was written from.
    pub revision: String,
    /// The component's container image in it.
    pub image: String,
    /// When it was written.
    pub written_at: Timestamp,
}

/// A checkpoint activated as a static pod in the kubelet's manifests directory.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ActiveCopy {
    /// The DaemonSet revision of the checkpoint it was made from.
    pub revision: String,
    /// When it was put into the manifests directory.
    pub since: Timestamp,
    /// Whether its process answers on the node.
    pub serving: bool,
    /// Whether the API shows the copy's mirror pod. A copy is retired only once it does, so
    /// that the mirror pod's going (the kubelet removes it once the process has stopped)
    /// proves the copy's process gone.
    pub mirror_pod: bool,
}

/// What an absent component is seen as.
static NOTHING: ComponentOnNode = ComponentOnNode {
    daemonset_pod: None,
    checkpoint: None,
    active: None,
    local_process_serving: false,
    static_manifest: false,
    other_processes: Vec::new(),
};

impl NodeCheckpoints {
    /// What the node shows of `component`: nothing at all when it is not in the map.
    pub fn component(&self, component: Component) -> &ComponentOnNode {
        self.components.get(&component).unwrap_or(&NOTHING)
    }

    /// How long the API has been unreachable; `None` while it answers.
    pub fn api_unreachable_for(&self) -> Option<Duration> {
        match self.api {
            Api::Answers => None,
            Api::Unreachable { since } => Some(time::age(self.now, since)),
        }
    }

    /// Whether a kube-apiserver can serve the node's controllers without the cluster's
    /// address: its copy is active, or one answers on the node.
    pub fn apiserver_on_node(&self) -> bool {
        let apiserver = self.component(Component::ApiServer);
        apiserver.active.is_some() || apiserver.local_process_serving
    }
}

impl RunningPod {
    /// When the pod's process started, if it runs.
    pub fn started_at(&self) -> Option<Timestamp> {
        match self.process {
            ContainerState::Running { started_at } => started_at,
            _ => None,
        }
    }
}
