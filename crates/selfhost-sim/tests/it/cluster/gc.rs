//! Cascading deletion of a DaemonSet with the controllers running: background, foreground
//! (the DaemonSet waits for its pods' graceful termination), orphan (the pods stay, and a new
//! DaemonSet adopts them); and no collection at all while no controller-manager runs.

use std::time::Duration;

use k8s_openapi::api::apps::v1::DaemonSet;
use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use kube::api::DeleteParams;
use selfhost_sim::cluster::{Leadership, Role};
use selfhost_sim::controllers::kubelet::ImageBehaviour;
use serde_json::json;
use tokio::time::Instant;

use super::*;

/// Pods that linger one second after SIGTERM, so a foreground deletion visibly waits.
const LINGERING: &str = "example.com/lingering:1";

fn lingering_cluster() -> SimClusterBuilder {
    let linger = ImageBehaviour {
        stop_delay: Some(Duration::from_secs(1)),
        ..ImageBehaviour::default()
    };
    workload_cluster(2).image(LINGERING, linger)
}

async fn running(cluster: &SimCluster, name: &str, image: &str) -> (Api<DaemonSet>, Api<Pod>) {
    let ds = create_daemonset(cluster, &app_daemonset(name, image, json!({}))).await;
    wait_for_daemonset(&ds, name, "running", |d| rolled_out(d, 2)).await;
    (ds, Api::default_namespaced(cluster.client()))
}

#[tokio::test]
async fn background_deletion_removes_the_daemonset_then_its_pods() {
    let cluster = start(lingering_cluster()).await;
    let (ds, pods) = running(&cluster, "bg", LINGERING).await;
    ds.delete("bg", &DeleteParams::background()).await.unwrap();
    assert!(
        ds.get_opt("bg").await.unwrap().is_none(),
        "the owner goes at once"
    );
    wait_for_pods(&pods, "app=bg", "the pods Terminating", |p| {
        p.len() == 2 && p.iter().all(|p| p.metadata.deletion_timestamp.is_some())
    })
    .await;
    wait_for_pods(&pods, "app=bg", "the pods gone", |p| p.is_empty()).await;
    cluster.shutdown().await;
}

#[tokio::test]
async fn foreground_deletion_waits_for_the_pods_to_terminate() {
    let cluster = start(lingering_cluster()).await;
    let (ds, pods) = running(&cluster, "fg", LINGERING).await;
    let asked = Instant::now();
    ds.delete("fg", &DeleteParams::foreground()).await.unwrap();
    let deleting = ds.get("fg").await.unwrap();
    assert!(deleting.metadata.deletion_timestamp.is_some());
    assert!(
        deleting
            .metadata
            .finalizers
            .unwrap()
            .contains(&"foregroundDeletion".to_string())
    );
    wait_for_pods(&pods, "app=fg", "the pods Terminating", |p| {
        p.len() == 2 && p.iter().all(|p| p.metadata.deletion_timestamp.is_some())
    })
    .await;
    let deadline = Instant::now() + DEADLINE;
    while ds.get_opt("fg").await.unwrap().is_some() {
        assert!(Instant::now() < deadline, "the DaemonSet goes in the end");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(
        super::pods(&pods, "app=fg").await.is_empty(),
        "only after its pods"
    );
    assert!(
        asked.elapsed() >= Duration::from_millis(900),
        "it waited for the graceful stop"
    );
    cluster.shutdown().await;
}

#[tokio::test]
async fn orphaned_pods_stay_and_a_new_daemonset_adopts_them() {
    let cluster = start(workload_cluster(2)).await;
    let (ds, pods) = running(&cluster, "orphans", APP_V1).await;
    let before: Vec<_> = super::pods(&pods, "app=orphans")
        .await
        .into_iter()
        .map(|p| p.metadata.uid)
        .collect();
    ds.delete("orphans", &DeleteParams::orphan()).await.unwrap();
    let freed = wait_for_pods(&pods, "app=orphans", "the references removed", |p| {
        p.len() == 2
            && p.iter().all(|p| {
                p.metadata
                    .owner_references
                    .as_ref()
                    .is_none_or(|o| o.is_empty())
            })
    })
    .await;
    assert!(ds.get_opt("orphans").await.unwrap().is_none());
    assert!(
        freed
            .iter()
            .all(|p| p.metadata.deletion_timestamp.is_none()),
        "still running"
    );

    create_daemonset(&cluster, &app_daemonset("orphans", APP_V1, json!({}))).await;
    let adopted = wait_for_pods(&pods, "app=orphans", "adopted by the new DaemonSet", |p| {
        p.iter().all(|p| {
            p.metadata
                .owner_references
                .as_ref()
                .is_some_and(|o| o.len() == 1)
        })
    })
    .await;
    let after: Vec<_> = adopted.into_iter().map(|p| p.metadata.uid).collect();
    assert_eq!(before.len(), 2);
    assert!(
        before.iter().all(|uid| after.contains(uid)),
        "the same pods, not new ones"
    );
    wait_for_daemonset(&ds, "orphans", "counted by the new owner", |d| {
        rolled_out(d, 2)
    })
    .await;
    cluster.shutdown().await;
}

#[tokio::test]
async fn nothing_is_collected_while_no_controller_manager_runs() {
    let cluster = start(workload_cluster(2)).await;
    let (ds, pods) = running(&cluster, "kept", APP_V1).await;
    let manifests = cluster.manifests_dir("cp-1").unwrap().to_path_buf();
    let manifest = manifests.join("kube-controller-manager.yaml");
    let saved = std::fs::read(&manifest).unwrap();
    std::fs::remove_file(&manifest).unwrap();
    let deadline = Instant::now() + DEADLINE;
    while cluster.leader(Role::ControllerManager) != Leadership::Vacant {
        assert!(Instant::now() < deadline, "the controller-manager stops");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    ds.delete("kept", &DeleteParams::background())
        .await
        .unwrap();
    // Long enough for the collector to have acted many times over, had it been running.
    tokio::time::sleep(Duration::from_secs(1)).await;
    let left = super::pods(&pods, "app=kept").await;
    assert_eq!(left.len(), 2);
    assert!(left.iter().all(|p| p.metadata.deletion_timestamp.is_none()));

    std::fs::write(&manifest, saved).unwrap();
    wait_for_pods(&pods, "app=kept", "collected once it is back", |p| {
        p.is_empty()
    })
    .await;
    cluster.shutdown().await;
}
