//! The rolling-out phase: the backup serves and the real DaemonSet is on the target. Its new
//! pods roll out (the kube-apiserver's held node by node: `hold.rs`, `vacate.rs`); once every
//! node runs a new pod that serves, the backup goes (`drain.rs`); on failure, a rollback
//! (`rolling_back.rs`) where it is safe.

use k8s_openapi::api::core::v1::PodTemplateSpec;
use k8s_openapi::jiff::Timestamp;

use super::decision_inputs::{Pivot, describe};
use super::step::{Step, Wait, Watch};
use crate::component::Component;
use crate::observation::{
    BackupObservation, IDENTITY_FRESHNESS, IdentityPublishing, identity_publishing,
};
use crate::rollout::{FailureSignal, failure_signals};

impl Pivot<'_> {
    /// The real DaemonSet is on the target: wait for the rollout, roll back on failure, remove
    /// the backup when done.
    pub(super) fn rolling_out(
        &self,
        backup: &BackupObservation,
        original: &PodTemplateSpec,
    ) -> Step {
        let deadline = self.deadline_after(self.update_started_at(), 1);
        if let Some(overrun) = self.budget_overrun() {
            return self.rollout_failed(backup, original, overrun, deadline);
        }
        let mut progress = self.serving_progress(true);
        self.add_backup_cover(&mut progress, backup);
        progress.extend(self.vacating_pending());
        if progress.is_empty() {
            return self
                .release_hold("every node runs a new pod that serves")
                .unwrap_or_else(|| self.remove_backup(backup));
        }
        let current = self.real.pods.iter().filter(|p| self.real.is_current(p));
        let mut signals = failure_signals(current, self.strict_signals());
        if signals.is_empty() && self.now() >= deadline {
            let since = self
                .update_started_at()
                .map_or(self.target.run_started_at, |u| {
                    u.max(self.target.run_started_at)
                });
            signals.push(FailureSignal::deadline(
                since,
                self.target.options.deadline,
                progress.clone(),
            ));
        }
        if !signals.is_empty() {
            return self.rollout_failed(backup, original, describe(&signals), deadline);
        }
        if let Some(step) = self.hurry() {
            return step;
        }
        Step::WaitForRollout(Wait {
            condition: if self.real.is_on_delete() {
                format!(
                    "every pod of {} on the target template, Ready and serving; selfhost \
                     replaces the old pods one node at a time, each once every new pod so far \
                     serves",
                    self.real.name
                )
            } else {
                format!(
                    "every pod of {} on the target template, Ready and serving",
                    self.real.name
                )
            },
            recheck_at: self.recheck(deadline),
            pending: progress,
            watch: self.rollout_watches(),
            deadline: Some(deadline),
        })
    }

    /// Whether the kube-apiserver's rollout has cost more unavailability than the budget
    /// allows, in words. It is checked before anything else: even a rollout that has just
    /// completed is rolled back, as the operator asked.
    fn budget_overrun(&self) -> Option<String> {
        if self.component() != Component::ApiServer {
            return None;
        }
        let overrun = self.target.options.budget.overrun(&self.obs.availability)?;
        Some(overrun.to_string())
    }

    /// What the rollout's wait watches: with a budget, the API's health too, so that the
    /// engine keeps probing while nothing else changes.
    fn rollout_watches(&self) -> Vec<Watch> {
        let mut watch = self.watches(true);
        if self.component() == Component::ApiServer && self.target.options.budget.is_set() {
            watch.push(Watch::ApiHealth);
        }
        watch
    }

    fn rollout_failed(
        &self,
        backup: &BackupObservation,
        original: &PodTemplateSpec,
        reason: String,
        deadline: Timestamp,
    ) -> Step {
        let state = format!(
            "{} is on the target template {} and its new pods are failing; the backup {} \
             keeps serving with the original template",
            self.real.name,
            self.version(),
            backup.daemonset.name
        );
        if self.target.options.no_rollback {
            return Step::Failed {
                reason,
                state,
                resume: format!(
                    "`{}` completes the upgrade if the new pods recover, and rolls back \
                     otherwise (add --no-rollback to keep waiting instead)",
                    self.resume_command()
                ),
            };
        }
        match self.rollback_hazard(backup) {
            None => self.roll_back(original, reason),
            Some(_) if let Some(at) = self.identity_publishing_pending() => {
                self.rollback_awaits_identity_publishing(&reason, at, deadline)
            }
            Some(hazard) => Step::Failed {
                reason: format!("{reason}; rolling back is not safe: {hazard}"),
                state,
                resume: format!(
                    "once the backup pods serve again, `{}` rolls back",
                    self.resume_command()
                ),
            },
        }
    }

    /// When it is decided whether this cluster publishes kube-apiserver identity Leases, if
    /// that is still to come: no identity Lease is renewed and every kube-apiserver process is
    /// younger than the freshness window — as after the old pods of one node are gone and the
    /// backup is new. Until then no pod can be shown to serve.
    fn identity_publishing_pending(&self) -> Option<Timestamp> {
        if self.component() != Component::ApiServer {
            return None;
        }
        match identity_publishing(self.obs) {
            IdentityPublishing::Undetermined {
                decided_at: Some(at),
            } if at > self.now() => Some(at),
            _ => None,
        }
    }

    /// A failed rollout whose rollback waits until the backup can be shown to serve or not
    /// (see [`Pivot::identity_publishing_pending`]) instead of giving up on a question time
    /// answers within seconds.
    fn rollback_awaits_identity_publishing(
        &self,
        reason: &str,
        at: Timestamp,
        deadline: Timestamp,
    ) -> Step {
        Step::WaitForRollout(Wait {
            condition: "whether the backup serves, to roll back onto it".to_string(),
            recheck_at: Some(at),
            pending: vec![format!(
                "the rollout failed ({reason}); whether the backup serves is known at {at} \
                 (no kube-apiserver identity Lease is renewed, and every kube-apiserver \
                 process is younger than {} s)",
                IDENTITY_FRESHNESS.as_secs()
            )],
            watch: self.watches(true),
            deadline: Some(at.max(deadline)),
        })
    }
}
