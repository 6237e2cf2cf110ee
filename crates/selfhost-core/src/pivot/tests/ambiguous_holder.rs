//! Leader hand-off when the Lease's holder is one of two processes on its node (the backup's
//! standby and the real pod's): the engine stops every process that may hold the Lease once
//! one of them goes, and hands the Lease over once none runs — never while one may.

use std::time::Duration;

use super::builder::{Pod, World, t, target};
use super::{check, row};
use crate::component::Component::{ControllerManager, Scheduler};
use crate::observation::{StoppedProcess, time};

const BACKUP_POD: &str = "temp-upgrade-self-hosted-kube-controller-manager";
const NEW_POD: &str = "self-hosted-kube-controller-manager-new";

/// The engine saw the process of `pod` on `node` (started at `started`) stopped by `by`.
fn seen_stopped(w: &mut World, pod: &str, node: &str, started: i64, by: Duration) {
    w.obs.stopped.push(StoppedProcess {
        pod: format!("{pod}-{node}"),
        pod_uid: format!("uid-{pod}-{node}"),
        node: node.to_string(),
        started_at: t(started),
        stopped_by: time::after(t(0), by),
    });
}

fn secs(s: f64) -> Duration {
    Duration::from_secs_f64(s)
}

/// Three nodes, rolled out: new pods since `t(20)`, backup standbys since `t(2)`; the
/// controller-manager Lease was acquired at `t(40)` by a process on cp-1, which may be the
/// backup's or the new pod's.
fn rolled_out() -> World {
    World::steady(ControllerManager, 3)
        .backup()
        .backup_serving()
        .updated()
        .all_new(20)
        .leader("cp-1", 40)
}

/// The backup removed since `t(70)`: its pods and the new pod on cp-1 gone, and the engine saw
/// the backup's and the new pod's processes on cp-1 stop by `t(71)`.
fn both_gone_and_seen() -> World {
    let mut w = rolled_out().backup_deleting(70).at(72);
    w.backup_mut().daemonset.pods.clear();
    w = w.real_pods_gone("cp-1");
    seen_stopped(&mut w, BACKUP_POD, "cp-1", 2, secs(71.0));
    seen_stopped(&mut w, NEW_POD, "cp-1", 20, secs(71.0));
    w
}

#[test]
fn when_the_backup_goes_the_new_pod_next_to_a_possible_holder_stops_too() {
    check(vec![
        row(
            "the backup is removed while its standby on cp-1 may hold the Lease: the new pod on \
             cp-1, which may hold it too, is deleted as well",
            rolled_out().backup_deleting(70).at(71).build(),
            target(ControllerManager),
            "stop-possible-lease-holder",
            &[
                "self-hosted-kube-controller-manager-new-cp-1",
                "\"node\":\"cp-1\"",
                "cannot be told apart",
            ],
        ),
        row(
            "once it is Terminating, nothing more is deleted: wait for both to stop",
            {
                let mut w = rolled_out().backup_deleting(70).at(71);
                for pod in &mut w.real_mut().pods {
                    if pod.node.as_deref() == Some("cp-1") {
                        pod.deleting_since = Some(t(71));
                    }
                }
                w.build()
            },
            target(ControllerManager),
            "wait-for-backup-gone",
            &[],
        ),
        row(
            "both processes seen stopped and their pods gone: the node has no pod left, but the \
             engine saw ours stop there, so the Lease is handed over",
            both_gone_and_seen().build(),
            target(ControllerManager),
            "hand-over-lease",
            &[
                "cp-1_uuid-40",
                "no kube-controller-manager process running on cp-1",
            ],
        ),
        row(
            "the same pods gone without the engine having seen them stop: nothing is known of \
             cp-1, the Lease is left to expire",
            {
                let mut w = both_gone_and_seen();
                w.obs.stopped.clear();
                w.build()
            },
            target(ControllerManager),
            "wait-for-backup-gone",
            &[],
        ),
        row(
            "the holder acquired after the backup's standby on cp-1 started: it is the new \
             pod's process, alive, and nothing is deleted",
            {
                let mut w = rolled_out().backup_deleting(70).at(71);
                for pod in &mut w.backup_mut().daemonset.pods {
                    if pod.node.as_deref() == Some("cp-1") {
                        pod.containers[0].state = crate::observation::ContainerState::Running {
                            started_at: Some(t(50)),
                        };
                    }
                }
                w.build()
            },
            target(ControllerManager),
            "wait-for-backup-gone",
            &[],
        ),
        row(
            "no standby runs on another Ready node to take the Lease and recreate the pod: \
             nothing is deleted",
            rolled_out()
                .backup_deleting(70)
                .node_not_ready("cp-2")
                .node_not_ready("cp-3")
                .at(71)
                .build(),
            target(ControllerManager),
            "wait-for-backup-gone",
            &[],
        ),
        row(
            "while neither goes away the holder is alive, whichever it is: nothing is deleted",
            rolled_out().at(71).build(),
            target(ControllerManager),
            "remove-backup",
            &[],
        ),
    ]);
}

