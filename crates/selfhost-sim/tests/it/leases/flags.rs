//! Each kube-controller-manager and kube-scheduler process elects on the clock its own flags
//! set (`--leader-elect-lease-duration`, `--leader-elect-renew-deadline`,
//! `--leader-elect-retry-period`), as the real components do, and one whose clock client-go
//! rejects exits instead of electing.

use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use serde_json::Value;
use tokio::time::Instant;

use super::*;

/// Rewrites `component`'s static pod manifest on `node` with `flags` added to its command
/// (the kubelet replaces the pod, so a new process starts with them).
fn add_flags(cluster: &SimCluster, node: &str, component: &str, flags: &[&str]) {
    let dir = cluster.manifests_dir(node).expect("a manifests directory");
    let path = dir.join(format!("{component}.yaml"));
    let text = std::fs::read_to_string(&path).expect("the manifest exists");
    let mut pod: Value = serde_saphyr::from_str(&text).expect("a YAML manifest");
    let command = pod["spec"]["containers"][0]["command"]
        .as_array_mut()
        .expect("a command");
    command.extend(flags.iter().map(|f| Value::from(*f)));
    // JSON is YAML: the kubelet reads it like any manifest.
    std::fs::write(&path, serde_json::to_string_pretty(&pod).unwrap()).unwrap();
}

/// The mean time between the Lease renewals seen while polling for `span`.
async fn mean_renewal_interval(cluster: &SimCluster, role: Role, span: Duration) -> Duration {
    let until = Instant::now() + span;
    let mut seen = Vec::new();
    while Instant::now() < until {
        let renewed = leader_lease(cluster, role)
            .await
            .and_then(|l| l.spec?.renew_time)
            .map(|t| t.0);
        if let Some(r) = renewed
            && seen.last() != Some(&r)
        {
            seen.push(r);
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    assert!(seen.len() >= 3, "{role:?}: renewals seen: {seen:?}");
    let (first, last) = (seen[0], seen[seen.len() - 1]);
    let nanos = last.duration_since(first).as_nanos() / (seen.len() as i128 - 1);
    Duration::from_nanos(u64::try_from(nanos).expect("renewals in order"))
}

/// At a hundredth of real time the cluster's default clock renews every 20 ms and writes a
/// one-second Lease (150 ms, rounded up); a controller-manager started with a 30 s retry
/// period and a 200 s lease (300 ms and 2 s here) renews every 300 ms and writes two seconds,
/// while the scheduler next to it, without the flags, keeps the defaults.
#[tokio::test]
async fn a_leader_renews_on_its_own_retry_period_and_writes_its_own_lease_duration() {
    let t = timings();
    let cluster = start(SimCluster::builder().control_plane_nodes(1).timings(t)).await;
    let role = Role::ControllerManager;
    let old = wait_for_holder(&cluster, role).await;
    wait_for_holder(&cluster, Role::Scheduler).await;
    add_flags(
        &cluster,
        &old.node,
        role.binary(),
        &[
            "--leader-elect-lease-duration=200s",
            "--leader-elect-renew-deadline=150s",
            "--leader-elect-retry-period=30s",
        ],
    );
    let new = wait_for_new_holder(&cluster, role, &old).await;
    let lease = leader_lease(&cluster, role).await.expect("the Lease");
    let spec = lease.spec.expect("a spec");
    assert_eq!(spec.holder_identity, new.identity);
    assert_eq!(
        spec.lease_duration_seconds,
        Some(2),
        "its own lease duration"
    );

    let span = Duration::from_millis(1_800);
    let flagged = mean_renewal_interval(&cluster, role, span).await;
    let default = mean_renewal_interval(&cluster, Role::Scheduler, span).await;
    println!("renewals every {flagged:?} with the flags, every {default:?} without");
    assert!(
        flagged >= Duration::from_millis(200) && flagged <= Duration::from_millis(600),
        "the flagged leader renews every {flagged:?}, not every 300 ms"
    );
    assert!(
        default <= Duration::from_millis(100),
        "the scheduler renews every {default:?}, not every 20 ms"
    );
    let scheduler = leader_lease(&cluster, Role::Scheduler).await.unwrap();
    assert_eq!(scheduler.spec.unwrap().lease_duration_seconds, Some(1));
    cluster.shutdown().await;
}

/// A renew deadline (the default 10 s) not above 1.2 retry periods (20 s): client-go refuses
/// the clock, the process exits (a Go panic's code 2) and never leads.
#[tokio::test]
async fn a_process_whose_clock_client_go_rejects_exits_instead_of_electing() {
    let cluster = start(
        SimCluster::builder()
            .control_plane_nodes(1)
            .timings(timings()),
    )
    .await;
    let role = Role::Scheduler;
    let old = wait_for_holder(&cluster, role).await;
    add_flags(
        &cluster,
        &old.node,
        role.binary(),
        &["--leader-elect-retry-period=20s"],
    );
    let pods: Api<Pod> = Api::namespaced(cluster.client(), "kube-system");
    let mirror = format!("{}-{}", role.binary(), old.node);
    let deadline = Instant::now() + DEADLINE;
    let message = loop {
        let pod = pods.get_opt(&mirror).await.expect("pod get");
        let terminated = pod
            .and_then(|p| p.status?.container_statuses)
            .into_iter()
            .flatten()
            .flat_map(|s| [s.state, s.last_state])
            .flatten()
            .filter_map(|s| s.terminated)
            .find(|t| t.exit_code == 2);
        if let Some(t) = terminated {
            break t.message.unwrap_or_default();
        }
        assert!(
            Instant::now() < deadline,
            "the scheduler never exited with 2"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    };
    assert!(
        message.contains("renewDeadline must be greater than retryPeriod*JitterFactor"),
        "{message}"
    );
    assert!(
        holder(&cluster, role).is_none_or(|p| p.identity == old.identity),
        "no new scheduler leads"
    );
    cluster.shutdown().await;
}
