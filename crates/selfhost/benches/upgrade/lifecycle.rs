//! The real-process bed's lifecycle scenarios on the simulator, measured as the bed measures
//! them, so that docs/benchmarks.md can set the two side by side: `apply` stopped dead inside
//! each component's pivot and run again until it finishes, and a rollback from a target whose
//! image cannot be pulled and from one whose kube-apiserver exits at start. Clusters as
//! `selfhost demo` makes them (port sharing, the measured hand-over model, pods five times
//! faster than real ones); two probers, one per kind of client.

use std::time::Duration;

use selfhost::{ApplyOptions, RunOutcome, apply};
use selfhost::{Event, Events};
use selfhost_core::Component;
use selfhost_core::pivot::PivotOptions;
use selfhost_sim::cluster::{Connections, ProbeReport, ProberOptions, Role, SimCluster};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::versus::{self, DEADLINE, FROM, TO};

/// Pods this many times faster than real ones, as `selfhost demo` runs them.
pub const SPEEDUP: u32 = 5;
/// The per-component deadline, as `selfhost demo` gives it.
const COMPONENT_DEADLINE: Duration = Duration::from_secs(60);
/// Where each run of the killed upgrade is stopped: one point inside each component's pivot,
/// the bed's kill points.
const KILL_POINTS: [(Component, &str); 3] = [
    (Component::ApiServer, "update-real"),
    (Component::ControllerManager, "update-real"),
    (Component::Scheduler, "update-real"),
];

/// A scenario of the table.
#[derive(Debug, Clone, Copy)]
pub enum Scenario {
    /// `apply` stopped dead at each of [`KILL_POINTS`] in turn, then run to the end.
    KilledAndResumed,
    /// The target's kube-apiserver image cannot be pulled.
    RollbackUnpullable,
    /// The target's kube-apiserver exits at start.
    RollbackExitsAtStart,
}

impl Scenario {
    /// Every scenario, in the table's order.
    pub const ALL: [Scenario; 3] = [
        Scenario::KilledAndResumed,
        Scenario::RollbackUnpullable,
        Scenario::RollbackExitsAtStart,
    ];

    fn describe(self) -> &'static str {
        match self {
            Scenario::KilledAndResumed => "apply killed in each pivot and run again",
            Scenario::RollbackUnpullable => "rollback from an image that cannot be pulled",
            Scenario::RollbackExitsAtStart => "rollback from a kube-apiserver that exits at start",
        }
    }
}

/// What one scenario cost.
pub struct Figures {
    /// From the first run's start until the last one returned.
    pub wall: Duration,
    /// HTTP requests of every run, the stopped ones included.
    pub requests: u64,
    /// What each kind of client saw over the same time.
    pub probes: Vec<(Connections, ProbeReport)>,
    /// Leaderless stretches per role.
    pub leaderless: Vec<(Role, Vec<Duration>)>,
}

async fn cluster(nodes: usize) -> SimCluster {
    let sim = versus::measured_cluster(nodes, SPEEDUP).await;
    versus::until_led(&sim).await;
    sim
}

fn prober_options(connections: Connections) -> ProberOptions {
    ProberOptions {
        config_map: format!("selfhost-prober-{connections:?}").to_lowercase(),
        connections,
        ..versus::prober_options()
    }
}

fn options() -> ApplyOptions {
    ApplyOptions {
        pivot: PivotOptions {
            deadline: COMPONENT_DEADLINE,
            ..Default::default()
        },
        ..Default::default()
    }
}

