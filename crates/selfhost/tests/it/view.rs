//! The watched view follows the cluster, and survives the API server going away.

use std::time::Duration;

use k8s_openapi::api::apps::v1::DaemonSet;
use selfhost::ClusterView;
use selfhost_sim::resources::DAEMONSETS;
use selfhost_sim::store::WriteOptions;
use serde_json::json;
use tokio::time::Instant;

use crate::sim;

fn daemonset(name: &str) -> serde_json::Value {
    json!({
        "apiVersion": "apps/v1", "kind": "DaemonSet",
        "metadata": { "name": name, "namespace": "kube-system" },
        "spec": {
            "selector": { "matchLabels": { "app": name } },
            "template": { "metadata": { "labels": { "app": name } },
                          "spec": { "containers": [{ "name": "c", "image": "busybox" }] } },
        },
    })
}

fn has(view: &ClusterView, name: &str) -> bool {
    view.daemonsets
        .state()
        .iter()
        .any(|d: &std::sync::Arc<DaemonSet>| d.metadata.name.as_deref() == Some(name))
}

/// A view of the simulator, listed once.
async fn view_of(sim: &selfhost_sim::SimServer) -> ClusterView {
    let clients = crate::clients(sim.kubeconfig_path()).await;
    let view = ClusterView::start(&clients.api);
    view.ready(Duration::from_secs(10))
        .await
        .expect("initial list");
    view
}

#[tokio::test]
async fn the_view_sees_changes_and_outlives_an_apiserver_crash() {
    let sim = sim().await;
    let mut view = view_of(&sim).await;

    sim.store()
        .create(
            &DAEMONSETS,
            "kube-system",
            daemonset("first"),
            &WriteOptions::default(),
        )
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    view.wait_until("DaemonSet first to appear", deadline, |v| has(v, "first"))
        .await
        .expect("seen");

    // The API goes away; a change happens meanwhile (the store is etcd: it survives).
    sim.crash().await;
    sim.store()
        .create(
            &DAEMONSETS,
            "kube-system",
            daemonset("second"),
            &WriteOptions::default(),
        )
        .unwrap();
    sim.restart().await.expect("restart");
    let deadline = Instant::now() + Duration::from_secs(20);
    view.wait_until(
        "DaemonSet second to appear after the restart",
        deadline,
        |v| has(v, "second"),
    )
    .await
    .expect("the watch reconnected and relisted");
}

#[tokio::test]
async fn a_wait_that_runs_out_names_what_it_waited_for() {
    let sim = sim().await;
    let mut view = view_of(&sim).await;
    let deadline = Instant::now() + Duration::from_millis(200);
    let err = view
        .wait_until("DaemonSet never to appear", deadline, |v| has(v, "never"))
        .await
        .unwrap_err();
    assert!(
        err.to_string()
            .starts_with("DaemonSet never to appear did not happen within"),
        "{err}"
    );
}

/// A change that arrives after the caches were read for a decision, but before the wait that
/// follows it begins, wakes that wait at once: the engine must not sleep on a view it has not
/// decided on. (Marking changes seen only when the wait began lost such a change until some
/// later one; this server has no controllers, so there is no later one.)
#[tokio::test]
async fn a_change_that_came_while_deciding_wakes_the_next_wait() {
    let sim = sim().await;
    let mut view = view_of(&sim).await;
    view.mark_seen();

    sim.store()
        .create(
            &DAEMONSETS,
            "kube-system",
            daemonset("late"),
            &WriteOptions::default(),
        )
        .unwrap();
    // Watch the cache, not the change feed, so the change stays unconsumed.
    let deadline = Instant::now() + Duration::from_secs(10);
    while !has(&view, "late") {
        assert!(
            Instant::now() < deadline,
            "the watch delivers the DaemonSet"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }

    let waited = Instant::now();
    assert!(
        view.next_change(Instant::now() + Duration::from_secs(5))
            .await,
        "the change made after the last read wakes the wait"
    );
    assert!(
        waited.elapsed() < Duration::from_secs(2),
        "woken at once, not at the deadline: {:?}",
        waited.elapsed()
    );
}
