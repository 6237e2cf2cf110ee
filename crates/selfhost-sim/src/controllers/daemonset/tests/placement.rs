//! Where pods go, what they look like, and how the core loop repairs a node.

use super::*;
use crate::controllers::fixtures::{node, pod};
use crate::controllers::taints::{effect, exists_toleration, key};

fn nodes_with_pods(h: &Harness) -> Vec<String> {
    let mut nodes: Vec<String> = h
        .live_pods()
        .iter()
        .map(|p| template::target_node(p).unwrap().to_string())
        .collect();
    nodes.sort();
    nodes
}

#[test]
fn creates_pods_only_on_eligible_nodes() {
    let cp = || node("cp-1").control_plane();
    let cases: Vec<(&str, DaemonSet, Vec<Node>, Vec<&str>)> = vec![
        (
            "every untainted node",
            daemon_set("ds"),
            vec![node("w-1").build(), node("w-2").build(), cp().build()],
            vec!["w-1", "w-2"],
        ),
        (
            "tolerating the control-plane taint",
            {
                let mut ds = daemon_set("ds");
                let spec = ds.spec.as_mut().unwrap().template.spec.as_mut().unwrap();
                spec.tolerations = Some(vec![exists_toleration(
                    key::CONTROL_PLANE,
                    effect::NO_SCHEDULE,
                )]);
                ds
            },
            vec![node("w-1").build(), cp().build()],
            vec!["cp-1", "w-1"],
        ),
        (
            "nodeSelector",
            {
                let mut ds = daemon_set("ds");
                let spec = ds.spec.as_mut().unwrap().template.spec.as_mut().unwrap();
                spec.node_selector = Some(map(&[("node-role.kubernetes.io/control-plane", "")]));
                spec.tolerations = Some(vec![exists_toleration(
                    key::CONTROL_PLANE,
                    effect::NO_SCHEDULE,
                )]);
                ds
            },
            vec![
                node("w-1").build(),
                cp().build(),
                node("cp-2").control_plane().build(),
            ],
            vec!["cp-1", "cp-2"],
        ),
        (
            "cordoned, not-ready (NoExecute) and pressured nodes are tolerated by default",
            daemon_set("ds"),
            vec![
                node("a")
                    .cordoned()
                    .taint(key::UNSCHEDULABLE, "", effect::NO_SCHEDULE)
                    .build(),
                node("b")
                    .taint(key::NOT_READY, "", effect::NO_EXECUTE)
                    .build(),
                node("c")
                    .taint(key::MEMORY_PRESSURE, "", effect::NO_SCHEDULE)
                    .build(),
                node("d")
                    .taint(key::PID_PRESSURE, "", effect::NO_SCHEDULE)
                    .build(),
                node("e")
                    .taint(key::DISK_PRESSURE, "", effect::NO_SCHEDULE)
                    .build(),
            ],
            vec!["a", "b", "c", "d", "e"],
        ),
        (
            "a not-ready NoSchedule taint keeps new pods away",
            daemon_set("ds"),
            vec![
                node("a")
                    .taint(key::NOT_READY, "", effect::NO_SCHEDULE)
                    .build(),
                node("b").build(),
            ],
            vec!["b"],
        ),
        (
            "network-unavailable is tolerated only by hostNetwork pods",
            daemon_set("ds"),
            vec![
                node("a")
                    .taint(key::NETWORK_UNAVAILABLE, "", effect::NO_SCHEDULE)
                    .build(),
            ],
            vec![],
        ),
        (
            "hostNetwork tolerates network-unavailable",
            {
                let mut ds = daemon_set("ds");
                ds.spec
                    .as_mut()
                    .unwrap()
                    .template
                    .spec
                    .as_mut()
                    .unwrap()
                    .host_network = Some(true);
                ds
            },
            vec![
                node("a")
                    .taint(key::NETWORK_UNAVAILABLE, "", effect::NO_SCHEDULE)
                    .build(),
            ],
            vec!["a"],
        ),
    ];
    for (name, ds, nodes, expected) in cases {
        let mut h = Harness::new(ds, nodes);
        h.sync();
        assert_eq!(nodes_with_pods(&h), expected, "{name}");
    }
}

