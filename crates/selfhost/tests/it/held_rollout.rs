//! The kube-apiserver's rollout held to one node at a time (`updateStrategy: OnDelete` for
//! the pivot): stopped at each of its steps and run again, the upgrade completes with zero
//! failed probes on three nodes, and the real DaemonSet ends with its own update strategy
//! back and no record of the hold.

use k8s_openapi::api::apps::v1::DaemonSet;
use kube::Api;
use selfhost::{ApplyOptions, RunOutcome};
use selfhost::{Event, Stamped};
use selfhost_core::Component;
use selfhost_core::pivot::HELD_UPDATE_STRATEGY;
use tokio_util::sync::CancellationToken;

use crate::upgrade::{ONE_PROBED_UPGRADE_AT_A_TIME, TO, cluster, images, on, run_upgrade};

/// The real apiserver DaemonSet's update strategy type and whether the hold is recorded.
async fn strategy(sim: &selfhost_sim::SimCluster) -> (Option<String>, bool) {
    let daemonsets: Api<DaemonSet> = Api::namespaced(sim.client(), "kube-system");
    let name = Component::ApiServer.daemonset_name();
    let ds = crate::read_again("read the real DaemonSet", || daemonsets.get(&name)).await;
    let held = ds
        .metadata
        .annotations
        .as_ref()
        .is_some_and(|a| a.contains_key(HELD_UPDATE_STRATEGY));
    let kind = ds
        .spec
        .and_then(|s| s.update_strategy)
        .and_then(|s| s.type_);
    (kind, held)
}

/// Runs the upgrade and stops it (as Ctrl-C does, at the next safe point) when the
/// apiserver's step `stop_at` has been announced `nth` times.
async fn stopped_at(
    sim: &selfhost_sim::SimCluster,
    stop_at: &'static str,
    nth: usize,
) -> Vec<String> {
    let mut seen = 0;
    let stop = move |stamped: &Stamped, cancel: &CancellationToken| {
        if let Event::Step {
            component: Component::ApiServer,
            step,
            ..
        } = &stamped.event
            && step == stop_at
        {
            seen += 1;
            if seen >= nth {
                cancel.cancel();
            }
        }
    };
    let (report, events, _) = crate::apply_to(sim, TO, &ApplyOptions::default(), stop).await;
    let steps: Vec<String> = events
        .iter()
        .filter_map(|stamped| match &stamped.event {
            Event::Step {
                component: Component::ApiServer,
                step,
                ..
            } => Some(step.clone()),
            _ => None,
        })
        .collect();
    assert!(
        matches!(
            report.outcome,
            RunOutcome::Interrupted {
                component: Component::ApiServer,
                ..
            }
        ),
        "stopped in the apiserver's pivot: {:?} after {steps:?}",
        report.outcome
    );
    steps
}

async fn stopped_and_run_again(stop_at: &'static str, nth: usize) {
    let _one = ONE_PROBED_UPGRADE_AT_A_TIME.lock().await;
    let sim = cluster(3).await;
    let prober = sim
        .prober(crate::upgrade::prober_options())
        .await
        .expect("prober");
    let first_steps = stopped_at(&sim, stop_at, nth).await;
    assert!(
        first_steps.iter().any(|s| s == stop_at),
        "stopped after {stop_at}: {first_steps:?}"
    );
    let (report, events, base) = run_upgrade(&sim, TO, ApplyOptions::default()).await;
    let probes = prober.stop().await;
    assert_eq!(report.outcome, RunOutcome::Done);
    assert_eq!(images(&sim).await, (on(TO), false));
    assert_eq!(
        strategy(&sim).await,
        (Some("RollingUpdate".to_string()), false),
        "the DaemonSet's own strategy is back"
    );
    // On three nodes the kube-apiserver's backup runs no pod (`vacate.rs`, `record_only`):
    // every new kube-apiserver joins a node out of the load balancer's rotation, so not one
    // probe may fail, in the stopped run or in the one that went on.
    let mut failed = Vec::new();
    for s in probes
        .reads
        .samples
        .iter()
        .chain(&probes.writes.samples)
        .filter(|s| !s.ok)
    {
        // When, on the clock of the run that went on (negative: before it).
        let at = s.started.checked_duration_since(base).map_or_else(
            || format!("-{:?}", base.duration_since(s.started)),
            |d| format!("+{d:?}"),
        );
        failed.push((at, s.error.clone(), s.caught_by.clone()));
    }
    let steps: Vec<String> = events
        .iter()
        .filter_map(|e| match &e.event {
            Event::Step {
                component, step, ..
            } => Some(format!("{:.3} {component} {step}", e.at)),
            _ => None,
        })
        .collect();
    assert!(
        failed.is_empty(),
        "probes failed: {failed:#?}; steps of the run that went on: {steps:#?}"
    );
    // Neither run ever put a backup pod anywhere: nothing to vacate, nothing to wait for.
    assert!(
        !steps
            .iter()
            .any(|s| s.ends_with("kube-apiserver wait-for-backup")
                || s.ends_with("kube-apiserver drain-backup-node")),
        "the backup ran pods: {steps:#?}"
    );
    assert!(
        !first_steps
            .iter()
            .any(|s| s == "wait-for-backup" || s == "drain-backup-node"),
        "the backup ran pods in the stopped run: {first_steps:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stopped_after_the_held_update_and_run_again() {
    stopped_and_run_again("delete-old-pod", 1).await;
}

/// Stopped right after the backup (a record only: no pod) was created, before the update.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stopped_after_the_record_only_backup_and_run_again() {
    stopped_and_run_again("create-backup", 1).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stopped_between_two_nodes_and_run_again() {
    stopped_and_run_again("delete-old-pod", 2).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stopped_at_the_strategy_written_back_and_run_again() {
    stopped_and_run_again("restore-update-strategy", 1).await;
}
