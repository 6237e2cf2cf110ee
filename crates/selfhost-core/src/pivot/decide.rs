//! The pivot's decision, in one place: which phase the component is in, and which decision
//! gives that phase's next step.
//!
//! [`locate`] reads the observation in the order the pivot moves and finds the phase, with
//! what that phase's decision reads (the backup, its original template, when a rollback
//! began). [`phase`] names it; [`next_step`] hands it to its decision, one `match` arm per
//! phase. The decisions themselves live with their concepts: `starting.rs`, `backing_up.rs`,
//! `rolling_out.rs`, `rolling_back.rs`, `drain.rs`, `verifying.rs`, `foreign_backup.rs`,
//! `hold.rs`, `refusals.rs`.

use k8s_openapi::api::apps::v1::DaemonSetUpdateStrategy;
use k8s_openapi::api::core::v1::PodTemplateSpec;
use k8s_openapi::jiff::Timestamp;

use super::annotations::{
    BACKUP_DRAIN_STEP_AT, backup_created_at, rollback_started_at, template_applied,
};
use super::decision_inputs::Pivot;
use super::foreign_backup::{Adoption, Blocking};
use super::phase::Phase;
use super::refusals::missing_real;
use super::step::Step;
use super::target::Target;
use crate::backup::BackupOrigin;
use crate::observation::{BackupObservation, Observation};

/// The phase the component is in: what [`next_step`] decides by.
pub fn phase(obs: &Observation, target: &Target) -> Phase {
    locate(obs, target).phase()
}

/// The one thing to do next for the observed component to reach `target`: the step its
/// phase's decision gives.
pub fn next_step(obs: &Observation, target: &Target) -> Step {
    match locate(obs, target) {
        Located::Missing => missing_real(obs),
        Located::ReleasingHold { pivot, held } => pivot.releasing_hold(held),
        Located::FinishingRollback { pivot, rollback_at } => pivot.finish_rolled_back(rollback_at),
        Located::NoPods { pivot } => pivot.no_pods(),
        Located::Verifying { pivot } => pivot.verifying(),
        Located::Starting { pivot } => pivot.starting(),
        Located::DeletingBackup { pivot, backup } => pivot.backup_going(backup),
        Located::DrainingBackup { pivot, backup } => pivot.draining(backup),
        Located::BlockedByBackup {
            pivot,
            backup,
            blocking,
        } => pivot.blocked_by_backup(backup, blocking),
        Located::AdoptingBackup {
            pivot,
            backup,
            adoption,
        } => pivot.adopting(backup, adoption),
        Located::RollingBack {
            pivot,
            backup,
            rollback_at,
        } => pivot.rolling_back(backup, rollback_at),
        Located::RollingOut {
            pivot,
            backup,
            original,
        } => pivot.rolling_out(backup, original),
        Located::BackingUp {
            pivot,
            backup,
            original,
            created,
        } => pivot.backing_up(backup, original, created),
    }
}

/// A [`Phase`], with what its decision reads.
enum Located<'a> {
    Missing,
    ReleasingHold {
        pivot: Pivot<'a>,
        /// The strategy the hold replaced.
        held: DaemonSetUpdateStrategy,
    },
    FinishingRollback {
        pivot: Pivot<'a>,
        rollback_at: Timestamp,
    },
    NoPods {
        pivot: Pivot<'a>,
    },
    Verifying {
        pivot: Pivot<'a>,
    },
    Starting {
        pivot: Pivot<'a>,
    },
    DeletingBackup {
        pivot: Pivot<'a>,
        backup: &'a BackupObservation,
    },
    DrainingBackup {
        pivot: Pivot<'a>,
        backup: &'a BackupObservation,
    },
    BlockedByBackup {
        pivot: Pivot<'a>,
        backup: &'a BackupObservation,
        blocking: Blocking<'a>,
    },
    AdoptingBackup {
        pivot: Pivot<'a>,
        backup: &'a BackupObservation,
        adoption: Adoption<'a>,
    },
    RollingBack {
        pivot: Pivot<'a>,
        backup: &'a BackupObservation,
        rollback_at: Option<Timestamp>,
    },
    RollingOut {
        pivot: Pivot<'a>,
        backup: &'a BackupObservation,
        /// The template the backup saved, which a rollback restores.
        original: &'a PodTemplateSpec,
    },
    BackingUp {
        pivot: Pivot<'a>,
        backup: &'a BackupObservation,
        original: &'a PodTemplateSpec,
        /// When the backup was created: its wait's deadline counts from then.
        created: Option<Timestamp>,
    },
}

