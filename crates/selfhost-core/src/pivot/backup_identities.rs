//! The backup's identity record ([`BACKUP_IDENTITIES`] on the real DaemonSet): which identity
//! holder is each backup pod's, as the run that updated the real DaemonSet proved it, kept
//! for a run that resumes after it, and the check of that record against an observation.
//!
//! A kube-apiserver pod serves when its own identity Lease vouches for it (`serving.rs`), and
//! on a Lease that every process of a host shares only a watcher that saw the hand-over knows
//! which holder is whose. A run killed during the rollout takes that knowledge with it: the
//! re-run finds each host's Lease held by the backup's process alone (a new pod that never
//! serves publishes nothing), cannot tell that holder from the new pod's, and so cannot prove
//! that the backup serves — which a rollback needs.
//!
//! So the update that starts the rollout (`backing_up.rs`) also records, on the real DaemonSet
//! ([`BACKUP_IDENTITIES`]), each backup pod proven serving by attribution: its uid, its
//! process (start time and restart count) and the holder identity attributed to it. A later
//! observation counts the backup pod as serving by that record only while
//! - the pod is the same pod, running the same process: same uid, the same start time and
//!   restart count of its main container (a restarted container is a new process with a new
//!   holder identity);
//! - the recorded holder is still renewed on its host's Lease ([`IDENTITY_FRESHNESS`]).
//!
//! Holder identities are unique per process, so a holder renewed now belongs to the process
//! it belonged to when the record was made; that process is still the pod's, so the pod
//! serves. A probe answered by another process cannot produce a record (the record holds
//! only attributions, never Ready), and a record names a pod uid, so it never speaks for a
//! later backup. Holders proven only by counting (every process of a host accounted for,
//! none attributed) are not recorded: once the other processes of the host change, nothing
//! would say which of the counted holders is the backup's.
//!
//! [`IDENTITY_FRESHNESS`]: crate::observation::IDENTITY_FRESHNESS

use serde::{Deserialize, Serialize};

use super::annotations::BACKUP_IDENTITIES;
use crate::observation::{IdentitySighting, Observation, PodObservation, sighting_node, time};

/// One backup pod's process and the identity holder attributed to it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RecordedIdentity {
    /// The backup pod's uid.
    pub pod_uid: String,
    /// Its node.
    pub node: String,
    /// When its main container's process started (the kubelet's `startedAt`, RFC 3339).
    pub process_started_at: String,
    /// Its main container's restart count then.
    pub restarts: i32,
    /// The identity Lease.
    pub lease: String,
    /// The holder identity attributed to the pod's process.
    pub holder: String,
}

/// The sighting of the holder recorded for backup pod `pod` (whose process started at
/// `started`), if the record still holds: same pod, same process, holder still renewed on
/// the pod's host.
pub(super) fn recorded_identity<'a>(
    obs: &'a Observation,
    pod: &PodObservation,
    started: k8s_openapi::jiff::Timestamp,
) -> Option<&'a IdentitySighting> {
    let uid = pod.uid.as_deref()?;
    let node = pod.node.as_deref()?;
    let backup = obs.backup.as_ref()?;
    // Only the backup's pods are recorded; a real pod of the same uid cannot exist, but the
    // record speaks for nothing else.
    if !backup
        .daemonset
        .pods
        .iter()
        .any(|p| p.uid.as_deref() == Some(uid))
    {
        return None;
    }
    let text = obs.real.as_ref()?.annotation(BACKUP_IDENTITIES)?;
    // An unreadable record proves nothing: the engine is only more cautious without it.
    let records: Vec<RecordedIdentity> = serde_json::from_str(text).ok()?;
    let restarts = pod.main_container(obs.component.name())?.restart_count;
    let record = records.into_iter().find(|r| {
        r.pod_uid == uid
            && r.node == node
            && r.restarts == restarts
            && time::parse(&r.process_started_at) == Some(started)
    })?;
    obs.identity_leases.iter().find(|sighting| {
        sighting.holder == record.holder
            && sighting.lease == record.lease
            && sighting.is_fresh(obs.now)
            && sighting_node(obs, sighting) == Some(node)
    })
}
