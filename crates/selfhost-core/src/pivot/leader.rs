//! Leader hand-off for the controller-manager and the scheduler.
//!
//! A stopped kube-controller-manager or kube-scheduler does not release its Lease; a standby
//! waits a whole lease duration (15 s) before taking it, and during that time no DaemonSet
//! controller runs (or nothing is scheduled) — the ~19 s leaderless gap of kubeadm's pivot.
//! Once the holder's process is *confirmed* gone, deleting the Lease (with a resourceVersion
//! precondition) lets a standby acquire on its next retry (2 s by default, 0.5–1.1 s on the
//! clock selfhost's templates set: see `daemonset::elect_promptly`).
//!
//! Confirmation without knowing which pod a holder identity `<hostname>_<uuid>` belongs to:
//! the holder acquired at `acquireTime` on host `hostname`, so its process was running then.
//! If every pod of the component on that node is either stopped (not running now) or started
//! after `acquireTime`, none of them can be the holder, and the holder is gone. Start times
//! are whole seconds; where the engine's own write made a pod (its update of the DaemonSet,
//! a static manifest a conversion wrote: [`Observation::known_starts`]) the process started
//! after that write, known to the millisecond. A node with no
//! pod of the component at all proves nothing (the holder may run outside our DaemonSets),
//! and neither does a node that is not Ready (its kubelet is not reporting), nor a container
//! whose state is unknown. So a Lease whose holder may still be alive is never touched — with
//! one exception that cannot make two leaders: when a process that may have held it stopped
//! since the acquisition and at most one process of the component can run at all (see
//! [`sole_candidate`]), that process is the only one that can hold the Lease after the
//! hand-over, whether it held it before or not.
//!
//! Two processes of a role on one node are the normal case, not the exception: every node runs
//! the backup's standby next to its real pod (old, then new). A standby acquires the Lease
//! whenever the previous holder goes, so the holder is often one of two processes on its node
//! that both started well before the acquisition (whole seconds before it: no wait for the next
//! second boundary would separate them), and nothing the API shows tells them apart: start
//! times only rule out processes started later; `renewTime` says the holder renewed, not which
//! process did, and a holder that stopped renewing still leads until a renewal round has failed
//! for its whole renew deadline (10 s; waiting that out would save 5 s of the 15); the
//! identity's uuid names no pod; `leaseDurationSeconds` is each process's flag, the same for
//! all of them; a pod's log would say whether its process acquired, but only through a message
//! text that may change between releases, and its absence proves nothing (the line follows the
//! write). So when one of the two goes away (the rollout deletes the old pod, or the engine
//! removes the backup) the holder may be dead or alive, and the rule above would leave the
//! Lease to expire: 15 s without a controller-manager or scheduler. The engine settles it by
//! sequencing instead ([`stop_every_possible_holder`]): it deletes the other possible holders
//! on that node too (pods of our DaemonSets, which recreate them), so that every process that
//! may hold the Lease stops, and hands the Lease over by the rule above once they have.
//! Deleting a standby can never make two leaders; the Lease is still only deleted once no
//! process that may hold it runs. It costs one pod restart and, when the process left running
//! was the holder, one leader change it would not otherwise have made — each as short as any
//! other hand-over, and only while a process that may hold the Lease is going away anyway. It
//! needs a standby that cannot be the holder (on another node, or started after the
//! acquisition) to take over, as the recreated pod needs a leader of its own role (the
//! controller-manager's DaemonSet controller creates it, the scheduler places it); on one node
//! the exception above applies instead.
//!
//! Pods that stopped leave the API soon after (at once, in the simulator), so the engine
//! remembers the processes it saw stop ([`Observation::stopped`]): a node where all of them
//! stopped has no pod left at all, and still must count as one where the holder is gone.
//!
//! The holder's host is the hostname its process sees, the machine's, which need not be the
//! node's name: a kubelet names its node after `--hostname-override` when given (kubeadm's
//! `nodeRegistration.name`, a cloud's node name), and the machines of a test bed may share one
//! hostname. [`Observation::place_host`] finds the node where it can (by the hostname label,
//! by name, or the only control-plane node); where it cannot, every control-plane node is a
//! possible host ([`Hosts`]), and every rule above reads "on the holder's node" as "on any of
//! them": the holder is gone once no process on any of them may hold the Lease, and the
//! processes that may hold it are stopped across them while a standby that cannot hold it runs.
//! Where that proves nothing the Lease is left to expire, a lease duration at worst. The end of
//! a pivot needs no node either
//! ([`leader_is_new_process`](super::leader_is_new_process), `new_leader.rs`): a holder that
//! renewed the Lease after every process other than the new pods' had stopped is one of the
//! new pods' processes.

