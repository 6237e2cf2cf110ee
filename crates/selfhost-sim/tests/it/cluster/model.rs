//! The model proves the problem: on one control-plane node a naive rollout of a self-hosted
//! component (what `kubectl set image` does) deadlocks the cluster, on three nodes the same
//! rollout completes with the API up throughout. Asserted with the availability recorder and
//! a prober over real HTTP.
//!
//! Proving that something never happens needs an observation window. With fast timings a
//! whole control-plane rollout takes tens of milliseconds, so [`WINDOW`] is generous: a
//! recovery the model allowed would have happened many times over.

use std::time::Duration;

use k8s_openapi::api::apps::v1::DaemonSet;
use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use selfhost_sim::SimTimings;
use selfhost_sim::bootstrap::BootstrapMode;
use selfhost_sim::cluster::{Leadership, ProberOptions, Role};
use selfhost_sim::resources::PODS;
use tokio::time::Instant;

use super::timeline::image_of;
use super::*;

/// How long the tests watch for a recovery that must not come.
const WINDOW: Duration = Duration::from_millis(1500);
const NEXT: &str = "v1.34.0";

fn self_hosted(control_planes: usize) -> SimClusterBuilder {
    SimCluster::builder()
        .control_plane_nodes(control_planes)
        .mode(BootstrapMode::SelfHosted)
}

async fn set_component_image(cluster: &SimCluster, component: &str) {
    let api: Api<DaemonSet> = Api::namespaced(cluster.client(), "kube-system");
    let image = format!("registry.k8s.io/{component}:{NEXT}");
    set_image(&api, &format!("self-hosted-{component}"), component, &image).await;
}

