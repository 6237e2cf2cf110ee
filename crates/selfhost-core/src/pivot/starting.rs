//! The starting phase: no backup, and the real DaemonSet not on the target. The start checks
//! (nodes Ready, the DaemonSet converged, a cluster shape the pivot can hand over on), then the
//! backup — a record only where the kube-apiserver's rollout will be held on two nodes or more
//! (`vacate.rs`), on an address of its own behind the node's API front (`front.rs`).

use super::backup_template::backup_daemonset;
use super::decision_inputs::Pivot;
use super::step::{Step, Wait};
use crate::disruption::{ClusterShape, expected_disruption};
use crate::observation::NodeReadiness;
use crate::rollout::{rollout_progress, stuck};

impl Pivot<'_> {
    /// The start checks, then the backup: a copy of the real DaemonSet that serves while its
    /// pods are replaced, and the upgrade's record.
    pub(super) fn starting(&self) -> Step {
        if let Some(refusal) = self.start_refusal() {
            return refusal;
        }
        let front = self.front();
        match backup_daemonset(
            self.real,
            self.component(),
            self.version(),
            self.now(),
            front,
        ) {
            // On two nodes or more the kube-apiserver's backup is a record only (`vacate.rs`).
            Ok(daemonset) if self.backup_runs_no_pod() => Step::CreateBackup {
                daemonset: Box::new(self.record_only(daemonset)),
            },
            Ok(daemonset) => Step::CreateBackup {
                daemonset: Box::new(daemonset),
            },
            Err(error) => Step::Refuse {
                reason: error.to_string(),
                fix: format!("repair {} first", self.real.name),
            },
        }
    }

    /// Why the pivot must not start, or not yet (a wait), if so: checked only before the
    /// backup exists.
    fn start_refusal(&self) -> Option<Step> {
        let not_ready: Vec<String> = self
            .obs
            .nodes
            .iter()
            .filter(|node| node.ready != NodeReadiness::Ready)
            .map(|node| match &node.ready {
                NodeReadiness::NotReady { reason: Some(r) } => format!("{} ({r})", node.name),
                _ => node.name.clone(),
            })
            .collect();
        if !not_ready.is_empty() {
            return Some(Step::Refuse {
                reason: format!(
                    "control-plane node(s) not Ready: {}; a hand-over there could not be \
                     verified",
                    not_ready.join(", ")
                ),
                fix: "bring the node(s) back (check the kubelet) or remove them from the \
                      cluster, then re-run"
                    .into(),
            });
        }
        let progress = rollout_progress(self.obs, self.real);
        if !progress.is_complete() {
            // Pods that restart on their own (a controller whose node's kube-apiserver was
            // just replaced exits and is restarted) converge by waiting; a pod that cannot
            // start, or a wait past the deadline, needs the operator.
            let stuck = self.real.pods.iter().find_map(stuck);
            let deadline = self.deadline_after(None, 1);
            if stuck.is_none() && self.now() < deadline {
                return Some(Step::WaitForRollout(Wait {
                    condition: format!("{} converged before its pivot starts", self.real.name),
                    pending: progress.pending,
                    watch: self.watches(false),
                    recheck_at: Some(deadline),
                    deadline: Some(deadline),
                }));
            }
            return Some(Step::Refuse {
                reason: format!(
                    "{} has not converged: {}",
                    self.real.name,
                    progress.pending.join("; ")
                ),
                fix: format!(
                    "wait for it or repair the failing pods (`kubectl -n kube-system rollout \
                     status ds/{}`), then re-run",
                    self.real.name
                ),
            });
        }
        let shape = ClusterShape::observe(self.obs, &self.target.template);
        let expected = expected_disruption(self.component(), &shape);
        if let Some(blocked) = expected.blocked {
            return Some(Step::Refuse {
                reason: blocked,
                fix: expected.fix.unwrap_or_default(),
            });
        }
        if expected.requires_accept_downtime && !self.target.options.accept_downtime {
            return Some(Step::Refuse {
                reason: expected.explanation.join("; "),
                fix: expected.fix.unwrap_or_default(),
            });
        }
        None
    }
}
