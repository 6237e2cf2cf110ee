//! Waiting for the rollout of the real DaemonSet, speeding it up, and deciding to roll back.

use super::builder::{Pod, UPDATE_AT, World, t, target};
use std::time::Duration;

use super::{check, decide, row, with};
use crate::component::Component::{ApiServer, ControllerManager};
use crate::rollout::AvailabilityBudget;

/// One node, backup serving since `t(2)`, real DaemonSet updated at [`UPDATE_AT`].
fn updated() -> World {
    World::steady(ApiServer, 1)
        .backup()
        .backup_serving()
        .updated()
}

#[test]
fn the_rollout_completes_only_when_every_new_pod_serves() {
    check(vec![
        row(
            "the controller has not replaced the old pod yet",
            updated().at(UPDATE_AT + 1).build(),
            target(ApiServer),
            "wait-for-rollout",
            &["runs the previous template", "\"deadline\""],
        ),
        row(
            "the old pod is gone, no new pod yet",
            updated().real_pods_gone("cp-1").build(),
            target(ApiServer),
            "wait-for-rollout",
            &["has no pods"],
        ),
        row(
            "the new pod is starting",
            updated()
                .new_pod("cp-1", Pod::Starting { started: 60 })
                .at(61)
                .build(),
            target(ApiServer),
            "wait-for-rollout",
            &["is not Ready"],
        ),
        row(
            "lying readiness: new pod Ready without its own identity",
            updated()
                .new_pod("cp-1", Pod::ReadyNoIdentity { started: 60 })
                .at(70)
                .build(),
            target(ApiServer),
            "wait-for-rollout",
            &["no identity Lease of its own"],
        ),
        row(
            "the new pod serves by its own identity",
            updated()
                .new_pod("cp-1", Pod::Serving { started: 60 })
                .at(70)
                .build(),
            target(ApiServer),
            "remove-backup",
            &["uid-backup", "temp-upgrade-self-hosted-kube-apiserver"],
        ),
        row(
            "the controller has not observed the update",
            updated().all_new(60).controller_lagging().at(70).build(),
            target(ApiServer),
            "wait-for-rollout",
            &["observe generation 2"],
        ),
        row(
            "controller-manager standby on the new template",
            World::steady(ControllerManager, 1)
                .backup()
                .backup_serving()
                .updated()
                .all_new(60)
                .at(70)
                .build(),
            target(ControllerManager),
            "remove-backup",
            &[],
        ),
        row(
            "three nodes, one rolled",
            World::steady(ApiServer, 3)
                .backup()
                .backup_serving()
                .updated()
                .new_pod("cp-1", Pod::Serving { started: 60 })
                .at(70)
                .build(),
            target(ApiServer),
            "wait-for-rollout",
            &["cp-2: pod", "cp-3: pod"],
        ),
    ]);
}

#[test]
fn an_old_apiserver_lingering_past_its_shutdown_delay_is_deleted_sooner_when_its_successor_serves()
{
    check(vec![
        row(
            "Terminating with 30 s grace, in its shutdown delay",
            updated().old_terminating("cp-1", 30).at(35).build(),
            target(ApiServer),
            "wait-for-rollout",
            &["is terminating"],
        ),
        row(
            "Terminating with 30 s grace, its shutdown delay over, backup serving by identity",
            updated().old_terminating("cp-1", 30).at(37).build(),
            target(ApiServer),
            "delete-old-pod",
            &[
                "\"grace_period_seconds\":5",
                "shutdown delay is over",
                "uid-old-cp-1",
            ],
        ),
        row(
            "already deleted with the short grace",
            updated().old_terminating("cp-1", 5).at(35).build(),
            target(ApiServer),
            "wait-for-rollout",
            &["is terminating"],
        ),
        row(
            "without identity Leases a backup that has soaked serves as well",
            World::steady(ApiServer, 1)
                .without_identity_leases()
                .backup()
                .backup_serving()
                .updated()
                .old_terminating("cp-1", 30)
                .at(37)
                .build(),
            target(ApiServer),
            "delete-old-pod",
            &["\"grace_period_seconds\":5", "temp-upgrade"],
        ),
        row(
            "a successor that does not serve shortens nothing",
            World::steady(ApiServer, 1)
                .backup()
                .backup_pod("cp-1", Pod::ReadyNoIdentity { started: 2 })
                .updated()
                .old_terminating("cp-1", 30)
                .at(37)
                .build(),
            target(ApiServer),
            "wait-for-rollout",
            &[],
        ),
        row(
            "its processes already stopped",
            updated()
                .old_terminating("cp-1", 30)
                .real_container_stopped("cp-1")
                .at(37)
                .build(),
            target(ApiServer),
            "wait-for-rollout",
            &[],
        ),
        row(
            "three nodes: the one the controller is replacing",
            World::steady(ApiServer, 3)
                .backup()
                .backup_serving()
                .updated()
                .new_pod("cp-1", Pod::Serving { started: 40 })
                .old_terminating("cp-2", 30)
                .at(50)
                .build(),
            target(ApiServer),
            "delete-old-pod",
            &["old-cp-2"],
        ),
        row(
            "a controller-manager pod is not hurried",
            World::steady(ControllerManager, 1)
                .backup()
                .backup_serving()
                .updated()
                .old_terminating("cp-1", 30)
                .leader("cp-1", 5)
                .at(37)
                .build(),
            target(ControllerManager),
            "wait-for-rollout",
            &[],
        ),
    ]);
}

