//! The steps the state machine returns: one API action, one wait on a named condition, or an
//! end.

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::{DaemonSet, DaemonSetUpdateStrategy};
use k8s_openapi::api::core::v1::PodTemplateSpec;
use k8s_openapi::jiff::Timestamp;
use serde::Serialize;

use super::annotations::{BACKUP_DRAIN_STEP_AT, BACKUP_DRAINED_NODES};
use super::update_strategy::describe_strategy;

/// What the engine does next for one component.
///
/// Actions carry everything the API call needs, including its precondition; the engine adds
/// nothing but the namespace (`kube-system`). Waits say exactly what they wait for and which
/// objects to watch; the engine watches them and calls [`super::next_step`] again on every
/// change (cheap and pure) until it returns something else, re-reading at the latest at
/// [`Wait::recheck_at`].
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "kebab-case", tag = "step")]
pub enum Step {
    /// The component runs the target, verified. Nothing to do.
    Done {
        /// What was verified.
        summary: String,
    },
    /// Create the backup DaemonSet (POST; a 409 AlreadyExists means another run made it:
    /// re-read).
    CreateBackup {
        /// The complete object to create.
        daemonset: Box<DaemonSet>,
    },
    /// Write our annotations onto an existing backup (a kubeadm backup, or one taken over
    /// with `--force`), so that a later run knows what it is a backup of. Metadata only: no
    /// pod changes.
    AdoptBackup {
        /// The backup DaemonSet.
        name: String,
        /// Precondition: the backup's resourceVersion as observed.
        resource_version: Option<String>,
        /// Annotations to set (other annotations stay).
        annotations: BTreeMap<String, String>,
        /// Why it is adopted.
        why: String,
    },
    /// Record on the real DaemonSet that its leader Lease was created again after this run
    /// handed it over, by a process alive then ([`super::LEADER_AFTER_HAND_OVER`]): a later
    /// run, which did not watch it happen, could not tell that holder from a process gone
    /// since (see `leader.rs`). Metadata only: no pod changes.
    RecordLeader {
        /// The real DaemonSet.
        name: String,
        /// Precondition: its resourceVersion as observed.
        resource_version: Option<String>,
        /// Annotations to set (other annotations stay).
        annotations: BTreeMap<String, String>,
        /// What is recorded, and why.
        why: String,
    },
    /// Wait until the backup serves on every node where the real DaemonSet runs.
    WaitForBackup(Wait),
    /// Replace the real DaemonSet's pod template with the target (PUT with a resourceVersion
    /// precondition; on 409 re-read).
    UpdateReal(Update),
    /// Wait until every pod of the real DaemonSet runs the target template and serves.
    WaitForRollout(Wait),
    /// Write the real DaemonSet's own update strategy back after selfhost held its rollout
    /// with `OnDelete` (PUT of the live object with only the strategy and our annotation
    /// changed, resourceVersion precondition; on 409 re-read). No pod changes: the revision
    /// hash depends on the pod template only.
    RestoreUpdateStrategy {
        /// The DaemonSet.
        name: String,
        /// Precondition: its resourceVersion as observed.
        resource_version: Option<String>,
        /// The strategy to write back.
        strategy: Box<DaemonSetUpdateStrategy>,
        /// Annotations to remove (the record of the hold).
        remove_annotations: Vec<String>,
        /// Why now.
        why: String,
    },
    /// Delete one pod with a uid precondition, because waiting for the DaemonSet controller
    /// or a long grace period would only lengthen the hand-over.
    DeleteOldPod {
        /// The pod.
        pod: String,
        /// Precondition: its uid.
        uid: Option<String>,
        /// Its node.
        node: String,
        /// The grace period to delete with; `None` for the pod's own.
        grace_period_seconds: Option<i64>,
        /// Why this is safe and useful now.
        why: String,
    },
    /// Stop (delete, with its own grace period) a controller-manager or scheduler pod whose
    /// process may hold the component's Lease, so that none of the possible holders
    /// runs and the Lease can be handed over instead of left to expire. Only pods of our
    /// DaemonSets, which recreate them, and only while a standby runs that cannot hold the
    /// Lease (on another node, or started after the acquisition).
    StopPossibleLeaseHolder {
        /// The pod.
        pod: String,
        /// Precondition: its uid.
        uid: Option<String>,
        /// Its node.
        node: String,
        /// Why this is safe and useful now.
        why: String,
    },
    /// Delete the leader-election Lease (precondition: its resourceVersion) whose holder's
    /// process is confirmed gone, so a standby acquires within one retry period instead of a
    /// whole lease duration.
    HandOverLease {
        /// The Lease.
        lease: String,
        /// Precondition: its uid, if known.
        uid: Option<String>,
        /// Precondition: its resourceVersion as observed.
        resource_version: String,
        /// The holder whose process is gone.
        holder: String,
        /// The evidence that the holder is gone.
        why: String,
    },
    /// Remove the backup's pod from one more node: PUT the backup DaemonSet with that node
    /// excluded from its required node affinity (the DaemonSet controller deletes the pod
    /// there) and `OnDelete` (its other pods stay), recording the excluded nodes; on 409
    /// re-read. One node at a time, so that no two backup processes stop on the shared port
    /// together (`drain.rs`); during the held rollout, a node just before its real pod is
    /// replaced (`vacate.rs`).
    DrainBackupNode {
        /// The PUT of the backup DaemonSet.
        update: Update,
        /// The node whose backup pod goes now.
        node: String,
        /// Why one node at a time.
        why: String,
    },
    /// Delete the backup DaemonSet in the foreground (its pods go first).
    RemoveBackup {
        /// The backup DaemonSet.
        name: String,
        /// Precondition: its uid.
        uid: Option<String>,
    },
    /// Wait until the backup DaemonSet and its pods are gone.
    WaitForBackupGone(Wait),
    /// Wait until the component is verified: `/readyz` and `/version` for the apiserver, a
    /// leader that is a new process for the others.
    Verify(Wait),
    /// Restore the original template onto the real DaemonSet while the backup serves.
    RollBack {
        /// The update that restores it.
        update: Update,
        /// What failed.
        reason: String,
    },
    /// Wait until the restored template has rolled out again.
    WaitForRollback(Wait),
    /// Refused before changing anything that matters; the cluster is as it was.
    Refuse {
        /// What is wrong.
        reason: String,
        /// What to do about it.
        fix: String,
    },
    /// Failed and not restored: the cluster is in `state`.
    Failed {
        /// What failed.
        reason: String,
        /// Exactly what the cluster looks like now.
        state: String,
        /// The command that continues from here.
        resume: String,
    },
    /// Failed and rolled back: the component runs its original template again.
    RolledBack {
        /// What failed.
        reason: String,
    },
}

