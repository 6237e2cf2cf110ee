//! kubeadm's self-hosted upgrade, scripted through kube-rs on one node with port sharing:
//! for each component, create a backup copy of its DaemonSet, wait for the backup pod to be
//! Running, update the real DaemonSet, wait for the old pod to be gone and the new one
//! Running, delete the backup with foreground propagation. The algorithm trusts pod phases,
//! never the Leases: each controller-manager and scheduler change hands the Lease over twice
//! (old to backup, backup to new), and each hand-over waits for a Lease to expire — about
//! one lease duration without a leader (the real run: ~19 s per change with a 15 s Lease).

use std::future::Future;
use std::time::Duration;

use k8s_openapi::api::apps::v1::DaemonSet;
use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use kube::api::{DeleteParams, ListParams, Patch, PatchParams, PostParams};
use selfhost_sim::SimCluster;
use selfhost_sim::bootstrap::BootstrapMode;
use selfhost_sim::cluster::Handovers;
use serde_json::json;
use tokio::time::Instant;

use super::*;
use crate::common::object;

const NEXT: &str = "v1.34.0";

fn running(pods: &[Pod]) -> bool {
    pods.len() == 1
        && pods.iter().all(|p| {
            p.metadata.deletion_timestamp.is_none()
                && p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running")
        })
}

fn image(pod: &Pod) -> &str {
    pod.spec
        .as_ref()
        .and_then(|s| s.containers.first())
        .and_then(|c| c.image.as_deref())
        .unwrap_or_default()
}

/// kubeadm's backup copy: `temp-<name>`, selecting its own pods.
fn backup_of(real: &DaemonSet) -> DaemonSet {
    let name = real.metadata.name.clone().unwrap_or_default();
    let temp = format!("temp-{name}");
    let mut copy = serde_json::to_value(real).unwrap();
    copy["metadata"] =
        json!({ "name": temp, "namespace": "kube-system", "labels": { "k8s-app": temp } });
    copy["spec"]["selector"] = json!({ "matchLabels": { "k8s-app": temp } });
    copy["spec"]["template"]["metadata"]["labels"]["k8s-app"] = json!(temp);
    copy.as_object_mut().unwrap().remove("status");
    object(copy)
}