async fn wait_until(what: &str, mut check: impl FnMut() -> bool) {
    let deadline = Instant::now() + DEADLINE;
    while !check() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

fn stored_pods(cluster: &SimCluster, component: &str) -> Vec<Pod> {
    let store = cluster.store();
    let list = store
        .list(&PODS, &selfhost_sim::store::ListOptions::default())
        .unwrap();
    list.items
        .iter()
        .map(|p| serde_json::from_value::<Pod>((**p).clone()).unwrap())
        .filter(|p| {
            p.metadata
                .labels
                .as_ref()
                .and_then(|l| l.get("component"))
                .map(String::as_str)
                == Some(component)
        })
        .collect()
}

#[tokio::test]
async fn a_naive_apiserver_rollout_on_one_node_takes_the_api_down_for_good() {
    let cluster = start(self_hosted(1)).await;
    let prober = cluster.prober(ProberOptions::default()).await.unwrap();
    let t0 = Instant::now();
    set_component_image(&cluster, "kube-apiserver").await;
    assert!(
        cluster.recorder().wait_for_api(false, DEADLINE).await,
        "the API goes down"
    );
    tokio::time::sleep(WINDOW).await;

    let recorder = cluster.recorder();
    let down_since = recorder
        .down_for_good_since(t0)
        .expect("down, and never back");
    assert!(down_since.elapsed() >= WINDOW);
    assert!(
        cluster.client().apiserver_version().await.is_err(),
        "connections are refused"
    );
    let report = prober.stop().await;
    assert!(report.reads.failures() > 0 && report.writes.failures() > 0);
    assert!(report.reads.longest_failure_window() >= WINDOW / 2);
    assert!(
        !report.reads.samples.last().unwrap().ok,
        "the last read failed too"
    );

    // What the store (etcd) holds: the old pod, deleted but never finally removed, and no
    // replacement, because the controller-manager could not reach the API to create one.
    let pods = stored_pods(&cluster, "kube-apiserver");
    assert_eq!(pods.len(), 1, "{pods:#?}");
    assert!(
        pods[0].metadata.deletion_timestamp.is_some(),
        "stuck Terminating"
    );
    assert_eq!(image_of(&pods[0]), "registry.k8s.io/kube-apiserver:v1.33.2");
    cluster.shutdown().await;
}

#[tokio::test]
async fn a_naive_controller_manager_rollout_on_one_node_never_creates_the_replacement() {
    let cluster = start(self_hosted(1)).await;
    let t0 = Instant::now();
    set_component_image(&cluster, "kube-controller-manager").await;
    wait_until("the controller-manager gone", || {
        cluster.leader(Role::ControllerManager) == Leadership::Vacant
            && stored_pods(&cluster, "kube-controller-manager").is_empty()
    })
    .await;
    tokio::time::sleep(WINDOW).await;

    let pods: Api<Pod> = Api::namespaced(cluster.client(), "kube-system");
    let left = super::pods(&pods, "component=kube-controller-manager").await;
    assert!(
        left.is_empty(),
        "no replacement was ever created: {left:#?}"
    );
    assert!(
        !cluster.recorder().was_down(t0, Instant::now()),
        "the API itself stayed up"
    );
    cluster.shutdown().await;
}

#[tokio::test]
async fn a_naive_scheduler_rollout_on_one_node_leaves_the_replacement_pending() {
    let cluster = start(self_hosted(1)).await;
    set_component_image(&cluster, "kube-scheduler").await;
    let new_image = format!("registry.k8s.io/kube-scheduler:{NEXT}");
    wait_until("the replacement created and the old scheduler gone", || {
        let pods = stored_pods(&cluster, "kube-scheduler");
        pods.len() == 1 && image_of(&pods[0]) == new_image
    })
    .await;
    tokio::time::sleep(WINDOW).await;

    let pods: Api<Pod> = Api::namespaced(cluster.client(), "kube-system");
    let left = super::pods(&pods, "component=kube-scheduler").await;
    assert_eq!(left.len(), 1);
    let spec = left[0].spec.as_ref().unwrap();
    assert_eq!(spec.node_name, None, "nobody binds it");
    assert_eq!(
        left[0].status.as_ref().unwrap().phase.as_deref(),
        Some("Pending")
    );
    assert_eq!(cluster.leader(Role::Scheduler), Leadership::Vacant);
    cluster.shutdown().await;
}

#[tokio::test]
async fn the_same_rollouts_on_three_nodes_complete_with_the_api_up_throughout() {
    // Slow enough for the prober to see the rollouts: about a second in all.
    let cluster = start(self_hosted(3).timings(SimTimings::scaled(100))).await;
    let prober = cluster
        .prober(ProberOptions {
            timeout: Duration::from_secs(5),
            ..ProberOptions::default()
        })
        .await
        .unwrap();
    let t0 = Instant::now();
    let api: Api<DaemonSet> = Api::namespaced(cluster.client(), "kube-system");
    for component in [
        "kube-apiserver",
        "kube-controller-manager",
        "kube-scheduler",
    ] {
        set_component_image(&cluster, component).await;
        let name = format!("self-hosted-{component}");
        wait_for_daemonset(&api, &name, "rolled out", |d| rolled_out(d, 3)).await;
    }
    let report = prober.stop().await;
    assert!(
        !cluster.recorder().was_down(t0, Instant::now()),
        "never fully down: {:?}",
        cluster.recorder().api_samples()
    );
    assert_eq!((report.reads.failures(), report.writes.failures()), (0, 0));
    assert!(report.reads.attempts() > 10 && report.writes.attempts() > 2);
    assert_eq!(
        cluster
            .client()
            .apiserver_version()
            .await
            .unwrap()
            .git_version,
        NEXT
    );
    let pods: Api<Pod> = Api::namespaced(cluster.client(), "kube-system");
    let control_plane = super::pods(&pods, "tier=control-plane").await;
    assert_eq!(control_plane.len(), 9);
    assert!(control_plane.iter().all(|p| image_of(p).ends_with(NEXT)));
    cluster.shutdown().await;
}

#[tokio::test]
async fn without_the_model_a_single_node_rollout_completes() {
    let cluster = start(self_hosted(1).self_hosting_model(false)).await;
    let t0 = Instant::now();
    let api: Api<DaemonSet> = Api::namespaced(cluster.client(), "kube-system");
    set_component_image(&cluster, "kube-apiserver").await;
    wait_for_daemonset(&api, "self-hosted-kube-apiserver", "rolled out", |d| {
        rolled_out(d, 1)
    })
    .await;
    assert!(!cluster.recorder().was_down(t0, Instant::now()));
    cluster.shutdown().await;
}
