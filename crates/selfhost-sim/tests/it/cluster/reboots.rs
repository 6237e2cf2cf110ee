//! Reboots and power cuts as real machines have them: a rebooted kubelet starts its static
//! pods from disk at once but learns its other pods only from the API. So a self-hosted
//! control plane whose every node lost power never comes back by itself (its kube-apiserver
//! was one of those other pods), while a kubeadm static-pod control plane does; a kubelet
//! restart keeps the containers running and loses nothing.

use std::time::Duration;

use selfhost_sim::bootstrap::BootstrapMode;
use tokio::time::Instant;

use super::*;

/// How long the nodes stay off.
const OFF: Duration = Duration::from_millis(300);
/// How long a test watches for a recovery that must not come: with fast timings a whole
/// control plane starts in well under a second.
const WINDOW: Duration = Duration::from_millis(2500);

fn control_plane(nodes: usize, mode: BootstrapMode) -> SimClusterBuilder {
    SimCluster::builder().control_plane_nodes(nodes).mode(mode)
}

/// The processes serving the API now: (node, process) pairs.
fn apiservers(cluster: &SimCluster) -> Vec<(String, String)> {
    cluster
        .processes()
        .ready("kube-apiserver")
        .into_iter()
        .map(|(node, c)| (node.to_string(), format!("{:?}", c.process)))
        .collect()
}

#[tokio::test]
async fn a_self_hosted_control_plane_never_comes_back_from_a_power_cut() {
    let cluster = start(control_plane(1, BootstrapMode::SelfHosted)).await;
    assert!(cluster.is_api_up());
    cluster.power_cycle(OFF).await;
    assert!(
        cluster.recorder().wait_for_api(false, DEADLINE).await,
        "the API goes down with the machine"
    );
    tokio::time::sleep(WINDOW).await;
    assert!(
        !cluster.is_api_up(),
        "nothing starts the kube-apiserver: its pod is known only to the API"
    );
    assert!(apiservers(&cluster).is_empty(), "no kube-apiserver runs");
    assert!(
        cluster.client().apiserver_version().await.is_err(),
        "and clients get no answer"
    );
    cluster.shutdown().await;
}

#[tokio::test]
async fn a_static_pod_control_plane_comes_back_from_a_power_cut_by_itself() {
    let cluster = start(control_plane(1, BootstrapMode::Static)).await;
    let before = Instant::now();
    cluster.power_cycle(OFF).await;
    assert!(
        cluster.recorder().wait_for_api(true, DEADLINE).await,
        "the kubelet starts the static kube-apiserver from its manifest"
    );
    let version = cluster.client().apiserver_version().await;
    assert!(version.is_ok(), "it answers: {version:?}");
    assert!(before.elapsed() >= OFF);
    cluster.shutdown().await;
}

#[tokio::test]
async fn a_kubelet_restart_keeps_a_self_hosted_control_plane_serving() {
    let cluster = start(control_plane(1, BootstrapMode::SelfHosted)).await;
    let serving = apiservers(&cluster);
    assert_eq!(serving.len(), 1);
    let t0 = Instant::now();
    cluster.restart_kubelet("cp-1").unwrap();
    tokio::time::sleep(WINDOW).await;
    assert!(
        cluster.recorder().down_for_good_since(t0).is_none() && cluster.is_api_up(),
        "the API is up"
    );
    assert_eq!(
        apiservers(&cluster),
        serving,
        "the same process serves: the restarted kubelet adopted its pod"
    );
    assert!(matches!(
        cluster.restart_kubelet("cp-9"),
        Err(selfhost_sim::ClusterError::UnknownNode(_))
    ));
    cluster.shutdown().await;
}

#[tokio::test]
async fn one_rebooted_node_of_three_runs_its_self_hosted_pods_again() {
    let cluster = start(control_plane(3, BootstrapMode::SelfHosted)).await;
    cluster.reboot("cp-2", OFF).await.unwrap();
    let deadline = Instant::now() + DEADLINE;
    loop {
        let on_cp2 = apiservers(&cluster).iter().any(|(node, _)| node == "cp-2");
        if on_cp2 && cluster.is_api_up() {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "cp-2 relists its pods from the other nodes' API and runs its kube-apiserver again"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    cluster.shutdown().await;
}