#[test]
fn created_pods_carry_owner_labels_tolerations_and_their_node() {
    let mut ds = daemon_set("self-hosted-kube-apiserver");
    let spec = ds.spec.as_mut().unwrap().template.spec.as_mut().unwrap();
    spec.host_network = Some(true);
    spec.tolerations = Some(vec![Toleration {
        toleration_seconds: Some(300),
        ..exists_toleration(key::NOT_READY, effect::NO_EXECUTE)
    }]);
    let mut h = Harness::new(ds, vec![node("cp-1").build()]);
    let decision = h.sync().clone();
    let created: Vec<&Pod> = decision.pods_to_create().collect();
    assert_eq!(created.len(), 1);
    let p = created[0];
    assert_eq!(
        p.metadata.generate_name.as_deref(),
        Some("self-hosted-kube-apiserver-")
    );
    assert_eq!(p.metadata.namespace.as_deref(), Some("kube-system"));
    let refs = owner_refs(p);
    assert_eq!(refs.len(), 1);
    assert_eq!(
        (
            refs[0].kind.as_str(),
            refs[0].name.as_str(),
            refs[0].uid.as_str()
        ),
        (
            "DaemonSet",
            "self-hosted-kube-apiserver",
            "uid-ds-self-hosted-kube-apiserver"
        )
    );
    assert_eq!(
        (refs[0].controller, refs[0].block_owner_deletion),
        (Some(true), Some(true))
    );
    let labels = p.metadata.labels.as_ref().unwrap();
    assert_eq!(labels["k8s-app"], "self-hosted-kube-apiserver");
    assert_eq!(labels["pod-template-generation"], "1");
    assert_eq!(labels["controller-revision-hash"], decision.hash);
    assert_eq!(template::target_node(p), Some("cp-1"));
    assert!(
        p.spec.as_ref().unwrap().node_name.is_none(),
        "the scheduler binds it"
    );
    let tolerations = p.spec.as_ref().unwrap().tolerations.clone().unwrap();
    let keys: Vec<(&str, &str, Option<i64>)> = tolerations
        .iter()
        .map(|t| {
            (
                t.key.as_deref().unwrap(),
                t.effect.as_deref().unwrap(),
                t.toleration_seconds,
            )
        })
        .collect();
    assert_eq!(
        keys,
        [
            (key::NOT_READY, "NoExecute", None),
            (key::UNREACHABLE, "NoExecute", None),
            (key::DISK_PRESSURE, "NoSchedule", None),
            (key::MEMORY_PRESSURE, "NoSchedule", None),
            (key::PID_PRESSURE, "NoSchedule", None),
            (key::UNSCHEDULABLE, "NoSchedule", None),
            (key::NETWORK_UNAVAILABLE, "NoSchedule", None),
        ]
    );
}

#[test]
fn required_node_affinity_selects_nodes_and_is_replaced_by_the_node_pin() {
    use k8s_openapi::api::core::v1::{
        Affinity, NodeAffinity, NodeSelector, NodeSelectorRequirement, NodeSelectorTerm,
    };
    let mut ds = daemon_set("ds");
    ds.spec
        .as_mut()
        .unwrap()
        .template
        .spec
        .as_mut()
        .unwrap()
        .affinity = Some(Affinity {
        node_affinity: Some(NodeAffinity {
            required_during_scheduling_ignored_during_execution: Some(NodeSelector {
                node_selector_terms: vec![NodeSelectorTerm {
                    match_expressions: Some(vec![NodeSelectorRequirement {
                        key: "zone".into(),
                        operator: "In".into(),
                        values: Some(vec!["a".into()]),
                    }]),
                    match_fields: None,
                }],
            }),
            ..NodeAffinity::default()
        }),
        ..Affinity::default()
    });
    let mut h = Harness::new(
        ds,
        vec![
            node("n-a").label("zone", "a").build(),
            node("n-b").label("zone", "b").build(),
        ],
    );
    h.sync();
    assert_eq!(nodes_with_pods(&h), ["n-a"]);
    let terms = &h.pods[0]
        .spec
        .as_ref()
        .unwrap()
        .affinity
        .as_ref()
        .unwrap()
        .node_affinity
        .as_ref()
        .unwrap()
        .required_during_scheduling_ignored_during_execution
        .as_ref()
        .unwrap()
        .node_selector_terms;
    assert_eq!(terms.len(), 1);
    assert!(terms[0].match_expressions.is_none());
    assert_eq!(
        terms[0].match_fields.as_ref().unwrap()[0].values.as_deref(),
        Some(&["n-a".to_string()][..])
    );
}

#[test]
fn noexecute_taints_remove_pods_noschedule_taints_do_not() {
    let mut h = Harness::new(daemon_set("ds"), vec![node("a").build(), node("b").build()]);
    h.settle();
    h.bind_all();
    h.nodes = vec![
        node("a")
            .taint("dedicated", "db", effect::NO_SCHEDULE)
            .build(),
        node("b")
            .taint("dedicated", "db", effect::NO_EXECUTE)
            .build(),
    ];
    h.sync();
    let deleted: Vec<(String, DeleteReason)> = h
        .last
        .pods_to_delete()
        .map(|(n, r)| (n.to_string(), r))
        .collect();
    assert_eq!(deleted.len(), 1);
    assert_eq!(
        template::target_node(
            h.pods
                .iter()
                .find(|p| p.metadata.name.as_deref() == Some(&deleted[0].0))
                .unwrap()
        ),
        Some("b")
    );
    assert_eq!(deleted[0].1, DeleteReason::NodeNotEligible);
    // The pod on "a" stays but is misscheduled (the node no longer wants new pods).
    h.finish_terminations();
    h.sync();
    let (desired, current, .., misscheduled, _) = h.counters();
    assert_eq!((desired, current, misscheduled), (0, 0, 1));
}