use k8s_openapi::jiff::{SignedDuration, Timestamp};

use super::annotations::LEADER_AFTER_HAND_OVER;
use super::serving::{created_after_our_write, started_no_earlier_than};
use super::step::Step;
use crate::component::Component;
use crate::observation::{
    ContainerState, DaemonSetObservation, HostPlacement, LeaderLease, Observation, PodObservation,
    StoppedProcess,
};

/// The hand-over to do now, if the leader Lease is held by a process confirmed gone.
pub fn lease_hand_over(obs: &Observation) -> Option<Step> {
    match hand_over_decision(obs)? {
        HandOver::Now(step) => Some(step),
        HandOver::Deferred(_) => None,
    }
}

/// Why the run must not end yet, if a hand-over by the [`sole_candidate`] exception waits for
/// a holder that just acquired to renew (see [`just_acquired`]): ending now would leave the
/// ambiguity to the next run, which would hand over a live leader's Lease on a no-op run.
pub(super) fn hand_over_deferred(obs: &Observation) -> Option<String> {
    match hand_over_decision(obs)? {
        HandOver::Deferred(why) => Some(why),
        HandOver::Now(_) => None,
    }
}

/// A hand-over to do now, or one waiting for the holder's first renewal.
enum HandOver {
    Now(Step),
    Deferred(String),
}

fn hand_over_decision(obs: &Observation) -> Option<HandOver> {
    if obs.component == Component::ApiServer {
        return None;
    }
    let lease = obs.leader_lease.as_ref()?;
    // An expired Lease needs no help: a standby takes it on its next retry.
    if !lease.is_held_at(obs.now) {
        return None;
    }
    let holder = lease.holder()?;
    let acquired = lease.acquire_time?;
    let hosts = Hosts::of(obs, lease)?;
    // A node that is not Ready has a kubelet that is not reporting: its pods' states prove
    // nothing.
    if !hosts.nodes.iter().all(|node| obs.node_is_ready(node)) {
        return None;
    }
    let name = obs.component.name();
    let pods: Vec<_> = obs
        .all_pods()
        .filter(|pod| hosts.contains(pod.node.as_deref()))
        .collect();
    // Our pods ran on every possible host: the ones left, or processes the engine saw stop.
    let ours_ran = |node: &str| {
        pods.iter().any(|pod| pod.node.as_deref() == Some(node))
            || stopped_on(obs, node).next().is_some()
    };
    if !hosts.nodes.iter().all(|node| ours_ran(node)) {
        return None;
    }
    let on = hosts.describe();
    let may_be_holder = pods.iter().any(|pod| may_hold(obs, pod, acquired));
    let reason = if !may_be_holder {
        format!("no {name} process running on {on} is that old")
    } else if (hosts
        .nodes
        .iter()
        .any(|node| stopped_since(obs, node, acquired))
        || (only_new_pods_started_that_second(obs, &pods, acquired)
            && !recreated_after_our_hand_over(obs, lease)))
        && sole_candidate(obs)
    {
        if just_acquired(lease) {
            return Some(HandOver::Deferred(format!(
                "Lease {} was acquired by {holder} at {acquired} and not renewed since: \
                 waiting for its renewal to tell a survivor of the hand-over from a holder \
                 that stopped",
                lease.name
            )));
        }
        format!(
            "a {name} process on {on} that may have held it stopped since, and the one \
             {name} process left is the only one that can hold it next"
        )
    } else {
        return stop_every_possible_holder(obs, &hosts, &pods, acquired).map(HandOver::Now);
    };
    let resource_version = lease.resource_version.clone()?;
    Some(HandOver::Now(Step::HandOverLease {
        lease: lease.name.clone(),
        uid: lease.uid.clone(),
        resource_version,
        holder: holder.to_string(),
        why: format!(
            "its holder acquired it at {acquired} on {on}, and {reason}; it would otherwise \
             stay held until {expiry}",
            expiry = lease
                .expires_at()
                .map_or_else(|| "it expires".to_string(), |t| t.to_string()),
        ),
    }))
}

