//! RollingUpdate without surge, OnDelete, and the status at every stage.

use super::*;
use crate::controllers::fixtures::node;

const V1: &str = "registry.k8s.io/kube-apiserver:v1.32.0";
const V2: &str = "registry.k8s.io/kube-apiserver:v1.33.0";

fn cluster(ds: DaemonSet, nodes: &[&str]) -> Harness {
    let mut h = Harness::new(ds, nodes.iter().map(|n| node(n).build()).collect());
    h.settle();
    h.bind_all();
    h.ready_all();
    h.sync();
    h
}

fn deleted(h: &Harness) -> usize {
    h.last.pods_to_delete().count()
}

fn created(h: &Harness) -> usize {
    h.last.pods_to_create().count()
}

#[test]
fn scaled_values_round_up_like_upstream() {
    let cases = [
        (IntOrString::Int(2), 10, 2),
        (pct("50%"), 3, 2),
        (pct("34%"), 3, 2),
        (pct("33%"), 3, 1),
        (pct("10%"), 3, 1),
        (pct("0%"), 3, 0),
        (pct("100%"), 7, 7),
        (pct("25%"), 0, 0),
    ];
    for (value, total, expected) in cases {
        assert_eq!(
            rollout::scaled_value(&value, total, true),
            Ok(expected),
            "{value:?} of {total}"
        );
    }
    assert_eq!(rollout::scaled_value(&pct("34%"), 3, false), Ok(1));
    assert!(rollout::scaled_value(&pct("abc"), 3, true).is_err());
    assert!(rollout::scaled_value(&pct("5"), 3, true).is_err());
}

#[test]
fn max_unavailable_one_walks_node_by_node_with_status_at_every_stage() {
    let mut h = cluster(daemon_set("ds"), &["a", "b", "c"]);
    assert_eq!(h.counters(), (3, 3, 3, 3, 3, 0, 0, 1));
    assert!(h.rollout_complete());

    h.set_image(V2);
    h.sync();
    assert_eq!(deleted(&h), 1, "one old pod goes first");
    // Status is computed from what the controller saw: nothing changed yet but the generation.
    assert_eq!(h.counters(), (3, 3, 0, 3, 3, 0, 0, 2));
    assert!(!h.rollout_complete());

    h.sync();
    assert_eq!(
        (deleted(&h), created(&h)),
        (0, 0),
        "a Terminating pod still occupies its node"
    );
    assert_eq!(
        h.counters(),
        (3, 3, 0, 3, 3, 0, 0, 2),
        "a Terminating pod still counts"
    );

    h.finish_terminations();
    h.sync();
    assert_eq!(
        (deleted(&h), created(&h)),
        (0, 1),
        "replacement once the old pod is gone"
    );
    assert_eq!(h.counters(), (3, 2, 0, 2, 2, 1, 0, 2));

    h.bind_all();
    h.sync();
    assert_eq!(
        (deleted(&h), created(&h)),
        (0, 0),
        "the new pod is not available yet"
    );
    assert_eq!(h.counters(), (3, 3, 1, 2, 2, 1, 0, 2));

    h.ready_all();
    h.sync();
    assert_eq!(deleted(&h), 1, "next node");
    assert_eq!(h.counters(), (3, 3, 1, 3, 3, 0, 0, 2));

    for _ in 0..2 {
        h.finish_terminations();
        h.sync();
        h.bind_all();
        h.ready_all();
        h.sync();
    }
    h.sync();
    assert_eq!(
        h.images(),
        [
            ("a".into(), V2.into()),
            ("b".into(), V2.into()),
            ("c".into(), V2.into())
        ]
    );
    assert_eq!(h.counters(), (3, 3, 3, 3, 3, 0, 0, 2));
    assert!(h.rollout_complete());
}

#[test]
fn one_node_deletes_the_old_pod_before_any_replacement_exists() {
    let mut h = cluster(daemon_set("self-hosted-kube-apiserver"), &["cp-1"]);
    h.set_image(V2);
    h.sync();
    assert_eq!(deleted(&h), 1);
    for _ in 0..5 {
        h.advance(10);
        h.sync();
        assert_eq!(
            created(&h),
            0,
            "nothing is created while the old pod is Terminating"
        );
    }
    assert_eq!(h.live_pods().len(), 0, "the node has no serving pod at all");
}

