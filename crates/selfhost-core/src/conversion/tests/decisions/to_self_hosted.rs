//! Towards self-hosted: the hand-over step by step, and its undoing after a failure (with
//! port sharing and without).

use super::{at, daemonset, fresh, pod, running, step, waiting};
use crate::conversion::decide::{ConvertStep, Direction, Mode, NodeComponent, next_step};
use crate::observation::ContainerState;

#[test]
fn to_self_hosted_table() {
    let with = |f: &dyn Fn(&mut NodeComponent)| {
        let mut obs = fresh();
        f(&mut obs);
        obs
    };
    let ds_here = |state: ContainerState, restarts: i32| {
        move |o: &mut NodeComponent| {
            o.daemonset = Some(daemonset(vec![pod("ds-pod", state.clone(), restarts)]));
            o.daemonset_gated = true;
            o.gated_nodes = vec!["cp-1".into()];
        }
    };
    let rows: Vec<(&str, NodeComponent, &str)> = vec![
        (
            "nothing done: create the DaemonSet",
            fresh(),
            "create-daemonset",
        ),
        (
            "a DaemonSet someone else made is gated first",
            with(&|o| o.daemonset = Some(daemonset(vec![]))),
            "gate-daemonset",
        ),
        (
            "gated DaemonSet, node not labelled",
            with(&|o| {
                o.daemonset = Some(daemonset(vec![]));
                o.daemonset_gated = true;
            }),
            "label-node",
        ),
        (
            "pod Ready but not serving by identity: wait",
            with(&ds_here(running(), 0)),
            "wait",
        ),
        (
            "pod serves beside the static pod: move the manifest",
            with(&|o| {
                ds_here(running(), 0)(o);
                o.daemonset_pod_serving = Ok(());
            }),
            "move-manifest-aside",
        ),
        (
            "it serves, but the node's checkpointer keeps no checkpoint of it yet: a power cut \
             after the move would leave neither pod to start, so wait",
            with(&|o| {
                ds_here(running(), 0)(o);
                o.daemonset_pod_serving = Ok(());
                o.checkpoint_kept = Some(Err("soaking".into()));
            }),
            "wait",
        ),
        (
            "it serves and is kept: move the manifest",
            with(&|o| {
                ds_here(running(), 0)(o);
                o.daemonset_pod_serving = Ok(());
                o.checkpoint_kept = Some(Ok(()));
            }),
            "move-manifest-aside",
        ),
        (
            "without port sharing a pod that has not started waits",
            with(&|o| {
                ds_here(waiting("ContainerCreating"), 0)(o);
                o.static_permits_port_sharing = false;
            }),
            "wait",
        ),
        (
            "without port sharing a crash-looping pod has its image: the static pod \
             restarts with port sharing",
            with(&|o| {
                ds_here(waiting("CrashLoopBackOff"), 1)(o);
                o.static_permits_port_sharing = false;
                o.mirror_permits_port_sharing = false;
            }),
            "add-port-sharing",
        ),
        (
            "port sharing added, the old static pod still runs: wait",
            with(&|o| {
                ds_here(waiting("CrashLoopBackOff"), 1)(o);
                o.static_port_sharing_added = true;
                o.mirror_permits_port_sharing = false;
            }),
            "wait",
        ),
        (
            "port sharing added and the DaemonSet pod serves beside: move",
            with(&|o| {
                ds_here(running(), 1)(o);
                o.static_port_sharing_added = true;
                o.daemonset_pod_serving = Ok(());
            }),
            "move-manifest-aside",
        ),
        (
            "an image that cannot be pulled fails before the hand-over",
            with(&ds_here(waiting("ImagePullBackOff"), 0)),
            "fail",
        ),
        (
            "a wait past the deadline fails",
            with(&|o| {
                ds_here(running(), 0)(o);
                o.now = at(101);
            }),
            "fail",
        ),
        (
            "handed over, mirror pod still there: wait",
            with(&|o| {
                ds_here(running(), 0)(o);
                o.manifest_on_disk = false;
                o.manifest_in_backup = true;
                o.daemonset_pod_serving = Ok(());
            }),
            "wait",
        ),
        (
            "handed over and serving alone: done",
            with(&|o| {
                ds_here(running(), 0)(o);
                o.manifest_on_disk = false;
                o.manifest_in_backup = true;
                o.mirror = None;
                o.daemonset_pod_serving = Ok(());
            }),
            "done",
        ),
        (
            "neither on disk nor in the cluster: refuse",
            with(&|o| {
                o.manifest_on_disk = false;
                o.mirror = None;
            }),
            "refuse",
        ),
    ];
    for (case, obs, expected) in rows {
        assert_eq!(step(Direction::ToSelfHosted, &obs), expected, "{case}");
    }
}

