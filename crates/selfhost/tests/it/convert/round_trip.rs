//! Static → self-hosted → `apply` → static, on one and three nodes, with and without port
//! sharing on the original static pods.

use std::time::Duration;

use selfhost::ComponentOutcome;
use selfhost::ConvertReport;
use selfhost::Observer;
use selfhost::RetryPolicy;
use selfhost::report::MeasuredDisruption;
use selfhost::{ApplyOptions, RunOutcome, apply};
use selfhost::{Event, Events};
use selfhost::{PlanRequest, make_plan};
use selfhost_core::KubeVersion;
use selfhost_core::conversion::decide::Direction;
use selfhost_core::skew::SkewFlags;
use selfhost_sim::cluster::Role;
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
        certificate_warning: selfhost::DEFAULT_CERTIFICATE_WARNING,
        etcd: None,
        assume_from: None,
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
    done(reports).filter_map(|(_, gap, _)| gap).collect()
}

/// The leaderless gaps the engine reported for the controller-manager and the scheduler.
fn leaderless(reports: &[ConvertReport]) -> Vec<f64> {
    done(reports)
        .filter(|(component, _, _)| *component != Component::ApiServer)
        .filter_map(|(_, _, measured)| measured.longest_leaderless_seconds())
        .collect()
}

/// Each component done: its gap (no port sharing) and what the engine measured.
fn done(
    reports: &[ConvertReport],
) -> impl Iterator<Item = (Component, Option<f64>, &MeasuredDisruption)> {
    reports
        .iter()
        .flat_map(|r| r.components.iter())
        .filter_map(|(component, o)| match o {
            ComponentOutcome::Done {
                handover_gap_seconds,
                measured: Some(measured),
                ..
            } => Some((*component, *handover_gap_seconds, measured)),
            _ => None,
        })
}

/// What one conversion phase (every node, one direction) cost, as the prober and the
/// simulator's own availability record saw it.
#[derive(Debug, Default)]
struct PhaseFigures {
    /// Probes the API did not serve (refused, reset or answered with an error; see
    /// [`failed`]).
    failed: Vec<String>,
    /// The longest stretch of consecutive failed reads.
    longest_failed_reads: Duration,
    /// The longest stretch with no serving apiserver at all.
    longest_down: Duration,
    /// The longest stretch without a controller-manager and without a scheduler leader that
    /// began during the phase (one inherited from before it is not the conversion's).
    leaderless: [Duration; 2],
}

impl PhaseFigures {
    fn measure(sim: &SimCluster, probes: &ProbeReport, from: Instant) -> PhaseFigures {
        let to = Instant::now();
        let recorder = sim.recorder();
        PhaseFigures {
            failed: failed(probes),
            longest_failed_reads: probes.reads.longest_failure_window(),
            longest_down: recorder.longest_down(from, to),
            leaderless: [Role::ControllerManager, Role::Scheduler].map(|role| {
                recorder
                    .leaderless_intervals(role, from, to)
                    .iter()
                    .filter(|(began, _)| *began > from)
                    .map(|(began, ended)| ended.duration_since(*began))
                    .max()
                    .unwrap_or_default()
            }),
        }
    }
}

/// The figures of a whole journey.
#[derive(Debug, Default)]
struct Figures {
    to_self_hosted: PhaseFigures,
    to_static: PhaseFigures,
    /// The hand-over gaps the engine measured and reported (no port sharing).
    gaps: Vec<f64>,
    /// The apiserver gaps the engine reported for each kube-apiserver conversion to
    /// self-hosted (its own `/readyz` probes).
    reported_api_gaps: Vec<f64>,
    /// The longest leaderless gap the engine reported for the controller-manager's and the
    /// scheduler's own conversions, both ways.
    reported_leaderless: Vec<f64>,
    /// The longest leaderless gap the engine measured while it converted each kube-apiserver
    /// to self-hosted (see [`assert_leases_handed_over`]).
    leaderless_during_apiserver: Vec<f64>,
}

impl Figures {
    fn print(&self, what: &str) {
        for (phase, f) in [
            ("to self-hosted", &self.to_self_hosted),
            ("to static", &self.to_static),
        ] {
            eprintln!(
                "{what}, {phase}: {} failed probes, longest failed reads {:?}, longest down {:?}, \
                 longest leaderless controller-manager {:?} / scheduler {:?}",
                f.failed.len(),
                f.longest_failed_reads,
                f.longest_down,
                f.leaderless[0],
                f.leaderless[1],
            );
        }
        eprintln!("{what}: hand-over gaps reported (s): {:?}", self.gaps);
        eprintln!(
            "{what}: apiserver gaps reported (s): {:?}",
            self.reported_api_gaps
        );
        eprintln!(
            "{what}: leaderless gaps reported for the controller-manager and scheduler (s): {:?}",
            self.reported_leaderless
        );
    }
}

