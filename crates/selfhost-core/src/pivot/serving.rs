//! When does a pod *serve*? Ready is not enough.
//!
//! A readiness probe of a host-network pod goes to `127.0.0.1:<port>`; with port sharing the
//! kernel hands it to whichever process it likes, so a starting kube-apiserver is reported
//! Ready within milliseconds because the old process answered. A kube-apiserver counts as
//! serving only when it says so itself: its own identity Lease appeared after its process
//! started and is being renewed. Clusters that publish no identity Leases (before 1.26, or
//! the `APIServerIdentity` gate off) fall back to Ready plus a soak from the process's start,
//! or Ready alone where no other process can have answered the probe (`Serving::Alone`).
//!
//! Holder identities are per process but say nothing about *which* pod they belong to, so a
//! pod counts as serving by identity in one of two ways (both only with holders renewed within
//! [`IDENTITY_FRESHNESS`](crate::observation::IDENTITY_FRESHNESS) on the pod's host):
//! - **attribution**: a holder whose [`IdentitySighting::holder_since`] is at or after the
//!   pod's process start, unless another apiserver process on the host started between the
//!   two (then the holder could be that one's). Exact when each process has its own Lease.
//!   Start times are whole seconds; a pod our own template write created started after that
//!   write, which we time exactly, so a holder seen before the write is never its.
//! - **counting**: the host has at least as many distinct holders renewed since its newest
//!   apiserver process started (plus a second, as start times are truncated to seconds) as it
//!   has running apiserver processes. Each process publishes one identity, so every process
//!   on the host serves. This is what works when all processes of a host share one Lease and
//!   take it over from each other on every renewal, and for processes that were already
//!   running when the engine started watching.
//!
//! - **elimination**: for a backup pod the engine created, when counting accounts for every
//!   process on the host and every holder but one was first seen (engine clock) before the
//!   backup was created: the one left is the backup pod's.
//! - **record**: for a backup pod, the holder that the run which updated the real DaemonSet
//!   attributed to it, while the pod runs the same process and the holder is renewed (see
//!   `backup_identities.rs`): a run resumed after that one was killed did not see the hand-overs.
//!
//! None can be fooled by a probe answered by another process: a process that does not
//! serve publishes nothing.
//!
//! An identity Lease names its host as the process sees it, the machine's hostname, which
//! need not be a node's name (see [`crate::observation::HostPlacement`]). A sighting whose host
//! tells no node attributes nothing; the nodes that no sighting is placed on then count as one
//! host for counting, with the sightings that tell no node as its holders (one control-plane
//! node is always the host of every sighting).
//!
//! Behind the node's API front none of this is needed: a kube-apiserver that listens on an
//! address of its own, which no other process of its node may listen at, answers its own
//! readiness probe (`own_address.rs`), and its Ready is the proof ([`Serving::OwnAddress`]).
//!
//! Controller-managers and schedulers publish nothing while on standby; for them serving
//! means running as a standby: Ready, running, on a Ready node.

use std::net::IpAddr;

use k8s_openapi::jiff::Timestamp;
use serde::Serialize;

use super::annotations::{
    APPLIED_OVER_GENERATION, BACKUP_CREATED_AT, ROLLBACK_STARTED_AT, UPDATE_STARTED_AT,
};
use super::backup_identities::recorded_identity;
use super::exclusion::runs_as_record_only;
use super::own_address::own_address;
use super::target::Target;
use crate::component::Component;
use crate::observation::{
    HostPlacement, IdentityPublishing, IdentitySighting, Observation, PodObservation,
    identity_publishing, sighting_node, time,
};

