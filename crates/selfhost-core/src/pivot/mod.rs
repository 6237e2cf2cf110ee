//! The pivot state machine: from what the cluster looks like now to the one thing to do next.
//!
//! [`next_step`] is the whole upgrade of one component (see docs/design.md, "The pivot"):
//! back up the real DaemonSet, wait until the backup really serves, update the real
//! DaemonSet, wait for its rollout, remove the backup, verify — or roll back. On two nodes or
//! more the kube-apiserver's backup is a record only, with no pods, and there is nothing to
//! wait for: the other nodes serve while one is replaced (see `vacate.rs`). It is a pure
//! function of an [`Observation`](crate::observation::Observation) and a [`Target`]; the
//! engine reads the cluster, calls it, performs the returned [`Step`] (one API action, or one
//! wait on a named condition), and reads again.
//!
//! # Phases
//!
//! Every observation is in exactly one [`Phase`] ([`phase()`]), and each phase has one decision.
//! `decide.rs` is the place to start reading: it classifies the observation, in the order
//! below, and dispatches to the phase's decision with one `match`.
//!
//! | phase | what is true | what it does |
//! |---|---|---|
//! | [`Missing`](Phase::Missing) | no real DaemonSet | refuses |
//! | no backup: | | |
//! | [`ReleasingHold`](Phase::ReleasingHold) | the rollout is held (`hold.rs`) | writes the real DaemonSet's own update strategy back |
//! | [`FinishingRollback`](Phase::FinishingRollback) | this run rolled back | waits for the original pods and a leader; rolled back |
//! | [`NoPods`](Phase::NoPods) | the real DaemonSet runs on no node | refuses |
//! | [`Verifying`](Phase::Verifying) | the real DaemonSet is on the target | waits for its rollout, verifies (`verifying.rs`); done |
//! | [`Starting`](Phase::Starting) | the real DaemonSet is not on the target | start checks, then creates the backup (`starting.rs`) |
//! | with a backup: | | |
//! | [`DeletingBackup`](Phase::DeletingBackup) | it is being deleted | waits until it is gone (`drain.rs`) |
//! | [`DrainingBackup`](Phase::DrainingBackup) | its removal node by node has begun | removes it from the next node (`drain.rs`) |
//! | [`BlockedByBackup`](Phase::BlockedByBackup) | its record is unreadable, or it is for another target, and no `--force` | refuses (`foreign_backup.rs`) |
//! | [`AdoptingBackup`](Phase::AdoptingBackup) | kubeadm's, or unreadable or for another target with `--force` | adopts it (`foreign_backup.rs`) |
//! | [`RollingBack`](Phase::RollingBack) | our rollback put the original template back | waits until the restored pods serve, removes the backup (`rolling_back.rs`) |
//! | [`RollingOut`](Phase::RollingOut) | the real DaemonSet is on the target | waits for the rollout (held node by node: `hold.rs`, `vacate.rs`, `replacing.rs`), removes the backup; rolls back on failure (`rolling_out.rs`) |
//! | [`BackingUp`](Phase::BackingUp) | the real DaemonSet is not on the target yet | waits until the backup serves, updates the real DaemonSet (`backing_up.rs`) |
//!
//! Behind each node's API front (the real kube-apiserver DaemonSet annotated
//! [`crate::front::FRONT_ANNOTATION`]) the phases are the same; a few of their decisions differ,
//! because the backup listens on an address of its own and the front moves new connections:
//! `front.rs` has the table.
//!
//! Steps that only speed a wait up — a gone leader's Lease handed over (`leader.rs`), a
//! lingering kube-apiserver deleted again with a short grace (`linger.rs`) — may come first in
//! the phases that wait. Every interrupted state is in some phase, whose decision continues
//! it: that is what makes `apply` resumable.
//!
//! # What a run remembers
//!
//! What a run must remember between steps lives in the cluster, written by the steps
//! themselves (`annotations.rs`):
//!
//! | where | what | written by |
//! |---|---|---|
//! | backup DaemonSet | target version, original template ([`crate::backup`]) | [`Step::CreateBackup`], [`Step::AdoptBackup`] |
//! | backup DaemonSet | [`BACKUP_CREATED_AT`]: start of the backup wait | [`Step::CreateBackup`] |
//! | backup DaemonSet | [`crate::front::FRONT_ANNOTATION`], as on the real DaemonSet: the backup's pods listen on its backup address (`front.rs`) | [`Step::CreateBackup`] |
//! | real DaemonSet | [`UPDATE_STARTED_AT`]: start of the rollout deadline | [`Step::UpdateReal`] |
//! | real DaemonSet | [`BACKUP_IDENTITIES`]: which identity holder is each backup pod's | [`Step::UpdateReal`] |
//! | real DaemonSet | [`APPLIED_TEMPLATE_HASH`], [`APPLIED_OVER_GENERATION`]: which template we applied on top of which | [`Step::UpdateReal`], [`Step::RollBack`] |
//! | real DaemonSet | [`ROLLBACK_STARTED_AT`], [`ROLLBACK_REASON`]: a rollback and why | [`Step::RollBack`] |
//! | backup DaemonSet | [`BACKUP_DRAINED_NODES`], [`BACKUP_DRAIN_STEP_AT`]: the backup's removal node by node (`drain.rs`) | [`Step::DrainBackupNode`] |
//! | backup DaemonSet | [`BACKUP_DRAINED_NODES`] alone: nodes vacated of the backup during the held rollout, before their real pod is replaced (`vacate.rs`) | [`Step::DrainBackupNode`] |
//! | backup DaemonSet | [`BACKUP_DRAINED_NODES`] alone, every node, from the start: the kube-apiserver's backup on two nodes or more is a record only and runs no pod (`vacate.rs`) | [`Step::CreateBackup`] |
//! | real DaemonSet | [`LEADER_AFTER_HAND_OVER`]: the leader Lease this run saw created again after its own hand-over (`leader.rs`) | [`Step::RecordLeader`] |
//! | real DaemonSet | [`HELD_UPDATE_STRATEGY`]: the strategy `OnDelete` replaced while the apiserver's rollout is held (`hold.rs`) | [`Step::UpdateReal`]; removed by [`Step::RestoreUpdateStrategy`], [`Step::RollBack`] |
//!
//! All our times are written with the engine's clock, the one
//! [`Observation::now`](crate::observation::Observation::now) comes from, so deadlines never
//! compare two machines' clocks; only identity and leader Leases and pod start times (kubelet
//! and API server clocks) are compared with `now`, as Kubernetes itself does, assuming clocks
//! synchronised to within a second or so.

