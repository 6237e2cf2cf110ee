//! Leader election: one holder among several processes, renewals, the leaderless gap when the
//! leader goes, deliberate hand-overs (a deleted or released Lease), and controllers that do
//! nothing while nobody holds their Lease.

use std::time::Duration;

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use kube::api::DeleteParams;
use selfhost_sim::SimCluster;
use selfhost_sim::bootstrap::BootstrapMode;
use selfhost_sim::cluster::{LEADER_LEASE_NAMESPACE, LeaseRelease, Role, leader_lease_name};
use serde_json::json;
use tokio::time::Instant;

use super::*;
use crate::cluster::{
    APP_V1, app_daemonset, create_daemonset, rolled_out, wait_for_daemonset, workload_cluster,
};

#[tokio::test]
async fn one_process_holds_each_lease_and_renews_it() {
    let t = timings();
    let cluster = start(SimCluster::builder().control_plane_nodes(3).timings(t)).await;
    for role in ROLES {
        let leader = wait_for_holder(&cluster, role).await;
        let running = cluster.processes();
        let candidates = running
            .nodes
            .values()
            .flat_map(|n| &n.containers)
            .filter(|c| c.binary.as_deref() == Some(role.binary()) && c.process.is_some())
            .count();
        assert_eq!(candidates, 3, "three processes elect");

        let lease = leader_lease(&cluster, role)
            .await
            .expect("the Lease exists");
        let spec = lease.spec.clone().unwrap();
        let identity = leader.identity.clone().unwrap();
        assert_eq!(spec.holder_identity.as_ref(), Some(&identity));
        assert!(
            identity.starts_with(&format!("{}_", leader.node)),
            "<hostname>_<uuid>: {identity}"
        );
        assert_eq!(
            spec.lease_duration_seconds,
            Some(t.leader_election.lease_duration_seconds())
        );
        let first_renewal = spec.renew_time.clone().unwrap();
        assert!(spec.acquire_time.is_some());

        let deadline = Instant::now() + DEADLINE;
        let renewed = loop {
            let lease = leader_lease(&cluster, role).await.unwrap();
            let now = lease.spec.clone().unwrap();
            if now.renew_time.as_ref() != Some(&first_renewal) {
                break now;
            }
            assert!(Instant::now() < deadline, "the Lease is renewed");
            tokio::time::sleep(t.leader_election.retry_period / 2).await;
        };
        assert_eq!(renewed.holder_identity, spec.holder_identity);
        assert_eq!(renewed.acquire_time, spec.acquire_time, "a renewal");
        assert_eq!(renewed.lease_transitions, spec.lease_transitions);
        assert!(renewed.renew_time.unwrap().0 > first_renewal.0);
        assert_eq!(
            holder(&cluster, role),
            Some(leader),
            "still the same leader"
        );
    }
    cluster.shutdown().await;
}

/// Deleting the leader's DaemonSet pod leaves its role without a leader until the Lease
/// expires: about one lease duration, then a standby on the other node acquires.
#[tokio::test]
async fn a_deleted_leader_pod_leaves_its_role_leaderless_for_about_one_lease_duration() {
    let t = timings();
    let lease = t.leader_election.lease_duration;
    for role in ROLES {
        let cluster = start(
            SimCluster::builder()
                .control_plane_nodes(2)
                .mode(BootstrapMode::SelfHosted)
                .timings(t),
        )
        .await;
        let old = wait_for_holder(&cluster, role).await;
        let transitions = leader_lease(&cluster, role)
            .await
            .and_then(|l| l.spec?.lease_transitions)
            .unwrap_or_default();
        let pods: Api<Pod> = Api::namespaced(cluster.client(), "kube-system");
        let t0 = Instant::now();
        pods.delete(&old.pod.name, &DeleteParams::default())
            .await
            .unwrap();
        let new = wait_for_new_holder(&cluster, role, &old).await;
        let gaps = cluster
            .recorder()
            .leaderless_intervals(role, t0, Instant::now());
        assert_eq!(gaps.len(), 1, "{role:?}: {gaps:?}");
        let gap = gaps[0].1 - gaps[0].0;
        println!(
            "{role:?}: leaderless {gap:?} after its leader's pod was deleted (lease {lease:?})"
        );
        assert_within(&format!("{role:?} gap"), gap, lease * 3 / 4, lease * 4);
        assert_ne!(new.node, old.node, "the standby on the other node");

        let after = leader_lease(&cluster, role).await.unwrap().spec.unwrap();
        assert_eq!(after.holder_identity, new.identity);
        assert_eq!(after.lease_transitions, Some(transitions + 1));
        let ds: Api<k8s_openapi::api::apps::v1::DaemonSet> =
            Api::namespaced(cluster.client(), "kube-system");
        let name = format!("self-hosted-{}", role.binary());
        wait_for_daemonset(&ds, &name, "the pod replaced", |d| rolled_out(d, 2)).await;
        cluster.shutdown().await;
    }
}

