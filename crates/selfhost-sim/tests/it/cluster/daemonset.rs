//! The DaemonSet controller against a running cluster: where pods go, what they carry, the
//! status it reports, OnDelete, ControllerRevisions and minReadySeconds.

use std::collections::BTreeSet;

use k8s_openapi::api::apps::v1::ControllerRevision;
use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use kube::api::{DeleteParams, ListParams};
use serde_json::json;

use super::timeline::{image_of, node_of};
use super::*;

fn nodes_of(pods: &[Pod]) -> BTreeSet<String> {
    pods.iter().map(node_of).collect()
}

fn names(nodes: &[&str]) -> BTreeSet<String> {
    nodes.iter().map(|n| n.to_string()).collect()
}

#[tokio::test]
async fn pods_run_on_matching_nodes_only_and_follow_node_labels() {
    let cluster = start(workload_cluster(3)).await;
    for node in ["worker-1", "worker-2"] {
        patch_node(
            &cluster,
            node,
            json!({"metadata": {"labels": {"disk": "ssd"}}}),
        )
        .await;
    }
    let ds = app_daemonset(
        "ssd",
        APP_V1,
        json!({"template": {"spec": {"nodeSelector": {"disk": "ssd"}}}}),
    );
    let api = create_daemonset(&cluster, &ds).await;
    let done = wait_for_daemonset(&api, "ssd", "two pods", |d| rolled_out(d, 2)).await;
    let status = done.status.unwrap();
    assert_eq!(
        (
            status.current_number_scheduled,
            status.number_misscheduled,
            status.number_unavailable
        ),
        (2, 0, None)
    );
    let pod_api: Api<Pod> = Api::default_namespaced(cluster.client());
    let running = pods(&pod_api, "app=ssd").await;
    assert_eq!(nodes_of(&running), names(&["worker-1", "worker-2"]));
    for pod in &running {
        let owner = &pod.metadata.owner_references.as_ref().unwrap()[0];
        assert_eq!(
            (owner.kind.as_str(), owner.name.as_str()),
            ("DaemonSet", "ssd")
        );
        assert_eq!(
            (owner.controller, owner.block_owner_deletion),
            (Some(true), Some(true))
        );
        let labels = pod.metadata.labels.as_ref().unwrap();
        assert_eq!(labels["pod-template-generation"], "1");
        assert!(labels.contains_key("controller-revision-hash"));
        let term = &pod
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
            .node_selector_terms[0];
        let field = &term.match_fields.as_ref().unwrap()[0];
        assert_eq!(field.key, "metadata.name");
        assert_eq!(
            field.values.as_ref().unwrap(),
            &vec![node_of(pod)],
            "bound where the controller meant"
        );
    }

    patch_node(
        &cluster,
        "worker-3",
        json!({"metadata": {"labels": {"disk": "ssd"}}}),
    )
    .await;
    wait_for_daemonset(&api, "ssd", "a third pod", |d| rolled_out(d, 3)).await;
    patch_node(
        &cluster,
        "worker-1",
        json!({"metadata": {"labels": {"disk": null}}}),
    )
    .await;
    wait_for_daemonset(&api, "ssd", "back to two", |d| rolled_out(d, 2)).await;
    wait_for_pods(&pod_api, "app=ssd", "the worker-1 pod gone", |p| {
        nodes_of(p) == names(&["worker-2", "worker-3"])
    })
    .await;
    cluster.shutdown().await;
}

#[tokio::test]
async fn taints_keep_pods_away_unless_tolerated() {
    let cluster = start(workload_cluster(2)).await;
    let plain = create_daemonset(&cluster, &app_daemonset("plain", APP_V1, json!({}))).await;
    let everywhere = app_daemonset(
        "everywhere",
        APP_V1,
        json!({"template": {"spec": {"tolerations": [{"operator": "Exists"}]}}}),
    );
    create_daemonset(&cluster, &everywhere).await;
    wait_for_daemonset(&plain, "plain", "workers only", |d| rolled_out(d, 2)).await;
    wait_for_daemonset(&plain, "everywhere", "the control plane too", |d| {
        rolled_out(d, 3)
    })
    .await;

    patch_node(
        &cluster,
        "worker-2",
        json!({"spec": {"taints": [{"key": "dedicated", "value": "db", "effect": "NoExecute"}]}}),
    )
    .await;
    wait_for_daemonset(&plain, "plain", "leaving the tainted node", |d| {
        rolled_out(d, 1)
    })
    .await;
    let pod_api: Api<Pod> = Api::default_namespaced(cluster.client());
    wait_for_pods(&pod_api, "app=plain", "only worker-1", |p| {
        nodes_of(p) == names(&["worker-1"])
    })
    .await;
    let stays = wait_for_daemonset(&plain, "everywhere", "unchanged", |d| rolled_out(d, 3)).await;
    assert_eq!(stays.status.unwrap().number_misscheduled, 0);
    cluster.shutdown().await;
}

