//! The default scheduler's decision for one pending pod: filter the nodes as the default
//! plugins do (NodeUnschedulable, NodeName, TaintToleration, NodeAffinity, NodePorts, in that
//! order, first failure wins), pick one deterministically (fewest pods, then name), or explain
//! why none fits in the scheduler's own words:
//!
//! `0/3 nodes are available: 1 node(s) had untolerated taint {node-role.kubernetes.io/control-plane: },
//! 2 node(s) didn't satisfy plugin(s) [NodeAffinity]. preemption: 0/3 nodes are available:
//! 3 Preemption is not helpful for scheduling.`
//!
//! Resources are not modelled: simulated nodes have room for everything.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use k8s_openapi::api::core::v1::{Binding, Node, ObjectReference, Pod, PodCondition, PodSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8s_openapi::jiff::Timestamp;

use super::affinity::{self, NODE_NAME_FIELD};
use super::objects::{self, condition};
use super::{clock, taints};

/// The scheduler's name, as events and `spec.schedulerName` spell it.
pub const SCHEDULER_NAME: &str = "default-scheduler";

/// Why one node was rejected, worded as the plugin words it.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub enum Unfit {
    /// NodeAffinity's pre-filter left the node out (the pod names other nodes in `matchFields`).
    NotAmongAffinityNodes,
    /// The node is cordoned and the pod does not tolerate it.
    Unschedulable,
    /// The pod asks for another node by name.
    NodeName,
    /// A `NoSchedule`/`NoExecute` taint the pod does not tolerate.
    UntoleratedTaint {
        /// The taint's key.
        key: String,
        /// The taint's value (empty when unset).
        value: String,
    },
    /// `nodeSelector` or required node affinity does not match.
    NodeAffinity,
    /// A requested host port is taken on the node.
    NodePorts,
}

impl Unfit {
    /// The histogram text for this reason.
    pub fn reason(&self) -> String {
        match self {
            Unfit::NotAmongAffinityNodes => {
                "node(s) didn't satisfy plugin(s) [NodeAffinity]".into()
            }
            Unfit::Unschedulable => "node(s) were unschedulable".into(),
            Unfit::NodeName => "node(s) didn't match the requested node name".into(),
            Unfit::UntoleratedTaint { key, value } => {
                format!("node(s) had untolerated taint {{{key}: {value}}}")
            }
            Unfit::NodeAffinity => "node(s) didn't match Pod's node affinity/selector".into(),
            Unfit::NodePorts => "node(s) didn't have free ports for the requested pod ports".into(),
        }
    }

    /// Whether evicting lower-priority pods could help (only port conflicts can).
    pub fn preemption_might_help(&self) -> bool {
        matches!(self, Unfit::NodePorts)
    }
}

/// No node fits the pod.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FitError {
    /// How many nodes were considered.
    pub nodes: usize,
    /// Why each node was rejected, by node name.
    pub rejections: BTreeMap<String, Unfit>,
}

impl fmt::Display for FitError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.nodes == 0 {
            return f.write_str("no nodes available to schedule pods");
        }
        let mut histogram: BTreeMap<String, usize> = BTreeMap::new();
        let (mut hopeless, mut victimless) = (0, 0);
        for unfit in self.rejections.values() {
            *histogram.entry(unfit.reason()).or_default() += 1;
            if unfit.preemption_might_help() {
                victimless += 1;
            } else {
                hopeless += 1;
            }
        }
        let mut reasons: Vec<String> = histogram.iter().map(|(r, n)| format!("{n} {r}")).collect();
        reasons.sort();
        let mut preemption = Vec::new();
        if hopeless > 0 {
            preemption.push(format!(
                "{hopeless} Preemption is not helpful for scheduling"
            ));
        }
        if victimless > 0 {
            preemption.push(format!(
                "{victimless} No preemption victims found for incoming pod"
            ));
        }
        preemption.sort();
        write!(
            f,
            "0/{n} nodes are available: {}. preemption: 0/{n} nodes are available: {}.",
            reasons.join(", "),
            preemption.join(", "),
            n = self.nodes
        )
    }
}

