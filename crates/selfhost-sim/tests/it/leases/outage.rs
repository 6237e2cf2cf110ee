//! An API outage longer than the renew deadline: both leaders exit (`leaderelection lost`),
//! their kubelet restarts them under the crash-loop back-off, processes that start while the
//! API is still down exit again, and a new leader acquires only after the API returns.

use std::time::Duration;

use k8s_openapi::api::core::v1::{ContainerStatus, Pod};
use kube::Api;
use selfhost_sim::SimCluster;
use selfhost_sim::bootstrap::mirror_name;
use tokio::time::Instant;

use super::*;

async fn container_status(cluster: &SimCluster, role: Role) -> Option<ContainerStatus> {
    let pods: Api<Pod> = Api::namespaced(cluster.client(), "kube-system");
    let pod = pods
        .get_opt(&mirror_name(role.binary(), "cp-1"))
        .await
        .ok()??;
    pod.status?.container_statuses?.into_iter().next()
}

#[tokio::test]
async fn an_api_outage_past_the_renew_deadline_makes_both_leaders_exit_and_crash_loop() {
    let t = timings();
    let renew_limit = t.leader_election.retry_period + t.leader_election.renew_deadline;
    let outage = Duration::from_millis(700);
    // (start needs the API, restarts at least, at most)
    let cases = [(true, 3, i32::MAX), (false, 1, 1)];
    for (start_needs_api, fewest, most) in cases {
        let cluster = start(
            SimCluster::builder()
                .timings(t)
                .start_needs_api(start_needs_api),
        )
        .await;
        let mut old = Vec::new();
        for role in ROLES {
            old.push(wait_for_holder(&cluster, role).await);
        }
        let t0 = Instant::now();
        let apiserver = Manifest::remove(&cluster, "cp-1", "kube-apiserver");
        assert!(cluster.recorder().wait_for_api(false, DEADLINE).await);
        let down_at = Instant::now();
        wait_until("both leaders lost their Lease", || {
            ROLES.iter().all(|r| holder(&cluster, *r).is_none())
        })
        .await;
        let lost_after = down_at.elapsed();
        assert!(
            lost_after >= renew_limit * 3 / 4,
            "leaders gave up {lost_after:?} after the API went down"
        );
        tokio::time::sleep(outage.saturating_sub(down_at.elapsed())).await;
        apiserver.restore();
        assert!(cluster.recorder().wait_for_api(true, DEADLINE).await);
        let up_at = Instant::now();

        for (role, old) in ROLES.into_iter().zip(&old) {
            let what = format!("{role:?}, start needs the API: {start_needs_api}");
            let new = wait_for_new_holder(&cluster, role, old).await;
            assert_eq!(new.node, "cp-1", "{what}");
            let gap = cluster
                .recorder()
                .longest_leaderless(role, t0, Instant::now());
            println!(
                "{what}: API down {:?}, leaderless {gap:?}, restarts {}",
                up_at - down_at,
                container_status(&cluster, role)
                    .await
                    .map_or(0, |s| s.restart_count)
            );
            assert!(
                gap > up_at - down_at,
                "{what}: leaderless for {gap:?}, longer than the outage"
            );
            let deadline = Instant::now() + DEADLINE;
            let status = loop {
                let status = container_status(&cluster, role).await;
                if let Some(s) = status.filter(|s| s.restart_count >= fewest && s.ready) {
                    break s;
                }
                assert!(Instant::now() < deadline, "{what}: restarts reported");
                tokio::time::sleep(Duration::from_millis(20)).await;
            };
            assert!(status.restart_count <= most, "{what}: {status:?}");
            let last = status
                .last_state
                .and_then(|s| s.terminated)
                .expect("a last exit");
            let message = last.message.unwrap_or_default();
            if start_needs_api {
                assert!(
                    (
                        last.exit_code,
                        message.contains("request-header-client-ca-file")
                    ) == (1, true)
                        || (last.exit_code, message.as_str()) == (255, "leaderelection lost"),
                    "{what}: {} {message}",
                    last.exit_code
                );
            } else {
                assert_eq!(
                    (last.exit_code, message.as_str()),
                    (255, "leaderelection lost"),
                    "{what}"
                );
            }
        }
        cluster.shutdown().await;
    }
}
