//! The kube-apiserver's rollout held to one node at a time (`hold.rs`): the update sets
//! `OnDelete`, the engine replaces the old pods node by node once each new pod serves by its
//! own identity (each node vacated of the backup first on two nodes or more: `vacate.rs`),
//! then writes the original strategy back; a rollback writes it back at once.

use k8s_openapi::api::apps::v1::{DaemonSetUpdateStrategy, RollingUpdateDaemonSet};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use super::builder::{Pod, UPDATE_AT, World, target};
use super::{check, decide, row};
use crate::component::Component::{ApiServer, ControllerManager, Scheduler};
use crate::pivot::{BACKUP_DRAINED_NODES, HELD_UPDATE_STRATEGY, Step};

/// The strategy every steady world starts with.
fn rolling_update() -> DaemonSetUpdateStrategy {
    DaemonSetUpdateStrategy {
        type_: Some("RollingUpdate".into()),
        rolling_update: Some(RollingUpdateDaemonSet {
            max_unavailable: Some(IntOrString::Int(1)),
            max_surge: Some(IntOrString::Int(0)),
        }),
    }
}

impl World {
    /// selfhost's update held the rollout: `OnDelete`, with the replaced strategy recorded.
    pub(crate) fn held(mut self) -> Self {
        let real = self.real_mut();
        let original = real.update_strategy.clone().unwrap_or_default();
        real.annotations.insert(
            HELD_UPDATE_STRATEGY.into(),
            serde_json::to_string(&original).expect("serialises"),
        );
        real.update_strategy = Some(DaemonSetUpdateStrategy {
            type_: Some("OnDelete".into()),
            rolling_update: None,
        });
        self
    }

    /// The held strategy was written back (a spec change: generation 3, same template).
    pub(crate) fn hold_released(mut self) -> Self {
        let real = self.real_mut();
        real.annotations.remove(HELD_UPDATE_STRATEGY);
        real.update_strategy = Some(rolling_update());
        real.generation = real.generation.map(|g| g + 1);
        self
    }
}

/// The old pod of `node`, still there beside its successor, Terminating with `grace` seconds
/// since `UPDATE_AT + 1` (add after [`World::new_pod`], which replaces a node's pods).
fn old_lingering(mut world: World, node: &str, grace: i64) -> World {
    let mut pod = world.pod(
        &format!("old-{node}"),
        node,
        1,
        Pod::Serving { started: -3600 },
    );
    pod.deleting_since = Some(super::builder::t(UPDATE_AT + 1 + grace));
    pod.deletion_grace_seconds = Some(grace);
    world.real_mut().pods.push(pod);
    world
}

/// Three nodes, backup serving, the real DaemonSet updated and held at [`UPDATE_AT`].
pub(super) fn held(nodes: usize) -> World {
    World::steady(ApiServer, nodes)
        .backup()
        .backup_serving()
        .updated()
        .held()
}

#[test]
fn the_apiserver_update_holds_the_rollout_where_the_backup_can_serve_beside_it() {
    let serving_backup = |component, nodes| {
        World::steady(component, nodes)
            .backup()
            .backup_serving()
            .at(10)
    };
    check(vec![
        row(
            "kube-apiserver on three nodes",
            serving_backup(ApiServer, 3).build(),
            target(ApiServer),
            "update-real",
            &[
                "\"update_strategy\":{\"type\":\"OnDelete\"}",
                HELD_UPDATE_STRATEGY,
                r#"{\"rollingUpdate\":{\"maxSurge\":0,\"maxUnavailable\":1},\"type\":\"RollingUpdate\"}"#,
            ],
        ),
        row(
            "kube-apiserver on one node",
            serving_backup(ApiServer, 1).build(),
            target(ApiServer),
            "update-real",
            &["\"update_strategy\":{\"type\":\"OnDelete\"}"],
        ),
    ]);
    for (case, obs) in [
        (
            "controller-manager: its readiness is its serving",
            serving_backup(ControllerManager, 3).build(),
        ),
        (
            "scheduler: its readiness is its serving",
            serving_backup(Scheduler, 3).build(),
        ),
        (
            "the operator's own OnDelete already holds it",
            serving_backup(ApiServer, 3).on_delete().build(),
        ),
        (
            "without port sharing the old pod must stop before another can serve",
            World::steady(ApiServer, 3)
                .live_without_port_sharing()
                .backup()
                .backup_pod("cp-1", Pod::Starting { started: 5 })
                .backup_pod("cp-2", Pod::Starting { started: 5 })
                .backup_pod("cp-3", Pod::Starting { started: 5 })
                .at(10)
                .build(),
        ),
    ] {
        let component = obs.component;
        match decide(&obs, &target(component)) {
            Step::UpdateReal(update) => {
                assert_eq!(update.update_strategy, None, "{case}");
                assert!(
                    !update.set_annotations.contains_key(HELD_UPDATE_STRATEGY),
                    "{case}"
                );
            }
            other => panic!("{case}: expected update-real, got {}", other.description()),
        }
    }
}