impl std::error::Error for FitError {}

/// Host ports a pod asks for: `(protocol, hostIP, port)`; hostNetwork pods use their container
/// ports on the host.
fn requested_host_ports(spec: &PodSpec) -> Vec<(String, String, i32)> {
    let host_network = spec.host_network == Some(true);
    spec.containers
        .iter()
        .flat_map(|c| c.ports.as_deref().unwrap_or_default())
        .filter_map(|p| {
            let port = match p.host_port {
                Some(port) if port > 0 => port,
                _ if host_network => p.container_port,
                _ => return None,
            };
            let protocol = p.protocol.clone().unwrap_or_else(|| "TCP".into());
            let ip = p.host_ip.clone().unwrap_or_default();
            let ip = if ip.is_empty() {
                "0.0.0.0".to_string()
            } else {
                ip
            };
            Some((protocol, ip, port))
        })
        .collect()
}

fn ports_conflict(wanted: &(String, String, i32), used: &(String, String, i32)) -> bool {
    let any = |ip: &str| ip == "0.0.0.0" || ip == "::";
    wanted.0 == used.0
        && wanted.2 == used.2
        && (any(&wanted.1) || any(&used.1) || wanted.1 == used.1)
}

/// The node names NodeAffinity's pre-filter restricts the pod to, when every required term
/// names nodes with `matchFields metadata.name In` (as DaemonSet pods do); `None` = all nodes.
/// A scheduler over many nodes can look at these nodes only: the choice is the same.
pub fn affinity_node_names(spec: &PodSpec) -> Option<BTreeSet<String>> {
    let terms = &spec
        .affinity
        .as_ref()?
        .node_affinity
        .as_ref()?
        .required_during_scheduling_ignored_during_execution
        .as_ref()?
        .node_selector_terms;
    let mut names = BTreeSet::new();
    for term in terms {
        let mut term_names: Option<BTreeSet<String>> = None;
        for r in term.match_fields.as_deref().unwrap_or_default() {
            if r.key == NODE_NAME_FIELD && r.operator == "In" {
                let these: BTreeSet<String> = r.values.iter().flatten().cloned().collect();
                term_names = Some(match term_names {
                    Some(before) => before.intersection(&these).cloned().collect(),
                    None => these,
                });
            }
        }
        names.extend(term_names?);
    }
    Some(names)
}

/// Runs the filters for one node; `pods_on_node` are the pods already bound to it.
pub fn filter(pod: &Pod, node: &Node, pods_on_node: &[&Pod]) -> Result<(), Unfit> {
    let spec = pod.spec.clone().unwrap_or_default();
    let tolerations = spec.tolerations.as_deref().unwrap_or_default();
    let node_spec = node.spec.clone().unwrap_or_default();
    if node_spec.unschedulable == Some(true) {
        let cordon = taints::taint(taints::key::UNSCHEDULABLE, taints::effect::NO_SCHEDULE);
        if !tolerations.iter().any(|t| taints::tolerates(t, &cordon)) {
            return Err(Unfit::Unschedulable);
        }
    }
    let node_name = node.metadata.name.as_deref().unwrap_or_default();
    if spec
        .node_name
        .as_deref()
        .is_some_and(|n| !n.is_empty() && n != node_name)
    {
        return Err(Unfit::NodeName);
    }
    let node_taints = node_spec.taints.as_deref().unwrap_or_default();
    if let Some(t) = taints::find_untolerated(node_taints, tolerations, taints::blocks_scheduling) {
        return Err(Unfit::UntoleratedTaint {
            key: t.key.clone(),
            value: t.value.clone().unwrap_or_default(),
        });
    }
    if !affinity::node_matches(&spec, node) {
        return Err(Unfit::NodeAffinity);
    }
    let wanted = requested_host_ports(&spec);
    if !wanted.is_empty() {
        let used: Vec<_> = pods_on_node
            .iter()
            .filter(|p| !objects::is_pod_terminal(p))
            .filter_map(|p| p.spec.as_ref())
            .flat_map(requested_host_ports)
            .collect();
        if wanted
            .iter()
            .any(|w| used.iter().any(|u| ports_conflict(w, u)))
        {
            return Err(Unfit::NodePorts);
        }
    }
    Ok(())
}

