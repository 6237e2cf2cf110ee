//! Nodes that stop answering: the kubelet's own NotReady, and a machine that is off, which
//! only the controller-manager's node lifecycle notices (after its grace period).

use k8s_openapi::api::core::v1::{Node, Pod};
use kube::Api;
use selfhost_sim::controllers::kubelet::NodeState;
use serde_json::json;

use super::timeline::{node_of, serving};
use super::*;

fn ready_condition(node: &Node) -> (String, String) {
    let c = node
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .and_then(|c| c.iter().find(|c| c.type_ == "Ready"))
        .expect("a Ready condition");
    (c.status.clone(), c.reason.clone().unwrap_or_default())
}

fn taints(node: &Node) -> Vec<(String, String)> {
    let mut t: Vec<_> = node
        .spec
        .as_ref()
        .and_then(|s| s.taints.clone())
        .unwrap_or_default()
        .into_iter()
        .map(|t| (t.key, t.effect))
        .collect();
    t.sort();
    t
}

async fn wait_for_node(api: &Api<Node>, name: &str, what: &str, check: impl Fn(&Node) -> bool) {
    let cond = |n: Option<&Node>| n.is_some_and(&check);
    let waited = tokio::time::timeout(
        DEADLINE,
        kube::runtime::wait::await_condition(api.clone(), name, cond),
    )
    .await;
    assert!(
        matches!(waited, Ok(Ok(Some(_)))),
        "timed out waiting for {what}: {:#?}",
        api.get(name).await.ok().and_then(|n| n.status)
    );
}

#[tokio::test]
async fn a_node_that_goes_down_turns_unknown_and_comes_back() {
    let cluster = start(workload_cluster(2)).await;
    let ds = create_daemonset(&cluster, &app_daemonset("agent", APP_V1, json!({}))).await;
    wait_for_daemonset(&ds, "agent", "on both workers", |d| rolled_out(d, 2)).await;
    let nodes: Api<Node> = Api::all(cluster.client());
    let pods: Api<Pod> = Api::default_namespaced(cluster.client());

    cluster.set_node_state("worker-1", NodeState::Down).unwrap();
    wait_for_node(&nodes, "worker-1", "Unknown after the grace period", |n| {
        ready_condition(n) == ("Unknown".into(), "NodeStatusUnknown".into())
            && taints(n)
                == [
                    (
                        "node.kubernetes.io/unreachable".to_string(),
                        "NoExecute".to_string(),
                    ),
                    (
                        "node.kubernetes.io/unreachable".to_string(),
                        "NoSchedule".to_string(),
                    ),
                ]
    })
    .await;
    let on_dead_node = wait_for_pods(&pods, "app=agent", "its pod marked not Ready", |p| {
        p.iter().any(|p| node_of(p) == "worker-1" && !serving(p))
    })
    .await;
    assert_eq!(
        on_dead_node.len(),
        2,
        "a DaemonSet pod tolerates unreachable: not evicted"
    );

    cluster.set_node_state("worker-1", NodeState::Up).unwrap();
    wait_for_node(&nodes, "worker-1", "Ready and untainted again", |n| {
        ready_condition(n).0 == "True" && taints(n).is_empty()
    })
    .await;
    wait_for_daemonset(&ds, "agent", "both pods Ready again", |d| rolled_out(d, 2)).await;
    cluster.shutdown().await;
}

#[tokio::test]
async fn a_kubelet_that_is_not_ready_says_so_at_once() {
    let cluster = start(workload_cluster(1)).await;
    let nodes: Api<Node> = Api::all(cluster.client());
    cluster
        .set_node_state("worker-1", NodeState::NotReady)
        .unwrap();
    wait_for_node(
        &nodes,
        "worker-1",
        "NotReady with the not-ready taint",
        |n| {
            ready_condition(n) == ("False".into(), "KubeletNotReady".into())
                && taints(n).contains(&("node.kubernetes.io/not-ready".into(), "NoSchedule".into()))
        },
    )
    .await;
    cluster.set_node_state("worker-1", NodeState::Up).unwrap();
    wait_for_node(&nodes, "worker-1", "Ready again", |n| {
        ready_condition(n).0 == "True" && taints(n).is_empty()
    })
    .await;
    assert!(matches!(
        cluster.set_node_state("worker-9", NodeState::Down),
        Err(selfhost_sim::ClusterError::UnknownNode(_))
    ));
    cluster.shutdown().await;
}

#[tokio::test]
async fn the_pods_of_a_deleted_node_are_collected() {
    let cluster = start(workload_cluster(2)).await;
    let ds = create_daemonset(&cluster, &app_daemonset("agent", APP_V1, json!({}))).await;
    wait_for_daemonset(&ds, "agent", "on both workers", |d| rolled_out(d, 2)).await;
    cluster.set_node_state("worker-2", NodeState::Down).unwrap();
    let nodes: Api<Node> = Api::all(cluster.client());
    nodes
        .delete("worker-2", &kube::api::DeleteParams::default())
        .await
        .unwrap();
    let pods: Api<Pod> = Api::default_namespaced(cluster.client());
    wait_for_pods(&pods, "app=agent", "the orphaned pod deleted", |p| {
        p.len() == 1 && node_of(&p[0]) == "worker-1"
    })
    .await;
    wait_for_daemonset(&ds, "agent", "one node left", |d| rolled_out(d, 1)).await;
    cluster.shutdown().await;
}
