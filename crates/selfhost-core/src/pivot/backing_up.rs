//! The backing-up phase: our backup exists and the real DaemonSet is not on the target yet.
//! The backup comes to serve on every node where the real DaemonSet runs (a record-only backup
//! runs no pod and has nothing to wait for: `vacate.rs`), then the real DaemonSet is updated
//! to the target; a backup that does not serve is rolled back from, nothing else changed.

use k8s_openapi::api::core::v1::PodTemplateSpec;
use k8s_openapi::jiff::Timestamp;

use super::annotations::{
    BACKUP_IDENTITIES, HELD_UPDATE_STRATEGY, ROLLBACK_REASON, ROLLBACK_STARTED_AT,
    UPDATE_STARTED_AT, template_applied,
};
use super::backup_identities::RecordedIdentity;
use super::decision_inputs::{Pivot, describe};
use super::serving::{Serving, pod_serves};
use super::step::{Step, Wait};
use super::target::Target;
use crate::disruption::{ClusterShape, expected_disruption};
use crate::observation::{BackupObservation, ContainerState, Observation, PodObservation, time};
use crate::rollout::{SignalPolicy, failure_signals};

impl Pivot<'_> {
    /// The real DaemonSet is not on the target yet: wait until the backup serves on every
    /// node where the real DaemonSet runs, then update it.
    pub(super) fn backing_up(
        &self,
        backup: &BackupObservation,
        original: &PodTemplateSpec,
        created: Option<Timestamp>,
    ) -> Step {
        let shape = ClusterShape::observe(self.obs, &self.target.template);
        let exclusive = shape.backup_waits_for_the_port();
        // The refusals first: they do not depend on the backup, and a record-only backup
        // (`vacate.rs`) made for a target that shares the port must not wait for pods it
        // will never run when the target no longer does.
        let expected = expected_disruption(self.component(), &shape);
        if let Some(blocked) = expected.blocked {
            return Step::Refuse {
                reason: blocked,
                fix: expected.fix.unwrap_or_default(),
            };
        }
        if expected.requires_accept_downtime && !self.target.options.accept_downtime {
            return Step::Refuse {
                reason: expected.explanation.join("; "),
                fix: expected.fix.unwrap_or_default(),
            };
        }
        let pending = self.backup_pending(backup, exclusive);
        if pending.is_empty() {
            return self.update_to_target(backup);
        }
        let signals = failure_signals(
            &backup.daemonset.pods,
            SignalPolicy {
                crash_loop_restarts: self.target.options.crash_loop_restarts,
                ignore_crash_loops: exclusive,
                exits_count_after: Some(self.exits_count_after()),
            },
        );
        let deadline = self.deadline_after(created, 1);
        let failure = if !signals.is_empty() {
            Some(describe(&signals))
        } else if self.now() >= deadline {
            Some(format!("not serving by {deadline}: {}", pending.join("; ")))
        } else {
            None
        };
        if let Some(reason) = failure {
            let reason = format!(
                "the backup {} does not serve: {reason}",
                backup.daemonset.name
            );
            if self.target.options.no_rollback {
                return Step::Failed {
                    reason,
                    state: format!(
                        "{} is unchanged; the backup {} exists but does not serve",
                        self.real.name, backup.daemonset.name
                    ),
                    resume: self.resume_command(),
                };
            }
            if template_applied(self.real, original) {
                // Nothing was changed: recording the rollback (same template, no pod touched)
                // lets the rollback phase remove the backup and end the run as rolled back.
                return self.roll_back(original, reason);
            }
            return Step::Failed {
                reason,
                state: format!(
                    "{} runs neither its original template nor the target, and the backup {} \
                     does not serve",
                    self.real.name, backup.daemonset.name
                ),
                resume: self.resume_command(),
            };
        }
        Step::WaitForBackup(Wait {
            condition: if exclusive {
                format!(
                    "backup pods of {} created on every node (without port sharing they \
                     crash-loop until the old pods stop)",
                    self.component()
                )
            } else {
                format!(
                    "backup pods of {} Ready and serving on every node where {} runs",
                    self.component(),
                    self.real.name
                )
            },
            recheck_at: self.recheck(deadline),
            pending,
            watch: self.watches(true),
            deadline: Some(deadline),
        })
    }

    /// What keeps the backup from covering every node the real DaemonSet runs on.
    fn backup_pending(&self, backup: &BackupObservation, exclusive: bool) -> Vec<String> {
        let nodes = self.real.nodes();
        if nodes.is_empty() {
            return vec![format!("{} has no pods", self.real.name)];
        }
        let name = self.obs.component.name();
        let mut pending = Vec::new();
        // A record-only backup (`vacate.rs`) runs no pod: on two nodes or more the other nodes
        // serve while one is out of rotation, and a backup process would only join nodes
        // still in it. Nothing to wait for on its excluded nodes, as long as the rollout will
        // be held and vacated as the backup was made for.
        let excluded = self.vacated_nodes();
        let record_only = self.backup_runs_no_pod();
        for node in nodes {
            if excluded.contains(node) {
                if !record_only {
                    pending.push(format!(
                        "{node}: excluded from the backup {} (made as a record only, for a \
                         rollout held node by node on several nodes), but this rollout would \
                         not be: the node has no backup pod to cover it",
                        backup.daemonset.name
                    ));
                }
                continue;
            }
            let pods: Vec<&PodObservation> = backup
                .daemonset
                .pods_on(node)
                .filter(|pod| !pod.is_terminating())
                .collect();
            if pods.is_empty() {
                pending.push(format!("{node}: no backup pod yet"));
                continue;
            }
            let mut reasons = Vec::new();
            let covered = pods.iter().any(|pod| {
                if exclusive {
                    let started = pod.main_container(name).is_some_and(|c| {
                        c.restart_count > 0
                            || matches!(
                                c.state,
                                ContainerState::Running { .. } | ContainerState::Terminated { .. }
                            )
                    });
                    if !started {
                        reasons.push(format!(
                            "{node}: backup pod {} has not started yet",
                            pod.name
                        ));
                    }
                    started
                } else {
                    match pod_serves(self.obs, self.target, pod) {
                        Ok(_) => true,
                        Err(why) => {
                            reasons.push(why);
                            false
                        }
                    }
                }
            });
            if !covered {
                pending.extend(reasons);
            }
        }
        pending
    }

    /// The update to the target, starting the rollout clock, recording which identity holder
    /// is each backup pod's (for a run that resumes this one: `backup_identities.rs`), and holding the
    /// rollout where the controller must not pace it (see `hold.rs`).
    pub(super) fn update_to_target(&self, backup: &BackupObservation) -> Step {
        let mut set = vec![(UPDATE_STARTED_AT, time::format(self.now()))];
        let mut remove = vec![ROLLBACK_STARTED_AT, ROLLBACK_REASON];
        match backup_identities(self.obs, self.target, backup) {
            Some(record) => set.push((BACKUP_IDENTITIES, record)),
            // A record left by an earlier upgrade names pods long gone; drop it.
            None => remove.push(BACKUP_IDENTITIES),
        }
        let hold = self.hold_on_update();
        if let Some((_, recorded)) = &hold {
            set.push((HELD_UPDATE_STRATEGY, recorded.clone()));
        }
        let mut update = self.update(&self.target.template, &set, &remove);
        update.update_strategy = hold.map(|(strategy, _)| strategy);
        Step::UpdateReal(update)
    }
}

/// The record of every backup pod that serves by an attributed identity now (or by a record
/// that still holds): the value of [`BACKUP_IDENTITIES`] (see `backup_identities.rs`), `None` when
/// there is none.
fn backup_identities(
    obs: &Observation,
    target: &Target,
    backup: &BackupObservation,
) -> Option<String> {
    let name = obs.component.name();
    let records: Vec<RecordedIdentity> = backup
        .daemonset
        .pods
        .iter()
        .filter(|pod| !pod.is_terminating())
        .filter_map(|pod| {
            let (lease, holder) = match pod_serves(obs, target, pod) {
                Ok(Serving::Identity { lease, holder } | Serving::Recorded { lease, holder }) => {
                    (lease, holder)
                }
                _ => return None,
            };
            Some(RecordedIdentity {
                pod_uid: pod.uid.clone()?,
                node: pod.node.clone()?,
                process_started_at: time::format(pod.process_started_at(name)?),
                restarts: pod.main_container(name)?.restart_count,
                lease,
                holder,
            })
        })
        .collect();
    if records.is_empty() {
        return None;
    }
    // Serialising strings and integers cannot fail.
    serde_json::to_string(&records).ok()
}