#[test]
fn adopts_matching_orphans_and_releases_unselected_pods() {
    let orphan = pod("orphan").label("k8s-app", "ds").on("a").build();
    let stranger = pod("stranger").label("k8s-app", "other").on("b").build();
    let mut h = Harness::new(daemon_set("ds"), vec![node("a").build(), node("b").build()]);
    let mut orphan = orphan;
    orphan.metadata.namespace = Some("kube-system".into());
    let mut stranger = stranger;
    stranger.metadata.namespace = Some("kube-system".into());
    h.pods = vec![orphan, stranger];
    h.sync();
    assert!(h.last.actions.contains(&Action::AdoptPod {
        name: "orphan".into()
    }));
    assert_eq!(
        h.last.pods_to_create().count(),
        1,
        "only b needs a pod; a has the adopted one"
    );
    // A pod relabelled away is released and replaced.
    h.pod_mut("orphan").metadata.labels = Some(map(&[("k8s-app", "gone")]));
    h.sync();
    assert!(h.last.actions.contains(&Action::ReleasePod {
        name: "orphan".into()
    }));
    assert_eq!(h.last.pods_to_create().count(), 1);
}

#[test]
fn failed_pods_are_replaced_under_back_off_and_succeeded_ones_at_once() {
    let mut h = Harness::new(daemon_set("ds"), vec![node("a").build()]);
    h.settle();
    h.bind_all();
    let name = h.pods[0].metadata.name.clone().unwrap();
    h.pod_mut(&name).status.as_mut().unwrap().phase = Some("Failed".into());
    h.sync();
    assert_eq!(
        h.last.pods_to_delete().collect::<Vec<_>>(),
        [(name.as_str(), DeleteReason::Failed)]
    );
    assert_eq!(h.last.events[0].reason, "FailedDaemonPod");
    h.finish_terminations();
    h.sync();
    assert_eq!(h.last.pods_to_create().count(), 1);
    h.bind_all();
    // The replacement fails at once: deleting it again waits for the back-off (1 s, then 2 s).
    let second = h.live_pods()[0].metadata.name.clone().unwrap();
    h.pod_mut(&second).status.as_mut().unwrap().phase = Some("Failed".into());
    h.sync();
    assert_eq!(h.last.pods_to_delete().count(), 0, "inside the 1 s window");
    assert_eq!(h.last.requeue_after, Some(Duration::from_secs(1)));
    h.advance(1);
    h.sync();
    assert_eq!(h.last.pods_to_delete().count(), 1);

    let mut h = Harness::new(daemon_set("ds"), vec![node("a").build()]);
    h.settle();
    let name = h.pods[0].metadata.name.clone().unwrap();
    h.pod_mut(&name).status.as_mut().unwrap().phase = Some("Succeeded".into());
    h.sync();
    assert_eq!(
        h.last.pods_to_delete().collect::<Vec<_>>(),
        [(name.as_str(), DeleteReason::Succeeded)]
    );
    assert_eq!(h.last.events[0].reason, "SucceededDaemonPod");
}

#[test]
fn surplus_pods_are_pruned_keeping_the_oldest_and_orphaned_pending_pods_go() {
    let mut h = Harness::new(daemon_set("ds"), vec![node("a").build()]);
    h.settle();
    h.bind_all();
    let mut extra = h.pods[0].clone();
    extra.metadata.name = Some("ds-younger".into());
    extra.metadata.creation_timestamp = Some(Time(t(50)));
    h.pods.push(extra);
    h.sync();
    assert_eq!(
        h.last.pods_to_delete().collect::<Vec<_>>(),
        [("ds-younger", DeleteReason::Surplus)]
    );

    // A pending pod whose node was removed is deleted; a bound one is left to the pod GC.
    let mut h = Harness::new(daemon_set("ds"), vec![node("a").build(), node("b").build()]);
    h.settle();
    h.nodes.retain(|n| n.metadata.name.as_deref() == Some("a"));
    h.sync();
    let deleted: Vec<_> = h.last.pods_to_delete().map(|(_, r)| r).collect();
    assert_eq!(deleted, [DeleteReason::NodeGone]);
}

#[test]
fn an_empty_selector_or_a_deleted_daemonset_does_nothing() {
    let mut ds = daemon_set("ds");
    ds.spec.as_mut().unwrap().selector = LabelSelector::default();
    let mut h = Harness::new(ds, vec![node("a").build()]);
    h.sync();
    assert!(h.last.actions.is_empty());
    assert_eq!(h.last.events[0].reason, "SelectingAll");

    let mut ds = daemon_set("ds");
    ds.metadata.deletion_timestamp = Some(Time(t(0)));
    let mut h = Harness::new(ds, vec![node("a").build()]);
    h.sync();
    assert!(h.last.actions.is_empty());
}

use k8s_openapi::api::core::v1::Toleration;