/// Picks the node for a pending pod among `nodes`, given every pod already bound to a node
/// (`assigned`), or explains why none fits.
pub fn schedule<'a>(pod: &Pod, nodes: &'a [Node], assigned: &[Pod]) -> Result<&'a Node, FitError> {
    let spec = pod.spec.clone().unwrap_or_default();
    let allowed = affinity_node_names(&spec);
    let mut by_node: BTreeMap<&str, Vec<&Pod>> = BTreeMap::new();
    for p in assigned {
        if let Some(n) = p.spec.as_ref().and_then(|s| s.node_name.as_deref()) {
            by_node.entry(n).or_default().push(p);
        }
    }
    let mut rejections = BTreeMap::new();
    let mut best: Option<(usize, &str, &Node)> = None;
    for node in nodes {
        let name = node.metadata.name.as_deref().unwrap_or_default();
        if allowed.as_ref().is_some_and(|a| !a.contains(name)) {
            rejections.insert(name.to_string(), Unfit::NotAmongAffinityNodes);
            continue;
        }
        let here = by_node.get(name).map(Vec::as_slice).unwrap_or_default();
        match filter(pod, node, here) {
            Ok(()) => {
                let load = here.iter().filter(|p| !objects::is_pod_terminal(p)).count();
                if best.is_none_or(|(l, n, _)| (load, name) < (l, n)) {
                    best = Some((load, name, node));
                }
            }
            Err(unfit) => {
                rejections.insert(name.to_string(), unfit);
            }
        }
    }
    best.map(|(_, _, node)| node).ok_or(FitError {
        nodes: nodes.len(),
        rejections,
    })
}

/// The `pods/binding` body that assigns the pod to the node.
pub fn binding(pod: &Pod, node_name: &str) -> Binding {
    Binding {
        metadata: ObjectMeta {
            name: pod.metadata.name.clone(),
            namespace: pod.metadata.namespace.clone(),
            uid: pod.metadata.uid.clone(),
            ..ObjectMeta::default()
        },
        target: ObjectReference {
            api_version: Some("v1".into()),
            kind: Some("Node".into()),
            name: Some(node_name.to_string()),
            ..ObjectReference::default()
        },
    }
}

/// The `PodScheduled=False` condition the scheduler writes when nothing fits.
pub fn unschedulable_condition(error: &FitError, now: Timestamp) -> PodCondition {
    PodCondition {
        type_: condition::POD_SCHEDULED.into(),
        status: "False".into(),
        reason: Some("Unschedulable".into()),
        message: Some(error.to_string()),
        last_transition_time: Some(clock::time(now)),
        ..PodCondition::default()
    }
}

/// Whether this scheduler is responsible for the pod: not bound yet, not being deleted, and
/// asking for the default scheduler.
pub fn wants_scheduling(pod: &Pod) -> bool {
    let spec = pod.spec.as_ref();
    let unbound = spec
        .and_then(|s| s.node_name.as_deref())
        .is_none_or(str::is_empty);
    let ours = spec
        .and_then(|s| s.scheduler_name.as_deref())
        .is_none_or(|n| n.is_empty() || n == SCHEDULER_NAME);
    unbound && ours && !objects::is_terminating(&pod.metadata)
}

#[cfg(test)]
#[path = "scheduler_tests.rs"]
mod tests;
