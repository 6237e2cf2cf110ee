//! A Lease holder whose host tells no node: every process sees its machine's hostname, which
//! is not its node's name (nodes named by `--hostname-override`), or is one hostname shared by
//! every node of a test bed. On one control-plane node the holder runs there all the same; on
//! several it may run on any, and the hand-over reasons over all of them — never deleting a
//! Lease whose holder may be alive, and at worst leaving it to expire.

use std::time::Duration;

use super::builder::{Pod, World, t, target};
use super::{check, row};
use crate::component::Component::{ApiServer, ControllerManager, Scheduler};
use crate::observation::{ContainerState, Observation, StoppedProcess, time};
use crate::pivot::{Serving, pod_serves};

/// The hostname every process of a test bed's nodes sees.
const BED: &str = "bed";

/// The backup's pods are deleted and their processes stopped.
fn stop_backup(w: &mut World) {
    for pod in &mut w.backup_mut().daemonset.pods {
        pod.deleting_since = Some(t(70));
        pod.containers[0].state = ContainerState::Terminated {
            reason: Some("Completed".into()),
            exit_code: 0,
            finished_at: Some(t(70)),
        };
        pod.containers[0].last_exit_at = Some(t(70));
    }
}

/// One node whose machine is `vm_abc`: backup standby since `t(2)`, the real DaemonSet
/// updated, the new pod serving since `t(50)`, the backup being removed since `t(70)`, and
/// the Lease acquired at `t(40)` by a process of that machine.
fn one_node_backup_going() -> World {
    World::steady(ControllerManager, 1)
        .machine_hostname("vm_abc")
        .backup()
        .backup_serving()
        .updated()
        .new_pod("cp-1", Pod::Serving { started: 50 })
        .backup_deleting(70)
        .at(71)
        .leader("cp-1", 40)
}

#[test]
fn on_one_node_a_machine_hostname_apart_from_the_nodes_name_is_that_node() {
    check(vec![
        row(
            "the new pod's process acquired after it started: the run ends (it waited for \
             ever, then failed, when the holder's host had to be a node's name)",
            World::steady(ControllerManager, 1)
                .machine_hostname("vm_abc")
                .updated()
                .new_pod("cp-1", Pod::Serving { started: 50 })
                .at(70)
                .leader("cp-1", 60)
                .build(),
            target(ControllerManager),
            "done",
            &["led by a new process"],
        ),
        row(
            "the backup's process that holds the Lease is still running: wait for it",
            one_node_backup_going().build(),
            target(ControllerManager),
            "wait-for-backup-gone",
            &[],
        ),
        row(
            "the backup's process stopped: the Lease is handed over at once",
            {
                let mut w = one_node_backup_going();
                stop_backup(&mut w);
                w.build()
            },
            target(ControllerManager),
            "hand-over-lease",
            &[
                "vm_abc_uuid-40",
                "no kube-controller-manager process running on cp-1",
            ],
        ),
        row(
            "the old leader's process stopped mid-rollout: handed over",
            World::steady(Scheduler, 1)
                .machine_hostname("vm_abc")
                .backup()
                .backup_serving()
                .updated()
                .old_terminating("cp-1", 30)
                .real_container_stopped("cp-1")
                .at(35)
                .build(),
            target(Scheduler),
            "hand-over-lease",
            &["vm_abc_old-uuid"],
        ),
    ]);
}

/// Three nodes of a test bed whose machines are all `bed`, mid-rollout: backup standbys since
/// `t(2)`, the real DaemonSet updated, the old pods' processes (leader among them, since
/// `t(-3000)`) still running unless a row changes that.
fn bed_mid_rollout() -> World {
    World::steady(ControllerManager, 3)
        .machine_hostname(BED)
        .backup()
        .backup_serving()
        .updated()
        .at(35)
}

/// The old pods on `nodes` are Terminating and their processes stopped.
fn old_stopped(mut w: World, nodes: &[&str]) -> World {
    for node in nodes {
        w = w.old_terminating(node, 30).real_container_stopped(node);
    }
    w
}

