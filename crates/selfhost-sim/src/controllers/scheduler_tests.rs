use super::*;
use crate::controllers::fixtures::{node, pod, t};
use crate::controllers::taints::{effect, exists_toleration, key};
use k8s_openapi::api::core::v1::{
    Affinity, NodeAffinity, NodeSelector, NodeSelectorRequirement, NodeSelectorTerm,
};

fn pinned_to(node_name: &str) -> Affinity {
    Affinity {
        node_affinity: Some(NodeAffinity {
            required_during_scheduling_ignored_during_execution: Some(NodeSelector {
                node_selector_terms: vec![NodeSelectorTerm {
                    match_expressions: None,
                    match_fields: Some(vec![NodeSelectorRequirement {
                        key: NODE_NAME_FIELD.into(),
                        operator: "In".into(),
                        values: Some(vec![node_name.into()]),
                    }]),
                }],
            }),
            ..NodeAffinity::default()
        }),
        ..Affinity::default()
    }
}

#[test]
fn picks_the_least_loaded_fitting_node_then_by_name() {
    let nodes = [
        node("cp-1").control_plane().build(),
        node("w-2").build(),
        node("w-1").build(),
    ];
    let cases: Vec<(&str, Vec<Pod>, &str)> = vec![
        ("empty cluster: first by name among fitting", vec![], "w-1"),
        ("w-1 busier", vec![pod("a").on("w-1").build()], "w-2"),
        (
            "terminal pods do not count",
            vec![
                pod("a").on("w-1").phase("Succeeded").build(),
                pod("b").on("w-2").build(),
            ],
            "w-1",
        ),
    ];
    for (name, assigned, expected) in cases {
        let chosen = schedule(&pod("p").build(), &nodes, &assigned).unwrap();
        assert_eq!(chosen.metadata.name.as_deref(), Some(expected), "{name}");
    }
}

#[test]
fn filters_explain_each_rejection_in_the_schedulers_words() {
    let cases: Vec<(&str, Pod, Vec<Node>, &str)> = vec![
        (
            "taint and selector",
            pod("p").node_selector("disk", "ssd").build(),
            vec![
                node("cp-1").control_plane().build(),
                node("w-1").build(),
                node("w-2").build(),
            ],
            "0/3 nodes are available: 1 node(s) had untolerated taint \
             {node-role.kubernetes.io/control-plane: }, 2 node(s) didn't match Pod's node \
             affinity/selector. preemption: 0/3 nodes are available: 3 Preemption is not \
             helpful for scheduling.",
        ),
        (
            "cordoned",
            pod("p").build(),
            vec![node("w-1").cordoned().build()],
            "0/1 nodes are available: 1 node(s) were unschedulable. preemption: 0/1 nodes are \
             available: 1 Preemption is not helpful for scheduling.",
        ),
        (
            "not ready node carries the not-ready taint",
            pod("p").build(),
            vec![
                node("w-1")
                    .taint(key::NOT_READY, "", effect::NO_SCHEDULE)
                    .build(),
            ],
            "0/1 nodes are available: 1 node(s) had untolerated taint \
             {node.kubernetes.io/not-ready: }. preemption: 0/1 nodes are available: 1 \
             Preemption is not helpful for scheduling.",
        ),
        (
            "no nodes",
            pod("p").build(),
            vec![],
            "no nodes available to schedule pods",
        ),
    ];
    for (name, p, nodes, message) in cases {
        let error = schedule(&p, &nodes, &[]).unwrap_err();
        assert_eq!(error.to_string(), message, "{name}");
    }
}

#[test]
fn a_daemonset_pod_goes_to_its_node_or_nowhere() {
    let mut p = pod("ds-abc").build();
    p.spec.as_mut().unwrap().affinity = Some(pinned_to("w-2"));
    let nodes = [
        node("w-1").build(),
        node("w-2").build(),
        node("w-3").build(),
    ];
    let chosen = schedule(&p, &nodes, &[]).unwrap();
    assert_eq!(chosen.metadata.name.as_deref(), Some("w-2"));

    let nodes = [
        node("w-1").build(),
        node("w-2")
            .taint(key::UNREACHABLE, "", effect::NO_SCHEDULE)
            .build(),
        node("w-3").build(),
    ];
    let error = schedule(&p, &nodes, &[]).unwrap_err();
    assert_eq!(
        error.to_string(),
        "0/3 nodes are available: 1 node(s) had untolerated taint {node.kubernetes.io/unreachable: }, \
         2 node(s) didn't satisfy plugin(s) [NodeAffinity]. preemption: 0/3 nodes are available: \
         3 Preemption is not helpful for scheduling."
    );
}

#[test]
fn tolerations_open_tainted_and_cordoned_nodes() {
    let nodes = [node("cp-1").control_plane().cordoned().build()];
    let p = pod("p")
        .tolerate(exists_toleration(key::CONTROL_PLANE, effect::NO_SCHEDULE))
        .tolerate(exists_toleration(key::UNSCHEDULABLE, effect::NO_SCHEDULE))
        .build();
    assert!(schedule(&p, &nodes, &[]).is_ok());
}

#[test]
fn host_ports_conflict_with_pods_already_on_the_node() {
    let nodes = [node("w-1").build(), node("w-2").build()];
    let assigned = [pod("old").on("w-1").host_port(6443).build()];
    let chosen = schedule(&pod("p").host_port(6443).build(), &nodes, &assigned).unwrap();
    assert_eq!(chosen.metadata.name.as_deref(), Some("w-2"));

    let assigned = [
        pod("a").on("w-1").host_port(6443).build(),
        pod("b").on("w-2").host_port(6443).build(),
    ];
    let error = schedule(&pod("p").host_port(6443).build(), &nodes, &assigned).unwrap_err();
    assert_eq!(
        error.to_string(),
        "0/2 nodes are available: 2 node(s) didn't have free ports for the requested pod ports. \
         preemption: 0/2 nodes are available: 2 No preemption victims found for incoming pod."
    );
}

#[test]
fn only_unbound_live_pods_for_this_scheduler_are_scheduled() {
    assert!(wants_scheduling(&pod("p").build()));
    assert!(!wants_scheduling(&pod("p").on("w-1").build()));
    assert!(!wants_scheduling(&pod("p").terminating(t(1)).build()));
    let mut other = pod("p").build();
    other.spec.as_mut().unwrap().scheduler_name = Some("my-scheduler".into());
    assert!(!wants_scheduling(&other));
}

#[test]
fn binding_and_condition_name_the_node_and_the_reason() {
    let p = pod("p").build();
    let b = binding(&p, "w-1");
    assert_eq!(b.target.name.as_deref(), Some("w-1"));
    assert_eq!(b.metadata.name.as_deref(), Some("p"));
    let error = schedule(&p, &[node("w-1").cordoned().build()], &[]).unwrap_err();
    let c = unschedulable_condition(&error, t(3));
    assert_eq!(
        (c.status.as_str(), c.reason.as_deref()),
        ("False", Some("Unschedulable"))
    );
    assert!(c.message.unwrap().starts_with("0/1 nodes are available"));
}
