//! Upgrade benchmark: wall time of a full upgrade on a simulated self-hosted cluster against
//! the lower bound its pod latencies allow, and the API requests the engine makes per
//! component. Not a test: it prints figures (recorded in docs/benchmarks.md).
//!
//! Run: `cargo bench -p selfhost --bench upgrade`

#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)] // a benchmark, not library code

use std::time::{Duration, Instant};

use selfhost::apply::{ApplyOptions, RunOutcome, apply};
use selfhost::client::{KubeconfigSource, connect_with};
use selfhost::events::Events;
use selfhost::observe::Observer;
use selfhost::plan::{PlanRequest, make_plan};
use selfhost::retry::RetryPolicy;
use selfhost_core::KubeVersion;
use selfhost_core::skew::SkewFlags;
use selfhost_sim::bootstrap::BootstrapMode;
use selfhost_sim::{SimCluster, SimTimings};
use tokio_util::sync::CancellationToken;

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

async fn run(nodes: usize) -> (Duration, Duration, u64) {
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
    let clients = connect_with(&KubeconfigSource::Flag(sim.kubeconfig_path().into()), None)
        .await
        .expect("connects");
    let before = sim.metrics().total();
    let started = Instant::now();
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
        &Events::none(),
        &CancellationToken::new(),
    )
    .await
    .expect("runs");
    let wall = started.elapsed();
    assert_eq!(report.outcome, RunOutcome::Done);
    drop(observer);
    let requests = sim.metrics().total() - before;
    (wall, lower_bound(&timings, nodes as u32), requests)
}

fn main() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");
    println!("upgrade v1.33.1 -> v1.34.0, simulated latencies / {SCALE}");
    println!(
        "{:>5} {:>10} {:>12} {:>8} {:>22}",
        "nodes", "wall", "lower bound", "ratio", "API requests/component"
    );
    for nodes in [1, 3, 5] {
        let mut best: Option<(Duration, Duration, u64)> = None;
        for _ in 0..3 {
            let sample = runtime.block_on(run(nodes));
            if best.is_none_or(|b| sample.0 < b.0) {
                best = Some(sample);
            }
        }
        let (wall, bound, requests) = best.expect("three samples");
        println!(
            "{nodes:>5} {:>9.2}s {:>11.2}s {:>8.2} {:>22}",
            wall.as_secs_f64(),
            bound.as_secs_f64(),
            wall.as_secs_f64() / bound.as_secs_f64(),
            requests / 3
        );
    }
}
