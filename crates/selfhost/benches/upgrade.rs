//! Upgrade benchmark, three tables in one run (figures recorded in docs/benchmarks.md):
//! 1. the engine's wall time for a full upgrade on a simulated self-hosted cluster against the
//!    lower bound its pod latencies allow, and the API requests it makes per component;
//! 2. the engine next to kubeadm's algorithm (the reference in `tests/reference/kubeadm.rs`,
//!    for comparison only) on identical clusters as kubeadm built them, under the measured
//!    hand-over model, and the engine behind an API front per node as `convert` builds it:
//!    wall time, API requests, failed probes of each kind of client, the longest time without
//!    a successful read, and the controller-manager's and scheduler's leaderless stretches;
//! 3. the real-process bed's lifecycle scenarios (killed and resumed, two rollbacks) on the
//!    simulator, with a prober of each kind of client.
//!
//! Not a test. Run: `cargo bench -p selfhost --bench upgrade --profile dev`; after `--`,
//! `lower-bound`, `kubeadm` or `lifecycle` runs one table only.

#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)] // a benchmark, not library code

use std::time::{Duration, Instant};

use selfhost::Events;
use selfhost::Observer;
use selfhost::RetryPolicy;
use selfhost::{ApplyOptions, RunOutcome, apply};
use selfhost::{KubeconfigSource, connect_with};
use selfhost::{PlanRequest, make_plan};
use selfhost_core::KubeVersion;
use selfhost_core::skew::SkewFlags;
use selfhost_sim::bootstrap::BootstrapMode;
use selfhost_sim::{SimCluster, SimTimings};
use tokio_util::sync::CancellationToken;

/// kubeadm's algorithm, for comparison only (not product code).
#[path = "../tests/reference/kubeadm.rs"]
mod kubeadm_reference;
/// The real-process bed's lifecycle scenarios on the simulator (`-- lifecycle`).
#[path = "upgrade/lifecycle.rs"]
mod lifecycle;
/// One run's timeline, simulator and engine merged (`-- profile N`).
#[path = "upgrade/profile.rs"]
mod profile;
/// Simulated clusters with an API front on every node, as the binary's `demo` builds them.
#[path = "../../selfhost-cli/src/commands/sim_front.rs"]
mod sim_front;
/// The side-by-side harness shared with the tests.
#[path = "../tests/reference/versus.rs"]
mod versus;

use selfhost_sim::cluster::Role;
use versus::{Cost, Tool};

/// Latencies a hundred times faster than real ones, as in the end-to-end tests.
const SCALE: u32 = 10;

/// The shortest a pivot of three components can take with these latencies: per component,
/// the backup pods start (in parallel, image already on the nodes), then node by node
/// (maxUnavailable 1) an old pod stops and a new one pulls, starts and becomes Ready, then
/// the backup pods stop (in parallel).
fn lower_bound(timings: &SimTimings, nodes: u32) -> Duration {
    let k = &timings.kubelet;
    let start_cached = k.sandbox + k.start + k.ready;
    let start_new = k.sandbox + k.pull + k.start + k.ready;
    let per_component = start_cached + (k.stop + start_new) * nodes + k.stop;
    per_component * 3
}

/// The same bound for the pivot as it runs: on two nodes or more the kube-apiserver's backup is
/// a record only (docs/design.md, "The pivot"), so its backup pods neither start nor stop.
/// Printed beside [`lower_bound`], which stays the bound of the backup pivot the issue names.
fn lower_bound_as_run(timings: &SimTimings, nodes: u32) -> Duration {
    let k = &timings.kubelet;
    let apiserver_backup = if nodes >= 2 {
        k.sandbox + k.start + k.ready + k.stop
    } else {
        Duration::ZERO
    };
    lower_bound(timings, nodes) - apiserver_backup
}