#[test]
fn a_held_rollout_moves_to_the_next_node_only_once_every_new_pod_serves() {
    check(vec![
        row(
            "the first node, right after the update: vacated of the backup first",
            held(3).at(UPDATE_AT + 1).build(),
            target(ApiServer),
            "drain-backup-node",
            &["\"node\":\"cp-1\"", "leaves the load balancer"],
        ),
        row(
            "the first node's old pod, once the backup has left it",
            held(3).vacated("cp-1").at(UPDATE_AT + 2).build(),
            target(ApiServer),
            "delete-old-pod",
            &[
                "old-cp-1",
                "holds the rollout",
                "\"grace_period_seconds\":10",
            ],
        ),
        row(
            "the old pod is going and its replacement not there yet",
            held(3).old_terminating("cp-1", 5).at(UPDATE_AT + 2).build(),
            target(ApiServer),
            "wait-for-rollout",
            &["one node at a time", "cp-1: pod old-cp-1 is terminating"],
        ),
        row(
            "the lying probe: the new pod is Ready, the backup answered it",
            held(3)
                .new_pod("cp-1", Pod::ReadyNoIdentity { started: 40 })
                .at(50)
                .build(),
            target(ApiServer),
            "wait-for-rollout",
            &["no identity Lease of its own", "one node at a time"],
        ),
        row(
            "a new pod that never gets Ready",
            held(3)
                .new_pod("cp-1", Pod::Starting { started: 40 })
                .at(50)
                .build(),
            target(ApiServer),
            "wait-for-rollout",
            &["is not Ready"],
        ),
        row(
            "the first new pod serves by its own identity: the second node is vacated",
            held(3)
                .vacated("cp-1")
                .new_pod("cp-1", Pod::Serving { started: 40 })
                .at(50)
                .build(),
            target(ApiServer),
            "drain-backup-node",
            &["\"node\":\"cp-2\"", "cp-1,cp-2"],
        ),
        row(
            "then its old pod goes",
            held(3)
                .vacated("cp-1")
                .vacated("cp-2")
                .new_pod("cp-1", Pod::Serving { started: 40 })
                .at(51)
                .build(),
            target(ApiServer),
            "delete-old-pod",
            &["old-cp-2", "holds the rollout"],
        ),
        row(
            "the first node's old pod Terminating with its own grace, its successor serving",
            old_lingering(
                held(3).new_pod("cp-1", Pod::Serving { started: 40 }),
                "cp-1",
                30,
            )
            .at(50)
            .build(),
            target(ApiServer),
            "delete-old-pod",
            &[
                "old-cp-1",
                "\"grace_period_seconds\":5",
                "on the same node serves",
            ],
        ),
        row(
            "the first node's old pod lingers Terminating: it has left the port",
            old_lingering(
                held(3)
                    .vacated("cp-1")
                    .vacated("cp-2")
                    .new_pod("cp-1", Pod::Serving { started: 40 }),
                "cp-1",
                5,
            )
            .at(50)
            .build(),
            target(ApiServer),
            "delete-old-pod",
            &["old-cp-2"],
        ),
        row(
            "the second new pod does not serve yet",
            held(3)
                .new_pod("cp-1", Pod::Serving { started: 40 })
                .new_pod("cp-2", Pod::ReadyNoIdentity { started: 55 })
                .at(60)
                .build(),
            target(ApiServer),
            "wait-for-rollout",
            &["cp-2", "no identity Lease of its own"],
        ),
        row(
            "the last node",
            held(3)
                .vacated("cp-1")
                .vacated("cp-2")
                .vacated("cp-3")
                .new_pod("cp-1", Pod::Serving { started: 40 })
                .new_pod("cp-2", Pod::Serving { started: 55 })
                .at(70)
                .build(),
            target(ApiServer),
            "delete-old-pod",
            &["old-cp-3"],
        ),
        row(
            "every node's new pod serves: the strategy goes back first",
            held(3).all_new(60).at(70).build(),
            target(ApiServer),
            "restore-update-strategy",
            &[
                "\"type\":\"RollingUpdate\"",
                "every node runs a new pod that serves",
                HELD_UPDATE_STRATEGY,
                "\"maxUnavailable\":1",
            ],
        ),
        row(
            "then the backup goes",
            held(3).all_new(60).hold_released().at(71).build(),
            target(ApiServer),
            "drain-backup-node",
            &["\"node\":\"cp-1\"", BACKUP_DRAINED_NODES, "OnDelete"],
        ),
        row(
            "one node: the old pod goes once the backup serves there",
            held(1).at(UPDATE_AT + 1).build(),
            target(ApiServer),
            "delete-old-pod",
            &["old-cp-1", "\"grace_period_seconds\":null"],
        ),
    ]);
}

