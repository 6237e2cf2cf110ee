//! The kube-apiserver's backup on two nodes or more is a record only (`vacate.rs`,
//! `record_only`): created with every node excluded, it runs no pod, the update follows at
//! once, and each node's turn goes straight to its old pod's deletion.

use std::collections::BTreeSet;

use k8s_openapi::api::apps::v1::DaemonSetUpdateStrategy;

use super::builder::{Pod, UPDATE_AT, World, target};
use super::{check, decide, row, with};
use crate::component::Component::{self, ApiServer, ControllerManager, Scheduler};
use crate::pivot::{
    BACKUP_DRAIN_STEP_AT, BACKUP_DRAINED_NODES, BACKUP_IDENTITIES, HELD_UPDATE_STRATEGY, Step,
    exclude_nodes,
};

impl World {
    /// Our backup for the target, made as a record only: every node excluded (recorded in
    /// [`BACKUP_DRAINED_NODES`]), update strategy `OnDelete`, no pods.
    fn record_only_backup(self) -> Self {
        let nodes = self.nodes();
        let mut world = self.backup();
        for node in &nodes {
            world = world.vacating(node);
        }
        world.backup_mut().daemonset.update_strategy = Some(DaemonSetUpdateStrategy {
            type_: Some("OnDelete".into()),
            rolling_update: None,
        });
        world
    }
}

/// Every node of a three-node apiserver, as a set.
fn three() -> BTreeSet<String> {
    ["cp-1", "cp-2", "cp-3"].map(String::from).into()
}

#[test]
fn on_several_nodes_the_apiservers_backup_is_created_with_every_node_excluded() {
    let obs = World::steady(ApiServer, 3).at(1).build();
    let step = decide(&obs, &target(ApiServer));
    let Step::CreateBackup { daemonset } = &step else {
        panic!("expected create-backup, got {}", step.description());
    };
    let annotations = daemonset.metadata.annotations.clone().unwrap_or_default();
    assert_eq!(
        annotations.get(BACKUP_DRAINED_NODES).map(String::as_str),
        Some("cp-1,cp-2,cp-3")
    );
    assert!(
        !annotations.contains_key(BACKUP_DRAIN_STEP_AT),
        "the removal has not begun: {annotations:?}"
    );
    let spec = daemonset.spec.as_ref().expect("a spec");
    assert_eq!(
        spec.update_strategy
            .as_ref()
            .and_then(|s| s.type_.as_deref()),
        Some("OnDelete")
    );
    let real = obs.real.as_ref().expect("real");
    let plain =
        crate::pivot::backup_daemonset(real, ApiServer, &target(ApiServer).version, obs.now, None)
            .expect("a backup");
    let plain_template = plain.spec.expect("a spec").template;
    assert_eq!(spec.template, exclude_nodes(&plain_template, &three()));
    // The record a resume and a rollback read is the same as a backup with pods carries.
    for key in [
        crate::backup::TARGET_VERSION_ANNOTATION,
        crate::backup::ORIGINAL_TEMPLATE_ANNOTATION,
        crate::pivot::BACKUP_CREATED_AT,
    ] {
        assert_eq!(
            annotations.get(key),
            plain.metadata.annotations.as_ref().and_then(|a| a.get(key)),
            "{key}"
        );
    }
    assert!(
        step.description().contains("record only, no pods"),
        "{}",
        step.description()
    );
}

#[test]
fn elsewhere_the_backup_runs_pods_as_before() {
    let cases: Vec<(&str, World)> = vec![
        ("one apiserver node", World::steady(ApiServer, 1)),
        (
            "the controller-manager",
            World::steady(ControllerManager, 3),
        ),
        ("the scheduler", World::steady(Scheduler, 3)),
        (
            "no port sharing on the live template",
            World::steady(ApiServer, 3).live_without_port_sharing(),
        ),
        (
            "the operator's own OnDelete (no hold)",
            World::steady(ApiServer, 3).on_delete(),
        ),
    ];
    for (case, world) in cases {
        let component = world.obs.component;
        let step = decide(&world.at(1).build(), &target(component));
        let Step::CreateBackup { daemonset } = &step else {
            // Without port sharing on three nodes the pivot proceeds too; only the backup's
            // shape matters here.
            panic!("{case}: expected create-backup, got {}", step.description());
        };
        let annotations = daemonset.metadata.annotations.clone().unwrap_or_default();
        assert!(
            !annotations.contains_key(BACKUP_DRAINED_NODES),
            "{case}: {annotations:?}"
        );
        assert!(
            !step.description().contains("record only"),
            "{case}: {}",
            step.description()
        );
    }
}

