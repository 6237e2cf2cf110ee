//! The pivot state machine: from what the cluster looks like now to the one thing to do next.
//!
//! [`next_step`] is the whole upgrade of one component (see docs/design.md, "The pivot"):
//! back up the real DaemonSet, wait until the backup really serves, update the real
//! DaemonSet, wait for its rollout, remove the backup, verify — or roll back. On two nodes or
//! more the kube-apiserver's backup is a record only, with no pods, and there is nothing to
//! wait for: the other nodes serve while one is replaced (see `vacate.rs`). It is
//! a pure function of an [`Observation`](crate::observation::Observation) and a [`Target`];
//! the engine reads the cluster,
//! calls it, performs the returned [`Step`] (one API action, or one wait on a named
//! condition), and reads again. What a run must remember between steps lives in the
//! cluster, written by the steps themselves:
//!
//! | where | what | written by |
//! |---|---|---|
//! | backup DaemonSet | target version, original template ([`crate::backup`]) | [`Step::CreateBackup`], [`Step::AdoptBackup`] |
//! | backup DaemonSet | [`BACKUP_CREATED_AT`]: start of the backup wait | [`Step::CreateBackup`] |
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
//! [`Observation::now`](crate::observation::Observation::now) comes
//! from, so deadlines never compare two machines' clocks; only identity and leader Leases and
//! pod start times (kubelet and API server clocks) are compared with `now`, as Kubernetes
//! itself does, assuming clocks synchronised to within a second or so.
//!
//! Every interrupted state maps to the step that continues it — that is what makes `apply`
//! resumable. See `next_step.rs` for the decision order.

mod annotations;
mod backup_template;
mod drain;
mod exclusion;
mod hold;
mod leader;
mod linger;
mod new_leader;
mod next_step;
mod phases;
mod recorded;
mod replacing;
mod rolling_back;
mod serving;
mod step;
mod target;
#[cfg(test)]
pub(crate) mod tests;
mod update_strategy;
mod vacate;

pub use crate::observation::{IdentityPublishing, identity_publishing};
pub use annotations::{
    APPLIED_OVER_GENERATION, APPLIED_TEMPLATE_HASH, BACKUP_CREATED_AT, BACKUP_DRAIN_STEP_AT,
    BACKUP_DRAINED_NODES, BACKUP_IDENTITIES, HELD_UPDATE_STRATEGY, LEADER_AFTER_HAND_OVER,
    ROLLBACK_REASON, ROLLBACK_STARTED_AT, UPDATE_STARTED_AT, template_applied,
};
pub use backup_template::{backup_daemonset, with_port_sharing};
pub use exclusion::{exclude_nodes, runs_as_record_only};
pub use leader::lease_hand_over;
pub use new_leader::{LEADER_ELECT_FLAG, leader_is_new_process};
pub use next_step::next_step;
pub use recorded::RecordedIdentity;
pub use serving::{Serving, pod_serves};
pub use step::{Step, Update, Wait, Watch};
pub use target::{
    DEFAULT_CRASH_LOOP_RESTARTS, DEFAULT_DEADLINE, DEFAULT_IDENTITY_FALLBACK_SOAK,
    DEFAULT_SHORTENED_GRACE, PivotOptions, Target,
};
pub use update_strategy::describe_strategy;
