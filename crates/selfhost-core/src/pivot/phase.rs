//! The phases of a pivot: where one component stands, read from one observation.
//!
//! [`super::phase()`] derives the phase and [`super::next_step`] decides by it; both read the
//! observation the same way (`decide.rs`).

use serde::{Serialize, Serializer};

/// Where one component's pivot stands, and so which decision its next step comes from.
///
/// Each phase says what is true of the cluster; the steps it takes move the component to a
/// later phase, or end the run. A run moves, when all goes well, through
/// [`Starting`](Phase::Starting) → [`BackingUp`](Phase::BackingUp) →
/// [`RollingOut`](Phase::RollingOut) → [`DrainingBackup`](Phase::DrainingBackup) or
/// [`DeletingBackup`](Phase::DeletingBackup) → [`Verifying`](Phase::Verifying); a failed rollout
/// goes through [`RollingBack`](Phase::RollingBack) and
/// [`FinishingRollback`](Phase::FinishingRollback) instead of verifying.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Phase {
    /// The real DaemonSet does not exist: the component is not self-hosted, or only its
    /// backup is left. Refused.
    Missing,
    /// No backup, but the real DaemonSet's rollout is still held (`OnDelete`, written by
    /// selfhost; the backup removed by hand): its own update strategy is written back first.
    ReleasingHold,
    /// No backup, and this run rolled the real DaemonSet back: the original pods come back
    /// and a leader is handed over, then the run ends rolled back.
    FinishingRollback,
    /// No backup, and the real DaemonSet runs on no node: there is nothing to hand over.
    /// Refused.
    NoPods,
    /// No backup, and the real DaemonSet is on the target: the end of a pivot, or a component
    /// that needed none. Its rollout completes, then the component is verified; done.
    Verifying,
    /// No backup, and the real DaemonSet is not on the target: the start checks (nodes Ready,
    /// the DaemonSet converged, a shape the pivot can hand over on), then the backup.
    Starting,
    /// The backup DaemonSet is being deleted: its pods go, and the run waits until they have.
    DeletingBackup,
    /// The backup is being removed one node at a time (the kube-apiserver's with pods): the
    /// next node once the last one's backup process has stopped.
    DrainingBackup,
    /// A backup exists that this run must not take over without `--force`: its record
    /// cannot be read, or a run towards another version made it. Refused.
    BlockedByBackup,
    /// A backup this run did not make is taken over: kubeadm's, or with `--force` one whose
    /// record cannot be read or that a run towards another version made.
    AdoptingBackup,
    /// Our backup exists, and this run's rollback put the real DaemonSet back on its original
    /// template: the restored pods come to serve, then the backup goes.
    RollingBack,
    /// Our backup exists and the real DaemonSet is on the target: its new pods roll out (the
    /// kube-apiserver's held node by node), then the backup goes; a failure rolls back.
    RollingOut,
    /// Our backup exists and the real DaemonSet is not on the target yet: the backup comes to
    /// serve on every node (a record-only backup runs no pod), then the real DaemonSet is
    /// updated.
    BackingUp,
}

impl Phase {
    /// Every phase, in the order a pivot meets them when it starts from scratch (the ones
    /// that end a run first).
    pub const ALL: [Phase; 13] = [
        Phase::Missing,
        Phase::NoPods,
        Phase::BlockedByBackup,
        Phase::Starting,
        Phase::AdoptingBackup,
        Phase::BackingUp,
        Phase::RollingOut,
        Phase::RollingBack,
        Phase::DrainingBackup,
        Phase::DeletingBackup,
        Phase::ReleasingHold,
        Phase::FinishingRollback,
        Phase::Verifying,
    ];

    /// A stable kebab-case name, for events and reports.
    pub fn name(self) -> &'static str {
        match self {
            Phase::Missing => "missing",
            Phase::ReleasingHold => "releasing-hold",
            Phase::FinishingRollback => "finishing-rollback",
            Phase::NoPods => "no-pods",
            Phase::Verifying => "verifying",
            Phase::Starting => "starting",
            Phase::DeletingBackup => "deleting-backup",
            Phase::DrainingBackup => "draining-backup",
            Phase::BlockedByBackup => "blocked-by-backup",
            Phase::AdoptingBackup => "adopting-backup",
            Phase::RollingBack => "rolling-back",
            Phase::RollingOut => "rolling-out",
            Phase::BackingUp => "backing-up",
        }
    }

    /// A few words an operator reads: what the pivot is doing in this phase.
    pub fn describe(self) -> &'static str {
        match self {
            Phase::Missing => "no self-hosted DaemonSet to upgrade",
            Phase::ReleasingHold => "giving the rollout back to the DaemonSet controller",
            Phase::FinishingRollback => "waiting for the original pods after the rollback",
            Phase::NoPods => "no pods to hand over",
            Phase::Verifying => "verifying the upgraded component",
            Phase::Starting => "checking the cluster, then creating the backup",
            Phase::DeletingBackup => "waiting for the backup to be deleted",
            Phase::DrainingBackup => "removing the backup one node at a time",
            Phase::BlockedByBackup => "blocked by a backup this run did not make",
            Phase::AdoptingBackup => "taking over an existing backup",
            Phase::RollingBack => "rolling back to the original template",
            Phase::RollingOut => "rolling out the target",
            Phase::BackingUp => "waiting for the backup to serve",
        }
    }
}

/// Serialised as its [`name`](Phase::name).
impl Serialize for Phase {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.name())
    }
}