#[test]
fn a_record_only_backup_has_nothing_to_wait_for() {
    let backed_up = || World::steady(ApiServer, 3).record_only_backup();
    check(vec![
        row(
            "killed right after create-backup: the update follows, held",
            backed_up().at(2).build(),
            target(ApiServer),
            "update-real",
            &[HELD_UPDATE_STRATEGY, "\"type\":\"OnDelete\""],
        ),
        row(
            "a target without port sharing is refused as before",
            backed_up().at(2).build(),
            {
                let mut t = target(ApiServer);
                t.template = super::builder::template(ApiServer, super::builder::NEW, false);
                t
            },
            "refuse",
            &["--permit-port-sharing=true"],
        ),
        row(
            "the operator set OnDelete since (no hold, no vacating): nothing covers a node",
            World::steady(ApiServer, 3)
                .record_only_backup()
                .on_delete()
                .at(2)
                .build(),
            target(ApiServer),
            "wait-for-backup",
            &["cp-1: excluded from the backup"],
        ),
    ]);
    // No identity is recorded: there is no backup pod to record.
    let step = decide(&backed_up().at(2).build(), &target(ApiServer));
    let Step::UpdateReal(update) = &step else {
        panic!("expected update-real, got {}", step.description());
    };
    assert!(!update.set_annotations.contains_key(BACKUP_IDENTITIES));
    assert!(
        update
            .remove_annotations
            .iter()
            .any(|k| k == BACKUP_IDENTITIES)
    );
}

/// After the update, under the hold: each node's turn is its old pod's deletion, one node at a
/// time, and the backup goes at once at the end.
fn rolling(nodes: usize) -> World {
    World::steady(ApiServer, nodes)
        .record_only_backup()
        .updated()
        .held()
}

#[test]
fn each_nodes_turn_goes_straight_to_its_old_pods_deletion() {
    check(vec![
        row(
            "killed right after update-real: the first node's old pod goes, grace 10 s",
            rolling(3).at(UPDATE_AT + 1).build(),
            target(ApiServer),
            "delete-old-pod",
            &[
                "old-cp-1",
                "\"grace_period_seconds\":10",
                "no backup process runs on this one",
            ],
        ),
        row(
            "the other nodes NotReady (their pods' Ready is stale): the first old pod stays",
            rolling(3)
                .node_not_ready("cp-2")
                .node_not_ready("cp-3")
                .at(UPDATE_AT + 1)
                .build(),
            target(ApiServer),
            "wait-for-rollout",
            &["cp-1: its old pod goes once a kube-apiserver on another Ready node is proven"],
        ),
        row(
            "the first node's new pod does not serve yet: the next node waits",
            rolling(3)
                .new_pod("cp-1", Pod::ReadyNoIdentity { started: 40 })
                .at(50)
                .build(),
            target(ApiServer),
            "wait-for-rollout",
            &["no identity Lease of its own"],
        ),
        row(
            "mid-rollout: the first node's new pod serves, the second node's old pod goes",
            rolling(3)
                .new_pod("cp-1", Pod::Serving { started: 40 })
                .at(50)
                .build(),
            target(ApiServer),
            "delete-old-pod",
            &["old-cp-2", "\"grace_period_seconds\":10"],
        ),
        row(
            "two nodes: the second node's turn",
            rolling(2)
                .new_pod("cp-1", Pod::Serving { started: 40 })
                .at(50)
                .build(),
            target(ApiServer),
            "delete-old-pod",
            &["old-cp-2"],
        ),
        row(
            "every node serves the target: the strategy is written back",
            rolling(3).all_new(40).at(60).build(),
            target(ApiServer),
            "restore-update-strategy",
            &[],
        ),
        row(
            "then the backup, which runs no pod, is deleted at once",
            rolling(3).all_new(40).hold_released().at(61).build(),
            target(ApiServer),
            "remove-backup",
            &["uid-backup"],
        ),
        row(
            "killed while the backup goes: the wait for it to be gone",
            rolling(3)
                .all_new(40)
                .hold_released()
                .backup_deleting(62)
                .at(63)
                .build(),
            target(ApiServer),
            "wait-for-backup-gone",
            &["its pods are gone"],
        ),
        row(
            "the backup gone: verified and done",
            rolling(3)
                .all_new(40)
                .hold_released()
                .backup_gone()
                .api(super::builder::NEW, true)
                .at(64)
                .build(),
            target(ApiServer),
            "done",
            &[],
        ),
    ]);
}

