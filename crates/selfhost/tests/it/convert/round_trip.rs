//! Static → self-hosted → `apply` → static, on one and three nodes, with and without port
//! sharing on the original static pods.

use std::time::Duration;

use selfhost::apply::{ApplyOptions, RunOutcome, apply};
use selfhost::convert::{ComponentOutcome, ConvertReport};
use selfhost::events::{Event, Events};
use selfhost::observe::Observer;
use selfhost::plan::{PlanRequest, make_plan};
use selfhost::retry::RetryPolicy;
use selfhost_core::KubeVersion;
use selfhost_core::conversion::decide::Direction;
use selfhost_core::skew::SkewFlags;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::*;

/// `selfhost apply <to>` on the converted cluster. An engine error (exit 4 in the CLI) is
/// answered as the CLI tells a user to: by running it again, once.
async fn upgrade(sim: &SimCluster, to: &str) {
    let clients = crate::clients(sim.kubeconfig_path()).await;
    let request = PlanRequest {
        version: KubeVersion::parse(to).expect("version"),
        config_file: None,
        flags: SkewFlags::default(),
        accept_downtime: false,
    };
    for attempt in 1..=2 {
        let mut observer = Observer::start(&clients);
        observer
            .ready(Duration::from_secs(20))
            .await
            .expect("watches list");
        let policy = RetryPolicy::default();
        let (plan, targets, _) = make_plan(&mut observer, &clients.api, &request, &policy)
            .await
            .expect("plan");
        assert!(plan.proceeds, "{:#?}", plan.preflight);
        let (options, events, cancel) = (
            ApplyOptions::default(),
            Events::none(),
            CancellationToken::new(),
        );
        let run = apply(
            &mut observer,
            &clients.api,
            &targets,
            &options,
            &events,
            &cancel,
        );
        match tokio::time::timeout(Duration::from_secs(240), run).await {
            Ok(Ok(report)) => {
                assert_eq!(report.outcome, RunOutcome::Done);
                return;
            }
            Ok(Err(e)) if attempt == 1 => eprintln!("apply stopped ({e}); running it again"),
            Ok(Err(e)) => panic!("apply failed twice: {e}"),
            Err(_) => panic!("apply did not finish in time"),
        }
    }
}

/// The gaps the engine measured (no port sharing), per component.
fn gaps(reports: &[ConvertReport]) -> Vec<f64> {
    reports
        .iter()
        .flat_map(|r| r.components.iter())
        .filter_map(|(_, o)| match o {
            ComponentOutcome::Done {
                handover_gap_seconds,
                ..
            } => *handover_gap_seconds,
            _ => None,
        })
        .collect()
}