#[test]
fn on_several_nodes_every_old_process_is_a_possible_holder_and_they_stop_together() {
    check(vec![
        row(
            "nothing is going away: the holder is alive, whichever it is",
            bed_mid_rollout().build(),
            target(ControllerManager),
            "wait-for-rollout",
            &[],
        ),
        row(
            "the rollout deletes cp-2's old pod: the holder may be it or either other old \
             process, so those stop too (the backups' standbys, started after the \
             acquisition, take over)",
            bed_mid_rollout().old_terminating("cp-2", 30).build(),
            target(ControllerManager),
            "stop-possible-lease-holder",
            &[
                "old-cp-1",
                "\"node\":\"cp-1\"",
                "its host bed names no single control-plane node",
            ],
        ),
        row(
            "each in turn: cp-1's is Terminating, cp-3's is next",
            bed_mid_rollout()
                .old_terminating("cp-2", 30)
                .old_terminating("cp-1", 30)
                .build(),
            target(ControllerManager),
            "stop-possible-lease-holder",
            &["old-cp-3"],
        ),
        row(
            "one old process stopped, the others Terminating but running: wait",
            old_stopped(bed_mid_rollout(), &["cp-2"])
                .old_terminating("cp-1", 30)
                .old_terminating("cp-3", 30)
                .build(),
            target(ControllerManager),
            "wait-for-rollout",
            &[],
        ),
        row(
            "every old process stopped: no process on any node is that old, handed over",
            old_stopped(bed_mid_rollout(), &["cp-1", "cp-2", "cp-3"]).build(),
            target(ControllerManager),
            "hand-over-lease",
            &[
                "bed_old-uuid",
                "no kube-controller-manager process running on any of cp-1, cp-2, cp-3",
            ],
        ),
        row(
            "the same with a node not Ready: its states are stale, the Lease is left to expire",
            old_stopped(bed_mid_rollout(), &["cp-1", "cp-2", "cp-3"])
                .node_not_ready("cp-3")
                .build(),
            target(ControllerManager),
            "wait-for-rollout",
            &[],
        ),
        row(
            "no standby that cannot hold the Lease (the backups' started before the \
             acquisition): nothing is deleted, the Lease is left to expire",
            bed_mid_rollout()
                .leader("cp-1", 10)
                .old_terminating("cp-2", 30)
                .build(),
            target(ControllerManager),
            "wait-for-rollout",
            &[],
        ),
    ]);
}

/// Three `bed` nodes rolled out: backup standbys since `t(2)`, new pods since `started`, the
/// backup being removed since `t(70)`; the Lease was acquired at `t(40)`.
fn bed_backup_going(started: i64) -> World {
    World::steady(ControllerManager, 3)
        .machine_hostname(BED)
        .backup()
        .backup_serving()
        .updated()
        .all_new(started)
        .backup_deleting(70)
        .at(71)
        .leader("cp-1", 40)
}

#[test]
fn on_several_nodes_the_backups_leadership_is_handed_over_when_no_new_pod_can_hold_it() {
    check(vec![
        row(
            "the new pods started after the acquisition: the holder is a backup standby, \
             wait for them to stop",
            bed_backup_going(50).build(),
            target(ControllerManager),
            "wait-for-backup-gone",
            &[],
        ),
        row(
            "the standbys stopped: handed over",
            {
                let mut w = bed_backup_going(50);
                stop_backup(&mut w);
                w.build()
            },
            target(ControllerManager),
            "hand-over-lease",
            &["bed_uuid-40", "any of cp-1, cp-2, cp-3"],
        ),
        row(
            "the backup's standbys go while every new pod started before the acquisition too, \
             so none can take over without possibly being the holder: nothing is deleted, \
             and the Lease is left to expire",
            bed_backup_going(20).build(),
            target(ControllerManager),
            "wait-for-backup-gone",
            &[],
        ),
        row(
            "the same with cp-3's new pod started after the acquisition: it can take over, so \
             the new pods that may hold the Lease stop too",
            bed_backup_going(20)
                .new_pod("cp-3", Pod::Serving { started: 50 })
                .build(),
            target(ControllerManager),
            "stop-possible-lease-holder",
            &["self-hosted-kube-controller-manager-new-cp-1"],
        ),
        row(
            "where the host is a node's name, only that node's new pod stops",
            World::steady(ControllerManager, 3)
                .backup()
                .backup_serving()
                .updated()
                .all_new(20)
                .backup_deleting(70)
                .at(71)
                .leader("cp-2", 40)
                .build(),
            target(ControllerManager),
            "stop-possible-lease-holder",
            &["self-hosted-kube-controller-manager-new-cp-2"],
        ),
    ]);
}

/// Three `bed` nodes after the pivot: new pods since `t(20)`, no backup, the Lease acquired
/// at `t(30)` and renewed at `t(40)`.
fn bed_finished() -> World {
    World::steady(ControllerManager, 3)
        .machine_hostname(BED)
        .updated()
        .all_new(20)
        .at(40)
        .leader("cp-1", 30)
}

/// The engine saw the process of `pod` on `node` stop by `t(by)`.
fn seen_stopped(mut obs: Observation, pod: &str, node: &str, by: f64) -> Observation {
    obs.stopped.push(StoppedProcess {
        pod: pod.to_string(),
        pod_uid: format!("uid-{pod}"),
        node: node.to_string(),
        started_at: t(2),
        stopped_by: time::after(t(0), Duration::from_secs_f64(by)),
    });
    obs
}