/// Once the leader's process is gone, deleting its Lease hands the role over within about a
/// retry period instead of a whole lease duration (what the engine does deliberately).
#[tokio::test]
async fn deleting_a_dead_leaders_lease_lets_a_standby_acquire_within_a_retry_period() {
    let lease = Duration::from_secs(2);
    let t = timings_with_lease(lease);
    let cluster = start(SimCluster::builder().control_plane_nodes(2).timings(t)).await;
    let role = Role::ControllerManager;
    let old = wait_for_holder(&cluster, role).await;
    let t0 = Instant::now();
    let _gone = Manifest::remove(&cluster, &old.node, role.binary());
    wait_until("the leader stopped", || holder(&cluster, role).is_none()).await;
    let api: Api<Lease> = Api::namespaced(cluster.client(), LEADER_LEASE_NAMESPACE);
    api.delete(leader_lease_name(role), &DeleteParams::default())
        .await
        .unwrap();
    let deleted = Instant::now();
    let new = wait_for_new_holder(&cluster, role, &old).await;
    let after_delete = deleted.elapsed();
    assert!(
        after_delete < lease / 4,
        "acquired {after_delete:?} after the deletion"
    );
    let gap = cluster
        .recorder()
        .longest_leaderless(role, t0, Instant::now());
    println!("leaderless {gap:?}, acquired {after_delete:?} after the deletion (lease {lease:?})");
    assert!(
        gap < lease / 2,
        "leaderless for {gap:?}, not a lease duration"
    );
    let created = leader_lease(&cluster, role).await.unwrap().spec.unwrap();
    assert_eq!(created.holder_identity, new.identity);
    assert_eq!(created.lease_transitions, Some(0), "a new Lease");
    cluster.shutdown().await;
}

/// With the upstream release behaviour a stopping kube-scheduler (v1.21 and later) clears
/// its Lease and a standby takes it at once, while a stopping kube-controller-manager still
/// leaves its Lease to expire.
#[tokio::test]
async fn a_stopping_leader_releases_its_lease_only_where_its_version_does() {
    let lease = Duration::from_secs(1);
    let cases = [
        (LeaseRelease::ByVersion, Role::Scheduler, true),
        (LeaseRelease::ByVersion, Role::ControllerManager, false),
        (LeaseRelease::Never, Role::Scheduler, false),
        (LeaseRelease::Always, Role::ControllerManager, true),
    ];
    for (release, role, released) in cases {
        let cluster = start(
            SimCluster::builder()
                .control_plane_nodes(2)
                .timings(timings_with_lease(lease))
                .lease_release(release),
        )
        .await;
        let old = wait_for_holder(&cluster, role).await;
        let t0 = Instant::now();
        let _gone = Manifest::remove(&cluster, &old.node, role.binary());
        let new = wait_for_new_holder(&cluster, role, &old).await;
        let gap = cluster
            .recorder()
            .longest_leaderless(role, t0, Instant::now());
        let what = format!("{release:?} {role:?}");
        if released {
            assert!(gap < lease / 4, "{what}: {gap:?}");
        } else {
            assert_within(&what, gap, lease * 3 / 4, lease * 3);
        }
        let spec = leader_lease(&cluster, role).await.unwrap().spec.unwrap();
        assert_eq!(spec.holder_identity, new.identity, "{what}");
        cluster.shutdown().await;
    }
}

/// The DaemonSet controller runs only in the process holding the controller-manager Lease:
/// a DaemonSet created while nobody holds it gets no pod until a standby acquires.
#[tokio::test]
async fn the_daemonset_controller_does_nothing_while_no_controller_manager_holds_the_lease() {
    let lease = Duration::from_secs(1);
    let cluster = start(
        workload_cluster(1)
            .control_plane_nodes(2)
            .timings(timings_with_lease(lease)),
    )
    .await;
    let role = Role::ControllerManager;
    let old = wait_for_holder(&cluster, role).await;
    let killed = Instant::now();
    let _gone = Manifest::remove(&cluster, &old.node, role.binary());
    wait_until("the leader stopped", || holder(&cluster, role).is_none()).await;
    let t0 = Instant::now();
    let ds = create_daemonset(&cluster, &app_daemonset("app", APP_V1, json!({}))).await;
    let pods: Api<Pod> = Api::default_namespaced(cluster.client());
    let mut checks = 0;
    loop {
        let vacant_before = holder(&cluster, role).is_none();
        let listed = crate::cluster::pods(&pods, "app=app").await;
        let status = ds.get("app").await.unwrap().status;
        if !(vacant_before && holder(&cluster, role).is_none()) {
            break;
        }
        assert!(listed.is_empty(), "no pod without a leader: {listed:?}");
        assert!(
            status.is_none_or(|s| s.observed_generation.is_none()),
            "no status without a leader"
        );
        checks += 1;
        assert!(t0.elapsed() < DEADLINE, "a standby acquires");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(checks > 5, "the gap was observed ({checks} checks)");
    wait_for_daemonset(&ds, "app", "rolled out by the new leader", |d| {
        rolled_out(d, 1)
    })
    .await;
    let gap = cluster
        .recorder()
        .longest_leaderless(role, killed, Instant::now());
    assert_within("the gap", gap, lease * 3 / 4, lease * 3);
    cluster.shutdown().await;
}
