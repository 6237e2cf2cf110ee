//! What a wait with the backup beside the real DaemonSet still waits for, and when to look
//! again: the rollout and rollback share these.

use k8s_openapi::jiff::Timestamp;

use super::decision_inputs::Pivot;
use super::serving::{pod_serves, soak_ends_at};
use crate::component::Component;
use crate::observation::{BackupObservation, IdentityPublishing, identity_publishing};
use crate::rollout::{pod_not_rolled_out, rollout_progress};

impl Pivot<'_> {
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

    /// Adds to `pending` the nodes only the backup covers, each in place of the rollout's
    /// plainer line about the same node having no pod yet.
    pub(super) fn add_backup_cover(&self, pending: &mut Vec<String>, backup: &BackupObservation) {
        let covered = self.nodes_only_the_backup_covers(backup);
        pending.retain(|line| !covered.iter().any(|c| c.starts_with(line.as_str())));
        pending.extend(covered);
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
