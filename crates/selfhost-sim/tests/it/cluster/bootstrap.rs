//! Both bootstrap modes bring a control plane up on every control-plane node.

use k8s_openapi::api::apps::v1::DaemonSet;
use k8s_openapi::api::core::v1::{ConfigMap, Node, Pod};
use kube::Api;
use kube::api::ListParams;
use selfhost_sim::SimCluster;
use selfhost_sim::bootstrap::BootstrapMode;

use super::start;

#[tokio::test]
async fn static_mode_runs_kubeadm_static_pods_with_mirror_pods() {
    let cluster = start(SimCluster::builder().control_plane_nodes(2).workers(1)).await;
    let client = cluster.client();
    let nodes: Api<Node> = Api::all(client.clone());
    assert_eq!(
        nodes
            .list(&ListParams::default())
            .await
            .unwrap()
            .items
            .len(),
        3
    );
    let pods: Api<Pod> = Api::namespaced(client.clone(), "kube-system");
    let mut names: Vec<String> = pods
        .list(&ListParams::default().labels("tier=control-plane"))
        .await
        .unwrap()
        .items
        .into_iter()
        .map(|p| p.metadata.name.unwrap())
        .collect();
    names.sort();
    assert_eq!(
        names,
        [
            "kube-apiserver-cp-1",
            "kube-apiserver-cp-2",
            "kube-controller-manager-cp-1",
            "kube-controller-manager-cp-2",
            "kube-scheduler-cp-1",
            "kube-scheduler-cp-2",
        ]
    );
    let config: Api<ConfigMap> = Api::namespaced(client.clone(), "kube-system");
    assert!(
        config.get("kubeadm-config").await.unwrap().data.unwrap()["ClusterConfiguration"]
            .contains("kubernetesVersion: v1.33.2")
    );
    assert!(
        cluster
            .manifests_dir("cp-1")
            .unwrap()
            .join("kube-apiserver.yaml")
            .is_file()
    );
    assert_eq!(
        client.apiserver_version().await.unwrap().git_version,
        "v1.33.2"
    );
    cluster.shutdown().await;
}

#[tokio::test]
async fn self_hosted_mode_runs_the_control_plane_as_daemonsets() {
    let cluster = start(
        SimCluster::builder()
            .control_plane_nodes(3)
            .mode(BootstrapMode::SelfHosted)
            .version("v1.32.4"),
    )
    .await;
    let client = cluster.client();
    let ds: Api<DaemonSet> = Api::namespaced(client.clone(), "kube-system");
    for component in [
        "kube-apiserver",
        "kube-controller-manager",
        "kube-scheduler",
    ] {
        let status = ds
            .get(&format!("self-hosted-{component}"))
            .await
            .unwrap()
            .status
            .unwrap();
        assert_eq!(
            (status.desired_number_scheduled, status.number_ready),
            (3, 3),
            "{component}"
        );
    }
    assert!(
        std::fs::read_dir(cluster.manifests_dir("cp-1").unwrap())
            .unwrap()
            .next()
            .is_none()
    );
    assert_eq!(
        client.apiserver_version().await.unwrap().git_version,
        "v1.32.4"
    );
    cluster.shutdown().await;
}

#[tokio::test]
async fn tls_and_a_chosen_kubeconfig_path() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("config");
    let cluster = start(SimCluster::builder().tls(true).kubeconfig_path(&path)).await;
    assert_eq!(cluster.kubeconfig_path(), path);
    let written = std::fs::read_to_string(&path).unwrap();
    assert!(written.contains("https://127.0.0.1:"));
    assert!(cluster.endpoint().starts_with("https://"));
    let version = cluster.client().apiserver_version().await.unwrap();
    assert_eq!(version.git_version, "v1.33.2");
    cluster.shutdown().await;
}

#[tokio::test]
async fn contradictory_options_are_refused() {
    let cases = [
        (
            SimCluster::builder().control_plane_nodes(0).workers(1),
            "switch the self-hosting model off",
        ),
        (SimCluster::builder().version("1.33"), "is not of the form"),
        (
            SimCluster::builder()
                .control_plane_nodes(0)
                .self_hosting_model(false),
            "at least one node",
        ),
    ];
    for (builder, message) in cases {
        let err = builder.start().await.unwrap_err();
        assert!(err.to_string().contains(message), "{err}");
    }
}
