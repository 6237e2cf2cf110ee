//! Removing the backup, and finishing a rollback.

use super::builder::{Pod, World, target};
use super::{check, decide, row};
use crate::component::Component::ApiServer;
use crate::pivot::Step;

/// One node, rollout complete (new pod serving since `t(60)`), backup being deleted.
fn removing() -> World {
    World::steady(ApiServer, 1)
        .backup()
        .backup_serving()
        .updated()
        .new_pod("cp-1", Pod::Serving { started: 60 })
        .backup_deleting(80)
}

#[test]
fn the_backup_is_waited_for_until_gone() {
    check(vec![
        row(
            "backup pod lingering Terminating past its shutdown delay while the new pod serves",
            removing().backup_pod_terminating("cp-1", 30).at(96).build(),
            target(ApiServer),
            "delete-old-pod",
            &[
                "temp-upgrade-self-hosted-kube-apiserver-cp-1",
                "\"grace_period_seconds\":5",
            ],
        ),
        row(
            "backup pod already on the short grace",
            removing().backup_pod_terminating("cp-1", 5).at(92).build(),
            target(ApiServer),
            "wait-for-backup-gone",
            &["still exists"],
        ),
        row(
            "backup pods gone, DaemonSet not yet",
            removing().remove_backup_pods().at(95).build(),
            target(ApiServer),
            "wait-for-backup-gone",
            &["backup temp-upgrade-self-hosted-kube-apiserver and its pods gone"],
        ),
        row(
            "backup stuck past the deadline",
            removing()
                .backup_pod_terminating("cp-1", 5)
                .at(80 + 301)
                .build(),
            target(ApiServer),
            "failed",
            &["was not gone by", "finalizers"],
        ),
        row(
            "backup gone: verify",
            removing().backup_gone().at(100).build(),
            target(ApiServer),
            "verify",
            &["/version"],
        ),
        row(
            "backup gone and verified",
            removing()
                .backup_gone()
                .api("v1.33.1", true)
                .at(100)
                .build(),
            target(ApiServer),
            "done",
            &[],
        ),
    ]);
}

/// One node, the new pod failed and selfhost rolled back at `t(130)`.
fn rolled_back() -> World {
    World::steady(ApiServer, 1)
        .backup()
        .backup_serving()
        .updated()
        .new_pod("cp-1", Pod::ImagePull)
        .rolled_back(130)
}

#[test]
fn a_rollback_is_finished_then_reported() {
    check(vec![
        row(
            "the failed pod still runs the target template",
            rolled_back().at(131).build(),
            target(ApiServer),
            "wait-for-rollback",
            &["back on the original template"],
        ),
        row(
            "the restored pod starts",
            rolled_back()
                .new_pod("cp-1", Pod::Starting { started: 135 })
                .at(136)
                .build(),
            target(ApiServer),
            "wait-for-rollback",
            &["is not Ready"],
        ),
        row(
            "the restored pod serves",
            rolled_back()
                .new_pod("cp-1", Pod::Serving { started: 135 })
                .at(140)
                .build(),
            target(ApiServer),
            "remove-backup",
            &[],
        ),
        row(
            "the original fails too",
            rolled_back()
                .new_pod("cp-1", Pod::ImagePull)
                .at(140)
                .build(),
            target(ApiServer),
            "failed",
            &["the rollback to the original template is failing too"],
        ),
        row(
            "the rollback does not complete in time",
            rolled_back()
                .new_pod("cp-1", Pod::Starting { started: 135 })
                .at(130 + 601)
                .build(),
            target(ApiServer),
            "failed",
            &["not complete by"],
        ),
        row(
            "the rollback has twice the per-component deadline",
            rolled_back()
                .new_pod("cp-1", Pod::Starting { started: 135 })
                .at(130 + 599)
                .build(),
            target(ApiServer),
            "wait-for-rollback",
            &[],
        ),
        row(
            "backup removed after the rollback",
            rolled_back()
                .new_pod("cp-1", Pod::Serving { started: 135 })
                .backup_gone()
                .at(150)
                .build(),
            target(ApiServer),
            "rolled-back",
            &["pod crash-looping"],
        ),
        row(
            "backup removed, the restored pod gone again (the controller recreates it)",
            rolled_back()
                .new_pod("cp-1", Pod::Serving { started: 135 })
                .backup_gone()
                .real_pods_gone("cp-1")
                .at(150)
                .build(),
            target(ApiServer),
            "wait-for-rollback",
            &["has 0 pods for 1 desired"],
        ),
        row(
            "backup removed, the recreated pod not Ready yet",
            rolled_back()
                .new_pod("cp-1", Pod::Starting { started: 148 })
                .backup_gone()
                .at(150)
                .build(),
            target(ApiServer),
            "wait-for-rollback",
            &["is not Ready"],
        ),
        row(
            "backup removed, the recreated pod never comes back in time",
            rolled_back()
                .new_pod("cp-1", Pod::Starting { started: 148 })
                .backup_gone()
                .at(130 + 601)
                .build(),
            target(ApiServer),
            "failed",
            &[
                "the rollback to the original template is failing too",
                "is not Ready",
            ],
        ),
    ]);
}

