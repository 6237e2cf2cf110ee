//! The rollback phase: the real DaemonSet is back on its original template, and the backup
//! serves until the restored pods do; after its removal, the run ends once they are all back.

use k8s_openapi::jiff::{SignedDuration, Timestamp};

use super::annotations::{BACKUP_CREATED_AT, ROLLBACK_REASON};
use super::leader::lease_hand_over;
use super::next_step::{Cx, describe};
use super::serving::{created_after_our_write, pod_serves};
use super::step::{Step, Wait};
use crate::observation::{BackupObservation, ContainerState, Observation, PodObservation, time};
use crate::rollout::{failure_signals, rollout_progress};

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
        // pending, and a rollback that fails names what it still waited for.
        let pending = self.rollback_pending(backup);
        if pending.is_empty() {
            return self.remove_backup(backup);
        }
        let current = self.real.pods.iter().filter(|p| self.real.is_current(p));
        let signals = failure_signals(current, self.strict_signals());
        // A rollback is the way back to pods known to work, and stopping it leaves the cluster
        // worse off (exit 4): it gets twice the per-component deadline from its own start,
        // for it waits out the failed pods' termination and restarts every node it touches
        // (on five nodes that takes longer than the rollout's own deadline).
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

    /// This run rolled the real DaemonSet back and the backup is gone: the run ends rolled
    /// back only once the original pods are all there and Ready again and a leader is handed
    /// over, as a finished pivot does. A pod can go after the backup's removal (the leader
    /// hand-over stops every possible holder on a node; the controller recreates it), and a
    /// run that ended then would leave a component one Ready pod short.
    pub(super) fn finish_rolled_back(&self, rollback_at: Timestamp) -> Step {
        if let Some(step) = lease_hand_over(self.obs) {
            return step;
        }
        let reason = self
            .real
            .annotation(ROLLBACK_REASON)
            .unwrap_or("the new pods failed")
            .to_string();
        let progress = rollout_progress(self.obs, self.real);
        if progress.is_complete() {
            return Step::RolledBack { reason };
        }
        let deadline = self.deadline_after(Some(rollback_at), ROLLBACK_DEADLINE_FACTOR);
        if self.now() >= deadline {
            return Step::Failed {
                reason: format!(
                    "the rollback to the original template is failing too: not complete by \
                     {deadline}: {}",
                    progress.pending.join("; ")
                ),
                state: format!(
                    "{} is back on its original template but not healthy, and the backup is \
                     gone",
                    self.real.name
                ),
                resume: format!(
                    "repair the failing pods (`kubectl -n kube-system describe ds {}`), then `{}`",
                    self.real.name,
                    self.resume_command()
                ),
            };
        }
        Step::WaitForRollback(Wait {
            condition: format!(
                "every pod of {} back on the original template and Ready",
                self.real.name
            ),
            pending: progress.pending,
            watch: self.watches(false),
            recheck_at: Some(deadline),
            deadline: Some(deadline),
        })
    }

    /// What keeps a rollback from being complete: the real DaemonSet's rollout back to the
    /// original template, and every node where a backup pod may still serve but no real pod
    /// is known to. Empty exactly when the backup can go.
    fn rollback_pending(&self, backup: &BackupObservation) -> Vec<String> {
        let mut pending = self.serving_progress(false);
        pending.extend(self.backup_may_serve_where_real_does_not(backup));
        pending.extend(self.nodes_only_the_backup_covers(backup));
        pending
    }

    /// Nodes where a backup pod may serve but no real pod is known to: removing the backup
    /// could lose the last process that serves there, and with it the cluster's last one.
    ///
    /// A backup pod *may* serve unless it is known not to ([`backup_pod_may_serve`]); one
    /// that does not *count* as serving (its node NotReady, its identity not dated) is not one
    /// that does not serve. Asking a proven successor only where the backup pod counts as
    /// serving would let backup pods that do not count (a node NotReady a moment before, a
    /// probe on the shared port answered by a restored process that has not finished
    /// starting) go on the restored pods' Ready — itself a probe the backup's process may have
    /// answered — and leave nothing serving.
    fn backup_may_serve_where_real_does_not(&self, backup: &BackupObservation) -> Vec<String> {
        let backup_created = self.backup_created_at(backup);
        backup
            .daemonset
            .pods
            .iter()
            .filter(|pod| backup_pod_may_serve(self.obs, pod))
            .filter_map(|pod| {
                let node = pod.node.as_deref()?;
                let mut why = Vec::new();
                for real in self.real.pods_on(node) {
                    if served_before_the_pivot(self.obs, real, backup_created) {
                        return None;
                    }
                    match pod_serves(self.obs, self.target, real) {
                        Ok(_) => return None,
                        Err(reason) => why.push(reason),
                    }
                }
                Some(if why.is_empty() {
                    format!("{node}: no real pod yet, and the backup pod there may serve")
                } else {
                    format!(
                        "{node}: the real pod does not serve yet ({}), and the backup pod there \
                         may",
                        why.join("; ")
                    )
                })
            })
            .collect()
    }

    /// When the backup was created: our annotation, else the object's creation time.
    fn backup_created_at(&self, backup: &BackupObservation) -> Option<Timestamp> {
        backup
            .daemonset
            .annotation(BACKUP_CREATED_AT)
            .and_then(time::parse)
            .or(backup.daemonset.created)
    }
}

/// Whether a backup pod may serve: every one whose process runs (or whose state is unknown),
/// unless it is being deleted (its process leaves the port). Not Ready proves nothing: on a
/// shared port the kubelet's probe reaches whichever process the kernel picks, so a serving
/// backup pod is reported not Ready when a restored process that never finishes starting
/// answers its probe; nor does a NotReady node, whose kubelet's report is stale, or an
/// identity Lease that two processes on one host take over from each other.
fn backup_pod_may_serve(obs: &Observation, pod: &PodObservation) -> bool {
    process_may_run(obs, pod)
}

/// Whether `pod`'s main process may run, and so serve: it is not being deleted, and its
/// container runs or its state is unknown.
pub(super) fn process_may_run(obs: &Observation, pod: &PodObservation) -> bool {
    !pod.is_terminating()
        && pod.main_container(obs.component.name()).is_none_or(|c| {
            matches!(
                c.state,
                ContainerState::Running { .. } | ContainerState::Unknown
            )
        })
}

/// Whether a real pod has served since before the pivot touched anything: the pod on the
/// original template that the update never replaced, its process running since before the
/// backup existed (plus a second: start times are whole seconds), Ready on a Ready node. It
/// served when the run began (preflight found the component converged and the API healthy)
/// and nothing of ours has touched it since, so it succeeds a backup pod on its node even
/// where its identity cannot be told apart from the backup's (two processes, one host Lease).
fn served_before_the_pivot(
    obs: &Observation,
    pod: &PodObservation,
    backup_created: Option<Timestamp>,
) -> bool {
    let (Some(created), Some(started)) =
        (backup_created, pod.process_started_at(obs.component.name()))
    else {
        return false;
    };
    let node_ready = pod.node.as_deref().is_some_and(|n| obs.node_is_ready(n));
    !pod.is_terminating()
        && pod.ready
        && node_ready
        && created_after_our_write(obs, pod).is_none()
        && started
            .checked_add(SignedDuration::from_secs(1))
            .is_ok_and(|end| end <= created)
}