/// The control-plane nodes a Lease's holder may run on: the one its identity's host part
/// names, or every control-plane node when it names none or several (see
/// [`Observation::place_host`]).
struct Hosts<'a> {
    /// The nodes, by name.
    nodes: Vec<&'a str>,
    /// The host part of the holder identity, when it does not tell the node.
    untold: Option<&'a str>,
}

impl<'a> Hosts<'a> {
    /// The possible hosts of the Lease's holder; `None` when the Lease is not held or there
    /// is no control-plane node.
    fn of(obs: &'a Observation, lease: &'a LeaderLease) -> Option<Self> {
        let host = lease.holder_hostname()?;
        let hosts = match obs.place_host(host) {
            HostPlacement::Node(node) => Hosts {
                nodes: vec![node.name.as_str()],
                untold: None,
            },
            HostPlacement::AnyNode => Hosts {
                nodes: obs.nodes.iter().map(|node| node.name.as_str()).collect(),
                untold: Some(host),
            },
        };
        (!hosts.nodes.is_empty()).then_some(hosts)
    }

    /// Whether `node` is one of them.
    fn contains(&self, node: Option<&str>) -> bool {
        node.is_some_and(|node| self.nodes.contains(&node))
    }

    /// Where the holder runs, in words: `cp-1`, or every node with the reason.
    fn describe(&self) -> String {
        match self.untold {
            None => self.nodes.join(", "),
            Some(host) => format!(
                "any of {} (its host {host} names no single control-plane node)",
                self.nodes.join(", ")
            ),
        }
    }
}

/// Whether the holder has not renewed the Lease since it acquired it: client-go writes the
/// same moment as `acquireTime` and `renewTime` when it creates or takes over a Lease, and
/// only a renewal moves `renewTime` on.
///
/// The [`sole_candidate`] exception cannot tell, within the whole second its times leave
/// open, a holder that *survived* the hand-over — it found its Lease gone and created it
/// again, as client-go does — from one that may have stopped; only a re-creation after that
/// second settles it. Pressing the survivor again on every re-creation, back to back, would
/// hand the same live holder's Lease over again and again, each within milliseconds of the
/// last. So it waits for the holder's first renewal before pressing again, and the
/// run does not end meanwhile ([`hand_over_deferred`]): the presses are spaced by the
/// holder's retry period, with a wait between any two. A holder that acquired and stopped
/// before it ever renewed is left to its Lease's expiry.
fn just_acquired(lease: &LeaderLease) -> bool {
    lease.renew_time.is_some() && lease.renew_time == lease.acquire_time
}

