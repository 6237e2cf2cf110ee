//! The kubelets against a running cluster, as `kubectl get pods` shows them: phases and
//! conditions, image pulls, crash loops, host ports, static pods, grace periods.

use std::time::Duration;

use k8s_openapi::api::core::v1::{ContainerStatus, Event as CoreEvent, Pod};
use kube::Api;
use kube::api::{DeleteParams, ListParams, PostParams};
use selfhost_sim::cluster::SimCluster;
use selfhost_sim::controllers::kubelet::ImageBehaviour;
use serde_json::{Value, json};
use tokio::time::Instant;

use super::timeline::PodTimeline;
use super::*;

fn pod(name: &str, spec: Value) -> Pod {
    object(json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": { "name": name, "labels": { "test": name } },
        "spec": spec,
    }))
}

fn container(pod: &Pod) -> Option<ContainerStatus> {
    pod.status
        .as_ref()?
        .container_statuses
        .as_ref()?
        .first()
        .cloned()
}

fn waiting(pod: &Pod) -> Option<String> {
    container(pod)?.state?.waiting?.reason
}

fn is_ready(pod: &Pod) -> bool {
    pod.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

async fn create(cluster: &SimCluster, pod: &Pod) -> Api<Pod> {
    let api: Api<Pod> = Api::default_namespaced(cluster.client());
    api.create(&PostParams::default(), pod)
        .await
        .expect("the pod is created");
    api
}

async fn wait_for_pod(api: &Api<Pod>, name: &str, what: &str, check: impl Fn(&Pod) -> bool) -> Pod {
    wait_for_pods(api, &format!("test={name}"), what, |pods| {
        pods.iter().any(&check)
    })
    .await
    .into_iter()
    .find(|p| check(p))
    .expect("the pod that matched")
}

/// A pod's state as the test's watch saw it.
#[derive(Debug)]
struct Seen {
    phase: String,
    ready: bool,
    waiting: Option<String>,
}

#[tokio::test]
async fn a_pod_is_scheduled_pulled_started_and_then_ready() {
    let slow = ImageBehaviour {
        ready_delay: Some(Duration::from_millis(300)),
        ..ImageBehaviour::default()
    };
    let cluster = start(workload_cluster(1).image("example.com/slow:1", slow)).await;
    let api: Api<Pod> = Api::default_namespaced(cluster.client());
    let timeline = PodTimeline::start(api.clone(), "test=life").await;
    create(
        &cluster,
        &pod(
            "life",
            json!({"containers": [{"name": "c", "image": "example.com/slow:1"}]}),
        ),
    )
    .await;
    let ready = wait_for_pod(&api, "life", "Ready", is_ready).await;

    let states: Vec<Seen> = timeline
        .states()
        .iter()
        .filter_map(|(_, pods)| pods.first().cloned())
        .map(|p| {
            let phase = p
                .status
                .as_ref()
                .and_then(|s| s.phase.clone())
                .unwrap_or_default();
            Seen {
                phase,
                ready: is_ready(&p),
                waiting: waiting(&p),
            }
        })
        .collect();
    let first = |f: &dyn Fn(&Seen) -> bool| states.iter().position(f);
    let creating = first(&|s| s.waiting.as_deref() == Some("ContainerCreating"))
        .expect("ContainerCreating seen");
    let running =
        first(&|s| s.phase == "Running" && !s.ready).expect("Running but not yet Ready seen");
    let ready_at = first(&|s| s.ready).expect("Ready seen");
    assert!(creating < running && running < ready_at, "{states:?}");

    let status = ready.status.unwrap();
    assert_eq!(status.host_ip.as_deref(), Some("10.1.0.11"));
    assert!(
        status.pod_ip.unwrap().starts_with("10.244.1."),
        "an address of worker-1's pod range"
    );
    let mut conditions: Vec<(String, String)> = status
        .conditions
        .unwrap()
        .into_iter()
        .map(|c| (c.type_, c.status))
        .collect();
    conditions.sort();
    let expected: Vec<(String, String)> = [
        "ContainersReady",
        "Initialized",
        "PodReadyToStartContainers",
        "PodScheduled",
        "Ready",
    ]
    .iter()
    .map(|t| (t.to_string(), "True".to_string()))
    .collect();
    assert_eq!(conditions, expected);
    let c = status.container_statuses.unwrap().remove(0);
    assert_eq!((c.ready, c.restart_count, c.started), (true, 0, Some(true)));
    assert!(c.state.unwrap().running.is_some());

    let events: Api<CoreEvent> = Api::default_namespaced(cluster.client());
    let reasons: Vec<String> = events
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter(|e| e.involved_object.name.as_deref() == Some("life"))
        .filter_map(|e| e.reason)
        .collect();
    for reason in ["Scheduled", "Pulling", "Pulled", "Created", "Started"] {
        assert!(
            reasons.iter().any(|r| r == reason),
            "{reason} in {reasons:?}"
        );
    }
    cluster.shutdown().await;
}

#[tokio::test]
async fn an_unknown_image_backs_off_until_the_registry_has_it() {
    let cluster = start(workload_cluster(1)).await;
    let spec = json!({"containers": [{"name": "c", "image": "example.com/later:1"}]});
    let api = create(&cluster, &pod("later", spec)).await;
    let failing = wait_for_pod(&api, "later", "ImagePullBackOff", |p| {
        waiting(p).as_deref() == Some("ImagePullBackOff")
    })
    .await;
    assert_eq!(failing.status.unwrap().phase.as_deref(), Some("Pending"));
    cluster.registry().add_image("example.com/later:1").unwrap();
    wait_for_pod(&api, "later", "Ready once it can be pulled", is_ready).await;
    cluster.shutdown().await;
}

#[tokio::test]
async fn a_crashing_container_restarts_under_back_off() {
    let cluster = start(workload_cluster(1)).await;
    cluster
        .registry()
        .make_crash_loop("example.com/crash:1", Duration::from_millis(5))
        .unwrap();
    let spec = json!({"containers": [{"name": "c", "image": "example.com/crash:1"}]});
    let api = create(&cluster, &pod("crash", spec)).await;
    let looping = wait_for_pod(&api, "crash", "CrashLoopBackOff after restarts", |p| {
        waiting(p).as_deref() == Some("CrashLoopBackOff")
            && container(p).is_some_and(|c| c.restart_count >= 3)
    })
    .await;
    let c = container(&looping).unwrap();
    assert!(!c.ready);
    assert_eq!(c.last_state.unwrap().terminated.unwrap().exit_code, 1);
    assert_eq!(looping.status.unwrap().phase.as_deref(), Some("Running"));
    cluster.shutdown().await;
}

fn server_pod(name: &str, port: u16, sharing: bool) -> Pod {
    let mut command = vec!["my-server".to_string()];
    if sharing {
        command.push("--permit-port-sharing=true".into());
    }
    pod(
        name,
        json!({
            "nodeName": "worker-1",
            "hostNetwork": true,
            "containers": [{
                "name": "c", "image": APP_V1, "command": command,
                "ports": [{ "containerPort": port }],
            }],
        }),
    )
}

#[tokio::test]
async fn host_ports_conflict_unless_every_holder_permits_sharing() {
    let cluster = start(workload_cluster(1)).await;
    let api = create(&cluster, &server_pod("first", 7443, false)).await;
    wait_for_pod(&api, "first", "Ready", is_ready).await;
    create(&cluster, &server_pod("second", 7443, false)).await;
    let refused = wait_for_pod(&api, "second", "crash-looping on the port", |p| {
        container(p).is_some_and(|c| c.restart_count >= 2)
    })
    .await;
    let message = container(&refused)
        .unwrap()
        .last_state
        .unwrap()
        .terminated
        .unwrap()
        .message
        .unwrap_or_default();
    assert!(
        message.contains("bind: address already in use"),
        "{message}"
    );
    assert!(
        is_ready(&api.get("first").await.unwrap()),
        "the holder keeps serving"
    );

    create(&cluster, &server_pod("shared-a", 7444, true)).await;
    create(&cluster, &server_pod("shared-b", 7444, true)).await;
    for name in ["shared-a", "shared-b"] {
        let p = wait_for_pod(&api, name, "Ready on a shared port", is_ready).await;
        assert_eq!(container(&p).unwrap().restart_count, 0);
    }
    cluster.shutdown().await;
}

#[tokio::test]
async fn static_pods_follow_their_manifest_files_and_are_mirrored() {
    let cluster = start(workload_cluster(1)).await;
    let dir = cluster.manifests_dir("worker-1").unwrap().to_path_buf();
    let manifest = format!(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: web\n  namespace: default\n  labels:\n    test: web-worker-1\nspec:\n  containers:\n  - name: web\n    image: {APP_V1}\n"
    );
    std::fs::write(dir.join("web.yaml"), manifest).unwrap();
    let api: Api<Pod> = Api::default_namespaced(cluster.client());
    let mirror = wait_for_pod(&api, "web-worker-1", "the mirror pod Ready", is_ready).await;
    assert_eq!(mirror.metadata.name.as_deref(), Some("web-worker-1"));
    let annotations = mirror.metadata.annotations.clone().unwrap();
    assert!(annotations.contains_key("kubernetes.io/config.mirror"));
    let owner = &mirror.metadata.owner_references.as_ref().unwrap()[0];
    assert_eq!(
        (owner.kind.as_str(), owner.name.as_str()),
        ("Node", "worker-1")
    );

    // A mirror pod deleted through the API comes back: the file is the truth.
    api.delete("web-worker-1", &DeleteParams::default())
        .await
        .unwrap();
    let old_uid = mirror.metadata.uid.clone();
    wait_for_pod(&api, "web-worker-1", "the mirror pod recreated", |p| {
        p.metadata.uid != old_uid && is_ready(p)
    })
    .await;

    std::fs::remove_file(dir.join("web.yaml")).unwrap();
    wait_for_pods(&api, "test=web-worker-1", "the mirror pod gone", |p| {
        p.is_empty()
    })
    .await;
    let deadline = Instant::now() + DEADLINE;
    while cluster.processes().nodes["worker-1"]
        .containers
        .iter()
        .any(|c| c.pod.name == "web-worker-1")
    {
        assert!(Instant::now() < deadline, "the static pod stops");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    cluster.shutdown().await;
}

async fn time_to_delete(api: &Api<Pod>, name: &str) -> Duration {
    wait_for_pod(api, name, "Ready", is_ready).await;
    let asked = Instant::now();
    let answer = api.delete(name, &DeleteParams::default()).await.unwrap();
    let terminating = answer
        .left()
        .expect("a graceful deletion answers with the pod");
    assert!(
        terminating.metadata.deletion_timestamp.is_some(),
        "Terminating first"
    );
    wait_for_pods(api, &format!("test={name}"), "gone", |p| p.is_empty()).await;
    asked.elapsed()
}

#[tokio::test]
async fn deleted_pods_stop_within_their_grace_period() {
    let stubborn = ImageBehaviour {
        ignores_sigterm: true,
        ..ImageBehaviour::default()
    };
    let cluster = start(workload_cluster(1).image("example.com/stubborn:1", stubborn)).await;
    let spec = |image: &str| json!({"terminationGracePeriodSeconds": 2, "containers": [{"name": "c", "image": image}]});
    let api = create(&cluster, &pod("stubborn", spec("example.com/stubborn:1"))).await;
    create(&cluster, &pod("polite", spec(APP_V1))).await;
    let killed = time_to_delete(&api, "stubborn").await;
    let stopped = time_to_delete(&api, "polite").await;
    assert!(
        killed >= Duration::from_millis(1_900),
        "SIGKILL only at the end of the grace period: {killed:?}"
    );
    assert!(
        stopped < Duration::from_millis(1_500),
        "a process that obeys SIGTERM goes at once: {stopped:?}"
    );
    cluster.shutdown().await;
}