/// One run of `apply` to [`TO`], planned afresh as a new process plans it; with `kill_at`,
/// stopped dead (its task aborted: no clean-up, no memory) right after it reports that step
/// (`None`).
async fn run_once(
    sim: &SimCluster,
    kill_at: Option<(Component, &'static str)>,
) -> Option<RunOutcome> {
    let (clients, mut observer, targets) = versus::plan_to(sim, TO).await;
    let (sender, mut receiver) = tokio::sync::mpsc::unbounded_channel();
    let run = tokio::spawn(async move {
        let (events, cancel) = (Events::to(sender), CancellationToken::new());
        apply(
            &mut observer,
            &clients.api,
            &targets,
            &options(),
            &events,
            &cancel,
        )
        .await
    });
    if let Some((component, step)) = kill_at {
        let deadline = Instant::now() + DEADLINE;
        loop {
            let event = tokio::time::timeout_at(deadline, receiver.recv())
                .await
                .expect("the run reaches its kill point in time")
                .expect("the run goes on until its kill point");
            if matches!(&event.event, Event::Step { component: c, step: s, .. } if *c == component && s == step)
            {
                break;
            }
        }
        run.abort();
        let _ = run.await;
        return None;
    }
    let report = tokio::time::timeout(DEADLINE * 2, run)
        .await
        .expect("the run ends in time")
        .expect("the run's task")
        .expect("the run");
    Some(report.outcome)
}

/// Makes the target's kube-apiserver image fail as `scenario` says.
fn break_target(sim: &SimCluster, scenario: Scenario) {
    let image = format!("registry.k8s.io/kube-apiserver:{TO}");
    match scenario {
        Scenario::KilledAndResumed => {}
        Scenario::RollbackUnpullable => sim.registry().make_unpullable(&image),
        Scenario::RollbackExitsAtStart => sim
            .registry()
            .make_crash_loop(&image, Duration::ZERO)
            .expect("an image name"),
    }
}

/// Runs `scenario` on a fresh cluster of `nodes` and checks it ended as the bed's does.
pub async fn measure(nodes: usize, scenario: Scenario) -> Figures {
    let sim = cluster(nodes).await;
    break_target(&sim, scenario);
    let mut probers = Vec::new();
    for connections in [Connections::NewPerRequest, Connections::KeepAlive] {
        let prober = sim
            .prober(prober_options(connections))
            .await
            .expect("prober");
        probers.push((connections, prober));
    }
    // What the probers measure is the scenario, not the fresh cluster's first moments.
    let deadline = Instant::now() + DEADLINE;
    while !probers.iter().all(|(_, prober)| {
        let report = prober.report();
        report.reads.samples.iter().any(|s| s.ok) && report.writes.samples.iter().any(|s| s.ok)
    }) {
        assert!(Instant::now() < deadline, "the probers get answers");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let before = versus::tool_requests(&sim);
    let started = Instant::now();
    let outcome = match scenario {
        Scenario::KilledAndResumed => {
            for point in KILL_POINTS {
                run_once(&sim, Some(point)).await;
            }
            run_once(&sim, None).await
        }
        Scenario::RollbackUnpullable | Scenario::RollbackExitsAtStart => run_once(&sim, None).await,
    };
    let wall = started.elapsed();
    let requests = versus::tool_requests(&sim) - before;
    match scenario {
        Scenario::KilledAndResumed => assert_eq!(outcome, Some(RunOutcome::Done)),
        _ => assert!(
            matches!(
                outcome,
                Some(RunOutcome::RolledBack {
                    component: Component::ApiServer,
                    ..
                })
            ),
            "{}: {outcome:?}",
            scenario.describe()
        ),
    }
    let ended = Instant::now();
    let mut probes = Vec::new();
    for (connections, prober) in probers {
        let mut report = prober.stop().await;
        for series in [&mut report.reads, &mut report.writes] {
            series.samples.retain(|s| s.started >= started);
        }
        probes.push((connections, report));
    }
    let leaderless = versus::leaderless(&sim, started, ended);
    sim.shutdown().await;
    Figures {
        wall,
        requests,
        probes,
        leaderless,
    }
}

/// Prints the table: per scenario and node count, the bed's columns.
pub fn table(runtime: &tokio::runtime::Runtime) {
    println!();
    println!(
        "the real-process bed's lifecycle scenarios on the simulator: {FROM} -> {TO}, pods \
         {SPEEDUP}x faster than real ones (times also given x{SPEEDUP}), measured hand-over \
         model, probers reading every 10 ms and writing every 50 ms (1 s timeout), one run each"
    );
    for nodes in [1, 3] {
        for scenario in Scenario::ALL {
            let figures = runtime.block_on(measure(nodes, scenario));
            let wall = figures.wall.as_secs_f64();
            println!(
                "{nodes} node(s), {}: wall {wall:.1} s (x{SPEEDUP}: {:.0} s), {} API requests",
                scenario.describe(),
                wall * f64::from(SPEEDUP),
                figures.requests
            );
            for (connections, probes) in &figures.probes {
                println!(
                    "  {}: reads failed {} of {} (longest gap {:.2} s), writes failed {} of {}",
                    connections.describe(),
                    probes.reads.failures(),
                    probes.reads.attempts(),
                    probes.reads.longest_gap().as_secs_f64(),
                    probes.writes.failures(),
                    probes.writes.attempts(),
                );
                let mut reasons = std::collections::BTreeMap::<String, usize>::new();
                for sample in probes.reads.samples.iter().chain(&probes.writes.samples) {
                    if !sample.ok {
                        let reason = sample.error.clone().unwrap_or_default();
                        *reasons.entry(reason).or_default() += 1;
                    }
                }
                for (reason, n) in reasons {
                    println!("    {n} x {reason}");
                }
            }
            for (role, gaps) in &figures.leaderless {
                let gaps: Vec<String> = gaps
                    .iter()
                    .map(|g| format!("{:.2} s", g.as_secs_f64()))
                    .collect();
                println!("  {role:?} leaderless: {}", gaps.join(", "));
            }
        }
    }
}