/// The whole journey on `nodes` nodes under `handovers`: static → self-hosted (node by node)
/// → `apply` to the next minor → static again.
async fn round_trip(nodes: usize, port_sharing: bool, handovers: Option<Handovers>) -> Figures {
    let sim = static_cluster_with(nodes, port_sharing, handovers).await;
    let names: Vec<String> = sim.nodes().iter().map(|n| n.name.clone()).collect();
    let mut reports = Vec::new();
    let mut back = Vec::new();

    // 1. To self-hosted, one node at a time.
    let phase = Instant::now();
    let prober = sim.prober(prober_options()).await.expect("prober");
    for node in &names {
        let (report, events) = run(&sim, &request(&sim, Direction::ToSelfHosted, node)).await;
        print_report(node, &report, &events);
        assert_done(&report, &format!("to-self-hosted on {node}"));
        assert!(
            events.iter().any(
                |e| matches!(&e.event, Event::Action { step, .. } if step == "move-manifest-aside")
            ),
            "the manifests were moved aside"
        );
        if !port_sharing {
            // Each static pod restarted with port sharing before its manifest was moved
            // aside: the hand-over itself shared the port, the kubelet's back-off had no part.
            for component in Component::ALL {
                let at = |wanted: &str| {
                    events.iter().position(|e| {
                        matches!(&e.event, Event::Action { component: c, step, .. }
                            if *c == component && step == wanted)
                    })
                };
                let (added, moved) = (at("add-port-sharing"), at("move-manifest-aside"));
                assert!(
                    added.is_some() && added < moved,
                    "{component} on {node}: port sharing added ({added:?}) before the move \
                     ({moved:?})"
                );
            }
        }
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
    let to_self_hosted = PhaseFigures::measure(&sim, &probes, phase);
    if nodes > 1 || port_sharing {
        assert!(
            !sim.recorder().was_down(phase, Instant::now()),
            "to self-hosted: never down"
        );
    }
    let seen = wait_for(&sim, &expected(&sim, "daemonset", FROM)).await;
    assert_eq!(seen.running, expected(&sim, "daemonset", FROM));
    assert_eq!(seen.daemonsets.len(), 3, "{:?}", seen.daemonsets);
    assert_eq!(manifests_aside(&reports), 3 * nodes, "every manifest kept");

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
        let (report, events) = run(&sim, &request(&sim, Direction::ToStatic, node)).await;
        print_report(node, &report, &events);
        assert_done(&report, &format!("to-static on {node}"));
        assert_eq!(manifests(&sim, node), ALL_MANIFESTS);
        back.push(report);
    }
    let probes = prober.stop().await;
    let to_static = PhaseFigures::measure(&sim, &probes, phase);
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
    Figures {
        to_self_hosted,
        to_static,
        gaps: gaps(&reports),
        reported_api_gaps: done(&reports)
            .filter(|(component, _, _)| *component == Component::ApiServer)
            .map(|(_, _, measured)| measured.longest_failing_seconds)
            .collect(),
        leaderless_during_apiserver: done(&reports)
            .filter(|(component, _, _)| *component == Component::ApiServer)
            .filter_map(|(_, _, measured)| measured.longest_leaderless_seconds())
            .collect(),
        reported_leaderless: leaderless(&[reports, back].concat()),
    }
}

/// What a user reads at the end of a run, and the Leases it handed over.
fn print_report(node: &str, report: &ConvertReport, events: &[selfhost::Stamped]) {
    for (component, outcome) in &report.components {
        eprintln!("{node} {component}: {}", outcome.message());
    }
    for e in events {
        if let Event::Action { step, detail, .. } = &e.event
            && step == "hand-over-lease"
        {
            eprintln!("{node}: {detail}");
        }
    }
}

/// How many static manifests the reports say were kept in backup directories.
fn manifests_aside(reports: &[ConvertReport]) -> usize {
    reports
        .iter()
        .map(|r| {
            ALL_MANIFESTS
                .iter()
                .filter(|f| r.backup_dir.join(f).exists())
                .count()
        })
        .sum()
}

/// One kube-apiserver joining a shared port under the measured model at these timings: its
/// socket takes a share of new connections shortly after its start and answers them only once
/// it is Ready (the kubelet's ready latency after its start, plus its authorization cache).
/// Probes the kernel hands it meanwhile fail.
fn one_join(t: &SimTimings) -> Duration {
    t.kubelet.ready + t.handover.authorization_after_accept
}

/// The longest the API can be down on one node when the static kube-apiserver does not
/// permit port sharing: the static pod restarts once, from the image it has, with port
/// sharing added (the DaemonSet pod has crashed once on the taken port by then, which proves
/// its image is there; it joins the shared port later, without a gap). One stop and one
/// start, up to the moment the new process answers on the shared port.
fn one_pod_restart(t: &SimTimings) -> Duration {
    let k = &t.kubelet;
    k.stop + k.sandbox + k.start + one_join(t)
}

/// What a loaded two-core machine adds to any stretch measured here (the prober, the
/// simulator and the engine share the cores with the other tests).
const LOAD_MARGIN: Duration = Duration::from_millis(300);

