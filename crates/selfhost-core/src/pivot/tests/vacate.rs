//! Each node vacated of the backup before its kube-apiserver is replaced (`vacate.rs`): the
//! node is out of the load balancer while its new process joins.

use std::collections::BTreeSet;

use super::builder::{Pod, UPDATE_AT, World, t, target};
use super::hold::held;
use super::{check, decide, row};
use crate::component::Component::ApiServer;
use crate::observation::time;
use crate::pivot::{BACKUP_DRAIN_STEP_AT, BACKUP_DRAINED_NODES, Step, exclude_nodes};

impl World {
    /// The backup pod of `node` gone (its process exited, the kubelet confirmed).
    pub(crate) fn backup_pod_gone(mut self, node: &str) -> Self {
        self.backup_mut()
            .daemonset
            .pods
            .retain(|p| p.node.as_deref() != Some(node));
        self
    }

    /// `node` excluded from the backup during the rollout (no `BACKUP_DRAIN_STEP_AT`), and its
    /// backup pod gone.
    pub(crate) fn vacated(self, node: &str) -> Self {
        self.vacating(node).backup_pod_gone(node)
    }

    /// `node` excluded from the backup during the rollout; its backup pod still there, for
    /// the DaemonSet controller to delete.
    pub(crate) fn vacating(mut self, node: &str) -> Self {
        let ds = &mut self.backup_mut().daemonset;
        let mut nodes: BTreeSet<String> = ds
            .annotations
            .get(BACKUP_DRAINED_NODES)
            .map(|n| n.split(',').map(str::to_string).collect())
            .unwrap_or_default();
        nodes.insert(node.to_string());
        ds.template = exclude_nodes(&ds.template, &nodes);
        ds.annotations.insert(
            BACKUP_DRAINED_NODES.into(),
            nodes.into_iter().collect::<Vec<_>>().join(","),
        );
        self
    }
}

#[test]
fn a_nodes_turn_begins_by_taking_the_backup_off_it() {
    let step = decide(&held(3).at(UPDATE_AT + 1).build(), &target(ApiServer));
    let Step::DrainBackupNode { update, node, why } = &step else {
        panic!("expected drain-backup-node, got {}", step.description());
    };
    assert_eq!(node, "cp-1");
    assert_eq!(
        update
            .set_annotations
            .get(BACKUP_DRAINED_NODES)
            .map(String::as_str),
        Some("cp-1")
    );
    assert!(
        !update.set_annotations.contains_key(BACKUP_DRAIN_STEP_AT),
        "the removal at the end is not begun: {:?}",
        update.set_annotations
    );
    assert_eq!(
        update
            .update_strategy
            .as_ref()
            .and_then(|s| s.type_.as_deref()),
        Some("OnDelete"),
        "the backup's other pods stay"
    );
    assert_eq!(
        *update.template,
        exclude_nodes(
            &held(3).build().backup.expect("a backup").daemonset.template,
            &BTreeSet::from(["cp-1".to_string()])
        )
    );
    assert!(why.contains("leaves the load balancer"), "{why}");
    assert!(
        step.description()
            .contains("before its real pod is replaced"),
        "{}",
        step.description()
    );
}