/// Without identity Leases a new pod's Ready is proof enough where nothing else can have
/// answered its probe: no backup process ever ran, and its node's old pod is gone. Where
/// another apiserver process is still on its node, the soak stands in as on one node.
#[test]
fn without_identity_leases_a_new_pod_alone_on_its_node_serves_when_ready() {
    let lone = || {
        rolling(3)
            .without_identity_leases()
            .new_pod("cp-1", Pod::ReadyNoIdentity { started: 40 })
    };
    let beside_a_lingering_process = {
        let mut world = lone();
        let mut old = world.pod("old-cp-1", "cp-1", 1, Pod::Serving { started: -3600 });
        // Deleted at t(44) with a short grace: nothing to cut short.
        old.deleting_since = Some(super::builder::t(49));
        old.deletion_grace_seconds = Some(5);
        world.real_mut().pods.push(old);
        world
    };
    check(vec![
        row(
            "Ready 5 s after its start, alone on its node: the next node's turn",
            lone().at(45).build(),
            target(ApiServer),
            "delete-old-pod",
            &["old-cp-2"],
        ),
        row(
            "another apiserver process on its node: the soak from its start",
            beside_a_lingering_process.at(45).build(),
            target(ApiServer),
            "wait-for-rollout",
            &["soaking until"],
        ),
        row(
            "not Ready: nothing to trust",
            rolling(3)
                .without_identity_leases()
                .new_pod("cp-1", Pod::Starting { started: 40 })
                .at(45)
                .build(),
            target(ApiServer),
            "wait-for-rollout",
            &["is not Ready"],
        ),
    ]);
}

#[test]
fn a_failing_target_is_rolled_back_with_no_backup_pod() {
    check(vec![
        row(
            "the first node's target cannot be pulled: the other nodes' old pods serve",
            rolling(3)
                .new_pod("cp-1", Pod::ImagePull)
                .at(UPDATE_AT + 320)
                .build(),
            target(ApiServer),
            "roll-back",
            &["ImagePullBackOff", "\"update_strategy\":{\"rollingUpdate\""],
        ),
        row(
            "the second node's crash-looping: the first node's new pod serves",
            rolling(3)
                .new_pod("cp-1", Pod::Serving { started: 40 })
                .new_pod("cp-2", Pod::CrashLoop { restarts: 3 })
                .at(70)
                .build(),
            target(ApiServer),
            "roll-back",
            &["crash-looping"],
        ),
        row(
            "--no-rollback: stopped with the state, nothing rolled back",
            rolling(3)
                .new_pod("cp-1", Pod::CrashLoop { restarts: 3 })
                .at(70)
                .build(),
            with(target(ApiServer), |o| o.no_rollback = true),
            "failed",
            &["crash-looping"],
        ),
        row(
            "rolling back: the restored pod starts; no backup pod keeps anything",
            rolling(3)
                .new_pod("cp-1", Pod::ImagePull)
                .rolled_back(60)
                .hold_released()
                .new_pod("cp-1", Pod::Starting { started: 62 })
                .at(63)
                .build(),
            target(ApiServer),
            "wait-for-rollback",
            &["cp-1"],
        ),
        row(
            "rolled back: the backup goes at once",
            rolling(3)
                .new_pod("cp-1", Pod::ImagePull)
                .rolled_back(60)
                .hold_released()
                .new_pod("cp-1", Pod::Serving { started: 62 })
                .at(70)
                .build(),
            target(ApiServer),
            "remove-backup",
            &[],
        ),
        row(
            "the backup gone: the run ends rolled back",
            rolling(3)
                .new_pod("cp-1", Pod::ImagePull)
                .rolled_back(60)
                .hold_released()
                .new_pod("cp-1", Pod::Serving { started: 62 })
                .backup_gone()
                .at(71)
                .build(),
            {
                let mut t = target(ApiServer);
                t.run_started_at = super::builder::t(0);
                t
            },
            "rolled-back",
            &["pod crash-looping"],
        ),
    ]);
}

