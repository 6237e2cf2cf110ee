//! Leader hand-off: a Lease is handed over only when its holder's process is confirmed gone.

use std::time::Duration;

use super::builder::{Pod, World, t, target};
use super::{check, row};
use crate::component::Component::{ControllerManager, Scheduler};
use crate::observation::time;
use crate::pivot::UPDATE_STARTED_AT;

/// One node: the backup's standby acquired the Lease at 40.2 s, the new pod (started in
/// second 40 by the kubelet's whole-second clock) was created by our update at
/// `40 s + update_ms`, and the backup's pods are deleted and their processes stopped.
fn same_second_as_the_new_pod(update_ms: u64) -> crate::observation::Observation {
    let mut w = World::steady(ControllerManager, 1)
        .backup()
        .backup_serving()
        .updated()
        .new_pod("cp-1", Pod::Serving { started: 40 })
        .leader("cp-1", 40)
        .backup_deleting(70)
        .at(75);
    let after = |ms| time::after(t(40), Duration::from_millis(ms));
    w.real_mut()
        .annotations
        .insert(UPDATE_STARTED_AT.into(), time::format(after(update_ms)));
    if let Some(lease) = w.obs.leader_lease.as_mut() {
        lease.acquire_time = Some(after(200));
    }
    stop_backup(&mut w);
    w.build()
}

/// The backup's pods are deleted and their processes stopped.
fn stop_backup(w: &mut World) {
    for pod in &mut w.backup_mut().daemonset.pods {
        pod.deleting_since = Some(t(70));
        pod.containers[0].state = crate::observation::ContainerState::Terminated {
            reason: Some("Completed".into()),
            exit_code: 0,
            finished_at: None,
        };
    }
}

/// One node; backup standby since `t(2)`; real DaemonSet updated; the old real pod's process
/// on cp-1 leads since `t(-3000)`.
fn updated(nodes: usize) -> World {
    World::steady(ControllerManager, nodes)
        .backup()
        .backup_serving()
        .updated()
        .at(35)
}

#[test]
fn the_lease_is_handed_over_only_when_its_holder_is_gone() {
    check(vec![
        row(
            "the old leader still runs",
            updated(1).build(),
            target(ControllerManager),
            "wait-for-rollout",
            &[],
        ),
        row(
            "the old leader is Terminating but its process runs",
            updated(1).old_terminating("cp-1", 30).build(),
            target(ControllerManager),
            "wait-for-rollout",
            &[],
        ),
        row(
            "the old leader's process stopped",
            updated(1)
                .old_terminating("cp-1", 30)
                .real_container_stopped("cp-1")
                .build(),
            target(ControllerManager),
            "hand-over-lease",
            &[
                "\"resource_version\":\"500\"",
                "cp-1_old-uuid",
                "no kube-controller-manager process running on cp-1 is that old",
            ],
        ),
        row(
            "the old leader's pod is gone",
            updated(1).real_pods_gone("cp-1").build(),
            target(ControllerManager),
            "hand-over-lease",
            &["uid-lease"],
        ),
        row(
            "the Lease already expired",
            updated(1).real_pods_gone("cp-1").leader_renewed(10).build(),
            target(ControllerManager),
            "wait-for-rollout",
            &[],
        ),
        row(
            "the holder's node is not Ready",
            updated(1)
                .real_pods_gone("cp-1")
                .node_not_ready("cp-1")
                .build(),
            target(ControllerManager),
            "wait-for-rollout",
            &[],
        ),
        row(
            "the backup's standby took over: it may be the holder",
            updated(1).real_pods_gone("cp-1").leader("cp-1", 5).build(),
            target(ControllerManager),
            "wait-for-rollout",
            &[],
        ),
        row(
            "a holder on a node without our pods may be anything",
            {
                let mut w = updated(3).real_pods_gone("cp-3").leader("cp-3", -100);
                w.backup_mut()
                    .daemonset
                    .pods
                    .retain(|p| p.node.as_deref() != Some("cp-3"));
                w.build()
            },
            target(ControllerManager),
            "wait-for-rollout",
            &[],
        ),
        row(
            "scheduler too",
            World::steady(Scheduler, 1)
                .backup()
                .backup_serving()
                .updated()
                .real_pods_gone("cp-1")
                .at(35)
                .build(),
            target(Scheduler),
            "hand-over-lease",
            &["kube-scheduler"],
        ),
    ]);
}