#[tokio::test]
async fn on_delete_replaces_only_the_pods_a_user_deletes() {
    let cluster = start(workload_cluster(3)).await;
    let ds = app_daemonset(
        "manual",
        APP_V1,
        json!({"updateStrategy": {"type": "OnDelete"}}),
    );
    let api = create_daemonset(&cluster, &ds).await;
    wait_for_daemonset(&api, "manual", "created", |d| rolled_out(d, 3)).await;
    set_image(&api, "manual", "app", APP_V2).await;
    let seen = wait_for_daemonset(&api, "manual", "the new generation observed", |d| {
        d.status.as_ref().and_then(|s| s.observed_generation) == Some(2)
    })
    .await;
    assert_eq!(
        seen.status.unwrap().updated_number_scheduled.unwrap_or(0),
        0,
        "nothing replaced by itself"
    );
    let pod_api: Api<Pod> = Api::default_namespaced(cluster.client());
    let before = pods(&pod_api, "app=manual").await;
    assert!(before.iter().all(|p| image_of(p) == APP_V1));
    let victim = before.iter().find(|p| node_of(p) == "worker-1").unwrap();
    pod_api
        .delete(
            victim.metadata.name.as_deref().unwrap(),
            &DeleteParams::default(),
        )
        .await
        .unwrap();
    let done = wait_for_daemonset(&api, "manual", "one pod updated", |d| {
        let s = d.status.clone().unwrap_or_default();
        s.updated_number_scheduled == Some(1) && s.number_available == Some(3)
    })
    .await;
    assert_eq!(done.status.unwrap().number_ready, 3);
    let after = pods(&pod_api, "app=manual").await;
    for pod in &after {
        let expected = if node_of(pod) == "worker-1" {
            APP_V2
        } else {
            APP_V1
        };
        assert_eq!(image_of(pod), expected, "{}", node_of(pod));
    }
    cluster.shutdown().await;
}

#[tokio::test]
async fn controller_revisions_record_each_template_and_a_rollback_reuses_one() {
    let cluster = start(workload_cluster(2)).await;
    let api = create_daemonset(&cluster, &app_daemonset("hist", APP_V1, json!({}))).await;
    wait_for_daemonset(&api, "hist", "created", |d| rolled_out(d, 2)).await;
    set_image(&api, "hist", "app", APP_V2).await;
    wait_for_daemonset(&api, "hist", "updated", |d| rolled_out(d, 2)).await;
    let revisions: Api<ControllerRevision> = Api::default_namespaced(cluster.client());
    let list = |revisions: Api<ControllerRevision>| async move {
        let mut items = revisions
            .list(&ListParams::default().labels("app=hist"))
            .await
            .unwrap()
            .items;
        items.sort_by_key(|r| r.revision);
        items
    };
    let history = list(revisions.clone()).await;
    assert_eq!(
        history.iter().map(|r| r.revision).collect::<Vec<_>>(),
        [1, 2]
    );
    for r in &history {
        let owner = &r.metadata.owner_references.as_ref().unwrap()[0];
        assert_eq!(
            (owner.name.as_str(), owner.controller),
            ("hist", Some(true))
        );
    }
    let hash = |r: &ControllerRevision| {
        r.metadata.labels.as_ref().unwrap()["controller-revision-hash"].clone()
    };
    let pod_api: Api<Pod> = Api::default_namespaced(cluster.client());
    let pod_hashes = |pods: &[Pod]| -> BTreeSet<String> {
        pods.iter()
            .map(|p| p.metadata.labels.as_ref().unwrap()["controller-revision-hash"].clone())
            .collect()
    };
    assert_eq!(
        pod_hashes(&pods(&pod_api, "app=hist").await),
        BTreeSet::from([hash(&history[1])])
    );

    set_image(&api, "hist", "app", APP_V1).await;
    wait_for_daemonset(&api, "hist", "rolled back", |d| rolled_out(d, 2)).await;
    let history = list(revisions).await;
    assert_eq!(
        history.len(),
        2,
        "the old template's revision is reused, not duplicated"
    );
    assert_eq!(
        history.last().unwrap().revision,
        3,
        "and renumbered as the newest"
    );
    let current = hash(history.last().unwrap());
    let rolled_back = wait_for_pods(&pod_api, "app=hist", "pods of the reused revision", |p| {
        p.len() == 2 && pod_hashes(p) == BTreeSet::from([current.clone()])
    })
    .await;
    assert!(
        rolled_back
            .iter()
            .all(|p| p.metadata.labels.as_ref().unwrap()["pod-template-generation"] == "3")
    );
    cluster.shutdown().await;
}

#[tokio::test]
async fn min_ready_seconds_delays_availability() {
    let cluster = start(workload_cluster(1)).await;
    let api = create_daemonset(
        &cluster,
        &app_daemonset("patient", APP_V1, json!({"minReadySeconds": 2})),
    )
    .await;
    let ready = wait_for_daemonset(&api, "patient", "Ready", |d| {
        d.status.as_ref().is_some_and(|s| s.number_ready == 1)
    })
    .await;
    let ready_at = tokio::time::Instant::now();
    assert_eq!(
        ready.status.unwrap().number_available.unwrap_or(0),
        0,
        "Ready is not yet available"
    );
    wait_for_daemonset(&api, "patient", "available", |d| rolled_out(d, 1)).await;
    assert!(
        ready_at.elapsed() >= std::time::Duration::from_secs(1),
        "available only after minReadySeconds (2 s, less the truncation of whole-second timestamps)"
    );
    cluster.shutdown().await;
}

#[tokio::test]
async fn a_tiny_watch_history_makes_every_component_relist_and_still_converge() {
    // Ten events of history: every informer, the kubelets' watch and the test's own watches
    // fall behind again and again (410) and must start over from a list.
    let cluster = start(workload_cluster(3).history_limit(10)).await;
    let api = create_daemonset(&cluster, &app_daemonset("relist", APP_V1, json!({}))).await;
    wait_for_daemonset(&api, "relist", "created", |d| rolled_out(d, 3)).await;
    set_image(&api, "relist", "app", APP_V2).await;
    wait_for_daemonset(&api, "relist", "updated", |d| rolled_out(d, 3)).await;
    api.delete("relist", &DeleteParams::background())
        .await
        .unwrap();
    let pod_api: Api<Pod> = Api::default_namespaced(cluster.client());
    wait_for_pods(&pod_api, "app=relist", "the pods collected", |p| {
        p.is_empty()
    })
    .await;
    cluster.shutdown().await;
}