#[test]
fn with_on_delete_the_engine_replaces_old_pods_one_node_at_a_time() {
    check(vec![
        row(
            "the first old pod",
            World::steady(ApiServer, 2)
                .on_delete()
                .backup()
                .backup_serving()
                .updated()
                .at(35)
                .build(),
            target(ApiServer),
            "delete-old-pod",
            &["old-cp-1", "OnDelete", "\"grace_period_seconds\":5"],
        ),
        row(
            "not the next before the first is replaced",
            World::steady(ApiServer, 2)
                .on_delete()
                .backup()
                .backup_serving()
                .updated()
                .new_pod("cp-1", Pod::Starting { started: 40 })
                .at(45)
                .build(),
            target(ApiServer),
            "wait-for-rollout",
            &[],
        ),
        row(
            "the next once the first serves",
            World::steady(ApiServer, 2)
                .on_delete()
                .backup()
                .backup_serving()
                .updated()
                .new_pod("cp-1", Pod::Serving { started: 40 })
                .at(50)
                .build(),
            target(ApiServer),
            "delete-old-pod",
            &["old-cp-2"],
        ),
    ]);
}

#[test]
fn failing_new_pods_are_rolled_back_while_the_backup_serves() {
    check(vec![
        row(
            "image cannot be pulled",
            updated().new_pod("cp-1", Pod::ImagePull).at(60).build(),
            target(ApiServer),
            "roll-back",
            &[
                "ImagePullBackOff",
                "kube-apiserver:v1.32.4",
                "selfhost.dev/rollback-reason",
            ],
        ),
        row(
            "crash-looping past the threshold",
            updated()
                .new_pod("cp-1", Pod::CrashLoop { restarts: 3 })
                .at(90)
                .build(),
            target(ApiServer),
            "roll-back",
            &["crash-looping (3 restarts, last exit: Error)"],
        ),
        row(
            "one restart is not a crash loop",
            updated()
                .new_pod("cp-1", Pod::CrashLoop { restarts: 1 })
                .at(90)
                .build(),
            target(ApiServer),
            "wait-for-rollout",
            &[],
        ),
        row(
            "a higher threshold",
            updated()
                .new_pod("cp-1", Pod::CrashLoop { restarts: 3 })
                .at(90)
                .build(),
            with(target(ApiServer), |o| o.crash_loop_restarts = 5),
            "wait-for-rollout",
            &[],
        ),
        row(
            "never Ready by the deadline",
            updated()
                .new_pod("cp-1", Pod::Starting { started: 60 })
                .at(UPDATE_AT + 301)
                .build(),
            target(ApiServer),
            "roll-back",
            &["not complete 300s after", "is not Ready"],
        ),
        row(
            "a shorter deadline",
            updated()
                .new_pod("cp-1", Pod::Starting { started: 60 })
                .at(UPDATE_AT + 61)
                .build(),
            with(target(ApiServer), |o| {
                o.deadline = std::time::Duration::from_secs(60)
            }),
            "roll-back",
            &[],
        ),
        row(
            "--no-rollback stops with the backup serving",
            updated().new_pod("cp-1", Pod::ImagePull).at(60).build(),
            with(target(ApiServer), |o| o.no_rollback = true),
            "failed",
            &[
                "keeps serving with the original template",
                "selfhost apply v1.33.1",
                "rolls back otherwise",
            ],
        ),
        row(
            "no serving backup: rolling back is not safe",
            updated()
                .remove_backup_pods()
                .new_pod("cp-1", Pod::ImagePull)
                .at(60)
                .build(),
            target(ApiServer),
            "failed",
            &["rolling back is not safe", "no pod of"],
        ),
    ]);
}