#[test]
fn max_unavailable_integers_and_percentages_bound_the_first_wave() {
    let cases = [
        (IntOrString::Int(1), 4, 1),
        (IntOrString::Int(2), 4, 2),
        (IntOrString::Int(10), 4, 4),
        (pct("25%"), 4, 1),
        (pct("30%"), 4, 2),
        (pct("50%"), 4, 2),
        (pct("100%"), 4, 4),
        (IntOrString::Int(0), 4, 1),
    ];
    for (max_unavailable, nodes, first_wave) in cases {
        let names: Vec<String> = (0..nodes).map(|i| format!("n{i}")).collect();
        let names: Vec<&str> = names.iter().map(String::as_str).collect();
        let ds = with_strategy(
            daemon_set("ds"),
            max_unavailable.clone(),
            IntOrString::Int(0),
        );
        let mut h = cluster(ds, &names);
        h.set_image(V2);
        h.sync();
        assert_eq!(
            deleted(&h),
            first_wave,
            "maxUnavailable {max_unavailable:?} on {nodes} nodes"
        );
        h.sync();
        assert_eq!(
            deleted(&h),
            0,
            "no more until the wave is replaced and available"
        );
    }
}

#[test]
fn unavailable_old_pods_are_replaced_beyond_the_budget() {
    let mut h = cluster(daemon_set("ds"), &["a", "b", "c"]);
    // Two old pods are not ready (crash-looping, say): they count as unavailable and are
    // replaced at once; no available pod is touched.
    for name in ["a", "b"] {
        let pod_name = h.pods_on(name)[0].metadata.name.clone().unwrap();
        h.pod_mut(&pod_name).status.as_mut().unwrap().conditions = None;
    }
    h.set_image(V2);
    h.sync();
    let mut deleted_nodes: Vec<&str> = h
        .last
        .pods_to_delete()
        .map(|(n, _)| {
            template::target_node(
                h.pods
                    .iter()
                    .find(|p| p.metadata.name.as_deref() == Some(n))
                    .unwrap(),
            )
            .unwrap()
        })
        .collect();
    deleted_nodes.sort();
    assert_eq!(deleted_nodes, ["a", "b"]);
}

#[test]
fn min_ready_seconds_delays_availability_and_the_next_wave() {
    let mut ds = daemon_set("ds");
    ds.spec.as_mut().unwrap().min_ready_seconds = Some(10);
    let mut h = Harness::new(ds, vec![node("a").build(), node("b").build()]);
    h.settle();
    h.bind_all();
    h.ready_all();
    h.sync();
    assert_eq!(
        h.counters(),
        (2, 2, 2, 2, 0, 2, 0, 1),
        "ready but not yet available"
    );
    assert_eq!(h.last.requeue_after, Some(Duration::from_secs(11)));
    h.advance(10);
    h.sync();
    assert_eq!(
        h.counters().4,
        0,
        "availability needs strictly more than minReadySeconds"
    );
    h.advance(1);
    h.sync();
    assert_eq!(h.counters(), (2, 2, 2, 2, 2, 0, 0, 1));

    h.set_image(V2);
    h.sync();
    assert_eq!(deleted(&h), 1);
    h.finish_terminations();
    h.sync();
    h.bind_all();
    h.ready_all();
    h.sync();
    assert_eq!(deleted(&h), 0, "the new pod is ready but not yet available");
    h.advance(11);
    h.sync();
    assert_eq!(deleted(&h), 1, "now the second node");
}

#[test]
fn on_delete_replaces_only_pods_someone_deleted() {
    let mut ds = daemon_set("ds");
    ds.spec.as_mut().unwrap().update_strategy = Some(DaemonSetUpdateStrategy {
        type_: Some("OnDelete".into()),
        rolling_update: None,
    });
    let mut h = cluster(ds, &["a", "b"]);
    h.set_image(V2);
    for _ in 0..3 {
        h.sync();
        assert_eq!((deleted(&h), created(&h)), (0, 0));
    }
    assert_eq!(h.counters(), (2, 2, 0, 2, 2, 0, 0, 2));
    assert!(!h.rollout_complete());
    // An operator deletes the pod on "a".
    h.pods.retain(|p| template::target_node(p) != Some("a"));
    h.sync();
    assert_eq!(created(&h), 1);
    h.bind_all();
    h.ready_all();
    h.sync();
    assert_eq!(
        h.images(),
        [("a".into(), V2.into()), ("b".into(), V1.into())]
    );
    assert_eq!(h.counters(), (2, 2, 1, 2, 2, 0, 0, 2));
}

#[test]
fn an_invalid_max_unavailable_is_reported_and_the_rest_still_happens() {
    let ds = with_strategy(daemon_set("ds"), pct("lots"), IntOrString::Int(0));
    let mut h = cluster(ds, &["a"]);
    h.set_image(V2);
    h.sync();
    assert!(matches!(
        h.last.rollout_error,
        Some(DaemonSetError::InvalidMaxUnavailable(_))
    ));
    assert_eq!(deleted(&h), 0);
    assert_eq!(
        h.counters().7,
        2,
        "the status still observes the generation"
    );
}