/// A PUT of the real DaemonSet: a new pod template plus our annotations.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Update {
    /// The DaemonSet.
    pub name: String,
    /// Precondition: its resourceVersion as observed.
    pub resource_version: Option<String>,
    /// The pod template to write.
    pub template: Box<PodTemplateSpec>,
    /// Annotations to set on the DaemonSet's metadata.
    pub set_annotations: BTreeMap<String, String>,
    /// Annotations to remove from the DaemonSet's metadata.
    pub remove_annotations: Vec<String>,
    /// The update strategy to write with the template (`None`: leave it as it is). The update
    /// to the target sets `OnDelete` to hold the kube-apiserver's rollout; a rollback writes
    /// the held strategy back.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub update_strategy: Option<DaemonSetUpdateStrategy>,
}

/// A wait: the condition in words, what is still missing, and what to watch.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Wait {
    /// The condition, e.g. "backup pods Ready and serving on every node".
    pub condition: String,
    /// What is still missing, one line per node or object.
    pub pending: Vec<String>,
    /// The objects whose changes can end the wait.
    pub watch: Vec<Watch>,
    /// When the decision can change without any watched change (a deadline, a soak, a lease
    /// expiring): re-observe then at the latest.
    pub recheck_at: Option<Timestamp>,
    /// When the wait fails (for display; the failure itself is a later step).
    pub deadline: Option<Timestamp>,
}

/// Something a wait watches, in `kube-system`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case", tag = "kind")]
pub enum Watch {
    /// One DaemonSet, by name.
    DaemonSet {
        /// Its name.
        name: String,
    },
    /// Pods, by label selector.
    Pods {
        /// e.g. `k8s-app=self-hosted-kube-apiserver`.
        selector: String,
    },
    /// The nodes (cluster-scoped).
    Nodes,
    /// Leases, by label selector (the apiserver identity Leases).
    Leases {
        /// e.g. `apiserver.kubernetes.io/identity=kube-apiserver`.
        selector: String,
    },
    /// One Lease, by name (a leader-election Lease).
    Lease {
        /// Its name.
        name: String,
    },
    /// `/readyz` and `/version`, polled through the probe client.
    ApiHealth,
}

