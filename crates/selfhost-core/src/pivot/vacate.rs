//! Vacating a node before its kube-apiserver is replaced (the held rollout, two nodes or more).
//!
//! On a shared port a starting kube-apiserver takes its share of the node's new connections
//! before it serves, and the load balancer keeps sending new connections to a node as long as
//! its `/readyz` checks pass. If the backup kept serving on the node while its real pod is
//! replaced, the checks would keep passing (the kernel hands some of them to the backup), and
//! the new process would catch clients' connections in its join window; a target that never
//! serves would fail every request on its share until the rollback.
//!
//! So where the real DaemonSet runs on two nodes or more, a node's turn in the held rollout
//! (`replace_on_delete`) begins by removing the backup's pod from it — the same exclusion
//! `drain.rs` makes at the end, recorded in [`BACKUP_DRAINED_NODES`] but without
//! [`BACKUP_DRAIN_STEP_AT`], which is what marks the end-of-upgrade removal — and only once
//! another node serves. Then the old real pod is deleted, at once: both processes fail
//! `/readyz` from their SIGTERM on, so the node fails every health check and the load
//! balancer takes it out within a check interval, while both still serve what it sent before
//! for their `--shutdown-delay-duration`. The old pod's grace is that delay plus the
//! shortened grace (the operator sets the delay to cover the balancer's checks, as the
//! kube-apiserver's documentation asks): the DaemonSet controller creates the new pod only
//! once the old one is gone, so the new process joins a node the balancer no longer sends
//! anything to, and the node returns to rotation when its new process passes `/readyz`. The
//! next node's turn waits until this one's new pod serves by its own identity, as before.
//!
//! A pod on a vacated node deleted with its full grace (by the DaemonSet controller in a
//! rollback, or by an earlier run) is deleted again with the shortened grace once its own
//! shutdown delay has passed since its deletion (`linger.rs`): no other process on its node
//! serves to hand over to, and by then the balancer has stopped sending it anything.
//!
//! With one node the backup keeps serving on it throughout, as it must: there is no other
//! node for clients to go to.
//!
//! On two nodes or more the backup's pods would therefore never cover anything: the other
//! nodes serve while one is out of rotation. They would still cost: each joins its node's
//! shared port at the start, while the node is in the load balancer's rotation, and takes its
//! share of new connections before it serves (the last failed probes under the measured
//! hand-over model); and every node waits for its backup to start and prove itself. So where
//! the rollout will be held and vacated — decided before the backup exists
//! ([`Pivot::backup_runs_no_pod`]: the kube-apiserver, port sharing on the live and the target
//! templates, the DaemonSet's own strategy not `OnDelete`, two nodes or more) — the backup is
//! created as a record only ([`Pivot::record_only`]): every node already excluded, in
//! [`BACKUP_DRAINED_NODES`], strategy `OnDelete`. It remains the upgrade's record (target,
//! original template, our annotations: resume and rollback read it) but runs no pod: the wait
//! for the backup has nothing to wait for, each node's turn goes straight to its old pod's
//! deletion (still only while another Ready node is proven to serve), a rollback needs no
//! backup pod, and the removal at the end deletes it at once.
//! A backup made with pods (an older selfhost, kubeadm's) is vacated node by node as above.
//!
//! Behind each node's API front nothing here applies (`front.rs`): the front hands over within
//! the node, so a node never leaves the load balancer, and the backup runs a pod on every node.

use std::collections::BTreeSet;

use k8s_openapi::api::apps::v1::DaemonSet;
use k8s_openapi::jiff::Timestamp;

use super::annotations::{BACKUP_DRAIN_STEP_AT, BACKUP_DRAINED_NODES};
use super::decision_inputs::Pivot;
use super::exclusion::{drained_nodes, exclude_nodes};
use super::serving::pod_serves;
use super::step::{Step, Update};
use super::update_strategy::on_delete;
use crate::component::Component;
use crate::observation::{BackupObservation, PodObservation};

/// What a node's turn in the held rollout asks for.
pub(super) enum Turn {
    /// This step (vacate the node, or delete its old pod).
    Step(Box<Step>),
    /// Nothing yet: the DaemonSet controller has still to delete the node's backup pod.
    Wait,
    /// The node is not vacated: the backup covers it while its pod is replaced.
    Covered,
}