/// Whether the Lease is a new object, created after the engine handed an earlier one of that
/// name over in this run ([`Observation::handed_over`]): its holder acquired it while the
/// engine watched the node, so every process there that could have held it and stopped since
/// is one the engine saw stop ([`Observation::stopped`], judged by [`stopped_since`]).
///
/// Then the doubt of [`only_new_pods_started_that_second`] — a process of a pod already gone,
/// whose stop the engine never saw — does not arise; on one node it would press the new pod's
/// process, the survivor of the engine's own hand-over, again after every renewal until the
/// second of its start is over. A run that starts after the acquisition (a resume) has no
/// such record and keeps the doubt.
///
/// A later run learns it from the record the run that saw it left ([`leader_record`]).
fn recreated_after_our_hand_over(obs: &Observation, lease: &LeaderLease) -> bool {
    seen_recreated(obs, lease)
        || obs
            .real
            .as_ref()
            .and_then(|real| real.annotation(LEADER_AFTER_HAND_OVER))
            .is_some_and(|recorded| Some(recorded) == record_of(lease).as_deref())
}

/// Whether this run handed the Lease over and sees another object of that name now.
fn seen_recreated(obs: &Observation, lease: &LeaderLease) -> bool {
    !obs.handed_over.is_empty()
        && lease
            .uid
            .as_ref()
            .is_some_and(|uid| !obs.handed_over.contains(uid))
}

/// The Lease object, its holder and the acquisition, as [`LEADER_AFTER_HAND_OVER`] records
/// them: a later holder, or the same holder acquiring again, no longer matches.
fn record_of(lease: &LeaderLease) -> Option<String> {
    Some(format!(
        "{} {} {}",
        lease.uid.as_deref()?,
        lease.holder()?,
        lease.acquire_time?
    ))
}

/// The record to leave before the run ends, if the leader it verified acquired in the second
/// its pod's process started, after this run's own hand-over: this run knows the holder is
/// that process (see [`recreated_after_our_hand_over`]), a later run would not, and would
/// hand a live leader's Lease over on a run with nothing to do.
pub(super) fn leader_record(obs: &Observation, real: &DaemonSetObservation) -> Option<Step> {
    let lease = obs.leader_lease.as_ref()?;
    if !seen_recreated(obs, lease) {
        return None;
    }
    let record = record_of(lease)?;
    if real.annotation(LEADER_AFTER_HAND_OVER) == Some(record.as_str()) {
        return None;
    }
    let acquired = lease.acquire_time?;
    let hosts = Hosts::of(obs, lease)?;
    let pods: Vec<_> = obs
        .all_pods()
        .filter(|pod| hosts.contains(pod.node.as_deref()))
        .collect();
    if !only_new_pods_started_that_second(obs, &pods, acquired) {
        return None;
    }
    Some(Step::RecordLeader {
        name: real.name.clone(),
        resource_version: real.resource_version.clone(),
        annotations: [(LEADER_AFTER_HAND_OVER.to_string(), record)].into(),
        why: format!(
            "Lease {} was created again by {} at {acquired}, after selfhost handed it over and \
             while it watched: its holder is the new pod's process on {}, which started in \
             that same whole second, so a later run could not tell it from a process gone since",
            lease.name,
            lease.holder().unwrap_or_default(),
            hosts.describe()
        ),
    })
}

/// Whether `pod`'s process may be the one that acquired at `acquired`: it runs (or its state
/// is unknown) and did not start after the acquisition. Start times are whole seconds; a pod
/// our own update created started after that write, which is known to the millisecond (the
/// backup's standby often acquires in the same second as the new pod starts).
fn may_hold(obs: &Observation, pod: &PodObservation, acquired: Timestamp) -> bool {
    match pod.main_container(obs.component.name()).map(|c| &c.state) {
        None | Some(ContainerState::Unknown) => true,
        Some(ContainerState::Running { .. }) => {
            started_no_earlier_than(obs, pod).is_none_or(|s| s <= acquired)
        }
        Some(ContainerState::Waiting { .. } | ContainerState::Terminated { .. }) => false,
    }
}

/// The processes on `node` the engine saw stop.
fn stopped_on<'a>(obs: &'a Observation, node: &'a str) -> impl Iterator<Item = &'a StoppedProcess> {
    obs.stopped.iter().filter(move |p| p.node == node)
}

