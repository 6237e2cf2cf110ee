//! `kubectl get pods` on a running cluster shows initialization as a user knows it: `Init:1/2`,
//! `Init:ImagePullBackOff`, `Init:CrashLoopBackOff`, `Init:Error`, then `PodInitializing`.
//! Back-offs and slow pulls last ten minutes here, so every pod holds its state while kubectl
//! reads it (the pods are bound to the worker by name, and control-plane processes wait for
//! the API instead of exiting, so nothing the test needs sits in such a back-off).

use std::time::Duration;

use k8s_openapi::api::core::v1::{ContainerStatus, Pod};
use kube::Api;
use kube::api::PostParams;
use selfhost_sim::controllers::backoff::BackoffPolicy;
use selfhost_sim::controllers::kubelet::ImageBehaviour;
use selfhost_sim::{SimCluster, SimTimings};
use serde_json::{Value, json};

use crate::cluster::{APP_V1, start, wait_for_pods, workload_cluster};
use crate::common::object;

use super::{Kubectl, kubectl_on_path, row};

const SLOW: &str = "example.com/slow:1";
const BROKEN: &str = "example.com/broken:1";

fn pod(name: &str, mut spec: Value) -> Pod {
    spec["nodeName"] = json!("worker-1");
    object(json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": { "name": name, "labels": { "test": "init" } },
        "spec": spec,
    }))
}

fn init(name: &str, image: &str, command: &[&str]) -> Value {
    json!({ "name": name, "image": image, "command": command })
}

fn init_statuses(pod: &Pod) -> Vec<ContainerStatus> {
    pod.status
        .as_ref()
        .and_then(|s| s.init_container_statuses.clone())
        .unwrap_or_default()
}

fn waiting(c: &ContainerStatus) -> Option<&str> {
    c.state.as_ref()?.waiting.as_ref()?.reason.as_deref()
}

fn running(c: &ContainerStatus) -> bool {
    c.state.as_ref().is_some_and(|s| s.running.is_some())
}

fn completed(c: &ContainerStatus) -> bool {
    c.state
        .as_ref()
        .and_then(|s| s.terminated.as_ref())
        .is_some_and(|t| t.exit_code == 0)
}

/// Whether the pod named `name` is in the state the test waits for.
fn settled(pods: &[Pod], name: &str) -> bool {
    let Some(pod) = pods
        .iter()
        .find(|p| p.metadata.name.as_deref() == Some(name))
    else {
        return false;
    };
    let inits = init_statuses(pod);
    let phase = pod.status.as_ref().and_then(|s| s.phase.as_deref());
    match name {
        "pulling" => inits.first().and_then(waiting) == Some("PodInitializing"),
        "second" => inits.get(1).is_some_and(running),
        "unpullable" => inits.first().and_then(waiting) == Some("ImagePullBackOff"),
        "crashing" => inits.first().and_then(waiting) == Some("CrashLoopBackOff"),
        "failed" => phase == Some("Failed"),
        "initialized" => inits.first().is_some_and(completed),
        _ => pod
            .status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True")),
    }
}

fn kubectl_for(cluster: &SimCluster, test: &str) -> Option<Kubectl> {
    let Some(program) = kubectl_on_path() else {
        eprintln!("skipping {test}: kubectl is not on the PATH");
        return None;
    };
    Some(Kubectl {
        program,
        kubeconfig: cluster.kubeconfig_path().to_path_buf(),
        home: tempfile::tempdir().expect("a temporary HOME for kubectl"),
    })
}

#[tokio::test]
async fn get_pods_shows_the_initialization_status_of_each_pod() {
    let mut timings = SimTimings::fast();
    let ten_minutes = Duration::from_secs(600);
    timings.kubelet.crash_loop = BackoffPolicy::new(ten_minutes, ten_minutes);
    timings.kubelet.image_pull = BackoffPolicy::new(ten_minutes, ten_minutes);
    let cluster = start(
        workload_cluster(1)
            .start_needs_api(false)
            .timings(timings)
            .image(SLOW, ImageBehaviour::slow_pull(ten_minutes))
            .image(
                BROKEN,
                ImageBehaviour::crash_looping(Duration::from_millis(1)),
            ),
    )
    .await;
    let Some(kubectl) = kubectl_for(&cluster, "get pods with init containers") else {
        cluster.shutdown().await;
        return;
    };
    let app = |init: Value| json!({ "initContainers": init, "containers": [{ "name": "main", "image": APP_V1 }] });
    let pods = [
        pod(
            "pulling",
            app(json!([init("tool", SLOW, &["tool", "--version"])])),
        ),
        pod(
            "second",
            app(json!([
                init("first", APP_V1, &["true"]),
                init("serve", APP_V1, &["app", "--serve"]),
            ])),
        ),
        pod(
            "unpullable",
            app(json!([init(
                "check",
                "example.com/missing:1",
                &["check", "--version"]
            )])),
        ),
        pod(
            "crashing",
            app(json!([init("check", BROKEN, &["check", "--version"])])),
        ),
        pod(
            "failed",
            json!({
                "restartPolicy": "Never",
                "initContainers": [init("check", APP_V1, &["false"])],
                "containers": [{ "name": "main", "image": APP_V1 }],
            }),
        ),
        pod(
            "initialized",
            json!({
                "initContainers": [init("first", APP_V1, &["true"])],
                "containers": [{ "name": "main", "image": SLOW }],
            }),
        ),
        pod("running", app(json!([init("first", APP_V1, &["true"])]))),
    ];
    let api: Api<Pod> = Api::default_namespaced(cluster.client());
    for p in &pods {
        api.create(&PostParams::default(), p)
            .await
            .expect("the pod is created");
    }
    let names: Vec<String> = pods
        .iter()
        .filter_map(|p| p.metadata.name.clone())
        .collect();
    wait_for_pods(&api, "test=init", "every pod in its state", |pods| {
        names.iter().all(|n| settled(pods, n))
    })
    .await;

    let out = kubectl.ok(&["get", "pods"]).await;
    let expected = [
        ("pulling", "0/1", "Init:0/1"),
        ("second", "0/1", "Init:1/2"),
        ("unpullable", "0/1", "Init:ImagePullBackOff"),
        ("crashing", "0/1", "Init:CrashLoopBackOff"),
        ("failed", "0/1", "Init:Error"),
        ("initialized", "0/1", "PodInitializing"),
        ("running", "1/1", "Running"),
    ];
    for (name, ready, status) in expected {
        let row = row(&out, name);
        assert_eq!(
            (row["READY"].as_str(), row["STATUS"].as_str()),
            (ready, status),
            "{name} in:\n{out}"
        );
    }
    assert!(
        row(&out, "crashing")["RESTARTS"].starts_with("1 ("),
        "one restart, at once, before the back-off:\n{out}"
    );
    cluster.shutdown().await;
}
