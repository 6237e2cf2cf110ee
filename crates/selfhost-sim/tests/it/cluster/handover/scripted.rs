//! The scripted hand-overs of the measured table, driven through kube-rs as kubeadm and
//! kubectl drive a real cluster, with the prober reading `/readyz` every 10 ms and writing a
//! ConfigMap every 50 ms.
//!
//! kubeadm's self-hosted upgrade of one component: create the backup copy of its DaemonSet,
//! wait until every backup pod is Running, update the real DaemonSet, wait until the old pods
//! are gone, wait until the new pods are Running, delete the backup in the foreground. It
//! polls every 500 ms (`APICallRetryInterval`) and retries whatever fails.
//!
//! A real kubelet writes a container's start into the pod's status only at its next relist
//! (PLEG, every second): the status a sync computes is the one from before it started the
//! containers. The simulated kubelet writes it at once, so the script counts a pod as Running
//! one relist after its containers started, which is when kubeadm could see it.

use std::future::Future;
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kube::api::{ListParams, PostParams};
use selfhost_sim::cluster::{ProbeReport, ProberOptions};

use super::*;

/// kubeadm's poll interval, on the tests' clock.
fn poll() -> Duration {
    scaled(Duration::from_millis(500))
}

/// The kubelet's relist period (PLEG), on the tests' clock.
fn relist() -> Duration {
    scaled(Duration::from_secs(1))
}

/// Calls `f` until it succeeds (the API may be failing), failing the test after [`DEADLINE`].
async fn retrying<T, E: std::fmt::Debug, F: Future<Output = Result<T, E>>>(
    what: &str,
    mut f: impl FnMut() -> F,
) -> T {
    let deadline = Instant::now() + DEADLINE;
    loop {
        match f().await {
            Ok(v) => return v,
            Err(e) => assert!(Instant::now() < deadline, "{what} kept failing: {e:?}"),
        }
        tokio::time::sleep(poll()).await;
    }
}