#[test]
fn a_vacated_node_has_its_old_pod_replaced_while_out_of_rotation() {
    check(vec![
        row(
            "the controller has not deleted the backup pod yet",
            held(3).vacating("cp-1").at(UPDATE_AT + 2).build(),
            target(ApiServer),
            "wait-for-rollout",
            &[
                "cp-1: backup pod",
                "not yet deleted by the DaemonSet controller",
            ],
        ),
        row(
            "the backup pod is stopping: the old pod stops with it",
            held(3)
                .vacating("cp-1")
                .backup_pod_terminating("cp-1", 30)
                .at(UPDATE_AT + 2)
                .build(),
            target(ApiServer),
            "delete-old-pod",
            &[
                "old-cp-1",
                "\"grace_period_seconds\":10",
                "drops out of the load balancer",
            ],
        ),
        row(
            "the backup pod is gone",
            held(3).vacated("cp-1").at(UPDATE_AT + 2).build(),
            target(ApiServer),
            "delete-old-pod",
            &["old-cp-1", "\"grace_period_seconds\":10"],
        ),
        row(
            "the old pod is stopping (grace 10 s), its replacement not created yet",
            held(3)
                .vacated("cp-1")
                .old_terminating("cp-1", 10)
                .at(UPDATE_AT + 3)
                .build(),
            target(ApiServer),
            "wait-for-rollout",
            &["cp-1: pod old-cp-1 is terminating"],
        ),
        row(
            "the new pod's probe lies (the backup is gone, but the next node waits all the same)",
            held(3)
                .vacated("cp-1")
                .new_pod("cp-1", Pod::ReadyNoIdentity { started: 40 })
                .at(50)
                .build(),
            target(ApiServer),
            "wait-for-rollout",
            &["no identity Lease of its own"],
        ),
        // The backup pod of cp-1 deleted at t(90) (Terminating until t(95), grace 5 s): in
        // its shutdown delay until t(95).
        row(
            "the second node waits while the first node's backup process is in its shutdown delay",
            held(3)
                .vacating("cp-1")
                .backup_pod_terminating("cp-1", 5)
                .new_pod("cp-1", Pod::Serving { started: 40 })
                .at(UPDATE_AT + 62)
                .build(),
            target(ApiServer),
            "wait-for-rollout",
            &["a stopping backup process fails its node's /readyz until"],
        ),
        row(
            "and goes on once it is over",
            held(3)
                .vacating("cp-1")
                .backup_pod_terminating("cp-1", 5)
                .new_pod("cp-1", Pod::Serving { started: 40 })
                .at(UPDATE_AT + 66)
                .build(),
            target(ApiServer),
            "drain-backup-node",
            &["\"node\":\"cp-2\""],
        ),
        row(
            "no other node serves (both NotReady): the backup covers the node as on one node",
            held(3)
                .node_not_ready("cp-2")
                .node_not_ready("cp-3")
                .at(UPDATE_AT + 1)
                .build(),
            target(ApiServer),
            "delete-old-pod",
            &["old-cp-1", "the backup serves on this one"],
        ),
    ]);
}

/// The old pod of `cp-1` deleted with its full grace (an earlier run, or the operator) at
/// `t(UPDATE_AT + 1)`, its node vacated: it is shortened once its shutdown delay (5 s) is
/// over, not before, and the wait in between ends at that moment.
#[test]
fn a_lingering_pod_on_a_vacated_node_is_shortened_once_its_shutdown_delay_is_over() {
    let lingering = || {
        let mut world = held(3).vacated("cp-1");
        for pod in &mut world.real_mut().pods {
            if pod.node.as_deref() == Some("cp-1") {
                pod.deleting_since = Some(t(UPDATE_AT + 1 + 30));
                pod.deletion_grace_seconds = Some(30);
            }
        }
        world
    };
    let before = decide(&lingering().at(UPDATE_AT + 4).build(), &target(ApiServer));
    let Step::WaitForRollout(wait) = &before else {
        panic!("expected wait-for-rollout, got {}", before.description());
    };
    assert_eq!(
        wait.recheck_at,
        Some(t(UPDATE_AT + 6)),
        "the wait ends when the shutdown delay is over"
    );
    check(vec![
        row(
            "its shutdown delay is over",
            lingering().at(UPDATE_AT + 6).build(),
            target(ApiServer),
            "delete-old-pod",
            &[
                "old-cp-1",
                "\"grace_period_seconds\":5",
                "shutdown delay is over",
            ],
        ),
        row(
            "a pod already ending within the shortened grace is left alone",
            held(3)
                .vacated("cp-1")
                .old_terminating("cp-1", 5)
                .at(UPDATE_AT + 2)
                .build(),
            target(ApiServer),
            "wait-for-rollout",
            &["cp-1"],
        ),
    ]);
}

