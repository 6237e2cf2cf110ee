//! Init containers on a running cluster, read through kube-rs as any client reads them: they
//! run in order to completion before the pod's containers, a failing or unpullable one holds
//! the pod Pending with `Initialized=False`, and the registry has the `pause` images nodes use.

use std::time::Duration;

use k8s_openapi::api::core::v1::{ContainerStatus, Pod};
use kube::Api;
use kube::api::PostParams;
use selfhost_sim::controllers::kubelet::{ImageBehaviour, PAUSE_IMAGES};
use serde_json::{Value, json};

use super::timeline::PodTimeline;
use super::*;

/// The cluster's own kube-apiserver image (the default version): a node has it, the registry
/// too.
const APISERVER: &str = "registry.k8s.io/kube-apiserver:v1.33.2";

fn pod(name: &str, init: Value, image: &str) -> Pod {
    object(json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": { "name": name, "labels": { "test": name } },
        "spec": {
            "initContainers": init,
            "containers": [{ "name": "main", "image": image }],
        },
    }))
}

async fn create(cluster: &SimCluster, pod: &Pod) -> Api<Pod> {
    let api: Api<Pod> = Api::default_namespaced(cluster.client());
    api.create(&PostParams::default(), pod)
        .await
        .expect("the pod is created");
    api
}

async fn wait_for(api: &Api<Pod>, name: &str, what: &str, check: impl Fn(&Pod) -> bool) -> Pod {
    wait_for_pods(api, &format!("test={name}"), what, |pods| {
        pods.iter().any(&check)
    })
    .await
    .into_iter()
    .find(|p| check(p))
    .expect("the pod that matched")
}

fn init_statuses(pod: &Pod) -> Vec<ContainerStatus> {
    pod.status
        .as_ref()
        .and_then(|s| s.init_container_statuses.clone())
        .unwrap_or_default()
}

fn main_status(pod: &Pod) -> Option<ContainerStatus> {
    pod.status
        .as_ref()?
        .container_statuses
        .as_ref()?
        .first()
        .cloned()
}

fn completed(c: &ContainerStatus) -> bool {
    c.state
        .as_ref()
        .and_then(|s| s.terminated.as_ref())
        .is_some_and(|t| t.exit_code == 0)
}

fn has_run(c: &ContainerStatus) -> bool {
    let state = c.state.clone().unwrap_or_default();
    state.running.is_some() || state.terminated.is_some() || c.restart_count > 0
}

fn waiting_reason(c: &ContainerStatus) -> Option<String> {
    c.state.as_ref()?.waiting.as_ref()?.reason.clone()
}

fn phase(pod: &Pod) -> String {
    pod.status
        .as_ref()
        .and_then(|s| s.phase.clone())
        .unwrap_or_default()
}

fn condition(pod: &Pod, type_: &str) -> Option<(String, Option<String>)> {
    let c = pod
        .status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == type_)?
        .clone();
    Some((c.status, c.reason))
}

fn is_ready(pod: &Pod) -> bool {
    condition(pod, "Ready").is_some_and(|(status, _)| status == "True")
}

#[tokio::test]
async fn init_containers_complete_in_order_before_the_container_starts() {
    // The first init container's image takes a while to pull, so its initialization is seen.
    let cluster = start(workload_cluster(1).image(
        "example.com/slow-tool:1",
        ImageBehaviour::slow_pull(Duration::from_millis(300)),
    ))
    .await;
    let api: Api<Pod> = Api::default_namespaced(cluster.client());
    let timeline = PodTimeline::start(api.clone(), "test=ordered").await;
    let init = json!([
        { "name": "tool", "image": "example.com/slow-tool:1", "command": ["tool", "--version"] },
        { "name": "version", "image": APISERVER, "command": ["kube-apiserver", "--version"] },
    ]);
    create(&cluster, &pod("ordered", init, APP_V1)).await;
    let ready = wait_for(&api, "ordered", "Ready", is_ready).await;

    let inits = init_statuses(&ready);
    assert_eq!(
        inits.iter().map(|c| c.name.as_str()).collect::<Vec<_>>(),
        ["tool", "version"]
    );
    for c in &inits {
        assert!(completed(c) && c.ready, "{c:?}");
        let reason = c
            .state
            .as_ref()
            .unwrap()
            .terminated
            .as_ref()
            .unwrap()
            .reason
            .clone();
        assert_eq!((reason.as_deref(), c.restart_count), (Some("Completed"), 0));
    }
    assert_eq!(phase(&ready), "Running");
    assert_eq!(
        condition(&ready, "Initialized"),
        Some(("True".into(), None))
    );

    let states: Vec<Pod> = timeline
        .states()
        .into_iter()
        .filter_map(|(_, pods)| pods.into_iter().next())
        .collect();
    // Every state the kubelet wrote (before that, the pod has no container statuses).
    for (i, state) in states.iter().enumerate() {
        let inits = init_statuses(state);
        if inits.is_empty() {
            continue;
        }
        let main = main_status(state);
        let initialized = inits.len() == 2 && inits.iter().all(completed);
        if inits.len() == 2 && has_run(&inits[1]) {
            assert!(
                completed(&inits[0]),
                "`version` ran before `tool` completed: state {i}"
            );
        }
        if main.as_ref().is_some_and(has_run) {
            assert!(initialized, "`main` ran before initialization: state {i}");
        }
        if !initialized {
            assert_eq!(phase(state), "Pending", "state {i}");
            assert_eq!(
                condition(state, "Initialized"),
                Some(("False".into(), Some("ContainersNotInitialized".into()))),
                "state {i}"
            );
            assert_eq!(
                main.as_ref().and_then(waiting_reason).as_deref(),
                Some("PodInitializing"),
                "state {i}"
            );
        }
    }
    let initializing = states.iter().any(|p| {
        init_statuses(p)
            .first()
            .and_then(waiting_reason)
            .is_some_and(|r| r == "PodInitializing")
    });
    assert!(
        initializing,
        "the initialization (a 300 ms pull) was seen: {} states",
        states.len()
    );
    cluster.shutdown().await;
}

