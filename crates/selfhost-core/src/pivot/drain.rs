//! Removing the backup: the phases where its removal has begun — its deletion, or its
//! removal one node at a time — and the next step of that removal once the rollout or a
//! rollback no longer needs the backup.
//!
//! A kube-apiserver that is told to stop keeps its port for its `--shutdown-delay-duration`
//! and fails `/readyz` on purpose meanwhile, so that load balancers take it out of rotation.
//! On a shared port the node's kernel hands each new connection, health checks included, to
//! either process listening there, so while a backup process drains, its node's checks fail
//! about half the time. Deleting the backup DaemonSet at once drains every node together, and a
//! load balancer can find no node whose checks pass and refuse connections.
//!
//! So the kube-apiserver's backup goes one node at a time (the other components' backups, with
//! no load balancer in front, are deleted at once): each step excludes one more node from the
//! backup's required node affinity (`matchFields metadata.name NotIn [node]`; the API accepts one value
//! per field requirement, so one requirement per node), and the DaemonSet controller deletes
//! the backup pod there, as upstream `NodeShouldRunDaemonPod` asks of a node that no longer
//! matches. The same write sets the backup's update strategy to `OnDelete`, so that the
//! changed template does not roll the backup pods on the other nodes. The next node is
//! excluded only once no backup process is still stopping. When at most one backup pod
//! remains, the DaemonSet itself is deleted in the foreground (its last pod goes first).
//!
//! The record lives on the backup DaemonSet: [`BACKUP_DRAINED_NODES`] and
//! [`BACKUP_DRAIN_STEP_AT`], written with each exclusion. Once it is there the removal is under
//! way and a resumed run continues it, as it continues a backup whose deletion has begun.
//!
//! The held kube-apiserver rollout on two nodes or more makes the same exclusion earlier, one
//! node per turn, just before the node's real pod is replaced (`vacate.rs`): it records the
//! node in [`BACKUP_DRAINED_NODES`] only, without [`BACKUP_DRAIN_STEP_AT`], for the removal
//! has not begun (the rollout, or a rollback, goes on with the backup serving on the other
//! nodes). By the end every node may already be vacated, and the removal here deletes the
//! DaemonSet at once. On two nodes or more a backup selfhost creates is vacated from the
//! start (a record only, `vacate.rs`): it never runs a pod, and its removal is always that
//! single deletion. The node-by-node removal remains for a backup with pods.

use super::annotations::{BACKUP_DRAIN_STEP_AT, BACKUP_DRAINED_NODES};
use super::decision_inputs::Pivot;
use super::exclusion::{drained_nodes, exclude_nodes};
use super::leader::lease_hand_over;
use super::step::{Step, Update, Wait, Watch};
use super::update_strategy::on_delete;
use crate::component::Component;
use crate::observation::{BackupObservation, PodObservation, time};

