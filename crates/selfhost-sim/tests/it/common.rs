//! Helpers shared by the conformance suites: a running simulator, typed objects built from
//! JSON, and waiting for conditions with a deadline.

#![allow(dead_code)]

use std::future::Future;
use std::time::Duration;

use k8s_openapi::api::apps::v1::DaemonSet;
use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use kube::Api;
use kube::core::Status;
use selfhost_sim::{SimServer, SimServerOptions};
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

/// How long any wait in these suites may take on a loaded machine before it fails.
pub const DEADLINE: Duration = Duration::from_secs(20);

/// A simulator with default options.
pub async fn sim() -> SimServer {
    sim_with(SimServerOptions::default()).await
}

/// A simulator with the given options.
pub async fn sim_with(options: SimServerOptions) -> SimServer {
    SimServer::start(options)
        .await
        .expect("the simulator starts")
}

/// A typed object from JSON.
pub fn object<K: DeserializeOwned>(v: Value) -> K {
    serde_json::from_value(v).expect("valid object JSON")
}

/// A pod with one container; `node` binds it (a bound pod is deleted gracefully).
pub fn pod(name: &str, labels: Value, node: Option<&str>) -> Pod {
    let mut spec =
        json!({ "containers": [{ "name": "main", "image": "registry.k8s.io/pause:3.10" }] });
    if let Some(n) = node {
        spec["nodeName"] = json!(n);
    }
    object(json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": { "name": name, "labels": labels },
        "spec": spec,
    }))
}

/// A ConfigMap with one key.
pub fn configmap(name: &str, value: &str) -> ConfigMap {
    object(json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": { "name": name },
        "data": { "key": value },
    }))
}

/// A DaemonSet selecting `app=<name>`, running `image`.
pub fn daemonset(name: &str, image: &str) -> DaemonSet {
    object(json!({
        "apiVersion": "apps/v1", "kind": "DaemonSet",
        "metadata": { "name": name },
        "spec": {
            "selector": { "matchLabels": { "app": name } },
            "template": {
                "metadata": { "labels": { "app": name } },
                "spec": { "containers": [{ "name": "main", "image": image }] },
            },
        },
    }))
}

/// The Status of a failed call (panics on success or on a transport error).
pub fn status<T: std::fmt::Debug>(result: kube::Result<T>) -> Status {
    match result {
        Err(kube::Error::Api(s)) => *s,
        other => panic!("expected an API error, got {other:?}"),
    }
}

/// Polls `check` until it returns `Some`, failing after [`DEADLINE`]. For state that is
/// reached asynchronously (the garbage collector, a restarted server).
pub async fn eventually<T, F, Fut>(what: &str, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let deadline = tokio::time::Instant::now() + DEADLINE;
    loop {
        if let Some(v) = check().await {
            return v;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Runs a future with [`DEADLINE`].
pub async fn within<T>(what: &str, f: impl Future<Output = T>) -> T {
    tokio::time::timeout(DEADLINE, f)
        .await
        .unwrap_or_else(|_| panic!("timed out: {what}"))
}

/// Whether an object is gone.
pub async fn is_gone<K>(api: &Api<K>, name: &str) -> bool
where
    K: kube::Resource + Clone + DeserializeOwned + std::fmt::Debug,
{
    matches!(api.get_opt(name).await, Ok(None))
}