/// How a pod was found to serve.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case", tag = "by")]
pub enum Serving {
    /// A kube-apiserver whose own identity Lease vouches for it.
    Identity {
        /// The Lease.
        lease: String,
        /// The holder identity attributed to the pod.
        holder: String,
    },
    /// A backup kube-apiserver pod whose holder the run that updated the real DaemonSet
    /// attributed to it, still renewed by the same process (see `backup_identities.rs`): what a
    /// resumed run knows of hand-overs it did not watch.
    Recorded {
        /// The Lease.
        lease: String,
        /// The holder identity recorded for the pod.
        holder: String,
    },
    /// A kube-apiserver on a host with as many live identities as apiserver processes.
    Identities {
        /// The holders live on the host.
        holders: Vec<String>,
    },
    /// A kube-apiserver on a cluster without identity Leases, Ready, its process running for
    /// longer than the soak.
    Soaked,
    /// A kube-apiserver on a cluster without identity Leases whose Ready can only be its own
    /// answer: see `answers_its_own_probe`.
    Alone,
    /// A kube-apiserver listening, and probed, on an address no other process of its node
    /// may listen at (behind the node's API front): its Ready is its own answer.
    OwnAddress {
        /// The address.
        address: IpAddr,
    },
    /// A controller-manager or scheduler running as a standby (or leader).
    Standby,
}

/// Whether `pod` (of the real or the backup DaemonSet) serves; `Err` says why not.
pub fn pod_serves(
    obs: &Observation,
    target: &Target,
    pod: &PodObservation,
) -> Result<Serving, String> {
    let name = obs.component.name();
    let node = pod.node.as_deref().unwrap_or("(unscheduled)");
    if pod.is_terminating() {
        return Err(format!("{node}: pod {} is terminating", pod.name));
    }
    if !obs.node_is_ready(node) {
        return Err(format!("{node}: node is not Ready; waiting for it"));
    }
    let Some(started) = pod.process_started_at(name) else {
        return Err(format!(
            "{node}: pod {} has no running {name} process",
            pod.name
        ));
    };
    if !pod.ready {
        return Err(format!("{node}: pod {} is not Ready", pod.name));
    }
    if obs.component != Component::ApiServer {
        return Ok(Serving::Standby);
    }
    if let Some(address) = own_address(obs, pod) {
        return Ok(Serving::OwnAddress { address });
    }
    match identity_publishing(obs) {
        IdentityPublishing::NotPublished if answers_its_own_probe(obs, pod, name) => {
            Ok(Serving::Alone)
        }
        IdentityPublishing::NotPublished => {
            // The soak runs from the process's start: what it waits for is the process
            // serving, and a Ready on a shared port may be another process's answer.
            let soak = target.options.identity_fallback_soak;
            if time::age(obs.now, started) >= soak {
                Ok(Serving::Soaked)
            } else {
                Err(format!(
                    "{node}: pod {} is Ready; soaking until {} (this cluster publishes no \
                     apiserver identity Leases)",
                    pod.name,
                    time::after(started, soak)
                ))
            }
        }
        IdentityPublishing::Published | IdentityPublishing::Undetermined { .. } => {
            // The process started no earlier than this: its whole-second start, or our own
            // write that created the pod, known to the millisecond. A holder first seen
            // before then is another process's — the backup's, taking its host's Lease back
            // in the second the restored pod started.
            let since = started_no_earlier_than(obs, pod).unwrap_or(started);
            if let Some(sighting) = attributed_identity(obs, pod, since) {
                return Ok(Serving::Identity {
                    lease: sighting.lease.clone(),
                    holder: sighting.holder.clone(),
                });
            }
            if let Some(sighting) = recorded_identity(obs, pod, started) {
                return Ok(Serving::Recorded {
                    lease: sighting.lease.clone(),
                    holder: sighting.holder.clone(),
                });
            }
            if let Some(sighting) = eliminated_identity(obs, pod) {
                return Ok(Serving::Identity {
                    lease: sighting.lease.clone(),
                    holder: sighting.holder.clone(),
                });
            }
            match counted_identities(obs, pod) {
                Some((holders, _)) => Ok(Serving::Identities { holders }),
                None => {
                    let unplaced = unplaced_nodes(obs);
                    let counted_with = if unplaced.len() > 1 && unplaced.contains(&node) {
                        format!(
                            "; the identity Leases name hosts that are no single node's, so it \
                             counts once every kube-apiserver on {} has renewed one since",
                            unplaced.join(", ")
                        )
                    } else {
                        String::new()
                    };
                    Err(format!(
                        "{node}: pod {} is Ready, but no identity Lease of its own has appeared \
                         since its process started at {started} (Ready alone can be answered \
                         by another process on a shared port){counted_with}",
                        pod.name
                    ))
                }
            }
        }
    }
}