impl Located<'_> {
    fn phase(&self) -> Phase {
        match self {
            Located::Missing => Phase::Missing,
            Located::ReleasingHold { .. } => Phase::ReleasingHold,
            Located::FinishingRollback { .. } => Phase::FinishingRollback,
            Located::NoPods { .. } => Phase::NoPods,
            Located::Verifying { .. } => Phase::Verifying,
            Located::Starting { .. } => Phase::Starting,
            Located::DeletingBackup { .. } => Phase::DeletingBackup,
            Located::DrainingBackup { .. } => Phase::DrainingBackup,
            Located::BlockedByBackup { .. } => Phase::BlockedByBackup,
            Located::AdoptingBackup { .. } => Phase::AdoptingBackup,
            Located::RollingBack { .. } => Phase::RollingBack,
            Located::RollingOut { .. } => Phase::RollingOut,
            Located::BackingUp { .. } => Phase::BackingUp,
        }
    }
}

/// Where the component stands: first whether the real DaemonSet exists, then whether a
/// backup does.
fn locate<'a>(obs: &'a Observation, target: &'a Target) -> Located<'a> {
    let Some(real) = obs.real.as_ref() else {
        return Located::Missing;
    };
    let pivot = Pivot { obs, target, real };
    match obs.backup.as_ref() {
        None => without_backup(pivot),
        Some(backup) => with_backup(pivot, backup),
    }
}

/// No backup: before a pivot, after one, or after its rollback.
fn without_backup(pivot: Pivot<'_>) -> Located<'_> {
    let Pivot { real, target, .. } = pivot;
    // A hold with no backup beside it (the backup removed by hand mid-rollout): the
    // controller must pace the rollout again, whatever comes next.
    if let Some(held) = pivot.held_strategy() {
        return Located::ReleasingHold { pivot, held };
    }
    // Before the check for pods: a pod of a rolled-back DaemonSet may be between its
    // deletion and its re-creation.
    if let Some(rollback_at) = rollback_started_at(real)
        && rollback_at >= target.run_started_at
    {
        return Located::FinishingRollback { pivot, rollback_at };
    }
    if real.pods.is_empty() || real.status.desired == 0 {
        return Located::NoPods { pivot };
    }
    if template_applied(real, &target.template) {
        return Located::Verifying { pivot };
    }
    Located::Starting { pivot }
}

/// A backup exists: being removed, someone else's, or ours — and then the real DaemonSet is
/// back on the original after our rollback, on the target, or not on it yet.
fn with_backup<'a>(pivot: Pivot<'a>, backup: &'a BackupObservation) -> Located<'a> {
    let Pivot { real, target, .. } = pivot;
    let force = target.options.force;
    if backup.daemonset.deleting_since.is_some() {
        return Located::DeletingBackup { pivot, backup };
    }
    if backup.daemonset.annotation(BACKUP_DRAIN_STEP_AT).is_some() {
        return Located::DrainingBackup { pivot, backup };
    }
    let record = match &backup.record {
        Ok(record) => record,
        Err(error) if force => {
            let adoption = Adoption::Unreadable(error);
            return Located::AdoptingBackup {
                pivot,
                backup,
                adoption,
            };
        }
        Err(error) => {
            let blocking = Blocking::Unreadable(error);
            return Located::BlockedByBackup {
                pivot,
                backup,
                blocking,
            };
        }
    };
    match &record.origin {
        BackupOrigin::Kubeadm => {
            let adoption = Adoption::Kubeadm(record);
            return Located::AdoptingBackup {
                pivot,
                backup,
                adoption,
            };
        }
        BackupOrigin::Selfhost { target: made_for } if made_for != &target.version => {
            if force {
                let adoption = Adoption::OtherTarget(made_for, record);
                return Located::AdoptingBackup {
                    pivot,
                    backup,
                    adoption,
                };
            }
            let blocking = Blocking::OtherTarget(made_for);
            return Located::BlockedByBackup {
                pivot,
                backup,
                blocking,
            };
        }
        BackupOrigin::Selfhost { .. } => {}
    }
    let original = &record.original_template;
    let created = backup_created_at(backup);
    let rollback_at = rollback_started_at(real);
    // Our rollback, made after this backup (an older one belongs to an earlier pivot), has
    // put the original template back.
    let rolled_back = rollback_at.is_some_and(|at| created.is_none_or(|c| at >= c))
        && template_applied(real, original);
    if rolled_back {
        Located::RollingBack {
            pivot,
            backup,
            rollback_at,
        }
    } else if template_applied(real, &target.template) {
        Located::RollingOut {
            pivot,
            backup,
            original,
        }
    } else {
        Located::BackingUp {
            pivot,
            backup,
            original,
            created,
        }
    }
}
