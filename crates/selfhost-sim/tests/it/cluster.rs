//! The simulated cluster end to end: controllers, kubelets and the self-hosting model driven
//! through kube-rs over HTTP, as the engine and the CLI will drive them. Fast timings: a pod
//! is Ready a few milliseconds after it is created, so waits are for conditions, with a
//! deadline generous enough for a loaded two-core machine.

mod bootstrap;
mod daemonset;
mod gc;
mod handover;
mod init_containers;
mod kubectl;
mod kubelet;
mod model;
mod nodes;
mod programs;
mod reboots;
mod rolling;
mod second_daemonset;
mod timeline;

use std::time::Duration;

use k8s_openapi::api::apps::v1::DaemonSet;
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::Api;
use kube::api::{ListParams, Patch, PatchParams, PostParams};
use selfhost_sim::{SimCluster, SimClusterBuilder};
use serde_json::{Value, json};

use crate::common::object;

/// How long any wait may take on a loaded machine before the test fails.
pub const DEADLINE: Duration = Duration::from_secs(30);

/// A workload image the registry knows, in two versions.
pub const APP_V1: &str = "example.com/app:1";
/// The next version of [`APP_V1`].
pub const APP_V2: &str = "example.com/app:2";

/// Starts a cluster or fails the test.
pub async fn start(builder: SimClusterBuilder) -> SimCluster {
    builder.start().await.expect("the cluster starts")
}

/// One control-plane node and `workers` workers whose registry knows the app images.
pub fn workload_cluster(workers: usize) -> SimClusterBuilder {
    SimCluster::builder()
        .workers(workers)
        .image(APP_V1, Default::default())
        .image(APP_V2, Default::default())
}

/// A DaemonSet `name` selecting `app=<name>` and running `image`; `spec` is merged into its
/// spec (strategy, selectors, tolerations…).
pub fn app_daemonset(name: &str, image: &str, spec: Value) -> DaemonSet {
    let mut ds = json!({
        "apiVersion": "apps/v1", "kind": "DaemonSet",
        "metadata": { "name": name },
        "spec": {
            "selector": { "matchLabels": { "app": name } },
            "template": {
                "metadata": { "labels": { "app": name } },
                "spec": { "containers": [{ "name": "app", "image": image }] },
            },
        },
    });
    merge(&mut ds["spec"], spec);
    object(ds)
}

fn merge(target: &mut Value, patch: Value) {
    match (target, patch) {
        (Value::Object(t), Value::Object(p)) => {
            for (k, v) in p {
                merge(t.entry(k).or_insert(Value::Null), v);
            }
        }
        (t, p) => *t = p,
    }
}

/// Creates a DaemonSet in `default`.
pub async fn create_daemonset(cluster: &SimCluster, ds: &DaemonSet) -> Api<DaemonSet> {
    let api: Api<DaemonSet> = Api::default_namespaced(cluster.client());
    api.create(&PostParams::default(), ds)
        .await
        .expect("the DaemonSet is created");
    api
}

/// Sets the image of the first container, as `kubectl set image` does.
pub async fn set_image(api: &Api<DaemonSet>, name: &str, container: &str, image: &str) {
    let patch = json!({ "spec": { "template": { "spec": {
        "containers": [{ "name": container, "image": image }] } } } });
    api.patch(name, &PatchParams::default(), &Patch::Strategic(&patch))
        .await
        .expect("the image is set");
}

/// Merge-patches a node's metadata or spec.
pub async fn patch_node(cluster: &SimCluster, node: &str, patch: Value) {
    let api: Api<Node> = Api::all(cluster.client());
    api.patch(node, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .expect("the node is patched");
}

/// Waits until `check` holds for the DaemonSet `name` (through a kube-rs watch), failing
/// after [`DEADLINE`] with the last status seen. A watch that fails (a 410 when the
/// history is short) starts over from a fresh list, as an informer does.
pub async fn wait_for_daemonset(
    api: &Api<DaemonSet>,
    name: &str,
    what: &str,
    check: impl Fn(&DaemonSet) -> bool,
) -> DaemonSet {
    let deadline = tokio::time::Instant::now() + DEADLINE;
    let mut last_error = None;
    loop {
        let cond = |ds: Option<&DaemonSet>| ds.is_some_and(&check);
        let waited = tokio::time::timeout_at(
            deadline,
            kube::runtime::wait::await_condition(api.clone(), name, cond),
        )
        .await;
        match waited {
            Ok(Ok(Some(ds))) => return ds,
            Ok(Ok(None)) => last_error = Some("the DaemonSet is gone".to_string()),
            Ok(Err(e)) => last_error = Some(e.to_string()),
            Err(_elapsed) => {
                let last = api.get_opt(name).await.ok().flatten();
                panic!(
                    "timed out waiting for {what} on ds/{name} (last watch error: {last_error:?}); last status: {:#?}",
                    last.and_then(|d| d.status)
                )
            }
        }
    }
}

/// Whether a DaemonSet's rollout of its current generation is complete on `n` nodes.
pub fn rolled_out(ds: &DaemonSet, n: i32) -> bool {
    let Some(s) = ds.status.as_ref() else {
        return false;
    };
    s.observed_generation == ds.metadata.generation
        && s.desired_number_scheduled == n
        && s.updated_number_scheduled == Some(n)
        && s.number_available == Some(n)
        && s.number_ready == n
}

/// Waits until `check` holds for the pods matching `selector`.
pub async fn wait_for_pods(
    api: &Api<Pod>,
    selector: &str,
    what: &str,
    check: impl Fn(&[Pod]) -> bool,
) -> Vec<Pod> {
    let deadline = tokio::time::Instant::now() + DEADLINE;
    loop {
        let pods = pods(api, selector).await;
        if check(&pods) {
            return pods;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out waiting for {what}; pods: {:#?}",
            pods.iter()
                .map(|p| (&p.metadata.name, p.status.as_ref().map(|s| &s.phase)))
                .collect::<Vec<_>>()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// The pods matching a label selector.
pub async fn pods(api: &Api<Pod>, selector: &str) -> Vec<Pod> {
    api.list(&ListParams::default().labels(selector))
        .await
        .expect("pods list")
        .items
}
