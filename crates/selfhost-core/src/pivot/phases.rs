//! The phases of a pivot while the backup exists (the rollback's in `rolling_back.rs`).

use k8s_openapi::api::core::v1::PodTemplateSpec;
use k8s_openapi::jiff::Timestamp;

use super::annotations::template_applied;
use super::leader::lease_hand_over;
use super::next_step::{Cx, describe};
use super::rolling_back::process_may_run;
use super::serving::{pod_serves, serves_despite_its_probe, soak_ends_at};
use super::step::{Step, Wait, Watch};
use crate::component::Component;
use crate::disruption::{ClusterShape, expected_disruption};
use crate::observation::{
    BackupObservation, ContainerState, IDENTITY_FRESHNESS, IdentityPublishing, PodObservation,
    identity_publishing,
};
use crate::rollout::{
    FailureSignal, SignalPolicy, failure_signals, pod_not_rolled_out, rollout_progress,
};

impl Cx<'_> {
    /// The backup is being deleted: wait until it is gone.
    pub(super) fn backup_going(&self, backup: &BackupObservation) -> Step {
        if let Some(step) = lease_hand_over(self.obs) {
            return step;
        }
        if let Some(step) = self.shorten_terminating() {
            return step;
        }
        let deadline = self.deadline_after(backup.daemonset.deleting_since, 1);
        let mut pending: Vec<String> = backup
            .daemonset
            .pods
            .iter()
            .map(|pod| {
                format!(
                    "{}: backup pod {} still exists",
                    pod.node.as_deref().unwrap_or("(unscheduled)"),
                    pod.name
                )
            })
            .collect();
        if pending.is_empty() {
            pending.push(format!(
                "backup DaemonSet {} still exists (its pods are gone)",
                backup.daemonset.name
            ));
        }
        if self.now() >= deadline {
            return Step::Failed {
                reason: format!(
                    "the backup {} was not gone by {deadline}: {}",
                    backup.daemonset.name,
                    pending.join("; ")
                ),
                state: format!(
                    "{} is being deleted; check its pods and finalizers \
                     (`kubectl -n kube-system get ds,pods -l {}`)",
                    backup.daemonset.name,
                    self.component().backup_label_query()
                ),
                resume: self.resume_command(),
            };
        }
        let mut watch = vec![
            Watch::DaemonSet {
                name: backup.daemonset.name.clone(),
            },
            Watch::Pods {
                selector: self.component().backup_label_query(),
            },
        ];
        watch.extend(self.lease_watch());
        Step::WaitForBackupGone(Wait {
            condition: format!("backup {} and its pods gone", backup.daemonset.name),
            pending,
            watch,
            recheck_at: Some(deadline),
            deadline: Some(deadline),
        })
    }

    /// The real DaemonSet is on the target: wait for the rollout, roll back on failure, remove
    /// the backup when done.
    pub(super) fn rolling_out(
        &self,
        backup: &BackupObservation,
        original: &PodTemplateSpec,
    ) -> Step {
        let mut progress = self.serving_progress(true);
        progress.extend(self.nodes_only_the_backup_covers(backup));
        progress.extend(self.vacating_pending());
        if progress.is_empty() {
            return self
                .release_hold("every node runs a new pod that serves")
                .unwrap_or_else(|| self.remove_backup(backup));
        }
        let current = self.real.pods.iter().filter(|p| self.real.is_current(p));
        let mut signals = failure_signals(current, self.strict_signals());
        let deadline = self.deadline_after(self.update_started_at(), 1);
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
            watch: self.watches(true),
            deadline: Some(deadline),
        })
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
    /// (see [`Cx::identity_publishing_pending`]) instead of giving up on a question time
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

    /// Why restoring the original template now could take a serving process away, if it
    /// could. A rollback replaces the pods on the target template (the others already run the
    /// original revision and stay): each of those that serves needs a serving backup pod on its
    /// node, and something must serve once they are gone.
    ///
    /// A backup pod whose probe fails counts when its process serves by its own identity
    /// Lease: the failing target beside it on the shared port may be what answered the probe.
    /// A node vacated of the backup needs none: other nodes serve while it is out of rotation.
    fn rollback_hazard(&self, backup: &BackupObservation) -> Option<String> {
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

    /// The real DaemonSet is not on the target yet: wait until the backup serves on every
    /// node where the real DaemonSet runs, then update it.
    pub(super) fn backing_up(
        &self,
        backup: &BackupObservation,
        original: &PodTemplateSpec,
        created: Option<Timestamp>,
    ) -> Step {
        let shape = ClusterShape::observe(self.obs, &self.target.template);
        let exclusive = !shape.live_shares_port;
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

    /// What keeps the real DaemonSet from serving on every node with current pods: the
    /// rollout progress, plus (when `strict`) each rolled-out pod proven to serve.
    pub(super) fn serving_progress(&self, strict: bool) -> Vec<String> {
        let mut pending = rollout_progress(self.obs, self.real).pending;
        if strict {
            for pod in &self.real.pods {
                if pod_not_rolled_out(self.obs, self.real, pod).is_none()
                    && let Err(why) = pod_serves(self.obs, self.target, pod)
                {
                    pending.push(why);
                }
            }
        }
        pending
    }

    /// Nodes where the backup still runs a pod and the real DaemonSet has none: removing the
    /// backup would leave them without the component. The DaemonSet's own status does not
    /// show them: a node tainted `node.kubernetes.io/not-ready` (even for a moment) is no
    /// longer one where a new daemon pod should run, so it leaves `desiredNumberScheduled`,
    /// and the rolling update deletes the unavailable old pod there without creating the new
    /// one until the taint is gone.
    pub(super) fn nodes_only_the_backup_covers(&self, backup: &BackupObservation) -> Vec<String> {
        let mut nodes: Vec<(&str, &str)> = backup
            .daemonset
            .pods
            .iter()
            .filter(|pod| !pod.is_terminating())
            .filter_map(|pod| Some((pod.node.as_deref()?, pod.name.as_str())))
            .filter(|(node, _)| !self.real.pods_on(node).any(|p| !p.is_terminating()))
            .collect();
        nodes.sort_unstable();
        nodes.dedup_by(|a, b| a.0 == b.0);
        nodes
            .into_iter()
            .map(|(node, backup_pod)| {
                format!(
                    "{node}: no pod of {} yet (only the backup pod {backup_pod} runs there)",
                    self.real.name
                )
            })
            .collect()
    }

    /// The earliest moment the decision can change by time alone: the deadline, the end of a
    /// soak, the moment identity publishing is decided.
    pub(super) fn recheck(&self, deadline: Timestamp) -> Option<Timestamp> {
        let now = self.now();
        let soaks = self
            .obs
            .all_pods()
            .filter_map(|pod| soak_ends_at(self.obs, self.target, pod));
        let decided = match identity_publishing(self.obs) {
            IdentityPublishing::Undetermined { decided_at }
                if self.component() == Component::ApiServer =>
            {
                decided_at
            }
            _ => None,
        };
        soaks
            .chain(decided)
            .chain(self.next_shortening())
            .chain(std::iter::once(deadline))
            .filter(|t| *t > now)
            .min()
            .or(Some(deadline))
    }
}
