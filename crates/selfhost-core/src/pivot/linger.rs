//! A stopping kube-apiserver lingers: it leaves its port once its `--shutdown-delay-duration`
//! is over, but open watches keep its process alive until the kubelet kills it at the end of
//! its grace period (30 s in selfhost's templates and kubeadm's). Nothing needs that time —
//! no new connection reaches it, and the watches are cut either way — yet the DaemonSet
//! controller creates a node's next pod only once the old one is gone, and the backup's
//! removal waits for its pods. So once a Terminating kube-apiserver's shutdown delay is over
//! and its node is served without it, it is deleted again with the shortened grace.
//!
//! Its node is served without it when another pod on the node serves, by the same proof that
//! lets a pivot go on (`serving.rs`: identity, record, or the soak on clusters that publish no
//! identity Leases), or when the node is vacated of the backup (`vacate.rs`): the load
//! balancer has taken it out, and its new pod joins only once the old one is gone.

use k8s_openapi::jiff::Timestamp;

use super::decision_inputs::Pivot;
use super::serving::pod_serves;
use super::step::Step;
use crate::component::Component;
use crate::observation::{PodObservation, time};

impl Pivot<'_> {
    /// A lingering kube-apiserver whose shutdown delay is over, on a node served without it:
    /// delete it again with the shortened grace.
    pub(super) fn shorten_terminating(&self) -> Option<Step> {
        let now = self.now();
        let grace = self.shortened_grace_seconds();
        let vacated = self.vacated_nodes();
        self.lingering()
            .into_iter()
            .filter(|(_, delay_over)| *delay_over <= now)
            .find_map(|(pod, _)| {
                let node = pod.node.as_deref()?;
                let why = if vacated.contains(node) {
                    "it is Terminating on a node vacated of the backup, and its shutdown delay \
                     is over: the load balancer has taken the node out, and nothing on it \
                     needs the rest of its grace period"
                        .to_string()
                } else {
                    let successor = self.serving_in_place_of(pod, node)?;
                    format!(
                        "it is Terminating and its shutdown delay is over, so it has left the \
                         port; only open watches would keep it for the rest of its grace \
                         period, while {} on the same node serves",
                        successor.name
                    )
                };
                Some(Step::DeleteOldPod {
                    pod: pod.name.clone(),
                    uid: pod.uid.clone(),
                    node: node.to_string(),
                    grace_period_seconds: Some(grace),
                    why,
                })
            })
    }

    /// When the next lingering kube-apiserver's shutdown delay is over, or a backup process
    /// in its shutdown delay leaves the port on a vacated node, if one is waiting.
    pub(super) fn next_shortening(&self) -> Option<Timestamp> {
        let now = self.now();
        self.lingering()
            .into_iter()
            .map(|(_, delay_over)| delay_over)
            .filter(|at| *at > now)
            .chain(
                self.vacates_nodes()
                    .then(|| self.backup_delay_ends_at())
                    .flatten(),
            )
            .min()
    }

    /// The pod that serves on `node` in place of the Terminating `pod`: on a node vacated of
    /// the backup only the real DaemonSet's current pod counts.
    fn serving_in_place_of(&self, pod: &PodObservation, node: &str) -> Option<&PodObservation> {
        let vacated = self.vacated_nodes();
        self.obs
            .all_pods()
            .filter(|other| other.name != pod.name && other.node.as_deref() == Some(node))
            .filter(|other| !vacated.contains(node) || self.real.is_current(other))
            .find(|other| pod_serves(self.obs, self.target, other).is_ok())
    }

    /// Terminating kube-apiserver pods whose processes run and that would outlive the
    /// shortened grace, each with the moment its shutdown delay is over, in node order.
    fn lingering(&self) -> Vec<(&PodObservation, Timestamp)> {
        if self.component() != Component::ApiServer {
            return Vec::new();
        }
        let shortened_end = time::after(self.now(), self.target.options.shortened_grace);
        let mut pods: Vec<(&PodObservation, Timestamp)> = self
            .obs
            .all_pods()
            .filter(|pod| pod.node.is_some() && !pod.processes_stopped())
            .filter_map(|pod| {
                if pod.deleting_since? <= shortened_end {
                    return None;
                }
                Some((pod, self.delay_over_at(pod)?))
            })
            .collect();
        pods.sort_by(|a, b| (&a.0.node, &a.0.name).cmp(&(&b.0.node, &b.0.name)));
        pods
    }
}