/// Waits until the pods matching `selector` satisfy `check`; an API that does not answer
/// (kubeadm's own hand-over of the apiserver takes it down for a moment) is waited out.
async fn wait_for(api: &Api<Pod>, selector: &str, what: &str, check: impl Fn(&[Pod]) -> bool) {
    let deadline = Instant::now() + DEADLINE;
    loop {
        let listed = api.list(&ListParams::default().labels(selector)).await;
        if listed.is_ok_and(|l| check(&l.items)) {
            return;
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Calls `f` until it succeeds: kubeadm retries its calls while the API does not answer.
async fn retried<T, E: std::fmt::Debug, Fut: Future<Output = Result<T, E>>>(
    what: &str,
    mut f: impl FnMut() -> Fut,
) -> T {
    let deadline = Instant::now() + DEADLINE;
    loop {
        match f().await {
            Ok(t) => return t,
            Err(e) => assert!(Instant::now() < deadline, "{what}: {e:?}"),
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// One component's upgrade, as kubeadm's self-hosted upgrade performed it.
async fn upgrade(cluster: &SimCluster, component: &str) {
    let daemonsets: Api<DaemonSet> = Api::namespaced(cluster.client(), "kube-system");
    let pod_api: Api<Pod> = Api::namespaced(cluster.client(), "kube-system");
    let real_name = format!("self-hosted-{component}");
    let real = retried("read the DaemonSet", || daemonsets.get(&real_name)).await;
    let backup = backup_of(&real);
    let backup_name = backup.metadata.name.clone().unwrap();
    let post = PostParams::default();
    retried("create the backup", || daemonsets.create(&post, &backup)).await;
    let backup_pods = format!("k8s-app={backup_name}");
    wait_for(&pod_api, &backup_pods, "the backup Running", running).await;
    let real_pods = ListParams::default().labels(&format!("k8s-app={real_name}"));
    let old = retried("list the old pods", || pod_api.list(&real_pods)).await;
    let new_image = format!("registry.k8s.io/{component}:{NEXT}");
    let patch = json!({ "spec": { "template": { "spec": {
        "containers": [{ "name": component, "image": new_image }] } } } });
    let patch = Patch::Strategic(&patch);
    let params = PatchParams::default();
    retried("update the real DaemonSet", || {
        daemonsets.patch(&real_name, &params, &patch)
    })
    .await;
    let old_names: Vec<String> = old.iter().filter_map(|p| p.metadata.name.clone()).collect();
    let selector = format!("k8s-app={real_name}");
    wait_for(&pod_api, &selector, "the old pod gone", |pods| {
        pods.iter()
            .all(|p| !old_names.contains(p.metadata.name.as_ref().unwrap()))
    })
    .await;
    wait_for(&pod_api, &selector, "the new pod Running", |p| {
        running(p) && image(&p[0]) == new_image
    })
    .await;
    let foreground = DeleteParams::foreground();
    retried("delete the backup", || {
        daemonsets.delete(&backup_name, &foreground)
    })
    .await;
}

/// Runs kubeadm's sequence and checks the leaderless gaps of both roles.
async fn kubeadms_sequence(handovers: Option<Handovers>) {
    let t = timings();
    let lease = t.leader_election.lease_duration;
    let cluster = start(
        SimCluster::builder()
            .mode(BootstrapMode::SelfHosted)
            .port_sharing(true)
            .handovers(handovers)
            .timings(t),
    )
    .await;
    // kubeadm upgrades the apiserver first; its hand-over is another test's subject, so the
    // gaps are measured from the controller-manager's change on.
    upgrade(&cluster, "kube-apiserver").await;
    assert!(cluster.recorder().wait_for_api(true, DEADLINE).await);
    for role in ROLES {
        wait_for_holder(&cluster, role).await;
    }
    let t0 = Instant::now();
    for component in ["kube-controller-manager", "kube-scheduler"] {
        upgrade(&cluster, component).await;
    }
    let daemonsets: Api<DaemonSet> = Api::namespaced(cluster.client(), "kube-system");
    for component in ["kube-controller-manager", "kube-scheduler"] {
        let name = format!("temp-self-hosted-{component}");
        let deadline = Instant::now() + DEADLINE;
        while daemonsets
            .get_opt(&name)
            .await
            .map_or(true, |d| d.is_some())
        {
            assert!(Instant::now() < deadline, "the backup {name} goes");
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
    wait_until("leaders again", || {
        ROLES.iter().all(|r| holder(&cluster, *r).is_some())
    })
    .await;
    let end = Instant::now();
    for role in ROLES {
        let gaps: Vec<_> = cluster
            .recorder()
            .leaderless_intervals(role, t0, end)
            .iter()
            .map(|(a, b)| *b - *a)
            .collect();
        let model = if handovers.is_some() {
            "hand-over model"
        } else {
            "ideal apiservers"
        };
        println!("{model}, {role:?}: leaderless {gaps:?} (lease {lease:?})");
        assert_eq!(
            gaps.len(),
            2,
            "{role:?}: old to backup, backup to new: {gaps:?}"
        );
        for gap in gaps {
            assert_within(
                &format!("{role:?} hand-over"),
                gap,
                lease * 3 / 4,
                lease * 4,
            );
        }
        let leader = holder(&cluster, role).unwrap();
        assert!(
            leader
                .pod
                .name
                .starts_with(&format!("self-hosted-{}", role.binary())),
            "the new real pod leads: {leader:?}"
        );
    }
    assert!(
        !cluster.recorder().was_down(t0, end),
        "the API itself stayed up while the controllers changed"
    );
    cluster.shutdown().await;
}

#[tokio::test]
async fn kubeadms_sequence_leaves_each_role_leaderless_for_a_lease_duration_per_hand_over() {
    kubeadms_sequence(None).await;
}

#[tokio::test]
async fn kubeadms_sequence_under_the_hand_over_model_leaves_the_same_gaps() {
    kubeadms_sequence(Some(Handovers::measured())).await;
}

/// Without port sharing every backup and every new controller-manager or scheduler
/// crash-loops on its port (`bind: address already in use`) until the process before it has
/// gone, so each hand-over waits for a restart under the kubelet's back-off and then for a
/// whole lease duration: the leaderless stretches grow (the real run: 38–92 s per change
/// with a 15 s Lease).
#[tokio::test]
async fn without_port_sharing_each_hand_over_also_waits_for_a_crash_loop_back_off() {
    let t = timings();
    let lease = t.leader_election.lease_duration;
    let back_off = t.kubelet.crash_loop.initial;
    let cluster = start(
        SimCluster::builder()
            .mode(BootstrapMode::SelfHosted)
            .port_sharing(false)
            .handovers(Handovers::measured())
            .timings(t),
    )
    .await;
    let t0 = Instant::now();
    for component in [
        "kube-apiserver",
        "kube-controller-manager",
        "kube-scheduler",
    ] {
        upgrade(&cluster, component).await;
    }
    wait_until("leaders again", || {
        ROLES.iter().all(|r| holder(&cluster, *r).is_some())
    })
    .await;
    let end = Instant::now();
    for role in ROLES {
        let gaps: Vec<_> = cluster
            .recorder()
            .leaderless_intervals(role, t0, end)
            .iter()
            .map(|(a, b)| *b - *a)
            .collect();
        println!("no port sharing, {role:?}: leaderless {gaps:?} (lease {lease:?})");
        assert!(gaps.len() >= 2, "{role:?}: {gaps:?}");
        let total: Duration = gaps.iter().sum();
        assert!(
            total >= lease * 2 + back_off,
            "{role:?}: {total:?} in all, {gaps:?}"
        );
        assert!(
            gaps.iter().all(|g| *g >= lease * 3 / 4),
            "{role:?}: {gaps:?}"
        );
    }
    cluster.shutdown().await;
}
