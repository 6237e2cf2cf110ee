//! The real DaemonSet's rollout and rollback in the observation builder.

use super::builder::{NEW, OLD, Pod, UPDATE_AT, World, t};
use crate::observation::{ContainerState, time};
use crate::pivot::{
    APPLIED_OVER_GENERATION, APPLIED_TEMPLATE_HASH, ROLLBACK_REASON, ROLLBACK_STARTED_AT,
    UPDATE_STARTED_AT,
};
use crate::rollout::template_hash;

impl World {
    /// selfhost updated the real DaemonSet to the target at [`UPDATE_AT`] (generation 2);
    /// the old pods are still there.
    pub(crate) fn updated(mut self) -> Self {
        let new = self.template_for(NEW);
        let real = self.real_mut();
        real.annotations
            .insert(APPLIED_TEMPLATE_HASH.into(), template_hash(&new));
        real.annotations
            .insert(APPLIED_OVER_GENERATION.into(), "1".into());
        real.annotations
            .insert(UPDATE_STARTED_AT.into(), time::format(t(UPDATE_AT)));
        real.annotations.insert(
            "deprecated.daemonset.template.generation".into(),
            "2".into(),
        );
        real.template = new;
        self.revision = "rev-2";
        let real = self.real_mut();
        real.generation = Some(2);
        real.template_generation = Some(2);
        real.resource_version = Some("101".into());
        self
    }

    /// The old real pod on `node` is Terminating with `grace` seconds since `UPDATE_AT + 1`.
    pub(crate) fn old_terminating(mut self, node: &str, grace: i64) -> Self {
        for pod in self
            .real_mut()
            .pods
            .iter_mut()
            .filter(|p| p.node.as_deref() == Some(node))
        {
            // The deletion timestamp is when the grace period ends, as the API server sets it.
            pod.deleting_since = Some(t(UPDATE_AT + 1 + grace));
            pod.deletion_grace_seconds = Some(grace);
        }
        self
    }

    /// The real pods on `node` are gone.
    pub(crate) fn real_pods_gone(mut self, node: &str) -> Self {
        self.real_mut()
            .pods
            .retain(|p| p.node.as_deref() != Some(node));
        self
    }

    /// A pod of the real DaemonSet's current template on `node` (replacing any pod there).
    pub(crate) fn new_pod(mut self, node: &str, state: Pod) -> Self {
        let generation = self
            .obs
            .real
            .as_ref()
            .and_then(|r| r.template_generation)
            .unwrap_or(2);
        let name = format!("{}-new-{node}", self.obs.component.daemonset_name());
        let pod = self.pod(&name, node, generation, state);
        let real = self.real_mut();
        real.pods.retain(|p| p.node.as_deref() != Some(node));
        real.pods.push(pod);
        self
    }

    /// Every node runs a serving pod of the current template, started at `started`.
    pub(crate) fn all_new(mut self, started: i64) -> Self {
        for node in self.nodes() {
            self = self.new_pod(&node, Pod::Serving { started });
        }
        self
    }

    /// The main container of the real pod on `node` stopped (pod still Terminating).
    pub(crate) fn real_container_stopped(mut self, node: &str) -> Self {
        for pod in self
            .real_mut()
            .pods
            .iter_mut()
            .filter(|p| p.node.as_deref() == Some(node))
        {
            for c in &mut pod.containers {
                c.state = ContainerState::Terminated {
                    reason: Some("Completed".into()),
                    exit_code: 0,
                    finished_at: None,
                };
            }
            pod.ready = false;
        }
        self
    }

    /// selfhost rolled the real DaemonSet back to the original at `at` (generation 3).
    pub(crate) fn rolled_back(mut self, at: i64) -> Self {
        let old = self.template_for(OLD);
        let real = self.real_mut();
        real.annotations
            .insert(APPLIED_TEMPLATE_HASH.into(), template_hash(&old));
        real.annotations
            .insert(APPLIED_OVER_GENERATION.into(), "2".into());
        real.annotations
            .insert(ROLLBACK_STARTED_AT.into(), time::format(t(at)));
        real.annotations
            .insert(ROLLBACK_REASON.into(), "pod crash-looping".into());
        real.annotations.insert(
            "deprecated.daemonset.template.generation".into(),
            "3".into(),
        );
        real.template = old;
        // The original template is revision 1 again: the DaemonSet controller reuses it.
        self.revision = "rev-1";
        let real = self.real_mut();
        real.generation = Some(3);
        real.template_generation = Some(3);
        self
    }

    /// selfhost recorded a rollback at `at` without changing the template (the backup never
    /// served, so the real DaemonSet was never updated).
    pub(crate) fn rollback_recorded(mut self, at: i64) -> Self {
        let real = self.real_mut();
        real.annotations
            .insert(ROLLBACK_STARTED_AT.into(), time::format(t(at)));
        real.annotations
            .insert(ROLLBACK_REASON.into(), "the backup does not serve".into());
        self
    }
}
