//! Rolling back: the write that restores the original template, whether that is safe now,
//! and the two phases after it — the real DaemonSet back on its original template while the
//! backup serves until the restored pods do, and, after the backup's removal, the wait until
//! they are all back before the run ends rolled back.

use k8s_openapi::api::core::v1::PodTemplateSpec;
use k8s_openapi::jiff::{SignedDuration, Timestamp};

use super::annotations::{
    HELD_UPDATE_STRATEGY, ROLLBACK_REASON, ROLLBACK_STARTED_AT, backup_created_at,
};
use super::decision_inputs::{Pivot, describe};
use super::leader::lease_hand_over;
use super::serving::{created_after_our_write, pod_serves, serves_despite_its_probe};
use super::step::{Step, Wait};
use crate::observation::{BackupObservation, ContainerState, Observation, PodObservation, time};
use crate::rollout::{failure_signals, rollout_progress};

/// The rollback's deadline, in per-component deadlines from the rollback's start.
pub(super) const ROLLBACK_DEADLINE_FACTOR: u32 = 2;

impl Pivot<'_> {
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

    /// The update that restores `original`, recording the rollback and why; a held rollout
    /// gets its own strategy back in the same write, so the DaemonSet controller replaces the
    /// failed pods by itself.
    pub(super) fn roll_back(&self, original: &PodTemplateSpec, reason: String) -> Step {
        let recorded: String = reason.chars().take(1024).collect();
        let held = self.held_strategy();
        let release: &[&str] = if held.is_some() {
            &[HELD_UPDATE_STRATEGY]
        } else {
            &[]
        };
        let mut update = self.update(
            original,
            &[
                (ROLLBACK_STARTED_AT, time::format(self.now())),
                (ROLLBACK_REASON, recorded),
            ],
            release,
        );
        update.update_strategy = held;
        Step::RollBack { update, reason }
    }

    /// Why restoring the original template now could take a serving process away, if it
    /// could. A rollback replaces the pods on the target template (the others already run the
    /// original revision and stay): each of those that serves needs a serving backup pod on its
    /// node, and something must serve once they are gone.
    ///
    /// A backup pod whose probe fails counts when its process serves by its own identity
    /// Lease: the failing target beside it on the shared port may be what answered the probe.
    /// A node vacated of the backup needs none: other nodes serve while it is out of rotation.
    pub(super) fn rollback_hazard(&self, backup: &BackupObservation) -> Option<String> {
        let serves = |pod: &PodObservation| pod_serves(self.obs, self.target, pod).is_ok();
        let serving_backup: Vec<&PodObservation> = backup
            .daemonset
            .pods
            .iter()
            .filter(|p| serves_despite_its_probe(self.obs, self.target, p))
            .collect();
        let (replaced, kept): (Vec<&PodObservation>, Vec<&PodObservation>) = self
            .real
            .pods
            .iter()
            .partition(|pod| self.real.is_current(pod));
        // A node vacated of the backup (`vacate.rs`) has no backup pod to cover it: its new
        // pod's replacement takes it out of the load balancer, and the other nodes serve —
        // their own new pods too, which the controller replaces one at a time.
        let vacated = self.vacated_nodes();
        let on_vacated = |p: &PodObservation| p.node.as_ref().is_some_and(|n| vacated.contains(n));
        // Where every node is vacated (a record-only backup, `vacate.rs`), nothing proven to
        // serve is a hazard only if the rollback would take away a process that may serve
        // unproven: replacing pods that run no process (an image that cannot be pulled, a
        // crash loop's back-off) takes nothing away. On a freshly booted cluster the old pods
        // may not be provable yet (whole-second starts), and an unpullable target must still
        // be rolled back. With backup pods the rule stays as it was: they must serve.
        let every_node_vacated =
            !vacated.is_empty() && self.real.nodes().iter().all(|n| vacated.contains(*n));
        let takes_nothing_away =
            every_node_vacated && !replaced.iter().any(|p| process_may_run(self.obs, p));
        if serving_backup.is_empty()
            && !kept.iter().any(|p| serves(p))
            && !replaced.iter().any(|p| on_vacated(p) && serves(p))
            && !takes_nothing_away
        {
            let why: Vec<String> = backup
                .daemonset
                .pods
                .iter()
                .filter_map(|p| pod_serves(self.obs, self.target, p).err())
                .collect();
            return Some(format!(
                "no pod of {} serves ({}), and no real pod outside the rollback does",
                backup.daemonset.name,
                if why.is_empty() {
                    "it has no pods".to_string()
                } else {
                    why.join("; ")
                }
            ));
        }
        replaced
            .iter()
            .filter(|p| serves(p))
            .filter(|p| !on_vacated(p))
            .find(|pod| !serving_backup.iter().any(|b| b.node == pod.node))
            .map(|pod| {
                format!(
                    "{}: the new pod {} serves and no backup pod there does",
                    pod.node.as_deref().unwrap_or("(unscheduled)"),
                    pod.name
                )
            })
    }

    /// What keeps a rollback from being complete: the real DaemonSet's rollout back to the
    /// original template, and every node where a backup pod may still serve but no real pod
    /// is known to. Empty exactly when the backup can go.
    fn rollback_pending(&self, backup: &BackupObservation) -> Vec<String> {
        let mut pending = self.serving_progress(false);
        pending.extend(self.backup_may_serve_where_real_does_not(backup));
        self.add_backup_cover(&mut pending, backup);
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
        let backup_created = backup_created_at(backup);
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
