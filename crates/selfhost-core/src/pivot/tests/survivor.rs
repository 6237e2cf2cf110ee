//! The sole-candidate exception of the Lease hand-over must not press a holder that survived
//! it. On one node, after crash-restarts, the kube-scheduler's holder — alive, the one process
//! left — creates its Lease again each time it finds it gone, as client-go does; deleting it
//! again and again would end the run as stuck (exit 4).

use std::time::Duration;

use super::builder::{Pod, World, t, target};
use super::{check, decide, row};
use crate::component::Component::ControllerManager;
use crate::observation::{ContainerState, Observation, StoppedProcess, time};
use crate::pivot::LEADER_AFTER_HAND_OVER;

/// One node: the backup is being deleted since `t(70)` and its process stopped in that
/// second; the new pod serves since `t(50)`; the Lease names `cp-1_uuid-70`, acquired at
/// 70 s + `acquired_ms` and renewed at 70 s + `renewed_ms`.
fn backup_gone_lease(acquired_ms: u64, renewed_ms: u64) -> Observation {
    let mut w = World::steady(ControllerManager, 1)
        .backup()
        .backup_serving()
        .updated()
        .new_pod("cp-1", Pod::Serving { started: 50 })
        .backup_deleting(70)
        .at(71)
        .leader("cp-1", 70);
    for pod in &mut w.backup_mut().daemonset.pods {
        pod.deleting_since = Some(t(70));
        pod.containers[0].state = ContainerState::Terminated {
            reason: Some("Completed".into()),
            exit_code: 0,
            finished_at: Some(t(70)),
        };
    }
    if let Some(lease) = w.obs.leader_lease.as_mut() {
        lease.acquire_time = Some(time::after(t(70), Duration::from_millis(acquired_ms)));
        lease.renew_time = Some(time::after(t(70), Duration::from_millis(renewed_ms)));
    }
    w.build()
}

/// One node, no backup: the new pod serves since `t(50)`; the old pod is still Terminating,
/// its container waiting (it exited at `t(60)` when the API went away, and a terminating
/// pod is not restarted); the new pod's process acquired the Lease at `t(65)`.
fn old_pod_waiting_since_its_exit() -> Observation {
    let new = World::steady(ControllerManager, 1)
        .updated()
        .new_pod("cp-1", Pod::Serving { started: 50 })
        .build()
        .real
        .expect("real")
        .pods;
    let mut w = World::steady(ControllerManager, 1)
        .updated()
        .old_terminating("cp-1", 30)
        .at(75)
        .leader("cp-1", 65);
    for pod in &mut w.real_mut().pods {
        let container = &mut pod.containers[0];
        container.state = ContainerState::Waiting {
            reason: Some("CrashLoopBackOff".into()),
            message: None,
        };
        container.last_exit_at = Some(t(60));
        pod.ready = false;
    }
    w.real_mut().pods.extend(new);
    w.build()
}

#[test]
fn a_holder_that_survived_a_hand_over_is_not_pressed_again() {
    let target = target(ControllerManager);
    let cases = [
        (
            "the backup's standby acquired in the second its pod stopped and renewed since: \
             it may be the stopped process, and the new pod's is the only one left",
            backup_gone_lease(200, 400),
            true,
        ),
        (
            "the Lease was created again in that second and never renewed since: its holder \
             wrote it after the hand-over, so it is alive",
            backup_gone_lease(600, 600),
            false,
        ),
        (
            "the old pod's container waits since it exited at 60 s, before the acquisition \
             at 65 s: the process that stopped cannot be the holder, whatever the second",
            old_pod_waiting_since_its_exit(),
            false,
        ),
    ];
    let mut failures = Vec::new();
    for (case, obs, hand_over) in cases {
        let step = decide(&obs, &target);
        if (step.name() == "hand-over-lease") != hand_over {
            failures.push(format!("{case}: {}", step.description()));
        }
    }
    assert!(failures.is_empty(), "\n{}", failures.join("\n"));
}

/// One node, no backup any more: the new pod, created by our update, started in second 40;
/// the Lease was acquired at 40.6 s — by that pod's process, or by the backup's, gone since
/// — and renewed at 40 s + `renewed_ms`.
fn done_but_acquired_in_the_new_pods_second(renewed_ms: u64) -> Observation {
    let mut w = World::steady(ControllerManager, 1)
        .updated()
        .new_pod("cp-1", Pod::Serving { started: 40 })
        .at(45)
        .leader("cp-1", 40);
    if let Some(lease) = w.obs.leader_lease.as_mut() {
        lease.acquire_time = Some(time::after(t(40), Duration::from_millis(600)));
        lease.renew_time = Some(time::after(t(40), Duration::from_millis(renewed_ms)));
    }
    w.build()
}