#[test]
fn every_state_a_killed_vacating_run_leaves_is_continued() {
    check(vec![
        row(
            "killed after the vacating write",
            held(3).vacating("cp-1").at(UPDATE_AT + 5).build(),
            target(ApiServer),
            "wait-for-rollout",
            &["not yet deleted by the DaemonSet controller"],
        ),
        row(
            "killed after the controller deleted the backup pod",
            held(3).vacated("cp-1").at(UPDATE_AT + 5).build(),
            target(ApiServer),
            "delete-old-pod",
            &["old-cp-1"],
        ),
        row(
            "killed after deleting the old pod, its replacement starting",
            held(3)
                .vacated("cp-1")
                .new_pod("cp-1", Pod::Starting { started: 40 })
                .at(41)
                .build(),
            target(ApiServer),
            "wait-for-rollout",
            &["is not Ready"],
        ),
        row(
            "killed once the first new pod served: the second node is vacated next",
            held(3)
                .vacated("cp-1")
                .new_pod("cp-1", Pod::Serving { started: 40 })
                .at(60)
                .build(),
            target(ApiServer),
            "drain-backup-node",
            &["\"node\":\"cp-2\"", "cp-1,cp-2"],
        ),
        row(
            "every node vacated and served: the strategy goes back",
            held(3)
                .vacated("cp-1")
                .vacated("cp-2")
                .vacated("cp-3")
                .all_new(60)
                .at(70)
                .build(),
            target(ApiServer),
            "restore-update-strategy",
            &["every node runs a new pod that serves"],
        ),
        row(
            "then the backup, with no pod left, goes at once",
            held(3)
                .vacated("cp-1")
                .vacated("cp-2")
                .vacated("cp-3")
                .all_new(60)
                .hold_released()
                .at(71)
                .build(),
            target(ApiServer),
            "remove-backup",
            &[],
        ),
        row(
            "a backup pod of a vacated node still stopping at the end is waited for",
            held(3)
                .vacating("cp-1")
                .backup_pod_terminating("cp-1", 30)
                .vacated("cp-2")
                .vacated("cp-3")
                .all_new(60)
                .hold_released()
                .at(71)
                .build(),
            target(ApiServer),
            "wait-for-backup-gone",
            &["cp-1: backup pod", "is stopping"],
        ),
    ]);
}

#[test]
fn a_rollback_needs_no_backup_pod_on_a_vacated_node() {
    check(vec![
        row(
            "the second node's target fails; the first node's new pod serves without a backup",
            held(3)
                .vacated("cp-1")
                .vacated("cp-2")
                .new_pod("cp-1", Pod::Serving { started: 40 })
                .new_pod("cp-2", Pod::ImagePull)
                .at(70)
                .build(),
            target(ApiServer),
            "roll-back",
            &["ImagePullBackOff", "\"update_strategy\":{\"rollingUpdate\""],
        ),
        row(
            "every node vacated, the last one's target failing: the others' new pods serve",
            held(3)
                .vacated("cp-1")
                .vacated("cp-2")
                .vacated("cp-3")
                .new_pod("cp-1", Pod::Serving { started: 40 })
                .new_pod("cp-2", Pod::Serving { started: 50 })
                .new_pod("cp-3", Pod::CrashLoop { restarts: 3 })
                .at(90)
                .build(),
            target(ApiServer),
            "roll-back",
            &["crash-looping"],
        ),
        row(
            "rolling back: the restored pod on the vacated node starts",
            held(3)
                .vacated("cp-1")
                .new_pod("cp-1", Pod::ImagePull)
                .rolled_back(60)
                .hold_released()
                .real_pods_gone("cp-1")
                .new_pod("cp-1", Pod::Starting { started: 62 })
                .at(63)
                .build(),
            target(ApiServer),
            "wait-for-rollback",
            &["cp-1"],
        ),
        row(
            "rolled back, one node vacated: the other nodes' backup pods go one at a time",
            held(3)
                .vacated("cp-1")
                .new_pod("cp-1", Pod::ImagePull)
                .rolled_back(60)
                .hold_released()
                .new_pod("cp-1", Pod::Serving { started: 62 })
                .at(70)
                .build(),
            target(ApiServer),
            "drain-backup-node",
            &["\"node\":\"cp-2\"", "cp-1,cp-2", BACKUP_DRAIN_STEP_AT],
        ),
        row(
            "rolled back, two nodes vacated: the last backup pod goes with the DaemonSet",
            held(3)
                .vacated("cp-1")
                .vacated("cp-2")
                .new_pod("cp-1", Pod::Serving { started: 40 })
                .new_pod("cp-2", Pod::ImagePull)
                .rolled_back(60)
                .hold_released()
                .new_pod("cp-1", Pod::Serving { started: 62 })
                .new_pod("cp-2", Pod::Serving { started: 64 })
                .at(70)
                .build(),
            target(ApiServer),
            "remove-backup",
            &[],
        ),
    ]);
}