#[test]
fn a_held_rollout_that_fails_is_rolled_back_with_its_own_strategy() {
    let step = decide(
        &held(3)
            .new_pod("cp-1", Pod::ReadyNoIdentity { started: 40 })
            .at(UPDATE_AT + 301)
            .build(),
        &target(ApiServer),
    );
    let Step::RollBack { update, reason } = step else {
        panic!("expected roll-back, got {}", step.description());
    };
    assert!(reason.contains("no identity Lease of its own"), "{reason}");
    assert_eq!(
        update.update_strategy,
        Some(rolling_update()),
        "the controller replaces the failed pod by itself again"
    );
    assert!(
        update
            .remove_annotations
            .contains(&HELD_UPDATE_STRATEGY.to_string())
    );
    check(vec![
        row(
            "the image cannot be pulled",
            held(3).new_pod("cp-1", Pod::ImagePull).at(50).build(),
            target(ApiServer),
            "roll-back",
            &["ImagePullBackOff", "\"update_strategy\":{\"rollingUpdate\""],
        ),
        row(
            "crash-looping",
            held(3)
                .new_pod("cp-1", Pod::CrashLoop { restarts: 3 })
                .at(90)
                .build(),
            target(ApiServer),
            "roll-back",
            &["crash-looping", "\"update_strategy\":{\"rollingUpdate\""],
        ),
        row(
            "a rollback that is not held restores no strategy",
            World::steady(ApiServer, 3)
                .backup()
                .backup_serving()
                .updated()
                .new_pod("cp-1", Pod::ImagePull)
                .at(50)
                .build(),
            target(ApiServer),
            "roll-back",
            &["ImagePullBackOff"],
        ),
    ]);
}

/// One node, the new pod never serving: its process answers the kubelet's probe of the
/// backup's container on the shared port with 500, so the backup's pod turns not Ready while
/// its process keeps serving and renewing its own identity Lease.
fn backup_probe_answered_by_the_target(world: World) -> World {
    let mut world = world;
    for pod in &mut world.backup_mut().daemonset.pods {
        pod.ready = false;
        for container in &mut pod.containers {
            container.ready = false;
        }
    }
    world
}