/// The engine hands the controller-manager's and scheduler's Leases over: no leaderless gap
/// the conversion opens is as long as a Lease lasts (a Lease left to expire keeps a standby
/// waiting that long, and more) — with two known exceptions (docs/reliability.md, "Known
/// limits"), reported rather than failed on:
/// - without port sharing a node's static kube-apiserver restarts once, and a leader on that
///   node talks to it; when the restart outlasts its renew deadline (at these timings a
///   second, which a loaded machine can stretch a restart to) the leader exits, and its Lease
///   is handed over only if its exit can be proven. Such a gap must fall within a
///   kube-apiserver's conversion, as the engine measured it.
/// - when the static leader stops on a node whose DaemonSet standby started before the
///   leader acquired the Lease, either could be the holder (the Lease names the host only),
///   and the conversion, unlike the upgrade (`stop-possible-lease-holder`), does not stop the
///   standby to find out: at most one such gap in a journey (seen under load only).
fn assert_leases_handed_over(figures: &Figures) {
    let lease = timings().leader_election.lease_duration;
    let mut unexplained = Vec::new();
    for f in [&figures.to_self_hosted, &figures.to_static] {
        for gap in f.leaderless {
            if gap < lease {
                continue;
            }
            let during_apiserver_restart = figures
                .leaderless_during_apiserver
                .iter()
                .any(|measured| Duration::from_secs_f64(*measured) + LOAD_MARGIN >= gap);
            if during_apiserver_restart {
                eprintln!(
                    "known gap: leaderless for {gap:?} while a kube-apiserver restarted on its \
                     leader's node"
                );
            } else {
                eprintln!(
                    "known gap: leaderless for {gap:?}, a Lease waited out where two processes \
                     on one node could hold it"
                );
                unexplained.push(gap);
            }
        }
    }
    assert!(
        unexplained.len() <= 1,
        "Leases waited out {unexplained:?} (a Lease lasts {lease:?}), outside a \
         kube-apiserver's restart (engine measured {:?}): more than the one known case allows",
        figures.leaderless_during_apiserver
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_node_with_port_sharing_has_no_more_than_one_join() {
    let figures = round_trip(1, true, Some(Handovers::measured())).await;
    figures.print("one node, port sharing, measured model");
    assert!(figures.gaps.is_empty(), "with port sharing there is no gap");
    // The API never went down (asserted in the journey); what failed is at most one
    // apiserver joining the shared port at a time, and requests on closing connections.
    let join = one_join(&timings());
    for f in [&figures.to_self_hosted, &figures.to_static] {
        assert_eq!(f.longest_down, Duration::ZERO);
        assert!(
            f.longest_failed_reads <= join + LOAD_MARGIN,
            "failed reads for {:?}, one join is {join:?}: {:?}",
            f.longest_failed_reads,
            f.failed
        );
    }
    assert_leases_handed_over(&figures);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_node_without_port_sharing_is_down_at_most_one_pod_restart() {
    let figures = round_trip(1, false, Some(Handovers::measured())).await;
    figures.print("one node, no port sharing, measured model");
    let t = timings();
    assert_eq!(
        figures.gaps.len(),
        3,
        "one measured hand-over per component"
    );
    let bound = one_pod_restart(&t);
    let f = &figures.to_self_hosted;
    eprintln!("one pod restart at these timings: {bound:?}");
    assert!(
        f.longest_down <= bound + LOAD_MARGIN,
        "down for {:?}; one pod restart is {bound:?}",
        f.longest_down
    );

    // The gap the run reports is what its probes saw: no longer than the real one plus a
    // probe period (it probes every 0.1 s).
    assert_eq!(figures.reported_api_gaps.len(), 1);
    for gap in &figures.reported_api_gaps {
        let most = bound + LOAD_MARGIN + Duration::from_millis(100);
        assert!(
            *gap <= most.as_secs_f64(),
            "the run reported an apiserver gap of {gap}s, more than {most:?}"
        );
    }
    // Back to static: the DaemonSet template shares its port, so at most a join.
    assert_eq!(figures.to_static.longest_down, Duration::ZERO);
    assert!(figures.to_static.longest_failed_reads <= one_join(&t) + LOAD_MARGIN);
    assert_leases_handed_over(&figures);
}

/// On three nodes other nodes serve throughout: the API is never down and no probe fails (a
/// request caught on a keep-alive connection a stopping apiserver closes is sent again, as
/// Go's transport does, and counted apart by the prober).
async fn three_nodes_never_down(port_sharing: bool) {
    let figures = round_trip(3, port_sharing, Some(Handovers::measured())).await;
    figures.print(&format!(
        "three nodes, port sharing {port_sharing}, measured model"
    ));
    for (phase, f) in [
        ("to self-hosted", &figures.to_self_hosted),
        ("to static", &figures.to_static),
    ] {
        assert_eq!(f.longest_down, Duration::ZERO, "{phase}");
        assert!(f.failed.is_empty(), "{phase}: {:?}", f.failed);
    }
    assert_leases_handed_over(&figures);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_nodes_with_port_sharing_convert_both_ways_never_down() {
    three_nodes_never_down(true).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_nodes_without_port_sharing_convert_both_ways_never_down() {
    three_nodes_never_down(false).await;
}