/// [`done_but_acquired_in_the_new_pods_second`] renewed at 40.9 s, in a run that deleted the
/// Lease of uid `deleted` to hand it over; the Lease now shown has uid `uid-lease`.
fn after_our_hand_over(deleted: &str) -> Observation {
    let mut obs = done_but_acquired_in_the_new_pods_second(900);
    obs.handed_over = vec![deleted.to_string()];
    obs
}

#[test]
fn a_lease_created_again_after_our_own_hand_over_is_its_survivors() {
    // The one-node benchmark's profile: after the backup went, the engine handed the Lease
    // over; the new pod's process created it again in the second it started, and was pressed
    // after each renewal until that second was over (five presses, 0.35 s).
    let mut stopped_since = after_our_hand_over("uid-earlier");
    stopped_since.stopped.push(StoppedProcess {
        pod: "backup-cp-1".into(),
        pod_uid: "uid-backup-cp-1".into(),
        node: "cp-1".into(),
        started_at: t(40),
        stopped_by: time::after(t(40), Duration::from_millis(800)),
    });
    let mut recorded = after_our_hand_over("uid-earlier");
    record(&mut recorded, RECORD);
    check(vec![
        row(
            "created again after the Lease we deleted: acquired while we watched, and no \
             process there stopped since: its holder is the new pod's process; record that \
             for a later run, which could not see it",
            after_our_hand_over("uid-earlier"),
            target(ControllerManager),
            "record-leader",
            &[
                LEADER_AFTER_HAND_OVER,
                RECORD,
                "could not tell it from a process gone",
            ],
        ),
        row(
            "the same, recorded: done",
            recorded,
            target(ControllerManager),
            "done",
            &[],
        ),
        row(
            "the cache still shows the very Lease we deleted: nothing is known of it yet",
            after_our_hand_over("uid-lease"),
            target(ControllerManager),
            "hand-over-lease",
            &["the only one that can hold it next"],
        ),
        row(
            "created again after our hand-over, but a process there was seen stopping since \
             the acquisition: that one may have been the holder",
            stopped_since,
            target(ControllerManager),
            "hand-over-lease",
            &["the only one that can hold it next"],
        ),
    ]);
}

/// What [`LEADER_AFTER_HAND_OVER`] says of the Lease of [`after_our_hand_over`].
const RECORD: &str = "uid-lease cp-1_uuid-40 2027-01-01T00:00:40.6Z";

/// The real DaemonSet carries `value` under [`LEADER_AFTER_HAND_OVER`].
fn record(obs: &mut Observation, value: &str) {
    if let Some(real) = obs.real.as_mut() {
        real.annotations
            .insert(LEADER_AFTER_HAND_OVER.to_string(), value.to_string());
    }
}

#[test]
fn a_later_run_trusts_the_record_of_the_run_that_saw_the_lease_created_again() {
    // `a_second_run_after_success_changes_nothing`: without the record, the next run hands
    // the live leader's Lease over once more.
    let later_run = |value: &str| {
        let mut obs = done_but_acquired_in_the_new_pods_second(900);
        record(&mut obs, value);
        obs
    };
    check(vec![
        row(
            "the record names this Lease, holder and acquisition: done, nothing written",
            later_run(RECORD),
            target(ControllerManager),
            "done",
            &[],
        ),
        row(
            "the record names another acquisition: the doubt stands",
            later_run("uid-lease cp-1_uuid-40 2027-01-01T00:00:30Z"),
            target(ControllerManager),
            "hand-over-lease",
            &["the only one that can hold it next"],
        ),
        row(
            "the record names another Lease object: the doubt stands",
            later_run("uid-other cp-1_uuid-40 2027-01-01T00:00:40.6Z"),
            target(ControllerManager),
            "hand-over-lease",
            &["the only one that can hold it next"],
        ),
    ]);
}

#[test]
fn a_run_does_not_end_while_a_hand_over_waits_for_the_holders_renewal() {
    // Ending here would leave the question to the next run, which would hand a live leader's
    // Lease over on a run with nothing to do (`a_second_run_after_success_changes_nothing`).
    check(vec![
        row(
            "acquired and not renewed since: wait, do not end",
            done_but_acquired_in_the_new_pods_second(600),
            target(ControllerManager),
            "verify",
            &["not renewed since"],
        ),
        row(
            "renewed since, still acquired in the ambiguous second: hand over once more",
            done_but_acquired_in_the_new_pods_second(900),
            target(ControllerManager),
            "hand-over-lease",
            &["the only one that can hold it next"],
        ),
    ]);
}
