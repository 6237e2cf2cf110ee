//! Leadership comes first in every decision: table-driven.

use k8s_openapi::jiff;

use super::{at, daemonset, fresh, pod, running, step};
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

/// A process of the component is stopped only once the leader on the node has held its Lease
/// into a later second than the one it acquired it in: whole-second start times could not tell
/// its successor from it, and its Lease would be left to expire.
#[test]
fn a_leader_is_not_stopped_in_the_second_it_acquired_its_lease() {
    // The DaemonSet pod serves beside the static pod: the manifest goes aside next.
    let beside = || {
        let mut o = fresh();
        o.component = Component::Scheduler;
        o.daemonset = Some(daemonset(vec![pod("ds-pod", running(), 0)]));
        o.daemonset_gated = true;
        o.gated_nodes = vec!["cp-1".into()];
        o.daemonset_pod_serving = Ok(());
        o.now = at(20);
        o
    };
    let within = |o: NodeComponent, millis: i64| NodeComponent {
        leader_here_acquired: Some(at(20) + jiff::SignedDuration::from_millis(millis)),
        ..o
    };
    assert_eq!(
        step(Direction::ToSelfHosted, &beside()),
        "move-manifest-aside"
    );
    type Row = (&'static str, NodeComponent, &'static str);
    let rows: Vec<Row> = vec![
        (
            "the leader here acquired in this very second: wait",
            within(beside(), 400),
            "wait",
        ),
        (
            "... at the second's first instant too",
            within(beside(), 0),
            "wait",
        ),
        (
            "the leader here acquired in the second before: go on",
            within(beside(), -1),
            "move-manifest-aside",
        ),
        (
            "no leader on this node: go on",
            beside(),
            "move-manifest-aside",
        ),
        (
            "a step that stops nothing is not held back",
            within(
                NodeComponent {
                    component: Component::Scheduler,
                    now: at(20),
                    ..fresh()
                },
                400,
            ),
            "create-daemonset",
        ),
        (
            "past the deadline the wait fails, as every wait does",
            NodeComponent {
                now: at(101),
                leader_here_acquired: Some(at(101)),
                ..beside()
            },
            "fail",
        ),
    ];
    for (what, obs, expected) in rows {
        assert_eq!(step(Direction::ToSelfHosted, &obs), expected, "{what}");
    }
    let held = next_step(
        Direction::ToSelfHosted,
        &Mode::Forward,
        &within(beside(), 400),
    );
    assert!(
        held.to_string().contains("into the next second"),
        "the wait says what for: {held}"
    );
}
