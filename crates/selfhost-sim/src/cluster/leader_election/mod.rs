//! Leader election as client-go's `leaderelection` package performs it, for one process: the
//! decisions of one candidate against the Lease record, with its clock and back-off, and
//! nothing about how the record is read or written (see `leader_election_task.rs`).
//!
//! A candidate tries to acquire at once when it starts, then every retry period plus a jitter
//! of up to 1.2 periods. It takes the Lease when there is none, when the holder is empty (a
//! released Lease), or when the record has not changed for a whole lease duration *as this
//! candidate observed it* (client-go measures expiry from the moment it last saw the record
//! change, not from `renewTime`). The holder renews every retry period; when no renewal
//! succeeds within the renew deadline of a round, it has lost the Lease
//! (`leaderelection lost`): kube-controller-manager and kube-scheduler exit then.
//!
//! Each process runs on its own clock, read from its command line as the real components
//! read it (`--leader-elect-lease-duration`, `--leader-elect-renew-deadline`,
//! `--leader-elect-retry-period`; the cluster's [`LeaderElectionTimings`] for any flag it does
//! not pass), and refuses to elect with a combination client-go's `NewLeaderElector` rejects.
//! A standby judges expiry by its own lease duration (client-go before v1.27; later releases
//! read the holder's `leaseDurationSeconds` — the same thing while every process passes the
//! same lease duration, as the templates selfhost writes do).
//!
//! One file a part: the clock a process reads from its flags (`timings.rs`), what a Lease
//! says (`leader_record.rs`), one candidate's decisions (`candidate.rs`), and whether a
//! stopping leader releases its Lease (`lease_release.rs`).

mod candidate;
mod leader_record;
mod lease_release;
mod timings;

use super::model::Role;

pub(super) use candidate::{Candidate, Due};
pub(super) use leader_record::LeaderRecord;
pub use lease_release::LeaseRelease;
pub use timings::LeaderElectionTimings;
pub(super) use timings::whole_seconds;

/// The namespace of the leader-election Leases.
pub const LEADER_LEASE_NAMESPACE: &str = "kube-system";

/// The Lease a role elects its leader through (`kube-system/<binary>`).
pub fn leader_lease_name(role: Role) -> &'static str {
    role.binary()
}

/// The upstream clock, which the tests of every part start from.
#[cfg(test)]
fn timings() -> LeaderElectionTimings {
    LeaderElectionTimings::realistic()
}

/// `s` whole seconds, the tests' unit.
#[cfg(test)]
fn secs(s: u64) -> std::time::Duration {
    std::time::Duration::from_secs(s)
}
