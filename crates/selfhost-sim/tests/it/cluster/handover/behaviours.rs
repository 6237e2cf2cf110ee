//! One focused test per behaviour of the hand-over model, with raw connections so that what
//! each connection gets, and when, is seen exactly.

use std::time::Duration;

use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use kube::api::{DeleteParams, PostParams};
use selfhost_sim::cluster::handover::CrossTalk;
use selfhost_sim::controllers::kubelet::ImageBehaviour;
use tokio::task::JoinSet;

use super::http::{Answer, KeepAlive, Outcome, Watch, fresh};
use super::*;

/// An API path every request may read.
const CONFIGMAPS: &str = "/api/v1/namespaces/default/configmaps";
/// How long a raw request may take.
const TIMEOUT: Duration = Duration::from_secs(2);

/// Fires `GET` requests on new connections every few milliseconds, alternately to `/readyz`
/// and to an API path (or to `paths[0]` only), until `stop` says so.
async fn fresh_requests(
    addr: std::net::SocketAddr,
    paths: &[&'static str],
    mut stop: impl FnMut() -> bool,
) -> Vec<(&'static str, Answer)> {
    let mut tasks = JoinSet::new();
    let mut i = 0;
    let deadline = Instant::now() + DEADLINE;
    while !stop() {
        assert!(Instant::now() < deadline, "the requests never ended");
        let path = paths[i % paths.len()];
        tasks.spawn(async move { (path, fresh(addr, path, TIMEOUT).await) });
        i += 1;
        tokio::time::sleep(Duration::from_millis(3)).await;
    }
    tasks.join_all().await
}

fn restarts(pod: &Pod) -> i32 {
    pod.status
        .as_ref()
        .and_then(|s| s.container_statuses.as_ref())
        .map_or(0, |c| c[0].restart_count)
}

fn last_exit_message(pod: &Pod) -> String {
    pod.status
        .as_ref()
        .and_then(|s| s.container_statuses.as_ref())
        .and_then(|c| {
            c[0].last_state
                .as_ref()?
                .terminated
                .as_ref()?
                .message
                .clone()
        })
        .unwrap_or_default()
}

async fn backup_pod(cluster: &SimCluster) -> Option<Pod> {
    let list = system_pods(cluster)
        .list(&kube::api::ListParams::default().labels("temp-upgrade-component=kube-apiserver"))
        .await
        .ok()?;
    list.items.into_iter().next()
}

#[tokio::test]
async fn a_joining_apiserver_takes_new_connections_that_hang_then_fail_until_it_is_ready() {
    let mut timings = SimTimings::scaled(SCALE);
    // Longer than the estimate, so that requests surely land in it.
    timings.handover.authorization_after_accept = Duration::from_millis(80);
    let cluster = start(cluster(1, true, model()).timings(timings)).await;
    let addr = cluster.server().address();
    let mut kept = KeepAlive::open(addr).await;
    assert_eq!(kept.get("/readyz", TIMEOUT).await, Outcome::Status(200));

    create_backup(&cluster, "kube-apiserver", None).await;
    until("the backup's socket on the port", || {
        backup_process(&cluster).is_some_and(|p| p.holds_port)
    })
    .await;
    let times = backup_process(&cluster).unwrap().times;
    let serves = times.serves_at.expect("it will serve");
    let authorizes = times.authorizes_at.expect("the 403 window is on");
    let mut kept_answers = Vec::new();
    let answers = fresh_requests(addr, &["/readyz", CONFIGMAPS], || {
        Instant::now() > serves + Duration::from_millis(60)
    });
    let answers = {
        let mut answers = std::pin::pin!(answers);
        loop {
            tokio::select! {
                done = &mut answers => break done,
                _ = tokio::time::sleep(Duration::from_millis(20)) => {
                    kept_answers.push(kept.get("/readyz", TIMEOUT).await);
                }
            }
        }
    };

    assert!(
        kept_answers.iter().all(|o| *o == Outcome::Status(200)),
        "an open connection keeps its process: {kept_answers:?}"
    );
    let failed: Vec<_> = answers.iter().filter(|(_, a)| !a.ok()).collect();
    assert!(
        answers
            .iter()
            .all(|(_, a)| matches!(a.outcome, Outcome::Status(_))),
        "every connection is answered in the end"
    );
    for (path, a) in &failed {
        // The server decides when it reads the request: after the client sent it.
        assert!(
            a.done >= times.accepts_at,
            "{path}: answered before accepting"
        );
        assert!(
            a.sent < serves,
            "{path}: failed though sent after the backup served"
        );
        if a.outcome == Outcome::Status(403) {
            assert_eq!(*path, CONFIGMAPS, "only API requests are authorized");
            assert!(a.sent < authorizes, "403 after the cache was loaded");
        }
    }
    let hung = failed
        .iter()
        .filter(|(_, a)| a.sent < times.accepts_at && a.done >= times.accepts_at)
        .count();
    let forbidden = failed
        .iter()
        .filter(|(_, a)| a.outcome == Outcome::Status(403))
        .count();
    let errors = failed
        .iter()
        .filter(|(_, a)| a.outcome == Outcome::Status(500))
        .count();
    assert!(hung > 0, "connections handed to it before it accepts hang");
    assert!(forbidden > 0, "403 right after it accepts");
    assert!(errors > 0, "500 until it is ready");
    let old_served = answers
        .iter()
        .filter(|(_, a)| a.sent < times.accepts_at && a.ok())
        .count();
    assert!(old_served > 0, "the old process takes its share meanwhile");
    cluster.shutdown().await;
}

#[tokio::test]
async fn a_leaving_apiserver_closes_idle_connections_and_lingers_for_its_watches_until_killed() {
    let cluster = start(cluster(1, true, model())).await;
    as_measured(&cluster).await;
    let addr = cluster.server().address();
    let watch_path = format!("{CONFIGMAPS}?watch=true");
    let mut watch = Watch::open(addr, &watch_path).await.expect("a watch");
    let mut idle = KeepAlive::open(addr).await;
    assert_eq!(idle.get("/readyz", TIMEOUT).await, Outcome::Status(200));
    let old = real_process(&cluster, "cp-1").unwrap();
    create_backup(&cluster, "kube-apiserver", None).await;
    until("the backup Ready", || {
        backup_process(&cluster).is_some_and(|p| p.ready)
    })
    .await;

    let pods = system_pods(&cluster);
    let deleted = Instant::now();
    pods.delete(&old.pod, &DeleteParams::default())
        .await
        .unwrap();
    until("the old process off the port", || {
        real_process(&cluster, "cp-1").is_some_and(|p| !p.holds_port)
    })
    .await;
    let grace = scaled(Duration::from_secs(30));
    assert!(deleted.elapsed() < grace / 10, "it stops listening at once");
    assert!(
        idle.closed_within(Duration::from_secs(1)).await,
        "its idle keep-alive connection is closed"
    );
    for _ in 0..20 {
        let answer = fresh(addr, "/readyz", TIMEOUT).await;
        assert!(answer.ok(), "new connections reach the backup: {answer:?}");
    }

    // Its watch goes on: a change made now still arrives on it.
    let configmaps: kube::Api<ConfigMap> = kube::Api::default_namespaced(cluster.client());
    let cm: ConfigMap =
        serde_json::from_value(json!({"metadata": {"name": "after-sigterm"}})).unwrap();
    configmaps
        .create(&PostParams::default(), &cm)
        .await
        .unwrap();
    let mut seen = false;
    while !seen {
        match watch.next(Duration::from_secs(2)).await {
            Ok(Some(text)) => seen = text.contains("after-sigterm"),
            other => panic!("the watch ended early or fell silent: {other:?}"),
        }
    }
    // Until SIGKILL at the end of the grace period, with its pod Terminating all along.
    let ended = loop {
        match watch.next(grace * 2).await {
            Ok(Some(_)) => continue,
            Ok(None) => panic!("the watch outlived the grace period"),
            Err(()) => break Instant::now(),
        }
    };
    let lingered = ended.duration_since(deleted);
    assert!(
        lingered >= grace - grace / 10 && lingered <= grace + Duration::from_millis(500),
        "it lingers for the grace period ({grace:?}): {lingered:?}"
    );
    until("the old pod gone", || {
        cluster
            .recorder()
            .pod_samples_named(&old.pod)
            .iter()
            .any(|s| s.phase == "Removed")
    })
    .await;
    let removed = cluster
        .recorder()
        .pod_samples_named(&old.pod)
        .into_iter()
        .find(|s| s.phase == "Removed")
        .unwrap();
    assert!(
        removed.at.duration_since(deleted) >= grace - grace / 10,
        "Terminating until its process exits"
    );
    cluster.shutdown().await;
}

#[tokio::test]
async fn with_a_shutdown_delay_a_leaving_apiserver_keeps_serving_with_readyz_failing() {
    // The simulator's self-hosted template passes --shutdown-delay-duration=5s.
    let cluster = start(cluster(1, true, model())).await;
    let addr = cluster.server().address();
    let mut kept = KeepAlive::open(addr).await;
    assert_eq!(kept.get("/readyz", TIMEOUT).await, Outcome::Status(200));
    let old = real_process(&cluster, "cp-1").unwrap();
    create_backup(&cluster, "kube-apiserver", None).await;
    until("the backup Ready", || {
        backup_process(&cluster).is_some_and(|p| p.ready)
    })
    .await;

    let deleted = Instant::now();
    system_pods(&cluster)
        .delete(&old.pod, &DeleteParams::default())
        .await
        .unwrap();
    until("SIGTERM", || {
        real_process(&cluster, "cp-1").is_some_and(|p| p.shutting_down)
    })
    .await;
    let delay = scaled(Duration::from_secs(5));
    assert_eq!(kept.get("/readyz", TIMEOUT).await, Outcome::Status(500));
    assert_eq!(kept.get(CONFIGMAPS, TIMEOUT).await, Outcome::Status(200));
    assert!(deleted.elapsed() < delay, "checked within the delay");
    assert!(
        real_process(&cluster, "cp-1").unwrap().holds_port,
        "still listening"
    );
    until("the old process off the port", || {
        real_process(&cluster, "cp-1").is_some_and(|p| !p.holds_port)
    })
    .await;
    let left = deleted.elapsed();
    assert!(
        left >= delay - Duration::from_millis(20) && left <= delay + Duration::from_millis(300),
        "it leaves the port after its shutdown delay ({delay:?}): {left:?}"
    );
    assert!(kept.closed_within(Duration::from_secs(1)).await);
    cluster.shutdown().await;
}

/// A connection a client opened and left unused (a pooled one, dialled for a request that
/// another connection took) is idle to Go's server once it is older than five seconds: a
/// stopping kube-apiserver closes it with the other idle ones when it leaves the port, on the
/// cluster's clock, well before the exit at the end of the grace period would cut it under a
/// request the client sends on it later.
#[tokio::test]
async fn a_leaving_apiserver_closes_a_connection_left_unused_for_long_as_an_idle_one() {
    let cluster = start(cluster(1, true, model())).await;
    let addr = cluster.server().address();
    let opened = Instant::now();
    let mut unused = KeepAlive::open(addr).await;
    let old = real_process(&cluster, "cp-1").unwrap();
    create_backup(&cluster, "kube-apiserver", None).await;
    until("the backup Ready", || {
        backup_process(&cluster).is_some_and(|p| p.ready)
    })
    .await;
    let idle = scaled(selfhost_sim::server::NEW_CONNECTION_IDLE);
    until(
        "the unused connection older than Go's idle time for new ones",
        || opened.elapsed() > idle,
    )
    .await;

    system_pods(&cluster)
        .delete(&old.pod, &DeleteParams::default())
        .await
        .unwrap();
    until("the old process off the port", || {
        processes(&cluster)
            .iter()
            .any(|p| p.uid == old.uid && p.process == old.process && !p.holds_port)
    })
    .await;
    assert!(
        unused.closed_within(scaled(Duration::from_secs(30))).await,
        "the unused connection is closed"
    );
    assert!(
        processes(&cluster)
            .iter()
            .any(|p| p.uid == old.uid && p.process == old.process),
        "closed as an idle connection while the old process lingers, not cut at its exit"
    );
    cluster.shutdown().await;
}

/// When the backup pod was first reported Ready, as its kubelet saw it.
async fn backup_reported_ready(cluster: &SimCluster) -> Instant {
    until("the backup pod reported Ready", || {
        cluster
            .recorder()
            .pod_samples_named("temp-upgrade-")
            .iter()
            .any(|s| s.ready)
    })
    .await;
    let samples = cluster.recorder().pod_samples_named("temp-upgrade-");
    samples.iter().find(|s| s.ready).unwrap().at
}

#[tokio::test]
async fn a_probe_of_a_shared_port_reports_a_new_pod_ready_when_the_old_process_answers() {
    for lying in [true, false] {
        let model = Handovers {
            lying_probes: lying,
            ..model()
        };
        let cluster = start(cluster(1, true, model)).await;
        create_backup(&cluster, "kube-apiserver", None).await;
        let reported = backup_reported_ready(&cluster).await;
        until("the backup's process known", || {
            backup_process(&cluster).is_some()
        })
        .await;
        let serves = backup_process(&cluster).unwrap().times.serves_at.unwrap();
        if lying {
            assert!(
                reported + Duration::from_millis(100) < serves,
                "Ready long before its own process serves ({:?} early)",
                serves.duration_since(reported)
            );
        } else {
            // (The two clocks meet through the wall clock: a millisecond of leeway.)
            assert!(
                reported + Duration::from_millis(1) >= serves,
                "Ready only once it serves itself"
            );
        }
        cluster.shutdown().await;
    }
}

#[tokio::test]
async fn a_crash_looping_apiserver_on_a_shared_port_can_be_reported_ready() {
    let image = format!("registry.k8s.io/kube-apiserver:{NEXT}");
    for lying in [true, false] {
        let model = Handovers {
            lying_probes: lying,
            ..model()
        };
        let timings = SimTimings::scaled(SCALE);
        // It crashes before it could ever serve.
        let crashing = ImageBehaviour {
            crash_after: Some(timings.kubelet.ready / 2),
            ..model.apiserver_behaviour(&timings.handover)
        };
        let cluster = start(cluster(1, true, model).image(&image, crashing)).await;
        create_backup(&cluster, "kube-apiserver", Some(&image)).await;
        let mut restarted = 0;
        let deadline = Instant::now() + DEADLINE;
        while restarted < 3 {
            assert!(Instant::now() < deadline, "it never crash-looped");
            restarted = backup_pod(&cluster).await.map_or(0, |p| restarts(&p));
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let ever_ready = cluster
            .recorder()
            .pod_samples_named("temp-upgrade-")
            .iter()
            .any(|s| s.ready);
        assert_eq!(ever_ready, lying, "lying probes: {lying}");
        cluster.shutdown().await;
    }
}

#[tokio::test]
async fn without_port_sharing_a_second_apiserver_crash_loops_and_connections_stay_with_the_holder()
{
    let cluster = start(cluster(1, false, model())).await;
    let addr = cluster.server().address();
    create_backup(&cluster, "kube-apiserver", None).await;
    let mut failures = Vec::new();
    let deadline = Instant::now() + DEADLINE;
    loop {
        let pod = backup_pod(&cluster).await;
        if pod.as_ref().is_some_and(|p| restarts(p) >= 2) {
            let message = last_exit_message(pod.as_ref().unwrap());
            assert!(
                message.contains("bind: address already in use"),
                "{message}"
            );
            break;
        }
        assert!(Instant::now() < deadline, "it never crash-looped");
        let answer = fresh(addr, "/readyz", TIMEOUT).await;
        if !answer.ok() {
            failures.push(answer);
        }
        assert!(
            processes(&cluster).iter().filter(|p| p.holds_port).count() == 1,
            "one socket on the port"
        );
    }
    assert!(
        failures.is_empty(),
        "the holder answers everything: {failures:?}"
    );
    let only = processes(&cluster);
    assert!(only.iter().all(|p| p.pod.starts_with("self-hosted-")));
    cluster.shutdown().await;
}

#[tokio::test]
async fn a_starting_apiserver_whose_loopback_client_reaches_the_other_process_may_exit() {
    let cases = [(1.0, 1.0), (1.0, 0.0), (0.0, 0.0)];
    for (probability, fatal) in cases {
        let model = Handovers {
            cross_talk: CrossTalk { probability, fatal },
            ..model()
        };
        let cluster = start(cluster(1, true, model)).await;
        create_backup(&cluster, "kube-apiserver", None).await;
        let label = format!("probability {probability}, fatal {fatal}");
        if fatal > 0.0 {
            let deadline = Instant::now() + DEADLINE;
            loop {
                let pod = backup_pod(&cluster).await;
                if pod.as_ref().is_some_and(|p| restarts(p) >= 1) {
                    let message = last_exit_message(pod.as_ref().unwrap());
                    assert!(
                        message.contains("x509: certificate signed by unknown authority"),
                        "{message}"
                    );
                    break;
                }
                assert!(Instant::now() < deadline, "{label}: it never exited");
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        } else {
            until("the backup Ready", || {
                backup_process(&cluster).is_some_and(|p| p.ready)
            })
            .await;
            let pod = backup_pod(&cluster).await.unwrap();
            assert_eq!(restarts(&pod), 0, "{label}");
        }
        let events = cluster.handover().unwrap().cross_talk();
        assert_eq!(!events.is_empty(), probability > 0.0, "{label}: {events:?}");
        assert!(events.iter().all(|e| e.fatal == (fatal > 0.0)), "{label}");
        cluster.shutdown().await;
    }
}

#[tokio::test]
async fn the_load_balancer_sends_new_connections_only_to_nodes_that_passed_their_last_check() {
    let cluster = start(cluster(3, true, model())).await;
    let front = cluster.handover().unwrap();
    until("every node healthy", || front.healthy_nodes().len() == 3).await;
    let addr = cluster.server().address();
    let old = real_process(&cluster, "cp-2").unwrap();
    system_pods(&cluster)
        .delete(&old.pod, &DeleteParams::default())
        .await
        .unwrap();

    let mut left_rotation = false;
    let mut early_connections = 0;
    let answers = fresh_requests(addr, &[CONFIGMAPS], || {
        let healthy = front.healthy_nodes().contains(&"cp-2".to_string());
        left_rotation |= !healthy;
        let new = real_process(&cluster, "cp-2").filter(|p| p.uid != old.uid);
        if let Some(p) = new.as_ref().filter(|p| !p.ready) {
            early_connections = early_connections.max(p.connections);
        }
        left_rotation && healthy && new.is_some_and(|p| p.ready)
    })
    .await;
    assert!(
        left_rotation,
        "cp-2 leaves the rotation while it has no Ready apiserver"
    );
    assert_eq!(
        early_connections, 0,
        "no connection reaches a process before it is Ready"
    );
    let failed: Vec<_> = answers.iter().filter(|(_, a)| !a.ok()).collect();
    assert!(
        failed.is_empty(),
        "{} of {} failed: {failed:?}",
        failed.len(),
        answers.len()
    );
    cluster.shutdown().await;
}