/// Three nodes mid-rollout: cp-2's old process and its backup standby (since `t(2)`) both ran
/// when a process on cp-2 acquired the Lease at `t(10)`.
fn mid_rollout() -> World {
    World::steady(ControllerManager, 3)
        .backup()
        .backup_serving()
        .updated()
        .leader("cp-2", 10)
        .at(35)
}

#[test]
fn when_the_rollout_deletes_an_old_pod_that_may_lead_the_backup_standby_beside_it_stops_too() {
    check(vec![
        row(
            "the old pod on cp-2 is Terminating: the backup's pod there is deleted as well",
            mid_rollout().old_terminating("cp-2", 30).build(),
            target(ControllerManager),
            "stop-possible-lease-holder",
            &["temp-upgrade-self-hosted-kube-controller-manager-cp-2"],
        ),
        row(
            "the old pod runs on: nothing",
            mid_rollout().build(),
            target(ControllerManager),
            "wait-for-rollout",
            &[],
        ),
        row(
            "both Terminating: wait",
            mid_rollout()
                .old_terminating("cp-2", 30)
                .backup_pod_terminating("cp-2", 30)
                .build(),
            target(ControllerManager),
            "wait-for-rollout",
            &[],
        ),
        row(
            "both gone, seen stopping after the acquisition: hand over",
            {
                let mut w = mid_rollout().real_pods_gone("cp-2");
                w.backup_mut()
                    .daemonset
                    .pods
                    .retain(|p| p.node.as_deref() != Some("cp-2"));
                seen_stopped(&mut w, BACKUP_POD, "cp-2", 2, secs(34.0));
                seen_stopped(
                    &mut w,
                    "self-hosted-kube-controller-manager-old",
                    "cp-2",
                    -3600,
                    secs(34.0),
                );
                w.build()
            },
            target(ControllerManager),
            "hand-over-lease",
            &["cp-2_uuid-10"],
        ),
        row(
            "the scheduler alike",
            World::steady(Scheduler, 3)
                .backup()
                .backup_serving()
                .updated()
                .leader("cp-2", 10)
                .at(35)
                .old_terminating("cp-2", 30)
                .build(),
            target(Scheduler),
            "stop-possible-lease-holder",
            &["temp-upgrade-self-hosted-kube-scheduler-cp-2"],
        ),
    ]);
}

/// Two nodes: the backup's standby on cp-1 acquired at 40.2 s and the engine saw its process
/// stop by `stopped_by`; cp-1's new pod started in second 40 (whole seconds), so it may have
/// acquired as well; cp-2's new pod is a standby.
fn same_second(stopped_by: f64) -> World {
    let mut w = World::steady(ControllerManager, 2)
        .backup()
        .backup_serving()
        .updated()
        .new_pod("cp-1", Pod::Serving { started: 40 })
        .new_pod("cp-2", Pod::Serving { started: 20 })
        .leader("cp-1", 40)
        .backup_deleting(70)
        .at(75);
    if let Some(lease) = w.obs.leader_lease.as_mut() {
        lease.acquire_time = Some(time::after(t(40), Duration::from_millis(200)));
    }
    w.backup_mut().daemonset.pods.clear();
    seen_stopped(&mut w, BACKUP_POD, "cp-1", 2, secs(stopped_by));
    w
}

#[test]
fn a_new_pod_started_in_the_second_of_the_acquisition_is_stopped_only_if_the_other_possible_holder_stopped_since()
 {
    check(vec![
        row(
            "the backup's process stopped after the acquisition: the new pod on cp-1 may hold \
             the Lease or the stopped process may: the new pod is deleted",
            same_second(70.5).build(),
            target(ControllerManager),
            "stop-possible-lease-holder",
            &["self-hosted-kube-controller-manager-new-cp-1"],
        ),
        row(
            "then, its process seen stopped as well, the Lease is handed over",
            {
                let mut w = same_second(70.5).real_pods_gone("cp-1");
                seen_stopped(&mut w, NEW_POD, "cp-1", 40, secs(72.0));
                w.build()
            },
            target(ControllerManager),
            "hand-over-lease",
            &["cp-1_uuid-40"],
        ),
        row(
            "the backup's process was seen stopped before the acquisition (40.1 s): the holder \
             is the new pod's process, alive: nothing is deleted",
            same_second(40.1).build(),
            target(ControllerManager),
            "wait-for-backup-gone",
            &[],
        ),
        row(
            "no standby on another Ready node: nothing is deleted, the Lease left to expire",
            same_second(70.5).node_not_ready("cp-2").build(),
            target(ControllerManager),
            "wait-for-backup-gone",
            &[],
        ),
    ]);
}
