//! What one decision reads: one node's components, as the API, the node's disk and its local
//! ports show them now.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::jiff::Timestamp;
use serde::Serialize;

use crate::component::Component;
use crate::observation::time;

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
    /// Since when the pod has served, as the agent saw it begin; `None` while it does not.
    /// Every component serves when Ready: the node's credentials the agent reads with cannot
    /// read the kube-apiserver's identity Leases, so a Ready condition set by a probe another
    /// process answered on a shared port counts too.
    pub serving_since: Option<Timestamp>,
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
}

/// What an absent component is seen as.
static NOTHING: ComponentOnNode = ComponentOnNode {
    daemonset_pod: None,
    checkpoint: None,
    active: None,
    local_process_serving: false,
    static_manifest: false,
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
    /// Whether the pod serves.
    pub fn serves(&self) -> bool {
        self.serving_since.is_some()
    }
}

impl ComponentOnNode {
    /// Whether this node's DaemonSet pod serves.
    pub fn daemonset_pod_serves(&self) -> bool {
        self.daemonset_pod.as_ref().is_some_and(RunningPod::serves)
    }
}
