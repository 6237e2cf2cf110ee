//! The pivot state machine: from what the cluster looks like now to the one thing to do next.
//!
//! [`next_step`] is the whole upgrade of one component (see docs/design.md, "The pivot"):
//! back up the real DaemonSet, wait until the backup really serves, update the real
//! DaemonSet, wait for its rollout, remove the backup, verify — or roll back. On two nodes or
//! more the kube-apiserver's backup is a record only, with no pods, and there is nothing to
//! wait for: the other nodes serve while one is replaced (see `vacate.rs`). It is
//! a pure function of an [`Observation`] and a [`Target`]; the engine reads the cluster,
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
//! All our times are written with the engine's clock, the one [`Observation::now`] comes
//! from, so deadlines never compare two machines' clocks; only identity and leader Leases and
//! pod start times (kubelet and API server clocks) are compared with `now`, as Kubernetes
//! itself does, assuming clocks synchronised to within a second or so.
//!
//! Every interrupted state maps to the step that continues it — that is what makes `apply`
//! resumable. See `next_step.rs` for the decision order.

mod backup_template;
mod drain;
mod hold;
mod leader;
mod linger;
mod next_step;
mod phases;
mod recorded;
mod replacing;
mod rolling_back;
mod serving;
mod step;
#[cfg(test)]
pub(crate) mod tests;
mod vacate;

use std::time::Duration;

use k8s_openapi::api::core::v1::PodTemplateSpec;
use k8s_openapi::jiff::Timestamp;

pub use crate::observation::{IdentityPublishing, identity_publishing};
pub use backup_template::{backup_daemonset, with_port_sharing};
pub use drain::{BACKUP_DRAIN_STEP_AT, BACKUP_DRAINED_NODES, exclude_nodes};
pub use hold::{HELD_UPDATE_STRATEGY, describe_strategy};
pub use leader::{
    LEADER_AFTER_HAND_OVER, LEADER_ELECT_FLAG, leader_is_new_process, lease_hand_over,
};
pub use next_step::next_step;
pub use recorded::{BACKUP_IDENTITIES, RecordedIdentity};
pub use serving::{Serving, pod_serves};
pub use step::{Step, Update, Wait, Watch};
pub use vacate::runs_as_record_only;

use crate::observation::{DaemonSetObservation, Observation};
use crate::rollout::{template_hash, templates_equal};
use crate::version::KubeVersion;

/// Annotation on the backup: when the run that created it did so (engine clock, RFC 3339).
pub const BACKUP_CREATED_AT: &str = "selfhost.dev/backup-created-at";
/// Annotation on the real DaemonSet: when selfhost updated it to the target (RFC 3339).
pub const UPDATE_STARTED_AT: &str = "selfhost.dev/update-started-at";
/// Annotation on the real DaemonSet: [`template_hash`] of the template selfhost last applied.
pub const APPLIED_TEMPLATE_HASH: &str = "selfhost.dev/applied-template-hash";
/// Annotation on the real DaemonSet: its template generation just before selfhost applied
/// that template. If the template generation has moved at most one step since, nobody else
/// changed the template after us.
pub const APPLIED_OVER_GENERATION: &str = "selfhost.dev/applied-over-template-generation";
/// Annotation on the real DaemonSet: when selfhost started rolling it back (RFC 3339).
pub const ROLLBACK_STARTED_AT: &str = "selfhost.dev/rollback-started-at";
/// Annotation on the real DaemonSet: why selfhost rolled it back.
pub const ROLLBACK_REASON: &str = "selfhost.dev/rollback-reason";