/// A rollback must still never take the last serving process away: with no backup pod, the
/// real pods outside the rollback are what serves. Replacing a pod that runs no process takes
/// nothing away, proven or not.
#[test]
fn a_rollback_takes_no_unproven_process_away() {
    // The old pods unproven (here: their probes fail; on a cluster booted within the second,
    // their whole-second starts leave their identities unattributed).
    let unproven = |world: World| {
        let mut world = world;
        for pod in &mut world.real_mut().pods {
            if pod.name.starts_with("old-") {
                pod.ready = false;
                for container in &mut pod.containers {
                    container.ready = false;
                }
            }
        }
        world
    };
    check(vec![
        row(
            "the target cannot be pulled and nothing is proven to serve: nothing is taken away",
            unproven(rolling(3).new_pod("cp-1", Pod::ImagePull))
                .at(UPDATE_AT + 320)
                .build(),
            target(ApiServer),
            "roll-back",
            &["ImagePullBackOff"],
        ),
        row(
            "the same with backup pods that do not serve: refused as before",
            unproven(
                World::steady(ApiServer, 3)
                    .backup()
                    .backup_pod("cp-1", Pod::ImagePull)
                    .updated()
                    .held()
                    .new_pod("cp-1", Pod::ImagePull),
            )
            .at(UPDATE_AT + 320)
            .build(),
            target(ApiServer),
            "failed",
            &["rolling back is not safe"],
        ),
        row(
            "the new pod runs unproven past the deadline and nothing else is proven: refused",
            unproven(rolling(3).new_pod("cp-1", Pod::ReadyNoIdentity { started: 40 }))
                .at(UPDATE_AT + 400)
                .build(),
            target(ApiServer),
            "failed",
            &["rolling back is not safe", "it has no pods"],
        ),
    ]);
}

#[test]
fn backups_with_pods_are_still_handled() {
    check(vec![
        row(
            "a backup with pods on every node (an older selfhost): it must serve first",
            World::steady(ApiServer, 3)
                .backup()
                .backup_pod("cp-1", Pod::Serving { started: 2 })
                .at(5)
                .build(),
            target(ApiServer),
            "wait-for-backup",
            &["cp-2: no backup pod yet"],
        ),
        row(
            "then, held, each node is vacated of it first",
            World::steady(ApiServer, 3)
                .backup()
                .backup_serving()
                .updated()
                .held()
                .at(UPDATE_AT + 1)
                .build(),
            target(ApiServer),
            "drain-backup-node",
            &["\"node\":\"cp-1\""],
        ),
        row(
            "a backup left by kubeadm is adopted as before",
            World::steady(ApiServer, 3)
                .backup_by_kubeadm()
                .at(5)
                .build(),
            target(ApiServer),
            "adopt-backup",
            &["kubeadm"],
        ),
    ]);
}

/// Whichever component: the backup with pods on one node, and the standbys, are unchanged.
#[test]
fn one_node_keeps_a_serving_backup() {
    let component: Component = ApiServer;
    check(vec![row(
        "one node: the backup must serve before the update",
        World::steady(component, 1).backup().at(5).build(),
        target(component),
        "wait-for-backup",
        &["cp-1: no backup pod yet"],
    )]);
}
