//! Leadership comes first in every decision: table-driven.

use super::{at, daemonset, fresh, pod, running};
use crate::component::Component;
use crate::conversion::decide::{Direction, LeaseHandOver, Mode, NodeComponent, next_step};
use crate::observation::ContainerState;

fn hand_over() -> LeaseHandOver {
    LeaseHandOver {
        lease: "kube-scheduler".into(),
        uid: Some("lease-uid".into()),
        resource_version: "7".into(),
        holder: "cp-1_old".into(),
        why: "its process is gone".into(),
    }
}

/// Leadership comes before anything but a refusal, both ways and when putting back.
#[test]
fn leadership_table() {
    let handed_over_alone = || {
        let mut o = fresh();
        o.component = Component::Scheduler;
        o.daemonset = Some(daemonset(vec![pod("ds-pod", running(), 0)]));
        o.daemonset_gated = true;
        o.gated_nodes = vec!["cp-1".into()];
        o.manifest_on_disk = false;
        o.manifest_in_backup = true;
        o.mirror = None;
        o.daemonset_pod_serving = Ok(());
        o
    };
    let restoring = Mode::Restore { reason: "x".into() };
    type Row = (&'static str, Direction, Mode, NodeComponent, &'static str);
    let rows: Vec<Row> = vec![
        (
            "serving alone, leader there: done",
            Direction::ToSelfHosted,
            Mode::Forward,
            handed_over_alone(),
            "done",
        ),
        (
            "serving alone, the old holder is gone: hand the Lease over",
            Direction::ToSelfHosted,
            Mode::Forward,
            NodeComponent {
                lease_hand_over: Some(hand_over()),
                ..handed_over_alone()
            },
            "hand-over-lease",
        ),
        (
            "serving alone, no leader yet: wait for one",
            Direction::ToSelfHosted,
            Mode::Forward,
            NodeComponent {
                leader: Err("Lease kube-scheduler is not held".into()),
                ..handed_over_alone()
            },
            "wait",
        ),
        (
            "no leader past the deadline: fail",
            Direction::ToSelfHosted,
            Mode::Forward,
            NodeComponent {
                leader: Err("Lease kube-scheduler is not held".into()),
                now: at(101),
                ..handed_over_alone()
            },
            "fail",
        ),
        (
            "waiting for the mirror pod to go: the Lease first",
            Direction::ToSelfHosted,
            Mode::Forward,
            NodeComponent {
                lease_hand_over: Some(hand_over()),
                mirror: Some(pod(
                    "kube-scheduler-cp-1",
                    ContainerState::Terminated {
                        exit_code: 0,
                        reason: None,
                        finished_at: None,
                    },
                    0,
                )),
                ..handed_over_alone()
            },
            "hand-over-lease",
        ),
        (
            "before an action too: the DaemonSet's deletion needs a leader's garbage collector",
            Direction::ToSelfHosted,
            Mode::Forward,
            NodeComponent {
                lease_hand_over: Some(hand_over()),
                ..fresh()
            },
            "hand-over-lease",
        ),
        (
            "a refusal changes nothing, the Lease included",
            Direction::ToSelfHosted,
            Mode::Forward,
            NodeComponent {
                lease_hand_over: Some(hand_over()),
                manifest_on_disk: false,
                mirror: None,
                ..fresh()
            },
            "refuse",
        ),
        (
            "put back, no leader yet: wait before saying so",
            Direction::ToSelfHosted,
            restoring.clone(),
            NodeComponent {
                daemonset: None,
                gated_nodes: vec![],
                leader: Err("Lease kube-scheduler is not held".into()),
                ..fresh()
            },
            "wait",
        ),
        (
            "put back with a leader: rolled back",
            Direction::ToSelfHosted,
            restoring,
            NodeComponent {
                daemonset: None,
                gated_nodes: vec![],
                ..fresh()
            },
            "rolled-back",
        ),
    ];
    for (what, direction, mode, obs, expected) in rows {
        assert_eq!(next_step(direction, &mode, &obs).name(), expected, "{what}");
    }
}
