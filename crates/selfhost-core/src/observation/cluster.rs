//! One observation of a component, and what it says of the nodes, their hosts and the API.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Taint;
use k8s_openapi::jiff::Timestamp;
use serde::Serialize;

use super::daemonsets::{BackupObservation, DaemonSetObservation};
use super::leases::{IdentitySighting, LeaderLease};
use super::pods::PodObservation;
use crate::component::Component;

/// Everything one decision of the pivot needs about one component.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Observation {
    /// The component observed.
    pub component: Component,
    /// When the observation was made; every age and deadline is measured against it.
    pub now: Timestamp,
    /// The real DaemonSet `self-hosted-<c>`, if it exists.
    pub real: Option<DaemonSetObservation>,
    /// The backup DaemonSet `temp-upgrade-self-hosted-<c>`, if it exists.
    pub backup: Option<BackupObservation>,
    /// The control-plane nodes: the nodes the component's DaemonSets are meant to run on.
    pub nodes: Vec<NodeObservation>,
    /// The API server's health as the engine's probe client saw it.
    pub api: ApiHealth,
    /// kube-apiserver identity Leases (`apiserver.kubernetes.io/identity=kube-apiserver`), one
    /// entry per holder seen. Read for every component; used for the apiserver.
    pub identity_leases: Vec<IdentitySighting>,
    /// The leader-election Lease of the controller-manager or scheduler (`None` for the
    /// apiserver, or when the Lease does not exist).
    pub leader_lease: Option<LeaderLease>,
    /// Pods whose process the engine knows started after an exact moment, because its own
    /// write made them (a static manifest it wrote): finer than the kubelet's whole seconds.
    pub known_starts: Vec<KnownStart>,
    /// Processes of the component's pods the engine saw running earlier in this run and has
    /// since seen stopped, or whose pods have left the API (see [`StoppedProcess`]).
    pub stopped: Vec<StoppedProcess>,
    /// Uids of the component's leader Lease objects the engine deleted in this run to hand
    /// them over. A Lease of that name with another uid was created after such a hand-over,
    /// so it was acquired while the engine watched (see `pivot/leader.rs`).
    pub handed_over: Vec<String>,
    /// What the engine's probes of the API saw so far while it upgraded this component,
    /// checked against the availability budget of `apply`.
    pub availability: AvailabilitySoFar,
}

/// A process of a pod of the real or backup DaemonSet that the engine saw running during the
/// run and then saw stopped: its container no longer running, or its pod removed from the
/// API. A pod deleted gracefully (the DaemonSet controller's, the garbage collector's and the
/// engine's deletes all are) leaves the API only once its kubelet reported its containers
/// stopped. Only the engine can know this: a snapshot no longer shows a removed pod at all,
/// and a stopped container's `finishedAt` has whole-second precision.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StoppedProcess {
    /// Its pod's name.
    pub pod: String,
    /// Its pod's uid.
    pub pod_uid: String,
    /// The node it ran on.
    pub node: String,
    /// When it started (the kubelet's `startedAt`, whole seconds).
    pub started_at: Timestamp,
    /// When the engine first saw it stopped or its pod gone (engine clock): it stopped no
    /// later than this.
    pub stopped_by: Timestamp,
}

/// A pod whose process cannot have started before `not_before`: the engine's own write at
/// that moment (its clock) is what made the pod.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct KnownStart {
    /// The pod's uid.
    pub pod_uid: String,
    /// The moment of the write, to the engine's clock's precision.
    pub not_before: Timestamp,
}

impl Observation {
    /// The node named `name`, if it is a control-plane node.
    pub fn node(&self, name: &str) -> Option<&NodeObservation> {
        self.nodes.iter().find(|node| node.name == name)
    }

    /// Where a process that names itself after `host` runs, as far as the control-plane nodes
    /// tell ([`place_host`]).
    pub fn place_host(&self, host: &str) -> HostPlacement<'_> {
        place_host(&self.nodes, host)
    }

    /// Whether a process that names itself after `host` may run on `node`: `host` is that
    /// node, or tells no single node ([`Self::place_host`]).
    pub fn host_may_be(&self, host: &str, node: &str) -> bool {
        match self.place_host(host) {
            HostPlacement::Node(placed) => placed.name == node,
            HostPlacement::AnyNode => true,
        }
    }

    /// Whether `node` is a control-plane node that reports Ready.
    pub fn node_is_ready(&self, node: &str) -> bool {
        self.node(node)
            .is_some_and(|n| n.ready == NodeReadiness::Ready)
    }

    /// The pods of the real and the backup DaemonSet.
    pub fn all_pods(&self) -> impl Iterator<Item = &PodObservation> {
        self.real
            .iter()
            .flat_map(|ds| ds.pods.iter())
            .chain(self.backup.iter().flat_map(|b| b.daemonset.pods.iter()))
    }
}

