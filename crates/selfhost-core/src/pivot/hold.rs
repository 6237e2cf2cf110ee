//! Holding the kube-apiserver's rollout to one node at a time.
//!
//! The DaemonSet controller's `RollingUpdate` moves to the next node as soon as the new pod
//! is Ready. On a shared port the kubelet's readiness probe can be answered by the backup's
//! process, so a new kube-apiserver that never serves looks Ready within milliseconds, and the
//! controller would put one such process on every node, each taking its share of new
//! connections and failing every request on them.
//!
//! So the engine holds the rollout itself: the same write that puts the target template on the
//! real DaemonSet sets `updateStrategy: OnDelete`, and records the strategy it replaced in
//! [`HELD_UPDATE_STRATEGY`]. Under `OnDelete` the controller replaces no pod by itself (it
//! only creates one on a node that has none), and the engine deletes the old pods one node at
//! a time, each only once every new pod so far serves by its own identity Lease (see
//! `replacing.rs`, `replace_on_delete`). On two nodes or more each node's turn begins by taking
//! the backup's pod off it (`vacate.rs`), so that the node is out of the load balancer while
//! its new kube-apiserver joins the port; on one node the backup serves on it throughout, as
//! there is nowhere else for clients to go; behind the node's API front the backup serves on
//! every node throughout, and the front moves the node's new connections to it (`front.rs`).
//! When every node's new pod serves, the recorded strategy is written back
//! ([`Step::RestoreUpdateStrategy`]) before the backup goes; a rollback writes it back together
//! with the original template, so the controller itself replaces the failed pods at once (they
//! are not available, or are on nodes the backup serves).
//!
//! Changing only the update strategy leaves the pods alone: the DaemonSet controller's
//! revision hash and the `deprecated.daemonset.template.generation` annotation are computed
//! from the pod template only, so the pods stay current and no rollout starts.

use k8s_openapi::api::apps::v1::DaemonSetUpdateStrategy;

use super::annotations::HELD_UPDATE_STRATEGY;
use super::decision_inputs::Pivot;
use super::step::Step;
use super::update_strategy::on_delete;
use crate::component::Component;
use crate::disruption::ClusterShape;

impl Pivot<'_> {
    /// The strategy the update to the target sets, with the annotation that records the one
    /// it replaces: only for the kube-apiserver (whose readiness probe can lie), only where
    /// the controller would roll by itself, and only where the backup can serve beside the old
    /// and the new pods: behind the node's API front, on an address of its own, or else on a
    /// port the live and target templates share (with exclusive ports the old pod must stop
    /// before anything else can serve, and the controller's own rolling update is the
    /// hand-over).
    pub(super) fn hold_on_update(&self) -> Option<(DaemonSetUpdateStrategy, String)> {
        if self.component() != Component::ApiServer || self.real.is_on_delete() {
            return None;
        }
        let shape = ClusterShape::observe(self.obs, &self.target.template);
        let shares_port = shape.live_shares_port && shape.target_shares_port;
        if !(shape.behind_front().is_some() || shares_port) {
            return None;
        }
        let original = self.real.update_strategy.clone().unwrap_or_default();
        // Serialising an update strategy cannot fail (strings and numbers only).
        let recorded = serde_json::to_string(&original).unwrap_or_else(|_| "{}".to_string());
        Some((on_delete(), recorded))
    }

    /// The strategy recorded when the rollout was held, if it is held. An annotation that
    /// does not parse (edited by hand) gives the API's default, `RollingUpdate`.
    pub(super) fn held_strategy(&self) -> Option<DaemonSetUpdateStrategy> {
        let recorded = self.real.annotation(HELD_UPDATE_STRATEGY)?;
        Some(
            serde_json::from_str::<DaemonSetUpdateStrategy>(recorded)
                .ok()
                .filter(|s| s.type_.is_some())
                .unwrap_or_else(|| DaemonSetUpdateStrategy {
                    type_: Some("RollingUpdate".to_string()),
                    rolling_update: None,
                }),
        )
    }

    /// Writes the held strategy back, if the rollout is held: every node runs a new pod
    /// that serves.
    pub(super) fn release_hold(&self, why: &str) -> Option<Step> {
        let strategy = self.held_strategy()?;
        Some(self.restore_update_strategy(strategy, why))
    }

    /// The rollout is held, and no backup exists any more (removed by hand mid-rollout): the
    /// controller must pace the rollout again, whatever comes next.
    pub(super) fn releasing_hold(&self, held: DaemonSetUpdateStrategy) -> Step {
        self.restore_update_strategy(
            held,
            "the rollout was held for the backup's sake, and no backup exists any more",
        )
    }

    fn restore_update_strategy(&self, strategy: DaemonSetUpdateStrategy, why: &str) -> Step {
        Step::RestoreUpdateStrategy {
            name: self.real.name.clone(),
            resource_version: self.real.resource_version.clone(),
            strategy: Box::new(strategy),
            remove_annotations: vec![HELD_UPDATE_STRATEGY.to_string()],
            why: why.to_string(),
        }
    }
}
