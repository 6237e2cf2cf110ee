//! RollingUpdate as a user sees it through watches: never more nodes without a serving pod
//! than `maxUnavailable` allows, surge pods Ready before the old ones go, a status that stays
//! consistent at every step, and a rollout to a broken image that stops where it should.

use k8s_openapi::api::apps::v1::DaemonSet;
use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use serde_json::{Value, json};

use super::timeline::{PodTimeline, image_of, node_of, nodes_without_serving_pod};
use super::*;

const WORKERS: [&str; 4] = ["worker-1", "worker-2", "worker-3", "worker-4"];

async fn rollout(cluster: &SimCluster, name: &str, rolling: Value) -> PodTimeline {
    let ds = app_daemonset(
        name,
        APP_V1,
        json!({"updateStrategy": {"type": "RollingUpdate", "rollingUpdate": rolling}}),
    );
    let api = create_daemonset(cluster, &ds).await;
    wait_for_daemonset(&api, name, "created", |d| rolled_out(d, 4)).await;
    let pod_api: Api<Pod> = Api::default_namespaced(cluster.client());
    let timeline = PodTimeline::start(pod_api.clone(), &format!("app={name}")).await;
    set_image(&api, name, "app", APP_V2).await;
    wait_for_daemonset(&api, name, "rolled out", |d| rolled_out(d, 4)).await;
    let after = pods(&pod_api, &format!("app={name}")).await;
    assert_eq!(after.len(), 4);
    assert!(
        after.iter().all(|p| image_of(p) == APP_V2),
        "{name}: every pod updated"
    );
    timeline
}

#[tokio::test]
async fn rolling_updates_take_at_most_max_unavailable_nodes_at_once() {
    let cluster = start(workload_cluster(4)).await;
    let cases = [
        ("one", json!(1), 1),
        ("two", json!(2), 2),
        ("half", json!("50%"), 2),
        ("thirty", json!("30%"), 2), // 1.2 nodes, rounded up
    ];
    for (name, max_unavailable, expected) in cases {
        let timeline = rollout(&cluster, name, json!({"maxUnavailable": max_unavailable})).await;
        let worst = timeline.max_of(|pods| nodes_without_serving_pod(&WORKERS, pods));
        assert_eq!(
            worst, expected,
            "{name}: nodes without a serving pod at worst"
        );
    }
    cluster.shutdown().await;
}

#[tokio::test]
async fn max_surge_makes_the_new_pod_ready_before_the_old_one_goes() {
    let cluster = start(workload_cluster(4)).await;
    let timeline = rollout(
        &cluster,
        "surge",
        json!({"maxSurge": 1, "maxUnavailable": 0}),
    )
    .await;
    assert_eq!(
        timeline.max_of(|pods| nodes_without_serving_pod(&WORKERS, pods)),
        0,
        "every node kept a serving pod"
    );
    let most_on_one_node = timeline.max_of(|pods| {
        WORKERS
            .iter()
            .map(|n| pods.iter().filter(|p| node_of(p) == *n).count())
            .max()
            .unwrap_or(0)
    });
    assert_eq!(most_on_one_node, 2, "old and new side by side");
    cluster.shutdown().await;
}

fn status_is_consistent(ds: &DaemonSet) -> Result<(), String> {
    let s = ds.status.clone().unwrap_or_default();
    let desired = s.desired_number_scheduled;
    let checks = [
        (
            s.number_ready <= s.current_number_scheduled,
            "ready <= current",
        ),
        (s.current_number_scheduled <= desired, "current <= desired"),
        (
            s.updated_number_scheduled.unwrap_or(0) <= desired,
            "updated <= desired",
        ),
        (
            s.number_available.unwrap_or(0) <= s.number_ready,
            "available <= ready",
        ),
        (
            s.number_available.unwrap_or(0) + s.number_unavailable.unwrap_or(0) == desired,
            "available + unavailable = desired",
        ),
    ];
    match checks.iter().find(|(ok, _)| !ok) {
        Some((_, rule)) => Err(format!("{rule}: {s:?}")),
        None => Ok(()),
    }
}