/// Whether a node reports Ready.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case", tag = "status")]
pub enum NodeReadiness {
    /// The Ready condition is True.
    Ready,
    /// The Ready condition is False.
    NotReady {
        /// The condition's reason, e.g. `KubeletNotReady`.
        reason: Option<String>,
    },
    /// The Ready condition is Unknown or missing: the kubelet stopped reporting.
    Unknown,
}

/// Where a process that names itself after its host runs.
///
/// Lease holder identities (`<host>_<uuid>`) and kube-apiserver identity Leases name the host
/// as the process sees it: `os.Hostname()`, which for a host-network pod is the machine's
/// hostname. A node is named by its kubelet, after `--hostname-override` when given (kubeadm
/// passes its `nodeRegistration.name`; clouds name nodes apart from their machines), so the
/// two need not agree, and machines of a test bed may all share one hostname.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum HostPlacement<'a> {
    /// The host is this control-plane node.
    Node(&'a NodeObservation),
    /// The host names no control-plane node, or several: the process may run on any of them.
    AnyNode,
}

/// Where a process that names itself after `host` runs among the control-plane `nodes` (see
/// [`HostPlacement`]).
///
/// The node whose `kubernetes.io/hostname` label is `host`, else the node named `host`
/// (compared without case: the kubelet lowercases the hostname it names its node after);
/// else, on a cluster of one control-plane node, that node, which is where every process
/// of the control plane runs; else any control-plane node.
pub fn place_host<'a>(nodes: &'a [NodeObservation], host: &str) -> HostPlacement<'a> {
    let by_label: Vec<&NodeObservation> = nodes
        .iter()
        .filter(|node| {
            node.hostname
                .as_deref()
                .is_some_and(|label| label.eq_ignore_ascii_case(host))
        })
        .collect();
    let by_name = || {
        let mut named = nodes
            .iter()
            .filter(|node| node.name.eq_ignore_ascii_case(host));
        match (named.next(), named.next()) {
            (Some(node), None) => Some(node),
            _ => None,
        }
    };
    match by_label.as_slice() {
        [node] => HostPlacement::Node(node),
        [] => match (by_name(), nodes) {
            (Some(node), _) | (None, [node]) => HostPlacement::Node(node),
            (None, _) => HostPlacement::AnyNode,
        },
        _ => HostPlacement::AnyNode,
    }
}

/// One control-plane node.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct NodeObservation {
    /// The node's name.
    pub name: String,
    /// Its `kubernetes.io/hostname` label: the name host-network processes know themselves by,
    /// and so the host part of Lease holder identities.
    pub hostname: Option<String>,
    /// Its Ready condition.
    pub ready: NodeReadiness,
    /// When the Ready condition last changed.
    pub ready_since: Option<Timestamp>,
    /// Whether it is cordoned.
    pub unschedulable: bool,
    /// Its labels, which a pod template's node selector and node affinity select on.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: BTreeMap<String, String>,
    /// Its taints, which a pod template must tolerate to run there.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub taints: Vec<Taint>,
}

/// The API server's health as seen through the engine's probe client (no retries).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct ApiHealth {
    /// Whether `/readyz` answered 200.
    pub readyz_ok: bool,
    /// What `/readyz` answered otherwise (status and the failing checks), for messages.
    pub readyz_detail: Option<String>,
    /// `gitVersion` from `/version`, if it answered.
    pub git_version: Option<String>,
    /// Until when the engine last saw the API unreachable (connections refused, cut or timed
    /// out): the moment it answered again after its latest outage, or `now` while one lasts.
    /// `None` when this run saw none. Control-plane processes exit when they cannot reach the
    /// API, so their exits until then say nothing about their image.
    pub unreachable_until: Option<Timestamp>,
}

/// What the engine's probes of the API saw so far while it upgraded this component: a probe
/// that fails is one with no answer, or not ready for any reason but an apiserver's drain.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct AvailabilitySoFar {
    /// Failed probes.
    pub failed_probes: u32,
    /// The longest stretch from a failed probe to the next one that did not fail (or to now,
    /// while it lasts), in seconds.
    pub longest_unavailable_seconds: f64,
}
