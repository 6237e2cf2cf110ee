//! Replacing the old pods while the backup exists: the actions that only speed a wait up —
//! a gone leader's Lease handed over, a lingering Terminating kube-apiserver deleted again
//! with a short grace, and, under `updateStrategy: OnDelete` (the operator's, or selfhost's
//! hold, `hold.rs`), the next old pod deleted once every other node is settled.

use super::decision_inputs::Pivot;
use super::leader::lease_hand_over;
use super::serving::{Serving, pod_serves};
use super::step::Step;
use super::vacate::Turn;
use crate::observation::PodObservation;
use crate::rollout::pod_not_rolled_out;

impl Pivot<'_> {
    /// Actions that only speed a wait up: a dead leader's Lease, a Terminating apiserver whose
    /// replacement already serves, an `OnDelete` pod whose node is covered.
    pub(super) fn hurry(&self) -> Option<Step> {
        lease_hand_over(self.obs)
            .or_else(|| self.shorten_terminating())
            .or_else(|| self.replace_on_delete())
    }

    /// With `updateStrategy: OnDelete` (the operator's, or selfhost's hold) the DaemonSet
    /// controller replaces nothing by itself: delete the next old pod once every other node
    /// is settled and its own node is covered by a serving backup pod — or, under selfhost's
    /// hold on two nodes or more, once the node is vacated of the backup (`vacate.rs`), so
    /// that it is out of the load balancer while its new pod joins.
    ///
    /// A node is settled when its new pod *serves* — for the kube-apiserver by its own
    /// identity Lease, since Ready can be the backup's answer on the shared port — or when it
    /// still runs its untouched, Ready old pod. So at most one node at a time runs a new pod
    /// that is not proven, and a target that never serves stays on the first node until the
    /// rollback. A Terminating old pod whose node's new pod serves does not hold the next
    /// node back: it has left the port, and its node is served.
    fn replace_on_delete(&self) -> Option<Step> {
        if !self.real.is_on_delete() {
            return None;
        }
        let backup = self.obs.backup.as_ref()?;
        let mut old: Vec<&PodObservation> = self
            .real
            .pods
            .iter()
            .filter(|pod| !self.real.is_current(pod) && !pod.is_terminating())
            .collect();
        old.sort_by(|a, b| (&a.node, &a.name).cmp(&(&b.node, &b.name)));
        let pod = old.first()?;
        let node = pod.node.as_deref()?;
        let others_settled = self
            .real
            .nodes()
            .into_iter()
            .filter(|other| *other != node)
            .all(|other| self.node_settled(other));
        let every_node_has_a_pod =
            usize::try_from(self.real.status.desired).is_ok_and(|d| self.real.nodes().len() >= d);
        if !others_settled || !every_node_has_a_pod {
            return None;
        }
        if self.vacates_nodes() {
            match self.vacating_turn(backup, pod, node) {
                Turn::Step(step) => return Some(*step),
                Turn::Wait => return None,
                Turn::Covered => {}
            }
        }
        let cover = backup
            .daemonset
            .pods_on(node)
            .find_map(|b| pod_serves(self.obs, self.target, b).ok())?;
        let held = self.held_strategy().is_some();
        if held && let Some(layout) = self.front() {
            return Some(self.replace_behind_front(pod, node, layout));
        }
        // Under selfhost's own hold the old pod goes as the controller would delete it, with
        // its own grace period (its `--shutdown-delay-duration` drains it); the grace is
        // shortened once that delay is over (`linger.rs`).
        let grace = match cover {
            _ if held => None,
            Serving::Identity { .. } | Serving::Recorded { .. } | Serving::Identities { .. } => {
                Some(self.shortened_grace_seconds())
            }
            Serving::Soaked | Serving::Alone | Serving::OwnAddress { .. } | Serving::Standby => {
                None
            }
        };
        Some(Step::DeleteOldPod {
            pod: pod.name.clone(),
            uid: pod.uid.clone(),
            node: node.to_string(),
            grace_period_seconds: grace,
            why: if held {
                "selfhost holds the rollout (update strategy OnDelete) so that one node at a \
                 time runs a new pod not yet proven to serve: every other node is settled, and \
                 the backup serves on this one"
                    .to_string()
            } else {
                "the DaemonSet's update strategy is OnDelete, and the backup serves on its \
                 node"
                    .to_string()
            },
        })
    }

    /// Whether `node` runs either a new pod that serves, or its untouched old pod, Ready.
    fn node_settled(&self, node: &str) -> bool {
        let live: Vec<&PodObservation> = self
            .real
            .pods_on(node)
            .filter(|pod| !pod.is_terminating())
            .collect();
        match live.as_slice() {
            [pod] if self.real.is_current(pod) => {
                pod_not_rolled_out(self.obs, self.real, pod).is_none()
                    && pod_serves(self.obs, self.target, pod).is_ok()
            }
            [pod] => pod.ready && self.real.pods_on(node).all(|p| !p.is_terminating()),
            _ => false,
        }
    }
}