#[test]
fn a_backup_whose_probe_the_failing_target_answers_still_covers_the_rollback() {
    check(vec![
        row(
            "one node: the backup serves by its own identity, its probe fails",
            backup_probe_answered_by_the_target(
                held(1).new_pod("cp-1", Pod::ReadyNoIdentity { started: 40 }),
            )
            .at(UPDATE_AT + 301)
            .build(),
            target(ApiServer),
            "roll-back",
            &["no identity Lease of its own"],
        ),
        row(
            "no other process on its node could have answered its probe",
            backup_probe_answered_by_the_target(held(1).new_pod("cp-1", Pod::ImagePull))
                .at(60)
                .build(),
            target(ApiServer),
            "failed",
            &["rolling back is not safe", "is not Ready"],
        ),
    ]);
}

#[test]
fn every_state_a_killed_held_run_leaves_is_continued() {
    check(vec![
        row(
            "killed after the held update",
            held(3).at(UPDATE_AT + 5).build(),
            target(ApiServer),
            "drain-backup-node",
            &["\"node\":\"cp-1\""],
        ),
        row(
            "killed after deleting the first old pod, its replacement starting",
            held(3)
                .new_pod("cp-1", Pod::Starting { started: 40 })
                .at(41)
                .build(),
            target(ApiServer),
            "wait-for-rollout",
            &["is not Ready"],
        ),
        row(
            "killed after deleting the second old pod",
            held(3)
                .new_pod("cp-1", Pod::Serving { started: 40 })
                .real_pods_gone("cp-2")
                .at(60)
                .build(),
            target(ApiServer),
            "wait-for-rollout",
            &["has 2 pods for 3 desired"],
        ),
        row(
            "killed after writing the strategy back",
            held(3).all_new(60).hold_released().at(90).build(),
            target(ApiServer),
            "drain-backup-node",
            &["\"node\":\"cp-1\""],
        ),
        row(
            "killed after the rollback wrote the strategy back",
            held(3)
                .new_pod("cp-1", Pod::ImagePull)
                .rolled_back(60)
                .hold_released()
                .at(61)
                .build(),
            target(ApiServer),
            "wait-for-rollback",
            &["cp-1"],
        ),
        row(
            "a hold left without a backup (removed by hand): the controller paces again",
            World::steady(ApiServer, 3)
                .updated()
                .held()
                .new_pod("cp-1", Pod::Serving { started: 40 })
                .at(60)
                .build(),
            target(ApiServer),
            "restore-update-strategy",
            &["no backup exists any more"],
        ),
        row(
            "a backup left by kubeadm is adopted before anything is held",
            World::steady(ApiServer, 3)
                .backup_by_kubeadm()
                .backup_serving()
                .at(10)
                .build(),
            target(ApiServer),
            "adopt-backup",
            &["left by kubeadm"],
        ),
    ]);
}

#[test]
fn the_strategy_written_back_is_described_in_words() {
    let step = decide(&held(3).all_new(60).at(70).build(), &target(ApiServer));
    assert_eq!(
        step.description(),
        "restore self-hosted-kube-apiserver's update strategy RollingUpdate (maxUnavailable 1, \
         maxSurge 0): every node runs a new pod that serves"
    );
    let update = decide(
        &World::steady(ApiServer, 3)
            .backup()
            .backup_serving()
            .at(10)
            .build(),
        &target(ApiServer),
    );
    assert!(
        update.description().contains("one node at a time"),
        "{}",
        update.description()
    );
}

#[test]
fn a_hold_record_that_does_not_parse_gives_back_the_default_strategy() {
    let mut world = held(3).all_new(60).at(70);
    world
        .real_mut()
        .annotations
        .insert(HELD_UPDATE_STRATEGY.into(), "not json".into());
    let step = decide(&world.build(), &target(ApiServer));
    let Step::RestoreUpdateStrategy { strategy, .. } = step else {
        panic!(
            "expected restore-update-strategy, got {}",
            step.description()
        );
    };
    assert_eq!(strategy.type_.as_deref(), Some("RollingUpdate"));
    assert_eq!(strategy.rolling_update, None, "the API server defaults it");
}
