//! Exits an API outage forces are not a crash loop: a new kube-controller-manager that cannot
//! reach the API exits, its kubelet restarts it under the back-off, and three such restarts
//! must not make the run stop with "nothing to roll back".

use super::builder::{Pod, World, t, target};
use super::{check, row, with};
use crate::component::Component::{self, ApiServer, ControllerManager};

/// The real pod on `node` last exited at `at`.
fn exited(mut world: World, node: &str, at: i64) -> World {
    for pod in world
        .real_mut()
        .pods
        .iter_mut()
        .filter(|p| p.node.as_deref() == Some(node))
    {
        for container in &mut pod.containers {
            container.last_exit_at = Some(t(at));
        }
    }
    world
}

/// The engine last saw the API unreachable until `at`.
fn unreachable_until(mut world: World, at: i64) -> World {
    world.obs.api.unreachable_until = Some(t(at));
    world
}

/// The real DaemonSet on the target, its new pod on cp-1 crash-looping (three restarts),
/// the backup serving.
fn rolling_out(component: Component) -> World {
    World::steady(component, 1)
        .backup()
        .backup_serving()
        .leader("cp-1", 5)
        .updated()
        .new_pod("cp-1", Pod::CrashLoop { restarts: 3 })
}

#[test]
fn exits_while_the_api_was_unreachable_are_not_a_crash_loop() {
    check(vec![
        row(
            "last exit during the outage: wait for the pod to come back",
            unreachable_until(exited(rolling_out(ControllerManager), "cp-1", 40), 42)
                .at(45)
                .build(),
            target(ControllerManager),
            "wait-for-rollout",
            &[],
        ),
        row(
            "last exit within the settle time after it",
            unreachable_until(exited(rolling_out(ControllerManager), "cp-1", 46), 42)
                .at(48)
                .build(),
            target(ControllerManager),
            "wait-for-rollout",
            &[],
        ),
        row(
            "an exit once the API has answered for a while is the image's",
            unreachable_until(exited(rolling_out(ControllerManager), "cp-1", 50), 42)
                .at(52)
                .build(),
            target(ControllerManager),
            "roll-back",
            &["crash-looping (3 restarts"],
        ),
        row(
            "the API unreachable now: no exit until now counts",
            unreachable_until(exited(rolling_out(ApiServer), "cp-1", 59), 60)
                .at(60)
                .build(),
            target(ApiServer),
            "wait-for-rollout",
            &[],
        ),
        row(
            "no outage seen: the exit counts",
            exited(rolling_out(ApiServer), "cp-1", 40).at(45).build(),
            target(ApiServer),
            "roll-back",
            &["crash-looping"],
        ),
        row(
            "an exit before this run started is not judged (a resumed run)",
            exited(rolling_out(ControllerManager), "cp-1", 40)
                .at(45)
                .build(),
            {
                let mut resumed = target(ControllerManager);
                resumed.run_started_at = t(41);
                resumed
            },
            "wait-for-rollout",
            &[],
        ),
        row(
            "an exit time the kubelet did not report: restarts alone decide",
            unreachable_until(rolling_out(ControllerManager), 42)
                .at(45)
                .build(),
            target(ControllerManager),
            "roll-back",
            &["crash-looping"],
        ),
        row(
            "an image pull failure is not an exit: the outage does not excuse it",
            unreachable_until(
                World::steady(ControllerManager, 1)
                    .backup()
                    .backup_serving()
                    .leader("cp-1", 5)
                    .updated()
                    .new_pod("cp-1", Pod::ImagePull),
                42,
            )
            .at(45)
            .build(),
            target(ControllerManager),
            "roll-back",
            &["ImagePullBackOff"],
        ),
    ]);
}

/// After the backup is gone there is nothing to roll back to: restarts forced by an outage
/// then wait for the pods to recover instead of stopping the run (exit 4).
#[test]
fn after_the_backup_is_gone_outage_restarts_are_waited_out() {
    // The backup's leader is gone with it and nobody holds the Lease yet (a hand-over of a
    // dead holder's Lease would come first otherwise).
    let finished = || {
        let mut world = World::steady(ControllerManager, 1)
            .backup()
            .backup_serving()
            .updated()
            .new_pod("cp-1", Pod::CrashLoop { restarts: 3 })
            .backup_gone();
        world.obs.leader_lease = None;
        world
    };
    check(vec![
        row(
            "restarts during the outage",
            unreachable_until(exited(finished(), "cp-1", 70), 71)
                .at(72)
                .build(),
            target(ControllerManager),
            "wait-for-rollout",
            &["is not Ready"],
        ),
        row(
            "restarts long after it: the target is crash-looping",
            unreachable_until(exited(finished(), "cp-1", 90), 71)
                .at(92)
                .build(),
            target(ControllerManager),
            "failed",
            &["crash-looping", "nothing to roll back"],
        ),
        row(
            "a higher threshold still applies",
            unreachable_until(exited(finished(), "cp-1", 90), 71)
                .at(92)
                .build(),
            with(target(ControllerManager), |o| o.crash_loop_restarts = 4),
            "wait-for-rollout",
            &[],
        ),
    ]);
}
