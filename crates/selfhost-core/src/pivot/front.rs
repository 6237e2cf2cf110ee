//! The pivot of a kube-apiserver behind each node's API front.
//!
//! The real DaemonSet's annotation [`crate::front::FRONT_ANNOTATION`] names the layout: its pods listen on
//! one loopback address, a backup's on another, on the node's API port, and the front on the
//! node's API address passes each new connection to one whose `/readyz` passes (see
//! [`crate::front`]). Where the annotation reads and the target template listens where it
//! says ([`FrontShape::layout`]), the pivot takes the front's path; the live template listens
//! there too, or still on every address with port sharing, as `selfhost front install` leaves
//! it, and then this pivot moves it behind the front: the front holds the node's address (the
//! more specific socket), the old process's wildcard socket answers the front's backends until
//! the backup and then the new pod listen on their own addresses. An unreadable annotation,
//! or a template that listens elsewhere, is refused before anything changes (the expected
//! disruption's block, `starting.rs`).
//!
//! What the front changes, phase by phase:
//!
//! | phase | behind a front |
//! |---|---|
//! | [`Starting`](super::Phase::Starting) | the backup listens on the layout's backup address with its probes there, and keeps the annotation; it runs a pod on every node, never a record only |
//! | [`BackingUp`](super::Phase::BackingUp) | a backup pod serves once Ready ([`Serving::OwnAddress`](super::Serving::OwnAddress)): no soak, no identity Lease; the update holds the rollout whether or not the templates share the port |
//! | [`RollingOut`](super::Phase::RollingOut) | a node's old pod goes once its backup pod is Ready, with a grace of its shutdown delay plus the shortened grace; a new pod serves once Ready; no node is vacated; at the end the backup is deleted at once, on any number of nodes |
//! | [`RollingBack`](super::Phase::RollingBack) | a restored pod serves once Ready; the backup is deleted at once |
//! | [`DrainingBackup`](super::Phase::DrainingBackup) | a removal begun node by node (by a run without the front) deletes the rest at once |
//!
//! Why each holds:
//! - **Ready is the proof.** The two processes of a node never share a socket, and each
//!   readiness probe asks its own address, so no process answers another's probe. The soak and
//!   the identity counting exist only because on a shared port Ready can be the other
//!   process's answer (`serving.rs`, `own_address.rs`).
//! - **The front stops sending first.** A stopping kube-apiserver fails `/readyz` from its
//!   SIGTERM on, and the front sends it no new connection from its first failed check (every
//!   200 ms), while the backup, healthy, takes them. Its shutdown delay lets requests already
//!   under way finish; after it, only open watches would keep the process for the rest of its
//!   grace, so the old pod is deleted with that delay plus the shortened grace in one write.
//!   The shortening of a lingering pod (`linger.rs`) still applies to pods deleted with their
//!   full grace (by the DaemonSet controller in a rollback, by the backup's deletion, by an
//!   earlier run): its condition, another pod on the node that serves, is met by a Ready pod
//!   on its own address.
//! - **A starting process gets nothing early.** The new pod starts only once the old one is
//!   gone (the DaemonSet controller's rule), and the front passes it no connection before its
//!   `/readyz` passes: the join window of a shared port does not exist here.
//! - **The shared-port rules do not apply.** No two processes share a socket, so neither the
//!   live nor the target template needs `--permit-port-sharing`, a backup never waits for the
//!   old process to free the port, and one node needs no `--accept-downtime`. The rollout is
//!   still held (`hold.rs`), so that one node at a time runs a new pod, each replaced only
//!   once the ones before serve.
//! - **No node leaves the load balancer.** On several nodes the front hands over within each
//!   node, so nodes are not vacated (`vacate.rs`) and the backup is not a record only: without
//!   a backup process, a node's front would hold and then close new connections from the old
//!   process's first failed check until the load balancer noticed. A stopping backup process
//!   fails only its own checks, not its node's, so the backup goes at once at the end.

use super::decision_inputs::Pivot;
use super::step::Step;
use crate::disruption::FrontShape;
use crate::front::FrontLayout;
use crate::observation::PodObservation;

impl Pivot<'_> {
    /// The layout, when this kube-apiserver pivots behind the node's API front.
    pub(super) fn front(&self) -> Option<FrontLayout> {
        FrontShape::observe(self.component(), Some(self.real), &self.target.template).layout()
    }

    /// The deletion of `old`, the real pod on `node` whose backup pod there serves, behind the
    /// front: with its shutdown delay plus the shortened grace.
    pub(super) fn replace_behind_front(
        &self,
        old: &PodObservation,
        node: &str,
        layout: FrontLayout,
    ) -> Step {
        let (grace, delay) = self.delay_then_shortened_grace(old);
        Step::DeleteOldPod {
            pod: old.name.clone(),
            uid: old.uid.clone(),
            node: node.to_string(),
            grace_period_seconds: Some(grace),
            why: format!(
                "selfhost holds the rollout (update strategy OnDelete) so that one node at a \
                 time runs a new pod not yet proven to serve: every other node is settled, and \
                 the backup serves on this one at {}, where the node's API front moves new \
                 connections from the old pod's first failed /readyz (grace: its {delay}s \
                 shutdown delay, then {}s)",
                layout.backup,
                self.shortened_grace_seconds()
            ),
        }
    }
}
