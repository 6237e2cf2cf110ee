//! The rollback phase: the real DaemonSet is back on its original template, and the backup
//! serves until the restored pods do.

use k8s_openapi::jiff::Timestamp;

use super::next_step::{Cx, describe};
use super::serving::pod_serves;
use super::step::{Step, Wait};
use crate::observation::BackupObservation;
use crate::rollout::failure_signals;

/// The rollback's deadline, in per-component deadlines from the rollback's start.
pub(super) const ROLLBACK_DEADLINE_FACTOR: u32 = 2;

impl Cx<'_> {
    /// The real DaemonSet is on its original template again after a rollback: wait until it
    /// serves, then remove the backup.
    pub(super) fn rolling_back(
        &self,
        backup: &BackupObservation,
        rollback_at: Option<Timestamp>,
    ) -> Step {
        // One list decides and explains: the rollback is complete exactly when nothing is
        // pending, and a rollback that fails names what it still waited for (finding D of
        // docs/reliability.md: the two were computed apart and a failure named nothing).
        let pending = self.rollback_pending(backup);
        if pending.is_empty() {
            return self.remove_backup(backup);
        }
        let current = self.real.pods.iter().filter(|p| self.real.is_current(p));
        let signals = failure_signals(current, self.strict_signals());
        // A rollback is the way back to pods known to work, and stopping it leaves the cluster
        // worse off (exit 4): it gets twice the per-component deadline from its own start,
        // for it waits out the failed pods' termination and restarts every node it touches
        // (campaign finding C: a rollback on five nodes ran out of the 12 s its rollout had).
        let deadline = self.deadline_after(rollback_at, ROLLBACK_DEADLINE_FACTOR);
        let failure = if !signals.is_empty() {
            Some(describe(&signals))
        } else if self.now() >= deadline {
            Some(format!(
                "not complete by {deadline}: {}",
                pending.join("; ")
            ))
        } else {
            None
        };
        if let Some(reason) = failure {
            return Step::Failed {
                reason: format!("the rollback to the original template is failing too: {reason}"),
                state: format!(
                    "{} is back on its original template but not healthy; the backup {} keeps \
                     serving",
                    self.real.name, backup.daemonset.name
                ),
                resume: format!(
                    "repair the failing pods, then `{}` finishes the rollback",
                    self.resume_command()
                ),
            };
        }
        if let Some(step) = self.hurry() {
            return step;
        }
        Step::WaitForRollback(Wait {
            condition: format!(
                "every pod of {} back on the original template and serving",
                self.real.name
            ),
            recheck_at: self.recheck(deadline),
            pending,
            watch: self.watches(true),
            deadline: Some(deadline),
        })
    }

    /// What keeps a rollback from being complete: the real DaemonSet's rollout back to the
    /// original template, and every node where the backup serves but the restored real pod
    /// does not yet. Empty exactly when the backup can go.
    fn rollback_pending(&self, backup: &BackupObservation) -> Vec<String> {
        let mut pending = self.serving_progress(false);
        pending.extend(self.backup_serves_where_real_does_not(backup));
        pending.extend(self.nodes_only_the_backup_covers(backup));
        pending
    }

    /// Nodes where a backup pod serves but no real pod does: removing the backup would lose
    /// them. Empty when the backup never served there (a rollback before the update).
    fn backup_serves_where_real_does_not(&self, backup: &BackupObservation) -> Vec<String> {
        backup
            .daemonset
            .pods
            .iter()
            .filter(|pod| pod_serves(self.obs, self.target, pod).is_ok())
            .filter_map(|pod| {
                let node = pod.node.as_deref()?;
                let mut why = Vec::new();
                for real in self.real.pods_on(node) {
                    match pod_serves(self.obs, self.target, real) {
                        Ok(_) => return None,
                        Err(reason) => why.push(reason),
                    }
                }
                Some(if why.is_empty() {
                    format!("{node}: no real pod yet, and the backup pod there serves")
                } else {
                    format!(
                        "{node}: the real pod does not serve yet ({})",
                        why.join("; ")
                    )
                })
            })
            .collect()
    }
}