/// The DaemonSet controller deletes a vacated node's failed pod with its full grace when a
/// rollback restores the template; no backup pod there serves to shorten it against, so it is
/// shortened once its shutdown delay is over.
#[test]
fn a_rollback_shortens_the_failed_pod_on_a_vacated_node() {
    let mut world = held(3)
        .vacated("cp-1")
        .new_pod("cp-1", Pod::ReadyNoIdentity { started: 40 })
        .rolled_back(60)
        .hold_released();
    for pod in &mut world.real_mut().pods {
        if pod.node.as_deref() == Some("cp-1") {
            pod.deleting_since = Some(t(61 + 30));
            pod.deletion_grace_seconds = Some(30);
        }
    }
    let obs = world.at(70).build();
    assert!(obs.now > time::after(t(61), std::time::Duration::from_secs(5)));
    check(vec![row(
        "the failed pod lingers past its shutdown delay",
        obs,
        target(ApiServer),
        "delete-old-pod",
        &["\"grace_period_seconds\":5", "shutdown delay is over"],
    )]);
}

/// The old pod's grace is its own template's shutdown delay (rounded up to whole seconds)
/// plus the shortened grace, never more than its own grace period.
#[test]
fn the_old_pods_grace_covers_its_own_shutdown_delay() {
    let with_delay = |delay: &str| {
        let mut world = held(3).vacated("cp-1");
        if let Ok(record) = world.backup_mut().record.as_mut() {
            let spec = record.original_template.spec.as_mut().expect("a pod spec");
            spec.containers[0]
                .command
                .get_or_insert_with(Vec::new)
                .push(format!("--shutdown-delay-duration={delay}"));
        }
        world.at(UPDATE_AT + 2).build()
    };
    for (delay, grace) in [("8s", 13), ("1500ms", 7), ("0s", 5), ("1m", 30)] {
        match decide(&with_delay(delay), &target(ApiServer)) {
            Step::DeleteOldPod {
                grace_period_seconds,
                ..
            } => assert_eq!(grace_period_seconds, Some(grace), "{delay}"),
            other => panic!(
                "{delay}: expected delete-old-pod, got {}",
                other.description()
            ),
        }
    }
    // A template without the flag runs without a delay (the kube-apiserver's default).
    let mut world = held(3).vacated("cp-1");
    if let Ok(record) = world.backup_mut().record.as_mut() {
        let spec = record.original_template.spec.as_mut().expect("a pod spec");
        if let Some(command) = spec.containers[0].command.as_mut() {
            command.retain(|arg| !arg.starts_with("--shutdown-delay-duration"));
        }
    }
    match decide(&world.at(UPDATE_AT + 2).build(), &target(ApiServer)) {
        Step::DeleteOldPod {
            grace_period_seconds,
            ..
        } => assert_eq!(grace_period_seconds, Some(5), "no flag"),
        other => panic!(
            "no flag: expected delete-old-pod, got {}",
            other.description()
        ),
    }
}
