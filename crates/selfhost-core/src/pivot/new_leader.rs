//! Whether the controller-manager's or the scheduler's leader is a new process: the end of
//! their pivot, once every pod runs the target.

use k8s_openapi::jiff::{SignedDuration, Timestamp};

use super::leader::hand_over_deferred;
use super::target::Target;
use crate::command_line;
use crate::component::Component;
use crate::observation::{
    ContainerState, DaemonSetObservation, HostPlacement, LeaderLease, Observation, PodObservation,
};

/// The flag that turns leader election off; then there is no Lease to verify.
pub const LEADER_ELECT_FLAG: &str = "leader-elect";

/// Whether the component's leader is a process of the real DaemonSet's current template:
/// the Lease is held, and its holder's node runs a current pod whose process started no later
/// than the acquisition. `Ok` also when the template turns leader election off.
///
/// When the holder's host tells no node ([`Observation::place_host`]), the holder is found
/// without one (`led_by_a_new_pod`).
pub fn leader_is_new_process(
    obs: &Observation,
    target: &Target,
    real: &DaemonSetObservation,
) -> Result<(), String> {
    if obs.component == Component::ApiServer || leader_election_off(obs, target) {
        return Ok(());
    }
    if let Some(why) = hand_over_deferred(obs) {
        return Err(why);
    }
    let lease_name = obs.component.leader_lease_name().unwrap_or_default();
    let Some(lease) = obs.leader_lease.as_ref() else {
        return Err(format!("no Lease {lease_name} yet: waiting for a leader"));
    };
    let (Some(holder), true) = (lease.holder(), lease.is_held_at(obs.now)) else {
        return Err(format!(
            "Lease {lease_name} is not held: waiting for a leader"
        ));
    };
    let Some(acquired) = lease.acquire_time else {
        return Err(format!("Lease {lease_name} has no acquireTime"));
    };
    let host = lease.holder_hostname().unwrap_or(holder);
    let node = match obs.place_host(host) {
        HostPlacement::Node(node) => node,
        HostPlacement::AnyNode => return led_by_a_new_pod(obs, real, lease, holder, acquired),
    };
    let name = obs.component.name();
    let new_process = real.pods_on(&node.name).any(|pod| {
        real.is_current(pod)
            && !pod.is_terminating()
            && pod.process_started_at(name).is_some_and(|s| s <= acquired)
    });
    if new_process {
        Ok(())
    } else {
        Err(format!(
            "leader {holder} (since {acquired}) is not a process of the new pod on {}",
            node.name
        ))
    }
}

/// Whether the leader is a process of a new pod, where its host tells no node: a new pod's
/// process (current template, not being deleted) ran at the acquisition, no process of
/// another pod runs, and the holder renewed the Lease after every process that is not a new
/// pod's running one had stopped — those the engine saw stop, and those whose stop the
/// kubelet reports (container restarts included). A holder that renews is alive, so it is one
/// of the new pods' processes.
///
/// A stop the kubelet reports has whole-second precision, so the renewal must come a second
/// after it; one the engine saw is bounded by the engine's clock, compared with the holder's
/// as Kubernetes compares clocks. A process that stopped before the engine watched is known
/// to neither: then the rule trusts the renewal, and at worst a holder that stopped just
/// before keeps the Lease until it expires, when a new pod's process takes it.
fn led_by_a_new_pod(
    obs: &Observation,
    real: &DaemonSetObservation,
    lease: &LeaderLease,
    holder: &str,
    acquired: Timestamp,
) -> Result<(), String> {
    let name = obs.component.name();
    let host = lease.holder_hostname().unwrap_or(holder);
    let new_pod = |pod: &PodObservation| {
        real.pods
            .iter()
            .any(|p| p.name == pod.name && p.uid == pod.uid)
            && real.is_current(pod)
            && !pod.is_terminating()
    };
    let ran_then = real
        .pods
        .iter()
        .any(|pod| new_pod(pod) && pod.process_started_at(name).is_some_and(|s| s <= acquired));
    if !ran_then {
        return Err(format!(
            "leader {holder} (since {acquired}) is not a process of a new pod: none of them \
             ran then (its host {host} names no single control-plane node)"
        ));
    }
    if let Some(other) = obs.all_pods().find(|pod| {
        !new_pod(pod)
            && pod.main_container(name).is_none_or(|c| {
                matches!(
                    c.state,
                    ContainerState::Running { .. } | ContainerState::Unknown
                )
            })
    }) {
        return Err(format!(
            "leader {holder} may be the process of pod {} on {}, which is not a new pod (its \
             host {host} names no single control-plane node)",
            other.name,
            other.node.as_deref().unwrap_or("no node")
        ));
    }
    let mut last_stop: Option<Timestamp> = None;
    for process in &obs.stopped {
        last_stop = last_stop.max(Some(process.stopped_by));
    }
    for pod in obs.all_pods() {
        let Some(container) = pod.main_container(name) else {
            continue;
        };
        let stopped_once = container.restart_count > 0
            || matches!(container.state, ContainerState::Terminated { .. });
        if !stopped_once {
            continue;
        }
        let Some(exit) = container.last_exit_at else {
            return Err(format!(
                "a {name} process of pod {} stopped at a time not reported: leader {holder} \
                 may be it (its host {host} names no single control-plane node)",
                pod.name
            ));
        };
        let end_of_second = exit
            .checked_add(SignedDuration::from_secs(1))
            .unwrap_or(exit);
        last_stop = last_stop.max(Some(end_of_second));
    }
    match (last_stop, lease.renew_time) {
        (None, _) => Ok(()),
        (Some(stop), Some(renewed)) if renewed > stop => Ok(()),
        (Some(stop), _) => Err(format!(
            "leader {holder} (its host {host} names no single control-plane node) has not \
             renewed Lease {} since {stop}, when the last process other than the new pods' \
             stopped: waiting for a renewal that proves it alive, and so a new pod's process",
            lease.name
        )),
    }
}

fn leader_election_off(obs: &Observation, target: &Target) -> bool {
    command_line::template_flag(&target.template, obs.component.name(), LEADER_ELECT_FLAG)
        .as_deref()
        == Some("false")
}