/// Whether the engine saw a process on `node` that may have held the Lease since `acquired`
/// stop: it started no later than the acquisition, and the engine first saw it stopped after
/// it. (Engine and node clocks are compared here, as Kubernetes compares them; a skew can
/// only cost an unneeded restart or a Lease left to expire, never a second leader: only
/// the processes still running decide whether the Lease is deleted.)
fn seen_stopping_since(obs: &Observation, node: &str, acquired: Timestamp) -> bool {
    stopped_on(obs, node).any(|p| p.started_at <= acquired && p.stopped_by > acquired)
}

/// When the Lease's holder may be a process on one of its possible `hosts` that is going away
/// or has gone, and other processes there may be it as well: delete one of those others (the
/// next decision deletes the next), so that all of them stop and the Lease can be handed over
/// once they have (see the module documentation). `pods` are the hosts' pods of our
/// DaemonSets.
///
/// Nothing is deleted while every possible holder runs on (the holder is then alive, whoever
/// it is), nor without a successor: a running, Ready process of the role on a Ready node that
/// cannot be the holder (on another node, or started after the acquisition) and is not going
/// away. It takes the Lease, and the deleted pod's replacement needs a leader of its role
/// (the controller-manager creates it, the scheduler places it).
fn stop_every_possible_holder(
    obs: &Observation,
    hosts: &Hosts<'_>,
    pods: &[&PodObservation],
    acquired: Timestamp,
) -> Option<Step> {
    let name = obs.component.name();
    let backup_going = obs
        .backup
        .as_ref()
        .filter(|backup| backup.daemonset.deleting_since.is_some());
    // Going away for good: being deleted, or a pod of the backup being deleted.
    let going = |pod: &PodObservation| {
        pod.is_terminating()
            || backup_going.is_some_and(|backup| {
                backup
                    .daemonset
                    .pods
                    .iter()
                    .any(|p| p.name == pod.name && p.uid == pod.uid)
            })
    };
    let (leaving, staying): (Vec<&PodObservation>, Vec<&PodObservation>) = pods
        .iter()
        .copied()
        .filter(|pod| may_hold(obs, pod, acquired))
        .partition(|pod| going(pod));
    let pressed = !leaving.is_empty()
        || hosts
            .nodes
            .iter()
            .any(|node| seen_stopping_since(obs, node, acquired));
    let pod = staying.first()?;
    if !pressed {
        return None;
    }
    let possible_holder = |other: &PodObservation| {
        hosts.contains(other.node.as_deref()) && may_hold(obs, other, acquired)
    };
    let successor = obs.all_pods().any(|other| {
        other.node.as_deref().is_some_and(|n| obs.node_is_ready(n))
            && other.ready
            && other.is_running(name)
            && !going(other)
            && !possible_holder(other)
    });
    if !successor {
        return None;
    }
    let gone = match leaving.first() {
        Some(leaving) => format!("pod {} is going away", leaving.name),
        None => "a process that may hold it has stopped".to_string(),
    };
    let on = hosts.describe();
    Some(Step::StopPossibleLeaseHolder {
        pod: pod.name.clone(),
        uid: pod.uid.clone(),
        node: pod.node.clone().unwrap_or_default(),
        why: format!(
            "the Lease's holder acquired it at {acquired} on {on}, where {gone} while \
             {count} other {name} process(es) that may hold it run on; the holder cannot be \
             told apart, so they stop too and the Lease is handed over once none runs, rather \
             than left to expire with its holder possibly gone (a standby that cannot hold it \
             takes over)",
            count = staying.len(),
        ),
    })
}

