//! What the kube-system Leases prove on the node: that this node's kube-apiserver pod serves
//! by its own identity, and that a leader Lease's holder has stopped.
//!
//! A Ready condition does not prove a kube-apiserver serves: on a shared port its probe may
//! be answered by another process (the active copy, or kubeadm's static pod during a
//! conversion). Each kube-apiserver process publishes one identity once it serves, renewed
//! every 10 s, whether every process has its own Lease or all processes of a host take one
//! Lease over from each other. So the pod serves once the node has at least as many fresh
//! holders, renewed after its newest kube-apiserver process started, as it runs such
//! processes: every process there serves, this pod's included. Where nothing can be proven
//! either way (no identities published, or holders whose host names tell no single node,
//! as on machines sharing one hostname), Ready counts, as without the Leases.
//!
//! A stopped controller-manager or scheduler does not release its leader Lease; a standby
//! waits the whole lease duration (15 s) before taking it over. When a copy is retired while
//! it leads, the Lease is released (`leader_release.rs`) once its holder's host is this node
//! and no process of the component that may hold it runs here any more — every one has stopped, or started
//! after the Lease was acquired. A retired copy's process is known stopped once its mirror
//! pod is gone: the kubelet removes a static pod's mirror only after its containers have
//! stopped, and a copy is retired only once its mirror pod was seen.

use k8s_openapi::jiff::Timestamp;

use super::observation::{ComponentOnNode, NodeCheckpoints, NodeLeases, RunningPod};
use crate::component::Component;
use crate::observation::{
    ContainerState, HostPlacement, LeaderLease, NodeReadiness, place_host, time,
};

/// Where a holder's host name places it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Placed {
    Here,
    Elsewhere,
    Unknown,
}

impl NodeLeases {
    fn place(&self, host: Option<&str>) -> Placed {
        let Some(host) = host else {
            return Placed::Unknown;
        };
        match place_host(&self.control_plane, host) {
            HostPlacement::Node(node) if node.name == self.node => Placed::Here,
            HostPlacement::Node(_) => Placed::Elsewhere,
            HostPlacement::AnyNode => Placed::Unknown,
        }
    }

    fn node_is_ready(&self) -> bool {
        self.control_plane
            .iter()
            .any(|n| n.name == self.node && n.ready == NodeReadiness::Ready)
    }
}

/// Since when this node's DaemonSet pod of `component` serves, as far as the observation
/// proves it; `None` while it does not (see the module documentation).
pub fn serving_since(obs: &NodeCheckpoints, component: Component) -> Option<Timestamp> {
    let on = obs.component(component);
    let pod = on.daemonset_pod.as_ref()?;
    let ready = pod.ready_since?;
    if component != Component::ApiServer {
        return Some(ready);
    }
    match &obs.leases {
        Some(leases) if !identity_unprovable(obs.now, leases) => {
            identity_counts(obs.now, leases, on, pod).then_some(ready)
        }
        _ => Some(ready),
    }
}

/// Whether identities can prove nothing here: none is published anywhere, or one names a
/// host that tells no single node.
fn identity_unprovable(now: Timestamp, leases: &NodeLeases) -> bool {
    let mut fresh = leases
        .identities
        .iter()
        .filter(|s| s.is_fresh(now))
        .peekable();
    fresh.peek().is_none() || fresh.any(|s| leases.place(s.hostname.as_deref()) == Placed::Unknown)
}

/// Whether the node has as many fresh holders renewed since its newest kube-apiserver
/// process started as it runs kube-apiserver processes.
fn identity_counts(
    now: Timestamp,
    leases: &NodeLeases,
    on: &ComponentOnNode,
    pod: &RunningPod,
) -> bool {
    let Some(mut newest) = pod.started_at() else {
        return false;
    };
    let mut processes = 1;
    for other in &on.other_processes {
        match other.state {
            ContainerState::Running {
                started_at: Some(started),
            } => {
                processes += 1;
                newest = newest.max(started);
            }
            ContainerState::Running { started_at: None } | ContainerState::Unknown => {
                return false;
            }
            ContainerState::Waiting { .. } | ContainerState::Terminated { .. } => {}
        }
    }
    // An active copy whose mirror pod is not shown yet runs a process the API does not list.
    if on.active.as_ref().is_some_and(|copy| !copy.mirror_pod) {
        return false;
    }
    // Start times are whole seconds: a renewal within the second of the newest start may
    // come from a process that started just before it.
    let after = time::after(newest, std::time::Duration::from_secs(1));
    let mut holders: Vec<&str> = leases
        .identities
        .iter()
        .filter(|s| s.is_fresh(now) && leases.place(s.hostname.as_deref()) == Placed::Here)
        .filter(|s| s.last_renewed.is_some_and(|renewed| renewed >= after))
        .map(|s| s.holder.as_str())
        .collect();
    holders.sort_unstable();
    holders.dedup();
    holders.len() >= processes
}

/// The leader Lease of `component` to hand over now, if its holder ran on this node and has
/// stopped (see the module documentation).
pub fn gone_leader(obs: &NodeCheckpoints, component: Component) -> Option<&LeaderLease> {
    if component == Component::ApiServer {
        return None;
    }
    let leases = obs.leases.as_ref()?;
    let lease = leases.leaders.get(&component)?;
    let on = obs.component(component);
    // kubeadm's static pod, or an active copy, may be the holder.
    if on.static_manifest || on.active.is_some() || !leases.node_is_ready() {
        return None;
    }
    if !lease.is_held_at(obs.now) || leases.place(lease.holder_hostname()) != Placed::Here {
        return None;
    }
    let acquired = lease.acquire_time?;
    // The delete is conditional on the Lease as read.
    lease.resource_version.as_ref()?;
    // Without our DaemonSet pod here the holder may run outside what the API shows.
    let pod = on.daemonset_pod.as_ref()?;
    let may_hold = |state: &ContainerState| match state {
        ContainerState::Running { started_at } => started_at.is_none_or(|s| s <= acquired),
        ContainerState::Unknown => true,
        ContainerState::Waiting { .. } | ContainerState::Terminated { .. } => false,
    };
    let any_may_hold =
        may_hold(&pod.process) || on.other_processes.iter().any(|p| may_hold(&p.state));
    (!any_may_hold).then_some(lease)
}
