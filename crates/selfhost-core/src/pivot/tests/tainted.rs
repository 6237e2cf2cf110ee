//! A node briefly NotReady during the rollout: the node lifecycle controller taints it
//! `node.kubernetes.io/not-ready:NoSchedule`, the DaemonSet controller stops counting it as a
//! node that should run a daemon pod (`desiredNumberScheduled` drops by one), and the rolling
//! update deletes the unavailable old pod there without creating the new one until the taint
//! is gone. The DaemonSet's status then looks complete, but removing the backup would leave
//! the node without the component: the run would end with a component one live pod short.

use super::builder::{Pod, World, target};
use super::{check, row};
use crate::component::Component::{self, ApiServer, ControllerManager, Scheduler};
use crate::observation::Observation;

/// Three nodes on the target except cp-3, whose real pod the rolling update deleted while
/// its node was tainted; the DaemonSet wants two pods, as the controller counts it. The node
/// reports Ready again, its taint not yet removed.
fn tainted_gap(component: Component, rolled_back_at: Option<i64>) -> Observation {
    let mut world = World::steady(component, 3)
        .backup()
        .backup_serving()
        .leader("cp-1", 5)
        .updated()
        .all_new(60);
    if let Some(at) = rolled_back_at {
        world = world
            .rolled_back(at)
            .new_pod("cp-1", Pod::Serving { started: at + 5 })
            .new_pod("cp-2", Pod::Serving { started: at + 5 });
    }
    let mut obs = world.real_pods_gone("cp-3").at(90).build();
    if let Some(real) = obs.real.as_mut() {
        real.status.desired = 2;
        real.status.unavailable = 0;
    }
    obs
}

#[test]
fn the_backup_stays_while_a_node_has_only_its_pod() {
    check(vec![
        row(
            "rolling out: the status looks complete, cp-3 has no real pod",
            tainted_gap(ControllerManager, None),
            target(ControllerManager),
            "wait-for-rollout",
            &["cp-3: no pod of self-hosted-kube-controller-manager yet"],
        ),
        row(
            "rolling out, the apiserver",
            tainted_gap(ApiServer, None),
            target(ApiServer),
            "wait-for-rollout",
            &["cp-3: no pod of self-hosted-kube-apiserver yet"],
        ),
        row(
            "rolling back: the same gap",
            tainted_gap(ControllerManager, Some(70)),
            target(ControllerManager),
            "wait-for-rollback",
            &["cp-3: no pod of self-hosted-kube-controller-manager yet"],
        ),
        row(
            "the new pod is back on cp-3: the backup goes",
            World::steady(ControllerManager, 3)
                .backup()
                .backup_serving()
                .leader("cp-1", 5)
                .updated()
                .all_new(60)
                .at(90)
                .build(),
            target(ControllerManager),
            "remove-backup",
            &[],
        ),
    ]);
}

/// No backup any more, the real DaemonSet on the target, and cp-3 without its pod: deleted
/// there (a possible Lease holder stopped for the hand-over, or the rolling update's old pod)
/// while the node was NotReady and tainted, so the DaemonSet controller counts two desired
/// pods and creates none on cp-3 until the taint is gone.
fn verifying_gap(component: Component, not_ready: bool) -> Observation {
    let mut world = World::steady(component, 3)
        .leader("cp-1", 95)
        .updated()
        .all_new(60)
        .real_pods_gone("cp-3");
    if not_ready {
        world = world.node_not_ready("cp-3");
    }
    let mut obs = world.at(100).build();
    if let Some(real) = obs.real.as_mut() {
        real.status.desired = 2;
        real.status.current = 2;
        real.status.updated = 2;
        real.status.ready = 2;
        real.status.available = 2;
        real.status.unavailable = 0;
    }
    obs
}

#[test]
fn a_component_is_not_done_while_a_node_has_no_pod_of_it() {
    check(vec![
        row(
            "the node is NotReady: the DaemonSet wants two pods and has them",
            verifying_gap(Scheduler, true),
            target(Scheduler),
            "wait-for-rollout",
            &["cp-3: no pod of self-hosted-kube-scheduler, and the node is not Ready"],
        ),
        row(
            "the node is Ready again, the DaemonSet's status not recounted yet",
            verifying_gap(Scheduler, false),
            target(Scheduler),
            "wait-for-rollout",
            &["cp-3: no pod of self-hosted-kube-scheduler yet"],
        ),
        row(
            "the controller-manager alike",
            verifying_gap(ControllerManager, true),
            target(ControllerManager),
            "wait-for-rollout",
            &["cp-3: no pod of self-hosted-kube-controller-manager"],
        ),
        row(
            "the kube-apiserver alike",
            verifying_gap(ApiServer, true),
            target(ApiServer),
            "wait-for-rollout",
            &["cp-3: no pod of self-hosted-kube-apiserver"],
        ),
    ]);
}