/// Whether nobody but `pod`'s own process can have answered its readiness probe: the backup
/// runs as a record only (the held rollout on two nodes or more: no backup process on the
/// pod's node), `pod` is the real DaemonSet's current pod, which its controller creates only
/// once the node's previous pod is gone, and no other kube-apiserver process runs on its
/// node. A backup pod vacated from the node earlier left the port after its shutdown delay,
/// before the old pod it preceded was gone. The soak stands in for a proof only where
/// another process shares the port; here Ready is the proof.
fn answers_its_own_probe(obs: &Observation, pod: &PodObservation, name: &str) -> bool {
    let record_only = obs.backup.as_ref().is_some_and(runs_as_record_only);
    let current = obs.real.as_ref().is_some_and(|real| real.is_current(pod));
    let others_on_node = obs
        .all_pods()
        .any(|other| other.uid != pod.uid && other.node == pod.node && other.is_running(name));
    record_only && current && !others_on_node
}

/// Whether a kube-apiserver pod whose readiness probe fails serves all the same by its own
/// identity Lease: on a shared port the kubelet's probe of one container can be answered by
/// another process on the node — a new kube-apiserver that never gets Ready answers it with
/// 500 — so the backup's pod turns not Ready while its process keeps serving and renewing its
/// identity. Only where another kube-apiserver process runs on the node (without one the probe
/// cannot lie), and only by an identity attributed to this very process since it started.
pub(crate) fn serves_despite_its_probe(
    obs: &Observation,
    target: &Target,
    pod: &PodObservation,
) -> bool {
    if pod_serves(obs, target, pod).is_ok() {
        return true;
    }
    // A probe aimed at the pod's own address cannot be answered by another process: its
    // failure is the pod's own.
    if obs.component != Component::ApiServer
        || pod.is_terminating()
        || own_address(obs, pod).is_some()
    {
        return false;
    }
    let name = obs.component.name();
    let (Some(node), Some(started)) = (pod.node.as_deref(), pod.process_started_at(name)) else {
        return false;
    };
    let shares_its_port = obs.all_pods().any(|other| {
        other.name != pod.name && other.node.as_deref() == Some(node) && other.is_running(name)
    });
    obs.node_is_ready(node) && shares_its_port && attributed_identity(obs, pod, started).is_some()
}

/// When the soak of `pod` ends, if the cluster uses the soak fallback and the pod is soaking.
pub(crate) fn soak_ends_at(
    obs: &Observation,
    target: &Target,
    pod: &PodObservation,
) -> Option<Timestamp> {
    if obs.component != Component::ApiServer
        || identity_publishing(obs) != IdentityPublishing::NotPublished
        || !pod.ready
        || own_address(obs, pod).is_some()
    {
        return None;
    }
    let started = pod.process_started_at(obs.component.name())?;
    let end = time::after(started, target.options.identity_fallback_soak);
    (end > obs.now).then_some(end)
}

fn attributed_identity<'a>(
    obs: &'a Observation,
    pod: &PodObservation,
    started: Timestamp,
) -> Option<&'a IdentitySighting> {
    let node = pod.node.as_deref()?;
    obs.identity_leases
        .iter()
        .filter(|sighting| sighting_node(obs, sighting) == Some(node))
        .filter(|sighting| sighting.is_fresh(obs.now))
        .filter(|sighting| sighting.holder_since.is_some_and(|since| since >= started))
        .find(|sighting| !ambiguous(obs, pod, started, sighting))
}