/// One node without identity Leases, the old pod gone (cut short once the backup had soaked),
/// the target failing to pull: while every apiserver process is younger than the freshness
/// window, whether the cluster publishes identity Leases — hence whether the backup serves —
/// is not decided yet. The rollback waits for that moment instead of giving up with exit 4.
#[test]
fn a_rollback_waits_until_it_can_tell_whether_the_backup_serves() {
    let failing = |at| {
        World::steady(ApiServer, 1)
            .without_identity_leases()
            .backup()
            .backup_pod("cp-1", Pod::ReadyNoIdentity { started: 10 })
            .updated()
            .new_pod("cp-1", Pod::ImagePull)
            .at(at)
            .build()
    };
    check(vec![
        row(
            "every apiserver process younger than 30 s: wait",
            failing(35),
            target(ApiServer),
            "wait-for-rollout",
            &["whether the backup serves is known at", "ImagePullBackOff"],
        ),
        row(
            "decided (none published): the backup has soaked, roll back",
            failing(41),
            target(ApiServer),
            "roll-back",
            &["ImagePullBackOff"],
        ),
    ]);
    let waiting = decide(&failing(35), &target(ApiServer));
    assert_eq!(
        waiting.wait().and_then(|w| w.recheck_at),
        Some(t(40)),
        "the wait ends when the question is decided"
    );
}

#[test]
fn a_resumed_run_gives_the_rollout_its_full_deadline_again() {
    let obs = updated()
        .new_pod("cp-1", Pod::Starting { started: 60 })
        .at(UPDATE_AT + 301)
        .build();
    let mut resumed = target(ApiServer);
    resumed.run_started_at = t(UPDATE_AT + 200);
    check(vec![row(
        "resumed 200 s after the update",
        obs,
        resumed,
        "wait-for-rollout",
        &[],
    )]);
}

/// The target with an availability budget of `seconds` of unavailability and `probes` failed
/// probes.
fn budget(
    component: crate::component::Component,
    seconds: Option<u64>,
    probes: Option<u32>,
) -> crate::pivot::Target {
    with(target(component), |o| {
        o.budget = AvailabilityBudget {
            max_unavailable: seconds.map(Duration::from_secs),
            max_failed_probes: probes,
        }
    })
}

#[test]
fn an_apiserver_rollout_over_its_availability_budget_is_rolled_back_and_says_by_how_much() {
    let serving_one_of_three = || {
        World::steady(ApiServer, 3)
            .backup()
            .backup_serving()
            .updated()
            .new_pod("cp-1", Pod::Serving { started: 60 })
            .at(70)
    };
    check(vec![
        row(
            "within the budget the rollout goes on, watching the API's health",
            serving_one_of_three().probes_failed(2, 1.0).build(),
            budget(ApiServer, Some(2), Some(3)),
            "wait-for-rollout",
            &["cp-2: pod", "\"kind\":\"api-health\""],
        ),
        row(
            "unavailable longer than allowed",
            serving_one_of_three().probes_failed(2, 3.0).build(),
            budget(ApiServer, Some(1), None),
            "roll-back",
            &[
                "availability budget exceeded",
                "unavailable for 3.0 s",
                "2.0 s over the budget of 1.0 s",
                "selfhost.dev/rollback-reason",
            ],
        ),
        row(
            "more failed probes than allowed",
            serving_one_of_three().probes_failed(4, 0.5).build(),
            budget(ApiServer, None, Some(1)),
            "roll-back",
            &["4 of the engine's probes of the API failed, 3 over the budget of 1"],
        ),
        row(
            "a rollout that has just completed is rolled back too",
            updated()
                .new_pod("cp-1", Pod::Serving { started: 60 })
                .at(70)
                .probes_failed(9, 4.0)
                .build(),
            budget(ApiServer, Some(1), None),
            "roll-back",
            &["availability budget exceeded"],
        ),
        row(
            "without a budget the same outage is no failure",
            serving_one_of_three().probes_failed(9, 30.0).build(),
            target(ApiServer),
            "wait-for-rollout",
            &[],
        ),
        row(
            "the controller-manager's rollout is not judged by the API's health",
            World::steady(ControllerManager, 1)
                .backup()
                .backup_serving()
                .updated()
                .at(61)
                .probes_failed(9, 30.0)
                .build(),
            budget(ControllerManager, Some(1), Some(0)),
            "wait-for-rollout",
            &[],
        ),
        row(
            "with --no-rollback an overrun stops with the backup serving",
            serving_one_of_three().probes_failed(2, 3.0).build(),
            with(budget(ApiServer, Some(1), None), |o| o.no_rollback = true),
            "failed",
            &["availability budget exceeded", "--no-rollback"],
        ),
    ]);
}

#[test]
fn without_a_budget_the_rollout_wait_does_not_poll_the_api() {
    let step = decide(
        &World::steady(ApiServer, 3)
            .backup()
            .backup_serving()
            .updated()
            .at(70)
            .build(),
        &target(ApiServer),
    );
    let wait = step.wait().expect("a wait");
    assert!(
        !wait
            .watch
            .iter()
            .any(|w| matches!(w, crate::pivot::Watch::ApiHealth))
    );
}
