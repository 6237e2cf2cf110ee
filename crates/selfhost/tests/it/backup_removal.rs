//! The backup's removal on several nodes under the measured hand-over model. Since the
//! backup of the kube-apiserver is a record only on two nodes or more (`vacate.rs`,
//! `record_only`), there is nothing to remove node by node: no backup kube-apiserver pod ever
//! exists, each node's old pod goes in its turn, the DaemonSet is deleted at once at the end,
//! and no probe fails — in particular none is refused by a load balancer that found no node
//! whose `/readyz` passed. (A backup with pods, made by an older selfhost, is still vacated
//! node by node and removed one node at a time: `pivot::tests::vacate` and `drain`.)

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use kube::api::ListParams;
use selfhost::{ApplyOptions, RunOutcome};
use selfhost::{Event, Stamped};
use selfhost_core::Component;
use selfhost_sim::cluster::CaughtBy;
use tokio::time::Instant;

use crate::upgrade::{ONE_PROBED_UPGRADE_AT_A_TIME, TO, cluster, images, on, run_upgrade};

/// The apiserver's steps of the backup's removal, in order.
const REMOVAL_STEPS: [&str; 3] = ["drain-backup-node", "remove-backup", "wait-for-backup-gone"];

/// Samples the apiserver backup's pods every 20 ms until told to stop and returns the most
/// that existed at once.
fn count_backup_pods(
    client: kube::Client,
    stop: Arc<AtomicBool>,
) -> tokio::task::JoinHandle<usize> {
    tokio::spawn(async move {
        let pods: Api<Pod> = Api::namespaced(client, "kube-system");
        let params = ListParams::default().labels(&Component::ApiServer.backup_label_query());
        let most = AtomicUsize::new(0);
        while !stop.load(Ordering::Relaxed) {
            if let Ok(list) = pods.list(&params).await {
                most.fetch_max(list.items.len(), Ordering::Relaxed);
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        most.load(Ordering::Relaxed)
    })
}

/// The apiserver's steps, with their times.
fn apiserver_steps(events: &[Stamped]) -> Vec<(f64, String)> {
    events
        .iter()
        .filter_map(|e| match &e.event {
            Event::Step {
                component: Component::ApiServer,
                step,
                ..
            } => Some((e.at, step.clone())),
            _ => None,
        })
        .collect()
}

/// How long the backup's removal at the end took: from its first step after the rollout
/// (the update strategy written back) to the first step after it that is not part of it.
fn removal_time(steps: &[(f64, String)]) -> Option<f64> {
    let rolled_out = steps
        .iter()
        .rposition(|(_, s)| s == "restore-update-strategy")
        .map_or(0, |i| i + 1);
    let first = rolled_out
        + steps[rolled_out..]
            .iter()
            .position(|(_, s)| s == REMOVAL_STEPS[0] || s == REMOVAL_STEPS[1])?;
    let end = steps[first..].iter().find(|(_, s)| {
        !REMOVAL_STEPS.contains(&s.as_str()) && s != "hand-over-lease" && s != "delete-old-pod"
    })?;
    Some(end.0 - steps[first].0)
}

async fn upgraded_with_no_backup_pod(nodes: usize) {
    let _one = ONE_PROBED_UPGRADE_AT_A_TIME.lock().await;
    let sim = cluster(nodes).await;
    // The load balancer's first checks must have passed before the prober starts: a
    // connection it refuses before then says nothing about the upgrade (seen once: a probe
    // refused before the run began).
    let front_end = sim.handover().expect("the measured model has a front end");
    let deadline = Instant::now() + Duration::from_secs(20);
    while front_end.healthy_nodes().len() < nodes {
        assert!(
            Instant::now() < deadline,
            "the load balancer found {:?} healthy, not all {nodes} nodes",
            front_end.healthy_nodes()
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let prober = sim
        .prober(crate::upgrade::prober_options())
        .await
        .expect("prober");
    let stop = Arc::new(AtomicBool::new(false));
    let sampler = count_backup_pods(sim.client(), stop.clone());
    let started = Instant::now();
    let (report, events, base) = run_upgrade(&sim, TO, ApplyOptions::default()).await;
    let probes = prober.stop().await;
    stop.store(true, Ordering::Relaxed);
    let most_backup_pods = sampler.await.expect("sampler");
    assert_eq!(report.outcome, RunOutcome::Done);
    assert_eq!(images(&sim).await, (on(TO), false));

    let steps = apiserver_steps(&events);
    // Every failed probe, named by what caught it (a refusal is the load balancer finding no
    // healthy node).
    let failed: Vec<String> = probes
        .reads
        .samples
        .iter()
        .chain(&probes.writes.samples)
        .filter(|s| !s.ok)
        .map(|s| {
            // When, on the run's clock (negative: before it).
            let at = s.started.checked_duration_since(base).map_or_else(
                || format!("-{:?}", base.duration_since(s.started)),
                |d| format!("+{d:?}"),
            );
            format!(
                "{at}: {} (caught by {:?})",
                s.error.clone().unwrap_or_default(),
                s.caught_by
            )
        })
        .collect();
    let refused = probes
        .reads
        .samples
        .iter()
        .chain(&probes.writes.samples)
        .filter(|s| !s.ok && s.caught_by == Some(CaughtBy::Refused))
        .count();
    // The figures of docs/reliability.md, shown with `--nocapture`.
    println!(
        "{nodes} nodes: upgrade {:.2} s, apiserver backup removal {:.2} s, {} failed probes \
         ({refused} refused), at most {most_backup_pods} backup pods at once",
        events.last().map_or(0.0, |e| e.at),
        removal_time(&steps).unwrap_or(f64::NAN),
        failed.len()
    );
    // What a user sees: the backup DaemonSet made as a record, no backup pod anywhere, each
    // node's old pod deleted in its turn, the backup deleted at once at the end.
    assert_eq!(most_backup_pods, 0, "backup pods existed: {steps:?}");
    let names: Vec<&str> = steps.iter().map(|(_, s)| s.as_str()).collect();
    for absent in ["wait-for-backup", "drain-backup-node"] {
        assert!(!names.contains(&absent), "{absent} in {names:?}");
    }
    let deleted = names.iter().filter(|s| **s == "delete-old-pod").count();
    assert!(
        deleted >= nodes,
        "{deleted} old pods deleted on {nodes} nodes: {names:?}"
    );
    assert_eq!(
        names.iter().filter(|s| **s == "remove-backup").count(),
        1,
        "{names:?}"
    );
    assert!(
        failed.is_empty(),
        "{} probes failed: {failed:#?}; apiserver steps: {steps:?}",
        failed.len()
    );
    assert!(!sim.recorder().was_down(started, Instant::now()));
    assert!(
        probes.reads.attempts() > 20,
        "the prober ran: {}",
        probes.reads.attempts()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_nodes_run_no_backup_pod_and_fail_no_probe() {
    upgraded_with_no_backup_pod(3).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn five_nodes_run_no_backup_pod_and_fail_no_probe() {
    upgraded_with_no_backup_pod(5).await;
}