impl Step {
    /// A stable kebab-case name, for JSON events.
    pub fn name(&self) -> &'static str {
        match self {
            Step::Done { .. } => "done",
            Step::CreateBackup { .. } => "create-backup",
            Step::AdoptBackup { .. } => "adopt-backup",
            Step::RecordLeader { .. } => "record-leader",
            Step::WaitForBackup(_) => "wait-for-backup",
            Step::UpdateReal(_) => "update-real",
            Step::WaitForRollout(_) => "wait-for-rollout",
            Step::RestoreUpdateStrategy { .. } => "restore-update-strategy",
            Step::DeleteOldPod { .. } => "delete-old-pod",
            Step::StopPossibleLeaseHolder { .. } => "stop-possible-lease-holder",
            Step::HandOverLease { .. } => "hand-over-lease",
            Step::DrainBackupNode { .. } => "drain-backup-node",
            Step::RemoveBackup { .. } => "remove-backup",
            Step::WaitForBackupGone(_) => "wait-for-backup-gone",
            Step::Verify(_) => "verify",
            Step::RollBack { .. } => "roll-back",
            Step::WaitForRollback(_) => "wait-for-rollback",
            Step::Refuse { .. } => "refuse",
            Step::Failed { .. } => "failed",
            Step::RolledBack { .. } => "rolled-back",
        }
    }

    /// A short human description of the step, one line.
    pub fn description(&self) -> String {
        match self {
            Step::Done { summary } => format!("done: {summary}"),
            Step::CreateBackup { daemonset } => {
                let name = daemonset.metadata.name.as_deref().unwrap_or_default();
                let record_only = daemonset
                    .metadata
                    .annotations
                    .as_ref()
                    .is_some_and(|a| a.contains_key(BACKUP_DRAINED_NODES));
                if record_only {
                    format!(
                        "create backup DaemonSet {name} (record only, no pods: on several \
                         nodes the other nodes serve while one is replaced, out of the load \
                         balancer's rotation; a backup process would only join nodes still in \
                         it, and catch connections before it serves)"
                    )
                } else {
                    format!("create backup DaemonSet {name}")
                }
            }
            Step::AdoptBackup { name, why, .. } => format!("adopt backup {name}: {why}"),
            Step::RecordLeader { name, why, .. } => format!("record on {name}: {why}"),
            Step::WaitForBackup(wait)
            | Step::WaitForRollout(wait)
            | Step::WaitForBackupGone(wait)
            | Step::Verify(wait)
            | Step::WaitForRollback(wait) => format!("wait: {}", wait.condition),
            Step::UpdateReal(update) => match &update.update_strategy {
                Some(_) => format!(
                    "update {} to the target template, holding its rollout (update strategy \
                     OnDelete: selfhost replaces the old pods one node at a time, each once the \
                     previous node's new pod serves)",
                    update.name
                ),
                None => format!("update {} to the target template", update.name),
            },
            Step::RestoreUpdateStrategy {
                name,
                strategy,
                why,
                ..
            } => format!(
                "restore {name}'s update strategy {}: {why}",
                describe_strategy(strategy)
            ),
            Step::DeleteOldPod {
                pod,
                node,
                grace_period_seconds,
                ..
            } => match grace_period_seconds {
                Some(grace) => format!("delete old pod {pod} on {node} (grace {grace}s)"),
                None => format!("delete old pod {pod} on {node}"),
            },
            Step::StopPossibleLeaseHolder { pod, node, .. } => {
                format!("stop pod {pod} on {node}, a possible holder of the Lease")
            }
            Step::HandOverLease { lease, holder, .. } => {
                format!("hand over Lease {lease} from gone holder {holder}")
            }
            Step::DrainBackupNode { update, node, .. } => {
                if update.set_annotations.contains_key(BACKUP_DRAIN_STEP_AT) {
                    format!(
                        "remove backup {}'s pod from {node} (one node at a time)",
                        update.name
                    )
                } else {
                    format!(
                        "remove backup {}'s pod from {node} before its real pod is replaced \
                         (the node leaves the load balancer meanwhile)",
                        update.name
                    )
                }
            }
            Step::RemoveBackup { name, .. } => format!("remove backup DaemonSet {name}"),
            Step::RollBack { update, reason } => {
                format!(
                    "roll {} back to its original template: {reason}",
                    update.name
                )
            }
            Step::Refuse { reason, .. } => format!("refused: {reason}"),
            Step::Failed { reason, .. } => format!("failed: {reason}"),
            Step::RolledBack { reason } => format!("rolled back: {reason}"),
        }
    }

    /// The object the step acts on where one step name acts on several in a row: the pod a
    /// deletion takes away. A loop that counts repeated steps counts per subject.
    pub fn subject(&self) -> Option<&str> {
        match self {
            Step::DeleteOldPod { pod, .. } | Step::StopPossibleLeaseHolder { pod, .. } => Some(pod),
            Step::DrainBackupNode { node, .. } => Some(node),
            _ => None,
        }
    }

    /// The wait, if this step is one.
    pub fn wait(&self) -> Option<&Wait> {
        match self {
            Step::WaitForBackup(wait)
            | Step::WaitForRollout(wait)
            | Step::WaitForBackupGone(wait)
            | Step::Verify(wait)
            | Step::WaitForRollback(wait) => Some(wait),
            _ => None,
        }
    }

    /// Whether the run of this component ends here.
    pub fn is_terminal(&self) -> bool {
        matches!(
            self,
            Step::Done { .. } | Step::Refuse { .. } | Step::Failed { .. } | Step::RolledBack { .. }
        )
    }

    /// Whether the step can take a serving process away: updating a DaemonSet's template,
    /// deleting a pod, deleting the backup, or handing a Lease over.
    pub fn is_disruptive(&self) -> bool {
        matches!(
            self,
            Step::UpdateReal(_)
                | Step::RollBack { .. }
                | Step::DeleteOldPod { .. }
                | Step::StopPossibleLeaseHolder { .. }
                | Step::DrainBackupNode { .. }
                | Step::RemoveBackup { .. }
                | Step::HandOverLease { .. }
        )
    }
}