#[test]
fn the_backups_leadership_is_handed_to_the_new_pods_when_it_goes() {
    let going = || {
        World::steady(ControllerManager, 1)
            .backup()
            .backup_serving()
            .updated()
            .new_pod("cp-1", Pod::Serving { started: 50 })
            .leader("cp-1", 40)
            .backup_deleting(70)
            .at(75)
    };
    check(vec![
        row(
            "the backup's process still runs",
            going().build(),
            target(ControllerManager),
            "wait-for-backup-gone",
            &[],
        ),
        row(
            "the backup's process stopped",
            {
                let mut w = going();
                stop_backup(&mut w);
                w.build()
            },
            target(ControllerManager),
            "hand-over-lease",
            &["cp-1_uuid-40"],
        ),
        row(
            "the backup's standby acquired at 40.2 s, the new pod started in second 40 but \
             was created by our update at 40.36 s: the holder is the backup's, and gone",
            same_second_as_the_new_pod(360),
            target(ControllerManager),
            "hand-over-lease",
            &["cp-1_uuid-40"],
        ),
        row(
            "the same when our update came before the acquisition: the new pod may hold it, \
             but the backup's process that may have held it stopped since, and the new pod's \
             is the only process left: it alone can hold the Lease next",
            same_second_as_the_new_pod(100),
            target(ControllerManager),
            "hand-over-lease",
            &["the only one that can hold it next"],
        ),
        row(
            "the same with a second node: the other node's process could take the Lease from \
             the new pod, if that holds it",
            {
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
                stop_backup(&mut w);
                w.build()
            },
            target(ControllerManager),
            "wait-for-backup-gone",
            &[],
        ),
        row(
            "a holder that acquired after the backup's process stopped (the new pod's, which \
             survived our hand-over) is not pressed again",
            {
                let mut w = going().leader("cp-1", 72);
                stop_backup(&mut w);
                for pod in &mut w.backup_mut().daemonset.pods {
                    if let crate::observation::ContainerState::Terminated { finished_at, .. } =
                        &mut pod.containers[0].state
                    {
                        *finished_at = Some(t(70));
                    }
                }
                w.build()
            },
            target(ControllerManager),
            "wait-for-backup-gone",
            &[],
        ),
        row(
            "nor once the backup's pods are gone, when its deletion came before the acquisition",
            {
                let mut w = going().leader("cp-1", 72);
                w.backup_mut().daemonset.pods.clear();
                w.build()
            },
            target(ControllerManager),
            "wait-for-backup-gone",
            &[],
        ),
        row(
            "but the backup deleted within the second of the acquisition, its pods gone, \
             leaves the new pod's process the only one: hand over",
            {
                let mut w = going().leader("cp-1", 70);
                w.backup_mut().daemonset.pods.clear();
                w.build()
            },
            target(ControllerManager),
            "hand-over-lease",
            &["the only one that can hold it next"],
        ),
        row(
            "the backup and its pods already gone when the engine looks, the new pod's process \
             (the only one) started in the second the holder acquired: it may hold the Lease \
             or the backup's vanished process may, so hand it over",
            {
                let mut w = World::steady(ControllerManager, 1)
                    .backup()
                    .backup_serving()
                    .updated()
                    .new_pod("cp-1", Pod::Serving { started: 40 })
                    .leader("cp-1", 40)
                    .backup_gone()
                    .at(75);
                if let Some(lease) = w.obs.leader_lease.as_mut() {
                    lease.acquire_time = Some(time::after(t(40), Duration::from_millis(200)));
                }
                w.build()
            },
            target(ControllerManager),
            "hand-over-lease",
            &["the only one that can hold it next"],
        ),
        row(
            "then the new pod leads",
            going().backup_gone().leader("cp-1", 80).at(82).build(),
            target(ControllerManager),
            "done",
            &[],
        ),
    ]);
}

/// Two nodes: the backup's standby on cp-1 acquired at 40.2 s and its process has stopped;
/// cp-1's new pod started in second 40 (whole seconds), and the engine knows it started no
/// earlier than `40 s + known_ms` (its own write made the pod, as a static manifest it wrote
/// does in a conversion). cp-2's pod could take the Lease too, so only that knowledge can
/// rule the new pod out as the holder.
fn known_start_after_the_acquisition(known_ms: u64) -> crate::observation::Observation {
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
    stop_backup(&mut w);
    let mut obs = w.build();
    let new_pod = obs
        .real
        .as_ref()
        .and_then(|real| {
            real.pods.iter().find(|p| {
                p.node.as_deref() == Some("cp-1")
                    && p.process_started_at("kube-controller-manager") == Some(t(40))
            })
        })
        .and_then(|p| p.uid.clone())
        .expect("the new pod on cp-1");
    obs.known_starts.push(crate::observation::KnownStart {
        pod_uid: new_pod,
        not_before: time::after(t(40), Duration::from_millis(known_ms)),
    });
    obs
}

#[test]
fn a_start_the_engine_knows_to_the_millisecond_tells_the_holder_apart() {
    check(vec![
        row(
            "the new pod was made after the acquisition: the holder was the backup's \
             process, which stopped, so the Lease is handed over though cp-2 could take it",
            known_start_after_the_acquisition(500),
            target(ControllerManager),
            "hand-over-lease",
            &[
                "cp-1_uuid-40",
                "no kube-controller-manager process running on cp-1 is that old",
            ],
        ),
        row(
            "made before the acquisition: the new pod may hold the Lease, and cp-2's process \
             could take it from it: left alone",
            known_start_after_the_acquisition(100),
            target(ControllerManager),
            "wait-for-backup-gone",
            &[],
        ),
    ]);
}