/// The whole journey on `nodes` nodes: static → self-hosted (node by node) → `apply` to the
/// next minor → static again. Returns the failed probes of each phase and the measured gaps.
async fn round_trip(nodes: usize, port_sharing: bool) -> (Vec<Vec<String>>, Vec<f64>, Duration) {
    let sim = static_cluster(nodes, port_sharing).await;
    let names: Vec<String> = sim.nodes().iter().map(|n| n.name.clone()).collect();
    let mut failed_probes = Vec::new();
    let mut reports = Vec::new();
    let mut longest = Duration::ZERO;

    // 1. To self-hosted, one node at a time.
    let phase = Instant::now();
    let prober = sim.prober(prober_options()).await.expect("prober");
    for node in &names {
        let (report, events) = run(&sim, &request(&sim, Direction::ToSelfHosted, node)).await;
        assert_done(&report, &format!("to-self-hosted on {node}"));
        assert!(
            events.iter().any(
                |e| matches!(&e.event, Event::Action { step, .. } if step == "move-manifest-aside")
            ),
            "the manifests were moved aside"
        );
        assert!(
            manifests(&sim, node).is_empty(),
            "{node}: {:?}",
            manifests(&sim, node)
        );
        let backups: Vec<String> = std::fs::read_dir(&report.backup_dir)
            .expect("backup dir")
            .filter_map(|e| e.ok())
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
        for file in ALL_MANIFESTS {
            assert!(
                backups.iter().any(|b| b == file),
                "{node}: {file} kept in the backup"
            );
        }
        reports.push(report);
    }
    let probes = prober.stop().await;
    longest = longest.max(probes.reads.longest_failure_window());
    failed_probes.push(failed(&probes));
    if nodes > 1 || port_sharing {
        assert!(
            !sim.recorder().was_down(phase, Instant::now()),
            "to self-hosted: never down"
        );
    }
    let seen = wait_for(&sim, &expected(&sim, "daemonset", FROM)).await;
    assert_eq!(seen.running, expected(&sim, "daemonset", FROM));
    assert_eq!(seen.daemonsets.len(), 3, "{:?}", seen.daemonsets);

    // 2. A second run changes nothing.
    let (again, events) = run(&sim, &request(&sim, Direction::ToSelfHosted, &names[0])).await;
    assert_done(&again, "a second to-self-hosted");
    assert!(
        !events
            .iter()
            .any(|e| matches!(e.event, Event::Action { .. })),
        "a converted node needs no action"
    );

    // 3. The self-hosted control plane upgrades (its probe figures are the upgrade engine's
    // to assert; here: the API never went down).
    let started = Instant::now();
    upgrade(&sim, TO).await;
    assert!(
        !sim.recorder().was_down(started, Instant::now()),
        "apply kept the API up"
    );
    let seen = wait_for(&sim, &expected(&sim, "daemonset", TO)).await;
    assert_eq!(seen.running, expected(&sim, "daemonset", TO));

    // 4. Back to static, one node at a time.
    let phase = Instant::now();
    let prober = sim.prober(prober_options()).await.expect("prober");
    for node in &names {
        let (report, _) = run(&sim, &request(&sim, Direction::ToStatic, node)).await;
        assert_done(&report, &format!("to-static on {node}"));
        assert_eq!(manifests(&sim, node), ALL_MANIFESTS);
    }
    let probes = prober.stop().await;
    longest = longest.max(probes.reads.longest_failure_window());
    failed_probes.push(failed(&probes));
    // The DaemonSet template always shares its port: back to static never has a gap.
    assert!(
        !sim.recorder().was_down(phase, Instant::now()),
        "to static: never down"
    );
    let seen = wait_for(&sim, &expected(&sim, "static", TO)).await;
    assert_eq!(
        seen.running,
        expected(&sim, "static", TO),
        "static pods at {TO}"
    );
    assert_eq!(seen.daemonsets, Vec::<String>::new(), "no DaemonSet left");
    assert_eq!(seen.gate_labels, Vec::<String>::new(), "no label left");
    (failed_probes, gaps(&reports), longest)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_node_with_port_sharing_converts_both_ways_without_a_failed_probe() {
    let (failed, gaps, _) = round_trip(1, true).await;
    assert!(
        gaps.is_empty(),
        "with port sharing there is no gap: {gaps:?}"
    );
    for (phase, failed) in ["to self-hosted", "to static"].iter().zip(&failed) {
        assert!(failed.is_empty(), "{phase}: {failed:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_node_without_port_sharing_has_a_gap_of_at_most_one_pod_start() {
    let (failed, gaps, longest) = round_trip(1, false).await;
    eprintln!(
        "hand-over gaps (s): {gaps:?}; longest failed-probe window: {longest:?}; failed probes per phase: {:?}",
        failed.iter().map(Vec::len).collect::<Vec<_>>()
    );
    assert_eq!(
        gaps.len(),
        3,
        "one measured hand-over per component: {gaps:?}"
    );
    // One pod start at these timings is a fraction of a second; the kubelet's first
    // crash-loop back-off (10 s / 100) comes on top at most once.
    assert!(longest < Duration::from_secs(2), "longest gap {longest:?}");
    assert!(
        failed[1].is_empty(),
        "back to static (the DaemonSet template shares its port): {:?}",
        failed[1]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_nodes_with_port_sharing_convert_both_ways_without_a_failed_probe() {
    let (failed, gaps, _) = round_trip(3, true).await;
    assert!(gaps.is_empty(), "{gaps:?}");
    for (phase, failed) in ["to self-hosted", "to static"].iter().zip(&failed) {
        assert!(failed.is_empty(), "{phase}: {failed:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_nodes_without_port_sharing_convert_both_ways_without_a_failed_probe() {
    let (failed, gaps, _) = round_trip(3, false).await;
    assert_eq!(gaps.len(), 9, "{gaps:?}");
    for (phase, failed) in ["to self-hosted", "to static"].iter().zip(&failed) {
        assert!(failed.is_empty(), "{phase}: {failed:?}");
    }
}