#[test]
fn a_failed_hand_over_is_undone_in_order() {
    let reason = Mode::Restore {
        reason: "boom".into(),
    };
    let mut obs = fresh();
    obs.daemonset = Some(daemonset(vec![pod(
        "ds-pod",
        waiting("CrashLoopBackOff"),
        3,
    )]));
    obs.daemonset_gated = true;
    obs.gated_nodes = vec!["cp-1".into()];
    obs.manifest_on_disk = false;
    obs.manifest_in_backup = true;
    obs.mirror = None;
    obs.mirror_serving = Err("no mirror pod".into());
    let mut seen = Vec::new();
    for _ in 0..6 {
        let step = next_step(Direction::ToSelfHosted, &reason, &obs);
        seen.push(step.name());
        match step {
            ConvertStep::RestoreManifest => obs.manifest_on_disk = true,
            ConvertStep::UnlabelNode { .. } => obs.gated_nodes.clear(),
            ConvertStep::Wait { .. } => {
                // The DaemonSet controller retires the pod, the kubelet restarts the
                // static pod.
                obs.daemonset = Some(daemonset(vec![]));
                obs.mirror_serving = Ok(());
            }
            ConvertStep::DeleteDaemonSet => obs.daemonset = None,
            ConvertStep::RolledBack { .. } => break,
            other => panic!("unexpected {other:?}"),
        }
    }
    assert_eq!(
        seen,
        [
            "restore-manifest",
            "unlabel-node",
            "wait",
            "delete-daemonset",
            "rolled-back"
        ]
    );
}

/// Undoing a hand-over whose static pod did not share its port: the port-sharing rewrite
/// first (written again if the manifest was moved aside), so that the static pod serves
/// beside the DaemonSet pod; the original back only once that pod has gone.
#[test]
fn a_hand_over_without_port_sharing_is_undone_without_a_second_gap_first() {
    let reason = Mode::Restore {
        reason: "boom".into(),
    };
    for moved_aside in [true, false] {
        let mut obs = fresh();
        obs.daemonset = Some(daemonset(vec![pod("ds-pod", running(), 1)]));
        obs.daemonset_gated = true;
        obs.gated_nodes = vec!["cp-1".into()];
        obs.manifest_in_backup = true;
        if moved_aside {
            obs.manifest_on_disk = false;
            obs.static_permits_port_sharing = false;
            obs.mirror = None;
            obs.mirror_serving = Err("no mirror pod".into());
        } else {
            obs.static_port_sharing_added = true;
        }
        let mut seen = Vec::new();
        for _ in 0..10 {
            let step = next_step(Direction::ToSelfHosted, &reason, &obs);
            seen.push(step.name());
            match step {
                ConvertStep::AddPortSharing => {
                    obs.manifest_on_disk = true;
                    obs.static_permits_port_sharing = true;
                    obs.static_port_sharing_added = true;
                }
                ConvertStep::RestoreManifest => {
                    obs.static_permits_port_sharing = false;
                    obs.static_port_sharing_added = false;
                    obs.mirror_serving = Err("restarting".into());
                }
                ConvertStep::UnlabelNode { .. } => obs.gated_nodes.clear(),
                ConvertStep::Wait { .. } => {
                    // The DaemonSet controller retires the pod, the kubelet (re)starts the
                    // static pod.
                    if let Some(ds) = obs.daemonset.as_mut() {
                        ds.pods.clear();
                    }
                    obs.mirror_serving = Ok(());
                }
                ConvertStep::DeleteDaemonSet => obs.daemonset = None,
                ConvertStep::RolledBack { .. } => break,
                other => panic!("unexpected {other:?}"),
            }
        }
        let mut expected = vec![
            "unlabel-node",
            "wait",
            "delete-daemonset",
            "restore-manifest",
            "wait",
            "rolled-back",
        ];
        if moved_aside {
            expected.insert(0, "add-port-sharing");
        }
        assert_eq!(seen, expected, "moved aside: {moved_aside}");
    }
}