async fn run(nodes: usize, show_profile: bool) -> (Duration, Duration, u64) {
    let timings = SimTimings::scaled(SCALE);
    let sim = SimCluster::builder()
        .control_plane_nodes(nodes)
        .version("v1.33.1")
        .mode(BootstrapMode::SelfHosted)
        .port_sharing(true)
        .timings(timings)
        .start()
        .await
        .expect("cluster");
    // The control-plane processes of a fresh cluster all started in the last second. On a
    // cluster anyone upgrades they have run far longer; container start times have whole-second
    // precision, so an upgrade in the same second would meet an ambiguity no real upgrade meets
    // (a backup apiserver's identity cannot be told from the old one's until the old renews).
    tokio::time::sleep(Duration::from_millis(1_100)).await;
    let clients = connect_with(&KubeconfigSource::Flag(sim.kubeconfig_path().into()), None)
        .await
        .expect("connects");
    let before = sim.metrics().total();
    let started = Instant::now();
    let tap = show_profile.then(|| {
        profile::StoreTap::start(sim.store().clone(), tokio::time::Instant::from_std(started))
    });
    let (sender, receiver) = tokio::sync::mpsc::unbounded_channel();
    let events = if show_profile {
        Events::to(sender)
    } else {
        Events::none()
    };
    let events_offset = started.elapsed();
    if show_profile {
        // Lines logged with RUST_LOG set are timed from the subscriber's start: this one
        // marks the profile's zero on that clock.
        tracing::info!("profile zero");
    }
    let mut observer = Observer::start(&clients);
    observer
        .ready(Duration::from_secs(20))
        .await
        .expect("listed");
    let request = PlanRequest {
        version: KubeVersion::parse("v1.34.0").expect("version"),
        config_file: None,
        flags: SkewFlags::default(),
        accept_downtime: false,
        certificate_warning: selfhost::DEFAULT_CERTIFICATE_WARNING,
        etcd: None,
        assume_from: None,
    };
    let (_, targets, _) = make_plan(
        &mut observer,
        &clients.api,
        &request,
        &RetryPolicy::default(),
    )
    .await
    .expect("plan");
    let report = apply(
        &mut observer,
        &clients.api,
        &targets,
        &ApplyOptions::default(),
        &events,
        &CancellationToken::new(),
    )
    .await
    .expect("runs");
    let wall = started.elapsed();
    assert_eq!(report.outcome, RunOutcome::Done);
    if let Some(tap) = tap {
        let (mut lines, facts) = tap.finish();
        let (engine, did) = profile::engine_lines(receiver, events_offset);
        lines.extend(engine);
        profile::print(lines);
        println!("wall {:.3}s", wall.as_secs_f64());
        profile::account(&facts, &did, lower_bound(&timings, nodes as u32) / 3, wall);
    }
    drop(observer);
    let requests = sim.metrics().total() - before;
    (wall, lower_bound(&timings, nodes as u32), requests)
}

fn lower_bound_table(runtime: &tokio::runtime::Runtime) {
    println!("upgrade v1.33.1 -> v1.34.0, simulated latencies / {SCALE}");
    println!(
        "{:>5} {:>10} {:>12} {:>8} {:>22} {:>14} {:>9}",
        "nodes", "wall", "lower bound", "ratio", "API requests/component", "bound as run", "ratio"
    );
    for nodes in [1, 3, 5] {
        let mut best: Option<(Duration, Duration, u64)> = None;
        for _ in 0..3 {
            let sample = runtime.block_on(run(nodes, false));
            if best.is_none_or(|b| sample.0 < b.0) {
                best = Some(sample);
            }
        }
        let (wall, bound, requests) = best.expect("three samples");
        let as_run = lower_bound_as_run(&SimTimings::scaled(SCALE), nodes as u32);
        println!(
            "{nodes:>5} {:>9.2}s {:>11.2}s {:>8.2} {:>22} {:>13.2}s {:>9.2}",
            wall.as_secs_f64(),
            bound.as_secs_f64(),
            wall.as_secs_f64() / bound.as_secs_f64(),
            requests / 3,
            as_run.as_secs_f64(),
            wall.as_secs_f64() / as_run.as_secs_f64(),
        );
    }
    println!(
        "(lower bound: the backup pivot's, a backup started and stopped for every component; \
         bound as run: without the kube-apiserver's backup pods, which on two nodes or more \
         are a record only)"
    );
}

/// One upgrade by `tool` on a fresh cluster of `nodes` as kubeadm built it.
async fn versus(nodes: usize, tool: Tool) -> Cost {
    let sim = versus::kubeadm_built_cluster(nodes, SCALE).await;
    let cost = versus::upgrade(&sim, tool, SCALE).await;
    sim.shutdown().await;
    cost
}

/// One upgrade by the engine on a fresh cluster of `nodes` as `convert to-self-hosted` builds
/// it: an API front on every node before kube-apiservers on loopback ports of their own.
async fn behind_fronts(nodes: usize) -> Cost {
    let builder = sim_front::with_front(versus::measured_builder(nodes, SCALE), SCALE)
        .expect("the front renders");
    let sim = builder.start().await.expect("cluster starts");
    versus::until_led(&sim).await;
    let cost = versus::upgrade(&sim, Tool::Selfhost, SCALE).await;
    sim.shutdown().await;
    cost
}