/// Whether at most one process of the component can run now or later: every other pod of the
/// real and the backup DaemonSet is being deleted, on a Ready node (its status is current),
/// and its container no longer runs (a terminating pod's container is not restarted).
///
/// Then the holder is either gone or that one process, and deleting the Lease cannot make two
/// leaders: if the process holds it, its next renewal finds no Lease and creates it again
/// (client-go's `tryAcquireOrRenew` creates a missing Lease), else it is the only one that can
/// take it. This settles what start times cannot: the kubelet reports them in whole seconds,
/// and on one node the new pod's process often starts within the second the backup's process
/// acquired the Lease, which would otherwise leave the role leaderless for a whole lease
/// duration after the backup goes.
fn sole_candidate(obs: &Observation) -> bool {
    let name = obs.component.name();
    let may_run = obs
        .all_pods()
        .filter(|pod| {
            let status_current = pod.node.as_deref().is_some_and(|n| obs.node_is_ready(n));
            !(status_current && stopped_for_good(pod, name))
        })
        .count();
    may_run <= 1
}

/// Whether a process that may have held the Lease since `acquired` has stopped for good on
/// `node`: a pod there is being deleted and its container stopped, or the backup DaemonSet is
/// being deleted with no pod left there — unless that stop or deletion is known to precede the
/// acquisition (its whole-second time plus a second is no later). Only what is still visible
/// counts: once the stopped pod and the deleted backup are gone, a holder that survived a
/// hand-over (it found its Lease gone and created it again) is not pressed again.
fn stopped_since(obs: &Observation, node: &str, acquired: Timestamp) -> bool {
    let name = obs.component.name();
    let not_before = |t: Option<Timestamp>| {
        t.is_none_or(|t| {
            t.checked_add(SignedDuration::from_secs(1))
                .is_ok_and(|end| end > acquired)
        })
    };
    let on_node = |pod: &&PodObservation| pod.node.as_deref() == Some(node);
    let pod_stopped = obs.all_pods().filter(on_node).any(|pod| {
        // A container waiting to be restarted stopped at its last exit: without it, a stop
        // of unknown time would make every later acquisition look older than the stop.
        let finished = pod.main_container(name).and_then(|c| match &c.state {
            ContainerState::Terminated { finished_at, .. } => *finished_at,
            ContainerState::Waiting { .. } => c.last_exit_at,
            _ => None,
        });
        stopped_for_good(pod, name) && not_before(finished)
    });
    let backup_removed = obs.backup.as_ref().is_some_and(|backup| {
        backup.daemonset.deleting_since.is_some()
            && not_before(backup.daemonset.deleting_since)
            && backup.daemonset.pods.iter().filter(on_node).count() == 0
    });
    pod_stopped || backup_removed || seen_stopping_since(obs, node, acquired)
}

/// Whether every pod on the holder's node whose process may hold the Lease is a pod our own
/// update created, whose process started in the whole second of the acquisition: the start
/// time cannot say whether it started before, and the holder may as well be a process of a
/// pod already gone (the backup's, whose stop the engine may not have seen before the pod
/// vanished). Such a pod's process started after our update, so this arises only while a
/// pivot finishes, and at most for that second: a process that survived a hand-over
/// acquires again later.
fn only_new_pods_started_that_second(
    obs: &Observation,
    pods: &[&PodObservation],
    acquired: Timestamp,
) -> bool {
    let name = obs.component.name();
    let mut may_hold = pods
        .iter()
        .filter(|pod| match pod.main_container(name).map(|c| &c.state) {
            Some(ContainerState::Waiting { .. } | ContainerState::Terminated { .. }) => false,
            Some(ContainerState::Running { .. }) => {
                started_no_earlier_than(obs, pod).is_none_or(|s| s <= acquired)
            }
            _ => true,
        });
    may_hold.all(|pod| {
        created_after_our_write(obs, pod).is_some()
            && pod.process_started_at(name).is_some_and(|started| {
                started <= acquired
                    && started
                        .checked_add(SignedDuration::from_secs(1))
                        .is_ok_and(|end| end > acquired)
            })
    })
}

/// A pod being deleted whose component container no longer runs: the kubelet does not restart
/// it.
fn stopped_for_good(pod: &PodObservation, name: &str) -> bool {
    pod.is_terminating()
        && pod.main_container(name).is_some_and(|c| {
            matches!(
                c.state,
                ContainerState::Waiting { .. } | ContainerState::Terminated { .. }
            )
        })
}