mod annotations;
mod backing_up;
mod backup_identities;
mod backup_template;
mod decide;
mod decision_inputs;
mod drain;
mod exclusion;
mod foreign_backup;
mod front;
mod hold;
mod leader;
mod linger;
mod new_leader;
mod own_address;
mod pending;
mod phase;
mod refusals;
mod replacing;
mod rolling_back;
mod rolling_out;
mod serving;
mod shutdown;
mod starting;
mod step;
mod target;
#[cfg(test)]
mod tests;
mod update_strategy;
mod vacate;
mod verifying;

pub use crate::observation::{IdentityPublishing, identity_publishing};
pub use annotations::{
    APPLIED_OVER_GENERATION, APPLIED_TEMPLATE_HASH, BACKUP_CREATED_AT, BACKUP_DRAIN_STEP_AT,
    BACKUP_DRAINED_NODES, BACKUP_IDENTITIES, HELD_UPDATE_STRATEGY, LEADER_AFTER_HAND_OVER,
    ROLLBACK_REASON, ROLLBACK_STARTED_AT, UPDATE_STARTED_AT, template_applied,
};
pub use backup_identities::RecordedIdentity;
pub use backup_template::{backup_daemonset, with_port_sharing};
pub use decide::{next_step, phase};
pub use exclusion::{exclude_nodes, runs_as_record_only};
pub use leader::lease_hand_over;
pub use new_leader::{LEADER_ELECT_FLAG, leader_is_new_process};
pub use phase::Phase;
pub use serving::{Serving, pod_serves};
pub use step::{Step, Update, Wait, Watch};
pub use target::{
    DEFAULT_CRASH_LOOP_RESTARTS, DEFAULT_DEADLINE, DEFAULT_IDENTITY_FALLBACK_SOAK,
    DEFAULT_SHORTENED_GRACE, PivotOptions, Target,
};
pub use update_strategy::describe_strategy;