#[tokio::test]
async fn a_crashing_init_container_backs_off_until_its_image_is_fixed() {
    let broken = "example.com/broken:1";
    let cluster = start(workload_cluster(1)).await;
    cluster
        .registry()
        .make_crash_loop(broken, Duration::from_millis(5))
        .unwrap();
    let init = json!([{ "name": "check", "image": broken, "command": ["check", "--version"] }]);
    let api = create(&cluster, &pod("crashing", init, APP_V1)).await;
    let looping = wait_for(&api, "crashing", "Init:CrashLoopBackOff", |p| {
        init_statuses(p).first().is_some_and(|c| {
            waiting_reason(c).as_deref() == Some("CrashLoopBackOff") && c.restart_count >= 2
        })
    })
    .await;
    let check = init_statuses(&looping).remove(0);
    let last = check.last_state.unwrap().terminated.unwrap();
    assert_eq!((last.exit_code, last.reason.as_deref()), (1, Some("Error")));
    assert!(!check.ready);
    assert_eq!(phase(&looping), "Pending");
    assert_eq!(
        condition(&looping, "Initialized").map(|c| c.0),
        Some("False".into())
    );
    let main = main_status(&looping).unwrap();
    assert_eq!(waiting_reason(&main).as_deref(), Some("PodInitializing"));
    assert_eq!(main.restart_count, 0);

    // Its next instance runs the fixed image: `check --version` prints and exits 0.
    cluster.registry().add_image(broken).unwrap();
    let ready = wait_for(&api, "crashing", "Ready once the image is fixed", is_ready).await;
    assert!(completed(&init_statuses(&ready)[0]));
    cluster.shutdown().await;
}

#[tokio::test]
async fn an_unpullable_init_image_holds_the_pod_with_the_registrys_message() {
    let missing = "example.com/missing:1";
    let cluster = start(workload_cluster(1)).await;
    let init = json!([{ "name": "check", "image": missing, "command": ["check", "--version"] }]);
    let api = create(&cluster, &pod("unpullable", init, APP_V1)).await;
    let held = wait_for(&api, "unpullable", "ImagePullBackOff", |p| {
        init_statuses(p)
            .first()
            .and_then(waiting_reason)
            .is_some_and(|r| r == "ImagePullBackOff")
    })
    .await;
    let check = init_statuses(&held).remove(0);
    let message = check.state.unwrap().waiting.unwrap().message.unwrap();
    assert!(
        message.contains(missing) && message.contains("not found"),
        "{message}"
    );
    assert_eq!(phase(&held), "Pending");
    assert_eq!(
        main_status(&held)
            .and_then(|c| waiting_reason(&c))
            .as_deref(),
        Some("PodInitializing")
    );
    cluster.registry().add_image(missing).unwrap();
    wait_for(&api, "unpullable", "Ready once it can be pulled", is_ready).await;
    cluster.shutdown().await;
}

#[tokio::test]
async fn the_registry_has_the_pause_images_unless_told_otherwise() {
    let cluster = start(workload_cluster(1)).await;
    for (i, image) in PAUSE_IMAGES.iter().enumerate() {
        let name = format!("pause-{i}");
        let api = create(&cluster, &pod(&name, json!([]), image)).await;
        wait_for(&api, &name, "Ready", is_ready).await;
    }
    cluster.shutdown().await;

    let cluster = start(workload_cluster(1).pause_images(false)).await;
    let api = create(&cluster, &pod("no-pause", json!([]), PAUSE_IMAGES[1])).await;
    wait_for(&api, "no-pause", "a failed pull", |p| {
        main_status(p)
            .and_then(|c| waiting_reason(&c))
            .is_some_and(|r| r == "ErrImagePull" || r == "ImagePullBackOff")
    })
    .await;
    cluster.shutdown().await;
}
