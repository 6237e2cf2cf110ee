//! RollingUpdate with `maxSurge`: the new pod runs next to the old one until it is available.

use super::*;
use crate::controllers::fixtures::node;

const V2: &str = "registry.k8s.io/kube-apiserver:v1.33.0";

fn surge_cluster(surge: IntOrString, nodes: &[&str], min_ready: i32) -> Harness {
    let mut ds = with_strategy(daemon_set("ds"), IntOrString::Int(0), surge);
    ds.spec.as_mut().unwrap().min_ready_seconds = Some(min_ready);
    let mut h = Harness::new(ds, nodes.iter().map(|n| node(n).build()).collect());
    h.settle();
    h.bind_all();
    h.advance(1);
    h.ready_all();
    h.advance(min_ready as u64 + 1);
    h.sync();
    h
}

#[test]
fn the_new_pod_is_available_before_the_old_one_goes() {
    let mut h = surge_cluster(IntOrString::Int(1), &["cp-1"], 0);
    h.set_image(V2);
    h.sync();
    assert_eq!(h.last.pods_to_create().count(), 1, "surge: create first");
    assert_eq!(h.last.pods_to_delete().count(), 0);
    h.sync();
    assert_eq!(
        h.last.pods_to_create().count(),
        0,
        "one surge pod at a time"
    );
    assert_eq!(h.pods_on("cp-1").len(), 2);
    h.bind_all();
    h.sync();
    assert_eq!(
        h.last.pods_to_delete().count(),
        0,
        "the new pod is not ready yet"
    );
    // Status counts the oldest pod on the node: still the old one.
    assert_eq!(h.counters(), (1, 1, 0, 1, 1, 0, 0, 2));
    h.ready_all();
    h.sync();
    let deleted: Vec<_> = h.last.pods_to_delete().collect();
    assert_eq!(deleted.len(), 1);
    assert_eq!(deleted[0].1, DeleteReason::Replaced);
    h.finish_terminations();
    h.sync();
    assert_eq!(h.images(), [("cp-1".into(), V2.into())]);
    assert!(h.rollout_complete());
}

#[test]
fn surge_waits_for_min_ready_seconds() {
    let mut h = surge_cluster(IntOrString::Int(1), &["cp-1"], 5);
    h.set_image(V2);
    h.sync();
    h.bind_all();
    h.ready_all();
    h.sync();
    assert_eq!(h.last.pods_to_delete().count(), 0);
    h.advance(5);
    h.sync();
    assert_eq!(
        h.last.pods_to_delete().count(),
        0,
        "strictly more than minReadySeconds"
    );
    h.advance(1);
    h.sync();
    assert_eq!(h.last.pods_to_delete().count(), 1);
}

#[test]
fn max_surge_bounds_the_new_pods_in_flight() {
    let cases = [
        (IntOrString::Int(1), 4, 1),
        (IntOrString::Int(2), 4, 2),
        (pct("50%"), 4, 2),
        (pct("30%"), 4, 2),
        (pct("100%"), 3, 3),
    ];
    for (surge, nodes, in_flight) in cases {
        let names: Vec<String> = (0..nodes).map(|i| format!("n{i}")).collect();
        let names: Vec<&str> = names.iter().map(String::as_str).collect();
        let mut h = surge_cluster(surge.clone(), &names, 0);
        h.set_image(V2);
        h.sync();
        assert_eq!(
            h.last.pods_to_create().count(),
            in_flight,
            "maxSurge {surge:?} on {nodes}"
        );
        assert_eq!(h.last.pods_to_delete().count(), 0);
    }
}

#[test]
fn an_unready_old_pod_is_replaced_without_waiting_for_the_surge_budget() {
    let mut h = surge_cluster(IntOrString::Int(1), &["a", "b", "c"], 0);
    for node_name in ["a", "b"] {
        let pod_name = h.pods_on(node_name)[0].metadata.name.clone().unwrap();
        h.pod_mut(&pod_name).status.as_mut().unwrap().conditions = None;
    }
    h.set_image(V2);
    h.sync();
    let mut nodes: Vec<&str> = h
        .last
        .pods_to_create()
        .map(|p| template::target_node(p).unwrap())
        .collect();
    nodes.sort();
    assert_eq!(
        nodes,
        ["a", "b", "c"],
        "two replacements for unready pods plus one surge"
    );
}

#[test]
fn a_terminating_old_pod_does_not_block_a_surge_replacement() {
    let mut h = surge_cluster(IntOrString::Int(1), &["cp-1"], 0);
    let name = h.pods[0].metadata.name.clone().unwrap();
    h.pod_mut(&name).metadata.deletion_timestamp = Some(Time(h.now));
    h.sync();
    assert_eq!(
        h.last.pods_to_create().count(),
        1,
        "with surge a node needs one live pod"
    );
}