#[tokio::test]
async fn the_status_stays_consistent_through_a_rollout() {
    let cluster = start(workload_cluster(4)).await;
    let api: Api<DaemonSet> = Api::default_namespaced(cluster.client());
    let statuses = std::sync::Arc::new(std::sync::Mutex::new(Vec::<DaemonSet>::new()));
    let watch = {
        let (api, statuses) = (api.clone(), statuses.clone());
        tokio::spawn(async move {
            use futures::StreamExt;
            use kube::runtime::WatchStreamExt;
            let config = kube::runtime::watcher::Config::default().fields("metadata.name=counted");
            let mut stream = kube::runtime::watcher(api, config)
                .applied_objects()
                .boxed();
            while let Some(Ok(ds)) = stream.next().await {
                statuses.lock().unwrap().push(ds);
            }
        })
    };
    let ds = app_daemonset(
        "counted",
        APP_V1,
        json!({"updateStrategy": {"rollingUpdate": {"maxUnavailable": 2}}}),
    );
    create_daemonset(&cluster, &ds).await;
    wait_for_daemonset(&api, "counted", "created", |d| rolled_out(d, 4)).await;
    set_image(&api, "counted", "app", APP_V2).await;
    wait_for_daemonset(&api, "counted", "rolled out", |d| rolled_out(d, 4)).await;
    watch.abort();
    let seen = statuses.lock().unwrap().clone();
    let mut last_updated = 0;
    let mut generation_two = false;
    for ds in seen.iter().filter(|d| d.status.is_some()) {
        status_is_consistent(ds).unwrap();
        let s = ds.status.clone().unwrap();
        if s.observed_generation == Some(2) {
            generation_two = true;
            let updated = s.updated_number_scheduled.unwrap_or(0);
            assert!(
                updated >= last_updated,
                "updatedNumberScheduled never goes back"
            );
            last_updated = updated;
        }
    }
    assert!(generation_two && last_updated == 4);
    cluster.shutdown().await;
}

/// The new version of the app, broken in the way each case says.
const BROKEN: &str = "example.com/app:broken";

/// How the new image is broken, and how its pod shows it.
#[derive(Debug, Clone, Copy)]
enum Breakage {
    Unpullable,
    NeverReady,
    CrashLoop,
}

impl Breakage {
    fn apply(self, cluster: &SimCluster) {
        let registry = cluster.registry();
        match self {
            Breakage::Unpullable => registry.make_unpullable(BROKEN),
            Breakage::NeverReady => registry.make_never_ready(BROKEN).unwrap(),
            // Before its readiness delay: never Ready even for a moment (one that crashes
            // after passing readiness counts as available in between, as upstream's does).
            Breakage::CrashLoop => registry
                .make_crash_loop(BROKEN, std::time::Duration::from_millis(1))
                .unwrap(),
        }
    }

    fn shows(self, pod: &Pod) -> bool {
        let status = pod.status.clone().unwrap_or_default();
        let container = status.container_statuses.unwrap_or_default();
        let Some(c) = container.first() else {
            return false;
        };
        match self {
            Breakage::Unpullable => waiting_reason(pod).as_deref() == Some("ImagePullBackOff"),
            Breakage::NeverReady => {
                c.state.as_ref().is_some_and(|s| s.running.is_some()) && !c.ready
            }
            Breakage::CrashLoop => {
                waiting_reason(pod).as_deref() == Some("CrashLoopBackOff") && c.restart_count >= 1
            }
        }
    }
}

#[tokio::test]
async fn a_rollout_to_a_broken_image_stops_after_max_unavailable_pods() {
    let cluster = start(workload_cluster(4).image(BROKEN, Default::default())).await;
    let pod_api: Api<Pod> = Api::default_namespaced(cluster.client());
    for breakage in [
        Breakage::Unpullable,
        Breakage::NeverReady,
        Breakage::CrashLoop,
    ] {
        breakage.apply(&cluster);
        let name = format!("{breakage:?}").to_lowercase();
        let api = create_daemonset(&cluster, &app_daemonset(&name, APP_V1, json!({}))).await;
        wait_for_daemonset(&api, &name, "created", |d| rolled_out(d, 4)).await;
        set_image(&api, &name, "app", BROKEN).await;
        let selector = format!("app={name}");
        wait_for_pods(
            &pod_api,
            &selector,
            &format!("{breakage:?} shown"),
            |pods| pods.iter().any(|p| breakage.shows(p)),
        )
        .await;
        wait_for_daemonset(&api, &name, "one pod unavailable, one updated", |d| {
            let s = d.status.clone().unwrap_or_default();
            s.number_unavailable == Some(1) && s.updated_number_scheduled == Some(1)
        })
        .await;
        let pods = super::pods(&pod_api, &selector).await;
        assert_eq!(
            pods.iter().filter(|p| image_of(p) == BROKEN).count(),
            1,
            "{breakage:?}: one pod replaced (maxUnavailable 1), the rest untouched"
        );
        if let Breakage::Unpullable = breakage {
            // The image appears in the registry: the kubelet's next pull attempt succeeds.
            cluster.registry().add_image(BROKEN).unwrap();
            wait_for_daemonset(&api, &name, "rolled out after all", |d| rolled_out(d, 4)).await;
        }
    }

    cluster.shutdown().await;
}

fn waiting_reason(pod: &Pod) -> Option<String> {
    pod.status
        .as_ref()?
        .container_statuses
        .as_ref()?
        .first()?
        .state
        .as_ref()?
        .waiting
        .as_ref()?
        .reason
        .clone()
}