/// A backup pod's holder by elimination, where counting accounts for every process of the
/// host but attributes none (the kubelet's whole-second start times cannot order processes
/// started within one second, as on a freshly booted cluster).
///
/// With exactly as many fresh holders as apiserver processes on the host, each holder is one
/// of those processes'. A holder the engine first saw before it created the backup
/// ([`BACKUP_CREATED_AT`], both on the engine's clock) belongs to a process that existed
/// before any backup pod did. If all holders but one are such, the one left is the backup
/// pod's. Only for a backup this run's engine created (its creation time by the API is not
/// before that moment's second; an adopted kubeadm backup's pods may be older than the
/// adoption).
fn eliminated_identity<'a>(
    obs: &'a Observation,
    pod: &PodObservation,
) -> Option<&'a IdentitySighting> {
    let backup = obs.backup.as_ref()?;
    if !backup
        .daemonset
        .pods
        .iter()
        .any(|p| p.name == pod.name && p.uid == pod.uid)
    {
        return None;
    }
    let created_by_us = backup
        .daemonset
        .annotation(BACKUP_CREATED_AT)
        .and_then(time::parse)?;
    // The API's creation time has whole seconds: a backup we created was created in the
    // second of our record or later (a second of allowance for the two clocks).
    let created = backup.daemonset.created?;
    if time::after(created, std::time::Duration::from_secs(2)) <= created_by_us {
        return None;
    }
    let node = pod.node.as_deref()?;
    let (holders, processes) = counted_identities(obs, pod)?;
    if holders.len() != processes {
        return None;
    }
    let mut newer: Vec<&IdentitySighting> = obs
        .identity_leases
        .iter()
        .filter(|s| sighting_node(obs, s) == Some(node) && s.is_fresh(obs.now))
        .filter(|s| holders.contains(&s.holder))
        .filter(|s| s.first_seen.is_none_or(|seen| seen >= created_by_us))
        .collect();
    newer.sort_by(|a, b| a.holder.cmp(&b.holder));
    newer.dedup_by(|a, b| a.holder == b.holder);
    match newer.as_slice() {
        [only] => Some(only),
        _ => None,
    }
}

/// The holders that make every apiserver process on the pod's host accounted for, if they
/// do (see the module documentation), with the number of those processes.
///
/// Where the pod's node has no sighting placed on it and some sightings tell no node, the
/// host is every node of [`unplaced_nodes`], and the holders are the unplaced sightings': each
/// process publishes one identity wherever it runs, so as many fresh holders as processes on
/// those nodes account for all of them just as on one host.
fn counted_identities(obs: &Observation, pod: &PodObservation) -> Option<(Vec<String>, usize)> {
    let node = pod.node.as_deref()?;
    let unplaced_nodes = unplaced_nodes(obs);
    let grouped = unplaced_nodes.contains(&node);
    let group: Vec<&str> = if grouped { unplaced_nodes } else { vec![node] };
    let name = obs.component.name();
    let on_host: Vec<&PodObservation> = obs
        .all_pods()
        .filter(|p| p.node.as_deref().is_some_and(|n| group.contains(&n)))
        .filter(|p| {
            p.main_container(name).is_none_or(|c| {
                matches!(
                    c.state,
                    crate::observation::ContainerState::Running { .. }
                        | crate::observation::ContainerState::Unknown
                )
            })
        })
        .collect();
    // A process whose start is unknown could be anything: nothing can be counted.
    let starts: Option<Vec<Timestamp>> =
        on_host.iter().map(|p| p.process_started_at(name)).collect();
    let newest = starts?.into_iter().max()?;
    let since = time::after(newest, std::time::Duration::from_secs(1));
    let of_host = |s: &IdentitySighting| {
        if grouped {
            unplaced(obs, s)
        } else {
            sighting_node(obs, s) == Some(node)
        }
    };
    let mut holders: Vec<String> = obs
        .identity_leases
        .iter()
        .filter(|s| of_host(s) && s.is_fresh(obs.now))
        .filter(|s| s.last_renewed.is_some_and(|renewed| renewed >= since))
        .map(|s| s.holder.clone())
        .collect();
    holders.sort();
    holders.dedup();
    (holders.len() >= on_host.len()).then_some((holders, on_host.len()))
}