/// A failed rollback must not read "not complete by ...: ." naming nothing: one list says
/// both what a rollback waits for and what its failure names. Whatever a rollback waits for
/// just before its deadline, its failure at the deadline names, and a rollback with nothing
/// pending is never a failure.
#[test]
fn a_failed_rollback_names_what_it_waited_for() {
    let cases: Vec<(&str, World, &[&str])> = vec![
        (
            "the restored pod is not Ready",
            rolled_back().new_pod("cp-1", Pod::Starting { started: 135 }),
            &["is not Ready"],
        ),
        (
            "the restored pod is Ready but not serving while the backup serves",
            rolled_back().new_pod("cp-1", Pod::ReadyNoIdentity { started: 135 }),
            &["cp-1: the real pod does not serve yet ("],
        ),
        (
            "the failed pod still runs the target template",
            rolled_back(),
            &["cp-1: pod"],
        ),
    ];
    let mut failures = Vec::new();
    for (case, world, mentions) in cases {
        let before = decide(&world.clone().at(130 + 599).build(), &target(ApiServer));
        let Step::WaitForRollback(wait) = &before else {
            failures.push(format!("{case}: before the deadline {}", before.name()));
            continue;
        };
        let after = decide(&world.at(130 + 601).build(), &target(ApiServer));
        let Step::Failed { reason, .. } = &after else {
            failures.push(format!("{case}: at the deadline {}", after.name()));
            continue;
        };
        if wait.pending.is_empty() || reason.ends_with(": ") {
            failures.push(format!("{case}: nothing named: {reason}"));
        }
        for line in &wait.pending {
            if !reason.contains(line.as_str()) {
                failures.push(format!("{case}: {reason:?} does not name {line:?}"));
            }
        }
        for mention in mentions {
            if !reason.contains(mention) {
                failures.push(format!("{case}: {reason:?} does not mention {mention:?}"));
            }
        }
    }
    assert!(failures.is_empty(), "\n{}", failures.join("\n"));
}

#[test]
fn a_rollback_before_any_update_removes_a_backup_that_never_served() {
    // The backup never served, so the real DaemonSet was never changed; the rollback only
    // recorded itself. Removing the backup takes nothing that serves away.
    let aborted = || {
        World::steady(ApiServer, 1)
            .backup()
            .backup_pod("cp-1", Pod::ImagePull)
            .rollback_recorded(20)
    };
    check(vec![
        row(
            "remove the backup",
            aborted().at(21).build(),
            target(ApiServer),
            "remove-backup",
            &[],
        ),
        row(
            "then the run ends rolled back",
            aborted().backup_gone().at(25).build(),
            target(ApiServer),
            "rolled-back",
            &["the backup does not serve"],
        ),
        row(
            "a rollback recorded before this backup belongs to an earlier run",
            World::steady(ApiServer, 1)
                .rollback_recorded(-100)
                .backup()
                .backup_serving()
                .at(10)
                .build(),
            target(ApiServer),
            "update-real",
            &[],
        ),
    ]);
}

/// On several nodes only the node whose new pod failed was rolled: a rollback restores the
/// old revision there, and the untouched old pods elsewhere already run it.
#[test]
fn a_rollback_on_several_nodes_keeps_the_pods_that_never_left_the_original() {
    let failed = || {
        World::steady(ApiServer, 3)
            .backup()
            .backup_serving()
            .updated()
            .new_pod("cp-1", Pod::ImagePull)
    };
    check(vec![
        row(
            "the failure rolls back",
            failed().at(60).build(),
            target(ApiServer),
            "roll-back",
            &["ImagePullBackOff"],
        ),
        row(
            "the failed pod still runs the target",
            failed().rolled_back(70).at(71).build(),
            target(ApiServer),
            "wait-for-rollback",
            &["cp-1: pod"],
        ),
        row(
            "restored on cp-1; cp-2 and cp-3 never left the original",
            failed()
                .rolled_back(70)
                .new_pod("cp-1", Pod::Serving { started: 75 })
                .at(80)
                .build(),
            target(ApiServer),
            "drain-backup-node",
            &["\"node\":\"cp-1\""],
        ),
    ]);
}
