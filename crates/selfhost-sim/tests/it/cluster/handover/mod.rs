//! The hand-over model through kube-rs and raw connections: kube-apiserver processes that join
//! a shared port seconds before they serve, leave it at SIGTERM and linger Terminating, probes
//! answered by whichever process the kernel picks, loopback cross-talk, a health-checked load
//! balancer in front of several nodes, node-local API fronts; and the scripted hand-overs the
//! measured table comes from (kubeadm's sequence with and without port sharing, a naive
//! rollout).
//!
//! Timings are scaled ten times down ([`SCALE`]): a join lasts 350 ms, a 30 s grace period
//! 3 s, the first crash-loop back-off 1 s. Assertions are bands around the modelled
//! durations, wide enough for a loaded two-core machine.

mod behaviours;
mod caught;
mod front;
mod http;
mod scripted;

use std::time::Duration;

use k8s_openapi::api::apps::v1::DaemonSet;
use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use kube::api::{ListParams, Patch, PatchParams, PostParams};
use selfhost_sim::bootstrap::BootstrapMode;
use selfhost_sim::cluster::handover::{ApiProcessState, CrossTalk};
use selfhost_sim::cluster::{Handovers, Leadership, Role};
use selfhost_sim::{SimCluster, SimClusterBuilder, SimTimings};
use serde_json::{Value, json};
use tokio::time::Instant;

use super::{DEADLINE, rolled_out, wait_for_daemonset};

/// How many times faster than real the clusters of these tests live.
pub const SCALE: u32 = 10;

/// The version the control plane is upgraded to.
pub const NEXT: &str = "v1.34.0";

/// A modelled real duration on the tests' clock.
pub fn scaled(real: Duration) -> Duration {
    real / SCALE
}

/// The hand-over model as measured, without loopback cross-talk (its own test turns it on):
/// the windows then come from joining and leaving alone.
pub fn model() -> Handovers {
    Handovers {
        cross_talk: CrossTalk::NEVER,
        ..Handovers::measured()
    }
}

/// A self-hosted cluster of `nodes` control-plane nodes under `model`.
pub fn cluster(nodes: usize, port_sharing: bool, model: Handovers) -> SimClusterBuilder {
    SimCluster::builder()
        .control_plane_nodes(nodes)
        .mode(BootstrapMode::SelfHosted)
        .port_sharing(port_sharing)
        .timings(SimTimings::scaled(SCALE))
        .handovers(model)
}

/// Starts a cluster or fails the test.
pub async fn start(builder: SimClusterBuilder) -> SimCluster {
    builder.start().await.expect("the cluster starts")
}

/// The kube-system DaemonSets.
pub fn daemonsets(cluster: &SimCluster) -> Api<DaemonSet> {
    Api::namespaced(cluster.client(), "kube-system")
}

/// The kube-system pods.
pub fn system_pods(cluster: &SimCluster) -> Api<Pod> {
    Api::namespaced(cluster.client(), "kube-system")
}

/// Waits until `check` holds, polling every few milliseconds; fails after [`DEADLINE`].
pub async fn until(what: &str, mut check: impl FnMut() -> bool) {
    let deadline = Instant::now() + DEADLINE;
    while !check() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
}

/// The apiserver processes the model knows.
pub fn processes(cluster: &SimCluster) -> Vec<ApiProcessState> {
    cluster
        .handover()
        .expect("the hand-over model is on")
        .processes()
}

/// Makes the control plane the measured one: kubeadm's v1.20 apiserver template had no
/// `--shutdown-delay-duration` (the simulator's self-hosted template has selfhost's). The
/// change is rolled out with the self-hosting model off, so nothing of it is measured.
pub async fn as_measured(cluster: &SimCluster) {
    cluster.set_self_hosting_model(false);
    let api = daemonsets(cluster);
    let name = "self-hosted-kube-apiserver";
    let ds = api.get(name).await.expect("the apiserver DaemonSet");
    let command: Vec<Value> =
        serde_json::to_value(&ds.spec.unwrap().template.spec.unwrap().containers[0].command)
            .ok()
            .and_then(|v| v.as_array().cloned())
            .unwrap_or_default();
    let kept: Vec<Value> = command
        .into_iter()
        .filter(|f| {
            let f = f.as_str().unwrap_or_default();
            !f.starts_with("--shutdown-delay-duration")
                && !f.starts_with("--shutdown-send-retry-after")
        })
        .collect();
    let patch = json!({ "spec": { "template": { "spec": {
        "containers": [{ "name": "kube-apiserver", "command": kept }] } } } });
    api.patch(name, &PatchParams::default(), &Patch::Strategic(&patch))
        .await
        .expect("the template is patched");
    let nodes = i32::try_from(cluster.nodes().len()).unwrap();
    wait_for_daemonset(&api, name, "rolled out", |d| rolled_out(d, nodes)).await;
    let pods = system_pods(cluster);
    let deadline = Instant::now() + DEADLINE;
    loop {
        let all = pods
            .list(&ListParams::default().labels("k8s-app=self-hosted-kube-apiserver"))
            .await
            .unwrap()
            .items;
        if all.len() == cluster.nodes().len()
            && all.iter().all(|p| p.metadata.deletion_timestamp.is_none())
        {
            break;
        }
        assert!(Instant::now() < deadline, "old apiserver pods never went");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    until("the old apiserver processes exited", || {
        processes(cluster).len() == cluster.nodes().len()
    })
    .await;
    cluster.set_self_hosting_model(true);
    until("leaders elected", || {
        matches!(cluster.leader(Role::ControllerManager), Leadership::Held(_))
            && matches!(cluster.leader(Role::Scheduler), Leadership::Held(_))
    })
    .await;
}

/// The backup copy kubeadm creates of a component's DaemonSet.
pub fn backup_of(real: &DaemonSet, component: &str) -> DaemonSet {
    let labels = json!({ "temp-upgrade-component": component });
    let mut value = serde_json::to_value(real).unwrap();
    value["metadata"] = json!({
        "name": format!("temp-upgrade-self-hosted-{component}"),
        "namespace": "kube-system",
        "labels": labels,
    });
    value["spec"]["selector"] = json!({ "matchLabels": labels });
    value["spec"]["template"]["metadata"]["labels"] = labels;
    value.as_object_mut().unwrap().remove("status");
    serde_json::from_value(value).unwrap()
}
/// Creates the backup DaemonSet of a component, running `image` instead of the real one's if
/// given.
pub async fn create_backup(cluster: &SimCluster, component: &str, image: Option<&str>) {
    let api = daemonsets(cluster);
    let real = api.get(&format!("self-hosted-{component}")).await.unwrap();
    let mut backup = backup_of(&real, component);
    if let Some(image) = image {
        let spec = backup
            .spec
            .as_mut()
            .unwrap()
            .template
            .spec
            .as_mut()
            .unwrap();
        spec.containers[0].image = Some(image.to_string());
    }
    api.create(&PostParams::default(), &backup)
        .await
        .expect("the backup is created");
}

/// The backup's apiserver process, once it has a socket.
pub fn backup_process(cluster: &SimCluster) -> Option<ApiProcessState> {
    processes(cluster)
        .into_iter()
        .find(|p| p.pod.starts_with("temp-upgrade-"))
}

/// The real DaemonSet's apiserver process on `node`, once it has a socket.
pub fn real_process(cluster: &SimCluster, node: &str) -> Option<ApiProcessState> {
    processes(cluster)
        .into_iter()
        .find(|p| p.node == node && p.pod.starts_with("self-hosted-kube-apiserver-"))
}
