//! What a run remembers between steps: the annotations it writes on the real and the backup
//! DaemonSets (the table in the module documentation of [`crate::pivot`] says which step
//! writes which), and whether the real DaemonSet carries a template by our own record.

use k8s_openapi::api::core::v1::PodTemplateSpec;
use k8s_openapi::jiff::Timestamp;

use crate::observation::{BackupObservation, DaemonSetObservation, time};
use crate::rollout::{template_hash, templates_equal};

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

/// Annotation on the backup while it is removed node by node: the nodes excluded so far,
/// comma-separated.
pub const BACKUP_DRAINED_NODES: &str = "selfhost.dev/backup-drained-nodes";
/// Annotation on the backup while it is removed node by node: when the last node was excluded
/// (engine clock, RFC 3339); the wait for that node's backup pod to go has its deadline from
/// it.
pub const BACKUP_DRAIN_STEP_AT: &str = "selfhost.dev/backup-drain-step-at";

/// Annotation on the real DaemonSet while selfhost holds the kube-apiserver's rollout: the
/// update strategy (JSON; `{}` when it was unset) that `OnDelete` replaced, to be written back.
pub const HELD_UPDATE_STRATEGY: &str = "selfhost.dev/held-update-strategy";

/// Annotation on the real DaemonSet: `<uid> <holder> <acquireTime>` of a leader Lease that a
/// run saw created again after its own hand-over
/// ([`Step::RecordLeader`](super::Step::RecordLeader)), so that a later run knows what only
/// that run could see (see `leader.rs`).
pub const LEADER_AFTER_HAND_OVER: &str = "selfhost.dev/leader-after-hand-over";

/// Annotation on the real DaemonSet: the backup pods the update's run proved serving, each
/// with the identity holder attributed to it (a JSON list of
/// [`RecordedIdentity`](super::RecordedIdentity)).
pub const BACKUP_IDENTITIES: &str = "selfhost.dev/backup-identities";

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

/// When the backup was created: our annotation (the engine's clock), else the object's
/// creation time.
pub(super) fn backup_created_at(backup: &BackupObservation) -> Option<Timestamp> {
    backup
        .daemonset
        .annotation(BACKUP_CREATED_AT)
        .and_then(time::parse)
        .or(backup.daemonset.created)
}

/// When selfhost started rolling the real DaemonSet back, from its annotation.
pub(super) fn rollback_started_at(real: &DaemonSetObservation) -> Option<Timestamp> {
    real.annotation(ROLLBACK_STARTED_AT).and_then(time::parse)
}