#[test]
fn on_several_nodes_the_leader_is_a_new_process_when_it_renewed_after_every_other_stopped() {
    check(vec![
        row(
            "a new pod's process ran at the acquisition, nothing else runs or stopped: done",
            bed_finished().build(),
            target(ControllerManager),
            "done",
            &["led by a new process"],
        ),
        row(
            "renewed after the backup's standbys were seen stopping: done",
            seen_stopped(bed_finished().build(), "backup-cp-1", "cp-1", 35.0),
            target(ControllerManager),
            "done",
            &[],
        ),
        row(
            "a standby seen stopping after the last renewal may be the holder: wait for the \
             next renewal",
            seen_stopped(
                bed_finished().leader_renewed(39).build(),
                "backup-cp-1",
                "cp-1",
                39.5,
            ),
            target(ControllerManager),
            "verify",
            &["waiting for a renewal that proves it alive"],
        ),
        row(
            "a backup pod still runs: the holder may be it",
            World::steady(ControllerManager, 3)
                .machine_hostname(BED)
                .backup()
                .backup_serving()
                .updated()
                .all_new(20)
                .at(40)
                .leader("cp-1", 30)
                .build(),
            target(ControllerManager),
            "remove-backup",
            &[],
        ),
        row(
            "every new pod started after the acquisition: the holder is none of them, and \
             gone, so the Lease is handed over rather than the run waiting",
            bed_finished().leader("cp-1", 10).build(),
            target(ControllerManager),
            "hand-over-lease",
            &["no kube-controller-manager process running on any of cp-1, cp-2, cp-3"],
        ),
    ]);
}

/// Three `bed` nodes mid-rollout of the kube-apiserver: cp-1's new pod started at `t(40)`, the
/// old processes on cp-2 and cp-3 renew their identities, observed at `now`. Every identity
/// Lease names `bed`, so none is placed on a node.
fn bed_apiservers(now: i64, new_serves: bool) -> Observation {
    let state = if new_serves {
        Pod::Serving { started: 40 }
    } else {
        Pod::ReadyNoIdentity { started: 40 }
    };
    World::steady(ApiServer, 3)
        .machine_hostname(BED)
        .backup()
        .updated()
        .held()
        .new_pod("cp-1", state)
        .at(now)
        .build()
}

#[test]
fn identities_that_name_no_node_count_for_every_node_together() {
    let target = target(ApiServer);
    let cases = [
        (
            "every process's holder renewed since the new one started: all serve",
            bed_apiservers(60, true),
            true,
        ),
        (
            "the old processes have not renewed since the new one started: not yet",
            bed_apiservers(42, true),
            false,
        ),
        (
            "the new process publishes nothing: two holders for three processes",
            bed_apiservers(60, false),
            false,
        ),
    ];
    let mut failures = Vec::new();
    for (case, obs, serves) in cases {
        let real = obs.real.as_ref().expect("real");
        let new = real
            .pods
            .iter()
            .find(|p| p.node.as_deref() == Some("cp-1"))
            .expect("the new pod");
        let verdict = pod_serves(&obs, &target, new);
        let counted = matches!(verdict, Ok(Serving::Identities { .. }));
        let says_why = verdict.as_ref().err().is_none_or(|why| {
            why.contains("counts once every kube-apiserver on cp-1, cp-2, cp-3 has renewed")
        });
        if counted != serves || !says_why {
            failures.push(format!("{case}: {verdict:?}"));
        }
    }
    assert!(failures.is_empty(), "\n{}", failures.join("\n"));
}

/// (case, observation, what the verification says: `None` for `Ok`, else a text of its
/// reason) for the end of a pivot on three `bed` nodes.
#[test]
fn the_verification_without_a_node_names_what_may_still_hold_the_lease() {
    let restarted = |exit: Option<i64>, now: i64| {
        let mut w = bed_finished().at(now).leader("cp-1", 30);
        for pod in &mut w.real_mut().pods {
            if pod.node.as_deref() == Some("cp-2") {
                pod.containers[0].restart_count = 1;
                pod.containers[0].last_exit_at = exit.map(t);
            }
        }
        w.build()
    };
    let cases: [(&str, Observation, Option<&str>); 6] = [
        ("nothing else ran", bed_finished().build(), None),
        (
            "a backup pod runs",
            World::steady(ControllerManager, 3)
                .machine_hostname(BED)
                .backup()
                .backup_serving()
                .updated()
                .all_new(20)
                .at(40)
                .leader("cp-1", 30)
                .build(),
            Some("may be the process of pod temp-upgrade-self-hosted-kube-controller-manager-cp-1"),
        ),
        (
            "no new pod's process ran at the acquisition",
            bed_finished().leader("cp-1", 10).build(),
            Some("none of them ran then"),
        ),
        (
            "a new pod's earlier process exited at a time the kubelet does not report",
            restarted(None, 40),
            Some("at a time not reported"),
        ),
        (
            "it exited in second 39, the Lease was renewed at 40.0: within that second",
            restarted(Some(39), 40),
            Some("waiting for a renewal"),
        ),
        (
            "renewed at 41, after that second: a live holder, a new pod's",
            restarted(Some(39), 41),
            None,
        ),
    ];
    let target = target(ControllerManager);
    let mut failures = Vec::new();
    for (case, obs, expected) in cases {
        let real = obs.real.as_ref().expect("real");
        let verdict = crate::pivot::leader_is_new_process(&obs, &target, real);
        let ok = match (&verdict, expected) {
            (Ok(()), None) => true,
            (Err(why), Some(text)) => why.contains(text),
            _ => false,
        };
        if !ok {
            failures.push(format!("{case}: {verdict:?}"));
        }
    }
    assert!(failures.is_empty(), "\n{}", failures.join("\n"));
}