/// Default per-component deadline: the rollout must complete this long after the update.
pub const DEFAULT_DEADLINE: Duration = Duration::from_secs(300);
/// Default soak of a new kube-apiserver when the cluster publishes no identity Leases, counted
/// from its process's start (and Ready as well): well above the 3.5–4 s a real kube-apiserver
/// takes from start to serving, so that a Ready reported early by a probe on a shared port
/// has long become true.
pub const DEFAULT_IDENTITY_FALLBACK_SOAK: Duration = Duration::from_secs(15);
/// Default restarts from which a new pod counts as crash-looping.
pub const DEFAULT_CRASH_LOOP_RESTARTS: i32 = 3;
/// Default grace period for an old kube-apiserver pod selfhost deletes itself once the pod
/// replacing it serves: long enough for in-flight requests, short of the 30 s that open
/// watches would otherwise hold it Terminating.
pub const DEFAULT_SHORTENED_GRACE: Duration = Duration::from_secs(5);

/// What the operator asked for, beyond the target itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PivotOptions {
    /// `--force`: take over a backup left by an upgrade to another version, or one whose
    /// annotations cannot be read.
    pub force: bool,
    /// `--no-rollback`: on failure leave the backup serving and stop (exit 4).
    pub no_rollback: bool,
    /// `--accept-downtime`: proceed where the hand-over must interrupt the API (one node
    /// without port sharing).
    pub accept_downtime: bool,
    /// `--timeout`: how long the backup may take to serve, and the rollout to complete.
    pub deadline: Duration,
    /// The soak that replaces identity Leases on clusters that publish none.
    pub identity_fallback_soak: Duration,
    /// Restarts from which a new pod counts as crash-looping.
    pub crash_loop_restarts: i32,
    /// Grace period for old kube-apiserver pods selfhost deletes itself.
    pub shortened_grace: Duration,
}

impl Default for PivotOptions {
    fn default() -> Self {
        PivotOptions {
            force: false,
            no_rollback: false,
            accept_downtime: false,
            deadline: DEFAULT_DEADLINE,
            identity_fallback_soak: DEFAULT_IDENTITY_FALLBACK_SOAK,
            crash_loop_restarts: DEFAULT_CRASH_LOOP_RESTARTS,
            shortened_grace: DEFAULT_SHORTENED_GRACE,
        }
    }
}

/// Where one component should end up.
#[derive(Debug, Clone, PartialEq)]
pub struct Target {
    /// The version the control plane moves to.
    pub version: KubeVersion,
    /// The real DaemonSet's pod template at that version, rendered by the caller.
    pub template: PodTemplateSpec,
    /// When this run of `apply` started (engine clock). A rollback recorded after it was
    /// made by this run, so the run ends [`Step::RolledBack`]; an older one was a previous
    /// run's, and re-running `apply` tries the upgrade again. Deadlines never start before it,
    /// so a resumed run gives a rollout its full time again.
    pub run_started_at: Timestamp,
    /// The operator's options.
    pub options: PivotOptions,
}

/// Whether the real DaemonSet carries `wanted` as its pod template.
///
/// True when the templates are equal once the API server's defaults are applied to both
/// ([`templates_equal`]), or when our own record says we applied exactly `wanted` and nobody
/// changed the template since: [`APPLIED_TEMPLATE_HASH`] is `wanted`'s hash and the template
/// generation is at most one past [`APPLIED_OVER_GENERATION`]. The second half keeps the pivot
/// from updating for ever if a server adds a default [`crate::rollout::normalize`] does not
/// know, while a template edited by anyone after us still counts as different.
pub fn template_applied(real: &DaemonSetObservation, wanted: &PodTemplateSpec) -> bool {
    if templates_equal(&real.template, wanted) {
        return true;
    }
    let hash_matches =
        real.annotation(APPLIED_TEMPLATE_HASH) == Some(template_hash(wanted).as_str());
    let over: Option<i64> = real
        .annotation(APPLIED_OVER_GENERATION)
        .and_then(|g| g.trim().parse().ok());
    let generation = real.template_generation.or(real.generation);
    hash_matches
        && matches!((over, generation), (Some(over), Some(now)) if now <= over.saturating_add(1))
}

/// The component's name as its containers are named.
fn container_name(obs: &Observation) -> &'static str {
    obs.component.name()
}