impl Pivot<'_> {
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

    /// The backup's removal has begun node by node: speed up what can be, then go on.
    pub(super) fn draining(&self, backup: &BackupObservation) -> Step {
        if let Some(step) = lease_hand_over(self.obs) {
            return step;
        }
        if let Some(step) = self.shorten_terminating() {
            return step;
        }
        self.remove_backup(backup)
    }

    /// The next step of removing the backup, which may go now (every node is served without
    /// it, or a rollback no longer needs it): wait while a backup process is still stopping or
    /// an excluded node's pod has yet to be deleted; exclude the next node while two or more
    /// backup pods run; delete the DaemonSet when at most one does.
    pub(super) fn remove_backup(&self, backup: &BackupObservation) -> Step {
        // Only kube-apiservers sit behind a load balancer that health-checks them; a standby
        // of the other components leaves nothing to drain, and their leader hand-over
        // (`leader.rs`) reads the backup's deletion as its pods going. Behind the node's API
        // front a stopping backup process fails only its own checks, not its node's
        // (`front.rs`).
        if self.component() != Component::ApiServer || self.front().is_some() {
            return Step::RemoveBackup {
                name: backup.daemonset.name.clone(),
                uid: backup.daemonset.uid.clone(),
            };
        }
        let drained = drained_nodes(backup);
        let pods = &backup.daemonset.pods;
        let stopping: Vec<&PodObservation> = pods
            .iter()
            .filter(|p| p.is_terminating() && !p.processes_stopped())
            .collect();
        let mut running: Vec<&PodObservation> = pods
            .iter()
            .filter(|p| !p.is_terminating() && p.node.is_some())
            .collect();
        running.sort_by(|a, b| (&a.node, &a.name).cmp(&(&b.node, &b.name)));
        let awaiting_controller: Vec<&PodObservation> = running
            .iter()
            .copied()
            .filter(|p| p.node.as_ref().is_some_and(|n| drained.contains(n)))
            .collect();
        if !stopping.is_empty() || !awaiting_controller.is_empty() {
            return self.wait_for_drained_node(backup, &stopping, &awaiting_controller);
        }
        if running.len() <= 1 {
            return Step::RemoveBackup {
                name: backup.daemonset.name.clone(),
                uid: backup.daemonset.uid.clone(),
            };
        }
        // `running` holds only pods with a node, none of them drained.
        let Some(node) = running.first().and_then(|p| p.node.clone()) else {
            return Step::RemoveBackup {
                name: backup.daemonset.name.clone(),
                uid: backup.daemonset.uid.clone(),
            };
        };
        let mut excluded = drained;
        excluded.insert(node.clone());
        let update = Update {
            name: backup.daemonset.name.clone(),
            resource_version: backup.daemonset.resource_version.clone(),
            template: Box::new(exclude_nodes(&backup.daemonset.template, &excluded)),
            set_annotations: [
                (
                    BACKUP_DRAINED_NODES.to_string(),
                    excluded.iter().cloned().collect::<Vec<_>>().join(","),
                ),
                (BACKUP_DRAIN_STEP_AT.to_string(), time::format(self.now())),
            ]
            .into(),
            remove_annotations: Vec::new(),
            update_strategy: Some(on_delete()),
        };
        Step::DrainBackupNode {
            update,
            node,
            why: format!(
                "{} backup pods still run; one node at a time, so that a load balancer always \
                 finds nodes whose /readyz passes while a backup process stops",
                running.len()
            ),
        }
    }

    /// Waits until the backup process that is stopping has exited (or the controller has
    /// deleted the pod of a node already excluded), failing at the deadline.
    fn wait_for_drained_node(
        &self,
        backup: &BackupObservation,
        stopping: &[&PodObservation],
        awaiting_controller: &[&PodObservation],
    ) -> Step {
        let name = &backup.daemonset.name;
        let step_at = backup
            .daemonset
            .annotation(BACKUP_DRAIN_STEP_AT)
            .and_then(time::parse);
        let deadline = self.deadline_after(step_at, 1);
        let on = |p: &PodObservation| p.node.clone().unwrap_or_else(|| "(unscheduled)".into());
        let mut pending: Vec<String> = stopping
            .iter()
            .map(|p| format!("{}: backup pod {} is stopping", on(p), p.name))
            .collect();
        pending.extend(awaiting_controller.iter().map(|p| {
            format!(
                "{}: backup pod {} not yet deleted by the DaemonSet controller (its node is \
                 excluded)",
                on(p),
                p.name
            )
        }));
        if self.now() >= deadline {
            return Step::Failed {
                reason: format!(
                    "the backup {name} was not removed from its node by {deadline}: {}",
                    pending.join("; ")
                ),
                state: format!(
                    "{name} is being removed node by node (excluded so far: {}); check its pods \
                     (`kubectl -n kube-system get pods -l {}`)",
                    backup
                        .daemonset
                        .annotation(BACKUP_DRAINED_NODES)
                        .unwrap_or("none"),
                    self.component().backup_label_query()
                ),
                resume: self.resume_command(),
            };
        }
        let mut watch = vec![
            Watch::DaemonSet { name: name.clone() },
            Watch::Pods {
                selector: self.component().backup_label_query(),
            },
        ];
        watch.extend(self.lease_watch());
        Step::WaitForBackupGone(Wait {
            condition: format!(
                "the stopping backup pod of {name} gone before the next node's is removed"
            ),
            pending,
            watch,
            recheck_at: Some(deadline),
            deadline: Some(deadline),
        })
    }
}
