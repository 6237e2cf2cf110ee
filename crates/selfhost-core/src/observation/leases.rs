//! The Leases a decision reads: kube-apiserver identities, and the leader Lease of the
//! controller-manager or scheduler.

use std::time::Duration;

use k8s_openapi::jiff::Timestamp;
use serde::Serialize;

use super::time;

/// How long after its last renewal an identity Lease still proves that its kube-apiserver
/// process serves. kube-apiserver renews its identity every 10 s; three periods tolerate one
/// slow or lost renewal without treating a live process as gone.
pub const IDENTITY_FRESHNESS: Duration = Duration::from_secs(30);

/// One holder of a kube-apiserver identity Lease.
///
/// kube-apiserver (≥ 1.26, `APIServerIdentity`) publishes a Lease labelled
/// `apiserver.kubernetes.io/identity=kube-apiserver` once it serves, holder identity unique
/// per process, renewed every 10 s. Depending on the version the Lease is named after the
/// process (holder = name) or after a hash of the host name, in which case every process on
/// that host takes the same Lease over with its own holder identity. So one entry here is one
/// (Lease, holder) pair.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct IdentitySighting {
    /// The Lease's name.
    pub lease: String,
    /// The Lease's `kubernetes.io/hostname` label: the host the process runs on.
    pub hostname: Option<String>,
    /// The holder identity (one per kube-apiserver process).
    pub holder: String,
    /// When this holder is known to have started holding the Lease: the Lease's creation time
    /// when the Lease is named after its holder (it was created by that process), or the first
    /// renewal the engine saw with this holder after it had seen another holder on the same
    /// Lease. `None` when the holder already held the Lease when the engine started watching:
    /// then nothing proves *which* process it is, and it vouches for no new pod.
    pub holder_since: Option<Timestamp>,
    /// The latest renewal seen with this holder.
    pub last_renewed: Option<Timestamp>,
    /// When the engine first saw this holder, by the engine's own clock (the one
    /// [`Observation::now`](super::Observation::now) comes from): its process existed then. `None`
    /// when unknown (one Lease read on its own). A holder first seen before selfhost created the
    /// backup cannot be a backup process's.
    pub first_seen: Option<Timestamp>,
}

impl IdentitySighting {
    /// Whether the holder renewed recently enough to be alive (see [`IDENTITY_FRESHNESS`]).
    pub fn is_fresh(&self, now: Timestamp) -> bool {
        self.last_renewed
            .is_some_and(|renewed| time::age(now, renewed) <= IDENTITY_FRESHNESS)
    }
}

/// The leader-election Lease of the controller-manager or the scheduler.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LeaderLease {
    /// The Lease's name (`kube-controller-manager` or `kube-scheduler`).
    pub name: String,
    /// Its uid.
    pub uid: Option<String>,
    /// Its resourceVersion: the precondition of a hand-over.
    pub resource_version: Option<String>,
    /// `holderIdentity`: `<hostname>_<uuid>`, unique per process; empty when released.
    pub holder: Option<String>,
    /// `acquireTime`: when the holder acquired the Lease.
    pub acquire_time: Option<Timestamp>,
    /// `renewTime`: the holder's latest renewal.
    pub renew_time: Option<Timestamp>,
    /// `leaseDurationSeconds`: how long after `renewTime` a standby may take the Lease.
    pub lease_duration_seconds: Option<i32>,
    /// `leaseTransitions`.
    pub transitions: Option<i32>,
}

impl LeaderLease {
    /// The holder identity, if the Lease is held (not empty).
    pub fn holder(&self) -> Option<&str> {
        self.holder.as_deref().filter(|h| !h.is_empty())
    }

    /// The host part of the holder identity (`cp-1` in `cp-1_0f6e…`).
    pub fn holder_hostname(&self) -> Option<&str> {
        self.holder()
            .map(|holder| holder.rsplit_once('_').map_or(holder, |(host, _)| host))
    }

    /// When a standby may take the Lease without help: `renewTime + leaseDurationSeconds`.
    pub fn expires_at(&self) -> Option<Timestamp> {
        let renewed = self.renew_time?;
        let seconds = u64::try_from(self.lease_duration_seconds?).ok()?;
        Some(time::after(renewed, Duration::from_secs(seconds)))
    }

    /// Whether the Lease is held and not expired at `now`.
    pub fn is_held_at(&self, now: Timestamp) -> bool {
        self.holder().is_some() && self.expires_at().is_some_and(|expiry| now < expiry)
    }
}
