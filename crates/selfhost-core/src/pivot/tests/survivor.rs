//! Campaign finding J (docs/reliability.md): the sole-candidate exception of the Lease
//! hand-over pressed a holder that had survived it. On one node, after crash-restarts, the
//! kube-scheduler's Lease was deleted five times in a row and each time its holder — alive,
//! the one process left — created it again, as client-go does when it finds its Lease gone;
//! the run stopped as stuck (exit 4).

use std::time::Duration;

use super::builder::{Pod, World, t, target};
use super::{check, decide, row};
use crate::component::Component::ControllerManager;
use crate::observation::{ContainerState, Observation, time};

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