impl Pivot<'_> {
    /// Whether the held rollout vacates each node of the backup before replacing its pod: the
    /// kube-apiserver's own hold, on two nodes or more.
    pub(super) fn vacates_nodes(&self) -> bool {
        self.component() == Component::ApiServer
            && self.held_strategy().is_some()
            && self.on_several_nodes()
            && self.front().is_none()
    }

    /// Whether the backup this run creates runs no pod: decided before it exists, on the
    /// condition [`Pivot::vacates_nodes`] reads after the update (the kube-apiserver's rollout
    /// will be held, on two nodes or more). Each node would be vacated of its backup pod
    /// before its real pod is replaced, so the backup's pods would never cover anything;
    /// they would only join every node's shared port at the start, while the node is in the
    /// load balancer's rotation, and catch connections before they serve.
    pub(super) fn backup_runs_no_pod(&self) -> bool {
        self.component() == Component::ApiServer
            && self.hold_on_update().is_some()
            && self.on_several_nodes()
            && self.front().is_none()
    }

    /// `daemonset` (the backup as [`super::backup_daemonset`] makes it) as a record only:
    /// every node the real DaemonSet runs on excluded from its node affinity, recorded in
    /// [`BACKUP_DRAINED_NODES`] as if vacated already (never [`BACKUP_DRAIN_STEP_AT`]: the
    /// removal has not begun), with the `OnDelete` strategy the vacating writes.
    pub(super) fn record_only(&self, mut daemonset: DaemonSet) -> DaemonSet {
        let nodes: BTreeSet<String> = self.real.nodes().into_iter().map(str::to_string).collect();
        daemonset
            .metadata
            .annotations
            .get_or_insert_with(Default::default)
            .insert(
                BACKUP_DRAINED_NODES.to_string(),
                nodes.iter().cloned().collect::<Vec<_>>().join(","),
            );
        if let Some(spec) = daemonset.spec.as_mut() {
            spec.template = exclude_nodes(&spec.template, &nodes);
            spec.update_strategy = Some(on_delete());
        }
        daemonset
    }

    /// The nodes vacated of the backup during the rollout (not its removal at the end).
    pub(super) fn vacated_nodes(&self) -> BTreeSet<String> {
        match &self.obs.backup {
            Some(backup) if backup.daemonset.annotation(BACKUP_DRAIN_STEP_AT).is_none() => {
                drained_nodes(backup)
            }
            _ => BTreeSet::new(),
        }
    }

    /// `node`'s turn in the held rollout: vacate it of the backup while another node serves,
    /// then delete `old` (its real pod) once the backup's pod there is going.
    pub(super) fn vacating_turn(
        &self,
        backup: &BackupObservation,
        old: &PodObservation,
        node: &str,
    ) -> Turn {
        let drained = drained_nodes(backup);
        if !drained.contains(node) {
            let Some(serving) = self.serving_elsewhere(node) else {
                return Turn::Covered;
            };
            if self.backup_delay_ends_at().is_some() {
                // A backup process still in its shutdown delay fails its node's checks now
                // and then; vacating this node too could leave the balancer no node that
                // passes (two nodes), so one node at a time, as at the end (`drain.rs`).
                return Turn::Wait;
            }
            let mut excluded = drained;
            excluded.insert(node.to_string());
            return Turn::Step(Box::new(Step::DrainBackupNode {
                update: Update {
                    name: backup.daemonset.name.clone(),
                    resource_version: backup.daemonset.resource_version.clone(),
                    template: Box::new(exclude_nodes(&backup.daemonset.template, &excluded)),
                    set_annotations: [(
                        BACKUP_DRAINED_NODES.to_string(),
                        excluded.iter().cloned().collect::<Vec<_>>().join(","),
                    )]
                    .into(),
                    remove_annotations: Vec::new(),
                    update_strategy: Some(on_delete()),
                },
                node: node.to_string(),
                why: format!(
                    "its real pod is replaced next: with no process on it passing /readyz the \
                     node leaves the load balancer, so the new kube-apiserver joins a node \
                     clients are not sent to ({serving} serves meanwhile)"
                ),
            }));
        }
        if backup
            .daemonset
            .pods_on(node)
            .any(|pod| !pod.is_terminating())
        {
            return Turn::Wait;
        }
        if self.serving_elsewhere(node).is_none() {
            // The node leaves the load balancer when its old pod goes: only while another
            // node is proven to serve (a stale Ready on a NotReady node proves nothing). A
            // record-only backup never vacated the node, which is where this was checked.
            return Turn::Wait;
        }
        let (grace, delay) = self.delay_then_shortened_grace(old);
        Turn::Step(Box::new(Step::DeleteOldPod {
            pod: old.name.clone(),
            uid: old.uid.clone(),
            node: node.to_string(),
            grace_period_seconds: Some(grace),
            why: format!(
                "selfhost holds the rollout (update strategy OnDelete) so that one node at a \
                 time runs a new pod not yet proven to serve: every other node is settled, and \
                 no backup process runs on this one, so it drops out of the load balancer \
                 until its new pod serves (grace: its {delay}s shutdown delay, then {}s)",
                self.shortened_grace_seconds()
            ),
        }))
    }

    /// A pod on another Ready node that serves, named with its node.
    fn serving_elsewhere(&self, node: &str) -> Option<String> {
        let mut pods: Vec<&PodObservation> = self
            .obs
            .all_pods()
            .filter(|pod| pod.node.as_deref().is_some_and(|n| n != node))
            .collect();
        pods.sort_by(|a, b| (&a.node, &a.name).cmp(&(&b.node, &b.name)));
        pods.into_iter()
            .find(|pod| pod_serves(self.obs, self.target, pod).is_ok())
            .map(|pod| {
                format!(
                    "{} on {}",
                    pod.name,
                    pod.node.as_deref().unwrap_or("(unscheduled)")
                )
            })
    }

    /// When the last backup process still in its shutdown delay leaves the port, if one is:
    /// a Terminating backup pod whose processes run, less than its shutdown delay after its
    /// deletion.
    pub(super) fn backup_delay_ends_at(&self) -> Option<Timestamp> {
        let backup = self.obs.backup.as_ref()?;
        let now = self.now();
        backup
            .daemonset
            .pods
            .iter()
            .filter(|pod| !pod.processes_stopped())
            .filter_map(|pod| self.delay_over_at(pod))
            .filter(|end| *end > now)
            .max()
    }

    /// What a vacated node still waits for before its old pod goes.
    pub(super) fn vacating_pending(&self) -> Vec<String> {
        let Some(backup) = &self.obs.backup else {
            return Vec::new();
        };
        let vacated = self.vacated_nodes();
        let mut pending: Vec<String> = Vec::new();
        if self.vacates_nodes()
            && let Some(at) = self.backup_delay_ends_at()
        {
            pending.push(format!(
                "a stopping backup process fails its node's /readyz until {at}; the next node \
                 is vacated after"
            ));
        }
        let waiting = backup
            .daemonset
            .pods
            .iter()
            .filter(|pod| !pod.is_terminating())
            .filter_map(|pod| Some((pod.node.as_deref()?, pod)))
            .filter(|(node, _)| vacated.contains(*node))
            .map(|(node, pod)| {
                format!(
                    "{node}: backup pod {} not yet deleted by the DaemonSet controller (the \
                     node is vacated before its real pod is replaced)",
                    pod.name
                )
            });
        pending.extend(waiting);
        if self.vacates_nodes()
            && let Some(node) = self.next_old_pod_node()
            && vacated.contains(node)
            && self.serving_elsewhere(node).is_none()
        {
            pending.push(format!(
                "{node}: its old pod goes once a kube-apiserver on another Ready node is proven \
                 to serve (the node leaves the load balancer when it goes)"
            ));
        }
        pending
    }

    /// The node of the old real pod the held rollout replaces next (the order of
    /// `replace_on_delete`), if one is left.
    fn next_old_pod_node(&self) -> Option<&str> {
        self.real
            .pods
            .iter()
            .filter(|pod| !self.real.is_current(pod) && !pod.is_terminating())
            .min_by(|a, b| (&a.node, &a.name).cmp(&(&b.node, &b.name)))
            .and_then(|pod| pod.node.as_deref())
    }

    /// Where the real DaemonSet runs on two nodes or more (or wants to).
    fn on_several_nodes(&self) -> bool {
        self.real.nodes().len() >= 2 || self.real.status.desired >= 2
    }
}
