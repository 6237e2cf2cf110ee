//! DaemonSets edited by hand into odd shapes, on clusters of their own: a sidecar the target
//! would drop, the component's container replaced, a selector that is not kubeadm's, another
//! tool's mark. Each is refused (exit 3) by the `daemonset-shape` check with what to undo,
//! and the cluster is left as the hand edit left it.

use std::time::Duration;

use k8s_openapi::api::apps::v1::DaemonSet;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::Api;
use kube::api::{DeleteParams, Patch, PatchParams, PostParams, PropagationPolicy};
use selfhost_sim::SimCluster;
use serde_json::json;

use super::{own_cluster, run_on};

const SCHEDULER: &str = "self-hosted-kube-scheduler";

fn daemonsets(sim: &SimCluster) -> Api<DaemonSet> {
    Api::namespaced(sim.client(), "kube-system")
}

async fn patch(sim: &SimCluster, patch: serde_json::Value) {
    daemonsets(sim)
        .patch(SCHEDULER, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .expect("patched");
}

/// Waits until the scheduler's DaemonSet has rolled its current template out everywhere.
async fn converged(sim: &SimCluster) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    loop {
        let ds = daemonsets(sim).get(SCHEDULER).await.expect("get");
        let status = ds.status.unwrap_or_default();
        if status.observed_generation == ds.metadata.generation
            && status.desired_number_scheduled > 0
            && status.updated_number_scheduled == Some(status.desired_number_scheduled)
            && status.number_ready == status.desired_number_scheduled
        {
            return;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "{SCHEDULER} did not converge: {status:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

const APPLY: &[&str] = &["apply", "v1.34.0", "--yes"];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn daemonset_with_a_sidecar_the_target_would_drop() {
    let sim = own_cluster(3, "v1.33.1", &["fluent/fluent-bit:3.2"]).await;
    let spec = daemonsets(&sim).get(SCHEDULER).await.expect("get").spec;
    let mut containers = spec
        .expect("spec")
        .template
        .spec
        .expect("pod spec")
        .containers;
    containers.push(k8s_openapi::api::core::v1::Container {
        name: "log-shipper".into(),
        image: Some("fluent/fluent-bit:3.2".into()),
        ..Default::default()
    });
    patch(
        &sim,
        json!({"spec": {"template": {"spec": {"containers": containers}}}}),
    )
    .await;
    converged(&sim).await;
    run_on(
        &sim,
        APPLY,
        3,
        &[
            "daemonset-shape (kube-scheduler)",
            "log-shipper (fluent/fluent-bit:3.2)",
            "would remove them",
            "--force",
            "nothing was changed",
        ],
    )
    .await;
    sim.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn daemonset_without_its_component_container() {
    let sim = own_cluster(3, "v1.33.1", &["registry.k8s.io/pause:3.10"]).await;
    // OnDelete first, so that the edit is only in the template (a rolling edit would take
    // the cluster's last scheduler away, and nothing would schedule its replacement).
    patch(
        &sim,
        json!({"spec": {"updateStrategy": {"type": "OnDelete", "rollingUpdate": null}}}),
    )
    .await;
    let spec = daemonsets(&sim).get(SCHEDULER).await.expect("get").spec;
    let mut containers = spec
        .expect("spec")
        .template
        .spec
        .expect("pod spec")
        .containers;
    containers[0].image = Some("registry.k8s.io/pause:3.10".into());
    patch(
        &sim,
        json!({"spec": {"template": {"spec": {"containers": containers}}}}),
    )
    .await;
    run_on(
        &sim,
        APPLY,
        3,
        &[
            "runs no kube-scheduler container",
            "registry.k8s.io/pause:3.10",
            "put the kube-scheduler container back",
            "selfhost manifests v1.34.0 --as daemonsets",
        ],
    )
    .await;
    sim.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn daemonset_with_a_selector_that_is_not_kubeadms() {
    let sim = own_cluster(3, "v1.33.1", &[]).await;
    // A selector cannot be edited: the DaemonSet is recreated around its running pods, as a
    // hand edit would do it.
    let api = daemonsets(&sim);
    let old = api.get(SCHEDULER).await.expect("get");
    api.delete(
        SCHEDULER,
        &DeleteParams {
            propagation_policy: Some(PropagationPolicy::Orphan),
            ..DeleteParams::default()
        },
    )
    .await
    .expect("deleted");
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    while api.get_opt(SCHEDULER).await.expect("get").is_some() {
        assert!(tokio::time::Instant::now() < deadline, "never deleted");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let mut spec = old.spec.expect("spec");
    let selector = [("tier".to_string(), "control-plane-scheduler".to_string())];
    spec.selector.match_labels = Some(selector.clone().into());
    let labels = spec
        .template
        .metadata
        .get_or_insert_with(Default::default)
        .labels
        .get_or_insert_with(Default::default);
    labels.extend(selector);
    let recreated = DaemonSet {
        metadata: ObjectMeta {
            name: Some(SCHEDULER.into()),
            namespace: Some("kube-system".into()),
            labels: old.metadata.labels.clone(),
            ..ObjectMeta::default()
        },
        spec: Some(spec),
        status: None,
    };
    api.create(&PostParams::default(), &recreated)
        .await
        .expect("recreated");
    converged(&sim).await;
    run_on(
        &sim,
        APPLY,
        3,
        &[
            "selects its pods by {tier=control-plane-scheduler}",
            "not by k8s-app=self-hosted-kube-scheduler",
            "recreate it with the selector k8s-app=self-hosted-kube-scheduler",
        ],
    )
    .await;
    sim.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn daemonset_managed_by_another_tool() {
    let sim = own_cluster(1, "v1.33.1", &[]).await;
    patch(
        &sim,
        json!({"metadata": {
            "labels": {"app.kubernetes.io/managed-by": "Helm"},
            "annotations": {"meta.helm.sh/release-name": "control-plane"},
        }}),
    )
    .await;
    run_on(
        &sim,
        APPLY,
        3,
        &[
            "is managed by Helm",
            "app.kubernetes.io/managed-by=Helm",
            "upgrade through Helm",
            "pass --force",
        ],
    )
    .await;
    sim.shutdown().await;
}
