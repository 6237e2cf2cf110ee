//! A second DaemonSet running a control-plane component next to the self-hosted one, as the
//! backup of an upgrade pivot does: the DaemonSet controller gives it one pod per node and
//! never a second one while nothing rolls, even once its pod is Ready and the model counts a
//! second scheduler process on the node.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use k8s_openapi::api::apps::v1::DaemonSet;
use kube::Api;
use kube::api::{DeleteParams, PostParams};
use selfhost_sim::SimTimings;
use selfhost_sim::bootstrap::BootstrapMode;
use selfhost_sim::resources::PODS;
use selfhost_sim::store::{EventType, WatchFilter, WatchStart};
use serde_json::{Value, json};
use tokio::time::Instant;

use super::*;
use crate::common::{eventually, is_gone};

const LABEL: &str = "temp-upgrade-component";
const REAL: &str = "self-hosted-kube-scheduler";
const COPY: &str = "temp-upgrade-self-hosted-kube-scheduler";
/// How long after its first pod is Ready the copy is watched for a second one (a sync of the
/// controller takes milliseconds with fast timings).
const WINDOW: Duration = Duration::from_secs(2);

/// The real scheduler DaemonSet's spec under other labels and another name, as a pivot's
/// backup is made.
fn copy_of(real: &DaemonSet) -> DaemonSet {
    let mut spec = serde_json::to_value(real.spec.as_ref().expect("a spec")).expect("json");
    let labels = json!({ LABEL: "kube-scheduler" });
    spec["selector"] = json!({ "matchLabels": labels });
    spec["template"]["metadata"] = json!({ "labels": labels });
    object(json!({
        "apiVersion": "apps/v1", "kind": "DaemonSet",
        "metadata": { "name": COPY, "namespace": "kube-system", "labels": labels },
        "spec": spec,
    }))
}

fn is_ready(pod: &Value) -> bool {
    pod["status"]["conditions"].as_array().is_some_and(|cs| {
        cs.iter()
            .any(|c| c["type"] == "Ready" && c["status"] == "True")
    })
}

/// The node a pod runs on, or the one a DaemonSet pod waits for.
fn node_of_pod(pod: &Value) -> String {
    let spec = &pod["spec"];
    let wanted = &spec["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
        ["nodeSelectorTerms"][0]["matchFields"][0]["values"][0];
    spec["nodeName"]
        .as_str()
        .filter(|n| !n.is_empty())
        .or(wanted.as_str())
        .unwrap_or_default()
        .to_string()
}

fn describe(event_type: EventType, pod: &Value) -> String {
    format!(
        "{event_type:?} {} rv={} node={} ready={} terminating={}",
        pod["metadata"]["name"].as_str().unwrap_or_default(),
        pod["metadata"]["resourceVersion"]
            .as_str()
            .unwrap_or_default(),
        node_of_pod(pod),
        is_ready(pod),
        pod["metadata"]["deletionTimestamp"].is_string()
    )
}

/// Creates the copy and follows every change of its pods in the store until [`WINDOW`] after
/// the first one is Ready; fails with the events so far at the first moment two of them
/// share a node.
async fn create_and_watch(cluster: &SimCluster, daemonsets: &Api<DaemonSet>, copy: &DaemonSet) {
    let filter = WatchFilter {
        namespace: Some("kube-system".into()),
        predicate: Some(Arc::new(|pod: &Value| {
            pod["metadata"]["labels"][LABEL] == "kube-scheduler"
        })),
    };
    let mut watch = cluster.store().watch(&PODS, filter, WatchStart::Now).cursor;
    daemonsets
        .create(&PostParams::default(), copy)
        .await
        .expect("the copy is created");
    let mut pods: BTreeMap<String, Value> = BTreeMap::new();
    let mut seen = Vec::new();
    let mut ready_at: Option<Instant> = None;
    let deadline = Instant::now() + DEADLINE;
    loop {
        let until = ready_at.map_or(deadline, |at| at + WINDOW);
        let Ok(events) = tokio::time::timeout_at(until, watch.next()).await else {
            break;
        };
        for event in events.expect("the watch keeps up") {
            let pod = &event.object;
            seen.push(describe(event.event_type, pod));
            let name = pod["metadata"]["name"].as_str().unwrap_or_default();
            if event.event_type == EventType::Deleted {
                pods.remove(name);
                continue;
            }
            if ready_at.is_none() && is_ready(pod) {
                ready_at = Some(Instant::now());
            }
            pods.insert(name.to_string(), (**pod).clone());
            let mut by_node: BTreeMap<String, BTreeSet<&str>> = BTreeMap::new();
            for (name, pod) in &pods {
                by_node.entry(node_of_pod(pod)).or_default().insert(name);
            }
            let crowded: Vec<_> = by_node.iter().filter(|(_, n)| n.len() > 1).collect();
            assert!(
                crowded.is_empty(),
                "two pods of {COPY} on one node: {crowded:?}; events: {seen:#?}"
            );
        }
    }
    assert!(
        ready_at.is_some(),
        "no pod of {COPY} became Ready; events: {seen:#?}"
    );
}

async fn delete_copy(cluster: &SimCluster, daemonsets: &Api<DaemonSet>) {
    daemonsets
        .delete(COPY, &DeleteParams::foreground())
        .await
        .expect("the copy is deleted");
    eventually("the copy and its pods gone", || async {
        let pods: Api<k8s_openapi::api::core::v1::Pod> =
            Api::namespaced(cluster.client(), "kube-system");
        let left = super::pods(&pods, &format!("{LABEL}=kube-scheduler")).await;
        (left.is_empty() && is_gone(daemonsets, COPY).await).then_some(())
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_copy_of_the_scheduler_daemonset_never_runs_two_pods_on_a_node() {
    let cluster = start(
        SimCluster::builder()
            .control_plane_nodes(1)
            .version("v1.33.1")
            .mode(BootstrapMode::SelfHosted)
            .port_sharing(true)
            .timings(SimTimings::fast()),
    )
    .await;
    let daemonsets: Api<DaemonSet> = Api::namespaced(cluster.client(), "kube-system");
    let real = daemonsets.get(REAL).await.expect("the scheduler DaemonSet");
    let copy = copy_of(&real);
    // Twice: a pivot creates and deletes its backup once per component.
    for _ in 0..2 {
        create_and_watch(&cluster, &daemonsets, &copy).await;
        delete_copy(&cluster, &daemonsets).await;
    }
    cluster.shutdown().await;
}