/// Polls the pods matching `selector` until `check` holds for what kubeadm sees, at its
/// interval from the first look on (`wait.PollImmediate`). A pod is seen as the API showed it
/// one kubelet relist earlier: its phase turns Running for kubeadm a relist after the API
/// first showed it Running.
async fn wait_pods(
    cluster: &SimCluster,
    selector: &str,
    what: &str,
    check: impl Fn(&[Pod]) -> bool,
) {
    let api = system_pods(cluster);
    let deadline = Instant::now() + DEADLINE;
    let mut ticks = tokio::time::interval(poll());
    let mut running_since: std::collections::HashMap<String, Instant> = Default::default();
    loop {
        ticks.tick().await;
        if let Ok(list) = api.list(&ListParams::default().labels(selector)).await {
            let now = Instant::now();
            let seen: Vec<Pod> = list
                .items
                .into_iter()
                .map(|mut p| {
                    let uid = p.metadata.uid.clone().unwrap_or_default();
                    if running(&p) {
                        let since = *running_since.entry(uid).or_insert(now);
                        if now.duration_since(since) < relist()
                            && let Some(s) = p.status.as_mut()
                        {
                            s.phase = Some("Pending".into());
                        }
                    }
                    p
                })
                .collect();
            if check(&seen) {
                return;
            }
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
    }
}

fn running(p: &Pod) -> bool {
    p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running")
}

fn image(p: &Pod) -> &str {
    p.spec.as_ref().unwrap().containers[0]
        .image
        .as_deref()
        .unwrap_or_default()
}

/// kubeadm's sequence for `component` to `image`.
pub async fn kubeadm_upgrade(cluster: &SimCluster, component: &str, image_to: &str) {
    let nodes = cluster.nodes().len();
    let real_name = format!("self-hosted-{component}");
    let real_selector = format!("k8s-app={real_name}");
    let backup_selector = format!("temp-upgrade-component={component}");
    let api = daemonsets(cluster);
    let real = retrying("reading the DaemonSet", || api.get(&real_name)).await;
    let backup = backup_of(&real, component);
    let post = PostParams::default();
    retrying("creating the backup", || api.create(&post, &backup)).await;
    wait_pods(cluster, &backup_selector, "backup pods Running", |p| {
        p.len() == nodes && p.iter().all(running)
    })
    .await;
    let pods = system_pods(cluster);
    let listing = ListParams::default().labels(&real_selector);
    let old: Vec<String> = retrying("listing the old pods", || pods.list(&listing))
        .await
        .items
        .into_iter()
        .filter_map(|p| p.metadata.name)
        .collect();
    retrying("updating the DaemonSet", || async {
        let mut ds = api.get(&real_name).await?;
        let spec = ds.spec.as_mut().unwrap().template.spec.as_mut().unwrap();
        spec.containers[0].image = Some(image_to.to_string());
        api.replace(&real_name, &PostParams::default(), &ds).await
    })
    .await;
    wait_pods(cluster, &real_selector, "the old pods gone", |p| {
        p.iter()
            .all(|p| !old.contains(p.metadata.name.as_ref().unwrap()))
    })
    .await;
    wait_pods(cluster, &real_selector, "new pods Running", |p| {
        p.len() == nodes && p.iter().all(|p| running(p) && image(p) == image_to)
    })
    .await;
    retrying("deleting the backup", || async {
        let params = kube::api::DeleteParams {
            propagation_policy: Some(kube::api::PropagationPolicy::Foreground),
            ..Default::default()
        };
        match api
            .delete(&format!("temp-upgrade-{real_name}"), &params)
            .await
        {
            Err(kube::Error::Api(e)) if e.code == 404 => Ok(()),
            other => other.map(|_| ()),
        }
    })
    .await;
    let deadline = Instant::now() + DEADLINE;
    loop {
        match api.get_opt(&format!("temp-upgrade-{real_name}")).await {
            Ok(None) => break,
            _ => assert!(Instant::now() < deadline, "the backup never went"),
        }
        tokio::time::sleep(poll()).await;
    }
}

fn apiserver_image() -> String {
    format!("registry.k8s.io/kube-apiserver:{NEXT}")
}

/// What the prober saw, printed for the report.
fn summary(label: &str, report: &ProbeReport) -> String {
    let windows: Vec<u128> = report
        .reads
        .failure_windows()
        .iter()
        .map(|(a, b)| b.duration_since(*a).as_millis())
        .collect();
    format!(
        "{label}: reads failed {} of {}, longest gap {:?}, windows {windows:?} ms; writes failed {} of {}, longest gap {:?}",
        report.reads.failures(),
        report.reads.attempts(),
        report.reads.longest_gap(),
        report.writes.failures(),
        report.writes.attempts(),
        report.writes.longest_gap(),
    )
}

/// How long a kube-apiserver takes from its start to Ready (the kubelet's ready latency).
fn join(cluster: &SimCluster) -> Duration {
    let _ = cluster;
    SimTimings::scaled(SCALE).kubelet.ready
}

/// Slack for a loaded machine on top of a modelled duration.
const SLACK: Duration = Duration::from_millis(200);

fn millis(windows: &[(Instant, Instant)]) -> Vec<u128> {
    windows
        .iter()
        .map(|(a, b)| b.duration_since(*a).as_millis())
        .collect()
}

#[tokio::test]
async fn kubeadm_with_port_sharing_fails_reads_in_two_windows_of_about_a_join() {
    let cluster = start(cluster(1, true, model())).await;
    as_measured(&cluster).await;
    let prober = cluster.prober(ProberOptions::default()).await.unwrap();
    kubeadm_upgrade(&cluster, "kube-apiserver", &apiserver_image()).await;
    let report = prober.stop().await;
    println!("{}", summary("kubeadm, port sharing", &report));

    // Each window: the old (then the backup) apiserver leaves at SIGTERM while the backup
    // (then the new one) has joined the port and is not Ready yet: all of a join but the
    // time kubeadm took to see its pod Running.
    let join = join(&cluster);
    let windows = report.reads.failure_windows();
    assert_eq!(windows.len(), 2, "two windows: {:?} ms", millis(&windows));
    for (from, to) in &windows {
        let length = to.duration_since(*from);
        assert!(
            length >= join / 4 && length <= join + SLACK,
            "a window of about a join ({join:?}): {length:?}"
        );
    }
    let failed = report.reads.failures();
    assert!(
        failed > 0 && failed * 10 < report.reads.attempts(),
        "partial: {failed} of {}",
        report.reads.attempts()
    );
    // Writes (one every 50 ms) may meet a window or not; any that fail, fail within one.
    assert!(report.writes.longest_failure_window() <= join + SLACK);
    cluster.shutdown().await;
}

#[tokio::test]
async fn kubeadm_without_port_sharing_takes_the_api_down_for_at_least_one_back_off() {
    let cluster = start(cluster(1, false, model())).await;
    as_measured(&cluster).await;
    let prober = cluster.prober(ProberOptions::default()).await.unwrap();
    kubeadm_upgrade(&cluster, "kube-apiserver", &apiserver_image()).await;
    let report = prober.stop().await;
    println!("{}", summary("kubeadm, no port sharing", &report));

    // The backup could not bind while the old apiserver held the port and is in crash-loop
    // back-off when the old one leaves: nothing listens until its next restart has joined.
    let back_off = SimTimings::scaled(SCALE).kubelet.crash_loop.initial;
    let join = join(&cluster);
    let outage = report.reads.longest_failure_window();
    assert!(
        outage >= back_off && outage <= back_off + join + SLACK,
        "a full outage of a back-off and a join: {outage:?}, windows {:?} ms",
        millis(&report.reads.failure_windows())
    );
    assert!(report.writes.longest_failure_window() >= back_off);
    cluster.shutdown().await;
}

#[tokio::test]
async fn kubeadm_on_three_nodes_behind_the_load_balancer_never_loses_the_api() {
    let cluster = start(cluster(3, true, model())).await;
    as_measured(&cluster).await;
    let t0 = Instant::now();
    let prober = cluster.prober(ProberOptions::default()).await.unwrap();
    kubeadm_upgrade(&cluster, "kube-apiserver", &apiserver_image()).await;
    let report = prober.stop().await;
    println!("{}", summary("kubeadm, three nodes", &report));

    assert!(
        !cluster.recorder().was_down(t0, Instant::now()),
        "some apiserver served throughout"
    );
    // A connection reset when an apiserver leaves may land, through a node the balancer
    // last saw healthy, on a joining process sharing that node's port: the most a prober
    // connection can then lose is the rest of that process's join.
    let join = join(&cluster);
    assert!(
        report.reads.longest_failure_window() <= join + SLACK,
        "windows {:?} ms",
        millis(&report.reads.failure_windows())
    );
    assert!(report.reads.failures() * 20 < report.reads.attempts());
    assert!(report.writes.longest_failure_window() <= join + SLACK);
    cluster.shutdown().await;
}

#[tokio::test]
async fn a_naive_rollout_never_recovers() {
    let cluster = start(cluster(1, true, model())).await;
    as_measured(&cluster).await;
    let prober = cluster.prober(ProberOptions::default()).await.unwrap();
    let t0 = Instant::now();
    let api = daemonsets(&cluster);
    super::super::set_image(
        &api,
        "self-hosted-kube-apiserver",
        "kube-apiserver",
        &apiserver_image(),
    )
    .await;
    assert!(
        cluster.recorder().wait_for_api(false, DEADLINE).await,
        "the API goes down"
    );
    // Long enough for the old apiserver's grace period to end twice over.
    let grace = scaled(Duration::from_secs(30));
    tokio::time::sleep(grace * 2).await;
    let report = prober.stop().await;
    println!("{}", summary("naive rollout", &report));

    let down_since = cluster
        .recorder()
        .down_for_good_since(t0)
        .expect("down, and never back");
    assert!(down_since.elapsed() >= grace * 2);
    let tail: Vec<_> = report
        .reads
        .samples
        .iter()
        .filter(|s| s.started > down_since + SLACK)
        .collect();
    assert!(
        tail.len() > 10 && tail.iter().all(|s| !s.ok),
        "every read fails"
    );
    assert!(
        cluster.client().apiserver_version().await.is_err(),
        "nothing answers"
    );
    cluster.shutdown().await;
}