/// Whether a sighting's host is a host the nodes do not tell (see [`unplaced_nodes`]).
fn unplaced(obs: &Observation, sighting: &IdentitySighting) -> bool {
    sighting
        .hostname
        .as_deref()
        .is_some_and(|host| obs.place_host(host) == HostPlacement::AnyNode)
}

/// The control-plane nodes no identity sighting is placed on, when some sighting's host tells
/// no node: the machines of those nodes publish under hostnames that are not the nodes' (or
/// all under one shared hostname), and the unplaced sightings are theirs. Their processes are
/// counted together, as the processes of one host are.
fn unplaced_nodes(obs: &Observation) -> Vec<&str> {
    if !obs.identity_leases.iter().any(|s| unplaced(obs, s)) {
        return Vec::new();
    }
    obs.nodes
        .iter()
        .map(|node| node.name.as_str())
        .filter(|node| {
            !obs.identity_leases
                .iter()
                .any(|s| sighting_node(obs, s) == Some(*node))
        })
        .collect()
}

/// Whether another apiserver process on the pod's node started between the pod's process and
/// the holder's appearance: then the holder may be that process's.
fn ambiguous(
    obs: &Observation,
    pod: &PodObservation,
    started: Timestamp,
    sighting: &IdentitySighting,
) -> bool {
    let Some(since) = sighting.holder_since else {
        return true;
    };
    obs.all_pods()
        .filter(|other| other.name != pod.name && other.node == pod.node)
        .filter_map(|other| started_no_earlier_than(obs, other))
        .any(|other_start| other_start >= started && other_start <= since)
}

/// The earliest moment `pod`'s apiserver process can have started.
///
/// The kubelet reports start times in whole seconds, so two processes started within one
/// second look simultaneous, and a holder that appeared in that second could be either's. One
/// more fact is exact: a pod of the real DaemonSet created from a template generation after
/// the one selfhost last wrote over ([`APPLIED_OVER_GENERATION`]) exists because of that
/// write, so its process started after it — after [`UPDATE_STARTED_AT`], or
/// [`ROLLBACK_STARTED_AT`] if the write was a rollback (recorded just before the write, with
/// the engine's clock). A holder the engine saw before its own update can then be told from
/// the pods the update created, however close in time (on one node the update follows the
/// backup's first renewal by well under a second with fast pod latencies). The same holds for
/// a pod in [`Observation::known_starts`]: a static pod from a manifest the engine wrote.
pub(super) fn started_no_earlier_than(
    obs: &Observation,
    pod: &PodObservation,
) -> Option<Timestamp> {
    let started = pod.process_started_at(obs.component.name())?;
    // The engine's record of its own writes: a static manifest it wrote made the pod.
    let known = obs
        .known_starts
        .iter()
        .filter(|k| pod.uid.as_deref() == Some(k.pod_uid.as_str()))
        .map(|k| k.not_before);
    Some(
        created_after_our_write(obs, pod)
            .into_iter()
            .chain(known)
            .fold(started, Timestamp::max),
    )
}

/// When selfhost wrote the real DaemonSet's template that `pod` was created from, if `pod` is
/// a real pod created from that write.
pub(super) fn created_after_our_write(
    obs: &Observation,
    pod: &PodObservation,
) -> Option<Timestamp> {
    let real = obs.real.as_ref()?;
    if !real
        .pods
        .iter()
        .any(|p| p.name == pod.name && p.uid == pod.uid)
    {
        return None;
    }
    let over: i64 = real
        .annotation(APPLIED_OVER_GENERATION)?
        .trim()
        .parse()
        .ok()?;
    if pod.template_generation? <= over {
        return None;
    }
    real.annotation(ROLLBACK_STARTED_AT)
        .or_else(|| real.annotation(UPDATE_STARTED_AT))
        .and_then(time::parse)
}
