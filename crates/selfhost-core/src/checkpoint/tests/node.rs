//! The whole node: every component decided together, in order, through a power cut and back.

use super::builder::{node_at, t};
use crate::checkpoint::{CheckpointPolicy, CheckpointStep, decide};
use crate::component::Component::{self, ApiServer, ControllerManager, Scheduler};

/// The names of the steps [`decide`] gives, in its order.
fn names(steps: &[(Component, CheckpointStep)]) -> Vec<(Component, &'static str)> {
    steps.iter().map(|(c, s)| (*c, s.name())).collect()
}

#[test]
fn every_component_is_decided_in_order_even_when_the_node_shows_none() {
    let steps = decide(&node_at(0).build(), &CheckpointPolicy::default());
    let components: Vec<Component> = steps.iter().map(|(c, _)| *c).collect();
    assert_eq!(components, Component::ALL);
    assert!(steps.iter().all(|(_, s)| s.name() == "wait"), "{steps:?}");
}

#[test]
fn a_power_cut_of_every_node_is_survived_step_by_step() {
    let policy = CheckpointPolicy::default();
    let steady = |n: super::builder::Node| {
        n.kept(ApiServer, "api-a")
            .kept(ControllerManager, "cm-a")
            .kept(Scheduler, "sched-a")
    };

    // Before the cut: every pod serves and is kept.
    let before = steady(node_at(100))
        .serving(ApiServer, "api-a", 10)
        .serving(ControllerManager, "cm-a", 10)
        .serving(Scheduler, "sched-a", 10)
        .build();
    assert_eq!(
        names(&decide(&before, &policy)),
        [
            (ApiServer, "nothing"),
            (ControllerManager, "nothing"),
            (Scheduler, "nothing")
        ]
    );

    // After the reboot: the agent has never seen the API answer.
    let rebooted = steady(node_at(203)).api_down_since(200).build();
    let steps = decide(&rebooted, &policy);
    assert_eq!(
        names(&steps),
        [
            (ApiServer, "wait"),
            (ControllerManager, "wait"),
            (Scheduler, "wait")
        ]
    );
    assert!(steps.iter().all(|(_, s)| matches!(
        s,
        CheckpointStep::Wait { recheck_at: Some(at), .. } if *at == t(210)
    )));

    // The grace is over: the kube-apiserver first; the controllers wait for it.
    let orphaned = steady(node_at(210)).api_down_since(200).build();
    let steps = decide(&orphaned, &policy);
    assert_eq!(
        names(&steps),
        [
            (ApiServer, "activate"),
            (ControllerManager, "wait"),
            (Scheduler, "wait")
        ]
    );

    // Its copy is active: the controllers follow.
    let apiserver_active = steady(node_at(211))
        .api_down_since(200)
        .active(ApiServer, "api-a", false)
        .build();
    assert_eq!(
        names(&decide(&apiserver_active, &policy)),
        [
            (ApiServer, "wait"),
            (ControllerManager, "activate"),
            (Scheduler, "activate")
        ]
    );

    // The API answers through the copies; the DaemonSet pods start, then serve.
    let starting = steady(node_at(230))
        .active(ApiServer, "api-a", true)
        .active(ControllerManager, "cm-a", true)
        .active(Scheduler, "sched-a", true)
        .not_serving(ApiServer, "api-a")
        .not_serving(ControllerManager, "cm-a")
        .build();
    assert_eq!(
        names(&decide(&starting, &policy)),
        [
            (ApiServer, "wait"),
            (ControllerManager, "wait"),
            (Scheduler, "wait")
        ]
    );
    let serving = steady(node_at(240))
        .active(ApiServer, "api-a", true)
        .active(ControllerManager, "cm-a", true)
        .active(Scheduler, "sched-a", true)
        .serving(ApiServer, "api-a", 235)
        .serving(ControllerManager, "cm-a", 238)
        .not_serving(Scheduler, "sched-a")
        .build();
    assert_eq!(
        names(&decide(&serving, &policy)),
        [
            (ApiServer, "retire"),
            (ControllerManager, "retire"),
            (Scheduler, "wait")
        ]
    );

    // The copies retired, the DaemonSet pods serve and are kept: back where it started.
    let after = steady(node_at(260))
        .serving(ApiServer, "api-a", 235)
        .serving(ControllerManager, "cm-a", 238)
        .serving(Scheduler, "sched-a", 245)
        .build();
    assert_eq!(
        names(&decide(&after, &policy)),
        [
            (ApiServer, "nothing"),
            (ControllerManager, "nothing"),
            (Scheduler, "nothing")
        ]
    );
}

#[test]
fn a_policy_changes_the_soak_and_the_grace() {
    let policy = CheckpointPolicy {
        soak: std::time::Duration::from_millis(2500),
        api_grace: std::time::Duration::from_secs(30),
    };
    let soaking = node_at(102).serving(ApiServer, "rev-a", 100).build();
    let steps = decide(&soaking, &policy);
    assert_eq!(
        steps[0].1.to_string(),
        "wait: the DaemonSet pod has served for 2 s of 2.5 s"
    );
    let gone = node_at(120)
        .api_down_since(100)
        .kept(ApiServer, "rev-a")
        .build();
    assert_eq!(
        decide(&gone, &policy)[0].1.to_string(),
        "wait: the API has been unreachable for 20 s of 30 s"
    );
}

#[test]
fn every_step_reads_as_one_line() {
    let steps = [
        CheckpointStep::Keep {
            pod_uid: "uid".into(),
            revision: "rev-a".into(),
            image: "registry.k8s.io/kube-apiserver:v1.31.2".into(),
        },
        CheckpointStep::Activate {
            revision: "rev-a".into(),
            image: "registry.k8s.io/kube-apiserver:v1.31.2".into(),
        },
        CheckpointStep::Retire {
            revision: "rev-a".into(),
        },
        CheckpointStep::Wait {
            reason: "the API has been unreachable for 3 s of 10 s".into(),
            recheck_at: Some(t(10)),
        },
        CheckpointStep::Nothing {
            summary: "the DaemonSet pod serves and its revision rev-a is kept".into(),
        },
    ];
    let lines: Vec<String> = steps.iter().map(ToString::to_string).collect();
    assert_eq!(
        lines,
        [
            "keep a checkpoint of the DaemonSet pod (revision rev-a, registry.k8s.io/kube-apiserver:v1.31.2)",
            "activate the checkpoint of revision rev-a (registry.k8s.io/kube-apiserver:v1.31.2) as a static pod",
            "retire the static copy of revision rev-a: the DaemonSet pod serves",
            "wait: the API has been unreachable for 3 s of 10 s",
            "the DaemonSet pod serves and its revision rev-a is kept",
        ]
    );
    let changing: Vec<&str> = steps
        .iter()
        .filter(|s| s.changes_static_pods())
        .map(CheckpointStep::name)
        .collect();
    assert_eq!(changing, ["activate", "retire"]);
}