fn secs(d: Duration) -> String {
    format!("{:.2}s", d.as_secs_f64())
}

fn gaps(cost: &Cost, role: Role) -> String {
    let gaps: Vec<String> = cost.gaps(role).into_iter().map(secs).collect();
    if gaps.is_empty() {
        "-".into()
    } else {
        gaps.join(" ")
    }
}

fn ratio(theirs: f64, ours: f64) -> String {
    if ours == 0.0 {
        if theirs == 0.0 {
            "=".into()
        } else {
            "inf".into()
        }
    } else {
        format!("{:.2}", theirs / ours)
    }
}

fn kubeadm_table(runtime: &tokio::runtime::Runtime) {
    println!();
    println!(
        "selfhost vs kubeadm's algorithm (reference), measured hand-over model, simulated \
         latencies / {SCALE}, one run each; \"front\": selfhost behind an API front per node as \
         convert builds it, the other two on clusters as kubeadm built them"
    );
    println!(
        "{:>5} {:<9} {:>7} {:>8} {:>15} {:>8} {:>15} {:>10} {:>11} {:>11} {:<22} {:<22}",
        "nodes",
        "tool",
        "wall",
        "requests",
        "keep-alive",
        "replayed",
        "new conn",
        "read fails",
        "longest gap",
        "leaderless",
        "controller-manager",
        "scheduler"
    );
    for nodes in [1, 3, 5] {
        let front = runtime.block_on(behind_fronts(nodes));
        let ours = runtime.block_on(versus(nodes, Tool::Selfhost));
        let theirs = runtime.block_on(versus(nodes, Tool::Kubeadm));
        for (name, cost) in [("front", &front), ("selfhost", &ours), ("kubeadm", &theirs)] {
            println!(
                "{nodes:>5} {name:<9} {:>7} {:>8} {:>15} {:>8} {:>15} {:>10} {:>11} {:>11} {:<22} {:<22}",
                secs(cost.wall),
                cost.requests,
                format!("{}/{}", cost.failed(), cost.attempts()),
                cost.probes.replayed(),
                format!("{}/{}", cost.fresh_failed(), cost.fresh_attempts()),
                format!("{}ms", cost.failing_time().as_millis()),
                secs(cost.longest_gap()),
                secs(cost.total_leaderless()),
                gaps(cost, Role::ControllerManager),
                gaps(cost, Role::Scheduler),
            );
        }
        println!(
            "{nodes:>5} {:<9} {:>7} {:>8} {:>15} {:>8} {:>15} {:>10} {:>11} {:>11}",
            "ratio",
            ratio(theirs.wall.as_secs_f64(), ours.wall.as_secs_f64()),
            ratio(theirs.requests as f64, ours.requests as f64),
            ratio(theirs.failed() as f64, ours.failed() as f64),
            "",
            ratio(theirs.fresh_failed() as f64, ours.fresh_failed() as f64),
            ratio(
                theirs.failing_time().as_secs_f64(),
                ours.failing_time().as_secs_f64()
            ),
            ratio(
                theirs.longest_gap().as_secs_f64(),
                ours.longest_gap().as_secs_f64()
            ),
            ratio(
                theirs.total_leaderless().as_secs_f64(),
                ours.total_leaderless().as_secs_f64()
            ),
        );
    }
    println!(
        "(keep-alive and new conn: failed of attempted probes of each kind of client; ratio: \
         kubeadm's figure divided by selfhost's on the same kubeadm-built cluster; replayed: \
         keep-alive probes the prober's transport sent again, as Go's does, after a server \
         closed a reused connection before answering — not failures; read fails and longest \
         gap: the keep-alive prober's)"
    );
}

fn main() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");
    // `cargo bench` passes `--bench`; a table's name runs that table only.
    let only: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with("--"))
        .collect();
    let wanted = |table: &str| only.is_empty() || only.iter().any(|o| o == table);
    if wanted("lower-bound") {
        lower_bound_table(&runtime);
    }
    if let Some(at) = only.iter().position(|o| o == "profile") {
        let nodes = only.get(at + 1).and_then(|n| n.parse().ok()).unwrap_or(1);
        tracing_subscriber::fmt()
            .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
            .with_timer(tracing_subscriber::fmt::time::Uptime::default())
            .with_writer(std::io::stderr)
            .init();
        runtime.block_on(run(nodes, true));
        return;
    }
    if wanted("kubeadm") {
        kubeadm_table(&runtime);
    }
    if wanted("lifecycle") {
        lifecycle::table(&runtime);
    }
}
