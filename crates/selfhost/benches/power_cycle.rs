//! Power-cut benchmark (figures recorded in docs/benchmarks.md): a simulated self-hosted
//! control plane loses power on every node at once and gets it back. With a checkpointer on
//! each control-plane node (the agent `selfhost checkpoint` runs, here as tasks beside the
//! simulator), the time from power-on until the API serves again and until every static copy
//! is retired for the DaemonSet pods; without one, whether the API serves within a window at
//! all.
//!
//! Not a test. Run: `cargo bench -p selfhost --bench power_cycle --profile dev`.

#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)] // a benchmark, not library code

use std::time::{Duration, Instant};

use selfhost::{CheckpointOptions, CheckpointRound, ClientArgs, checkpoint};
use selfhost_sim::bootstrap::BootstrapMode;
use selfhost_sim::{SimCluster, SimTimings};
use tokio_util::sync::CancellationToken;

/// Latencies ten times faster than real ones; times in the table are multiplied back.
const SCALE: u32 = 10;
/// How long the nodes stay off.
const OFF: Duration = Duration::from_millis(500);
/// How long a run may take to come back before it counts as never (real time: 5 min).
const WINDOW: Duration = Duration::from_secs(30);

/// What one run measured, in real-time seconds from power-on.
struct Recovery {
    api_serving: Option<f64>,
    copies_retired: Option<f64>,
}

async fn run(nodes: usize, with_checkpointer: bool) -> Recovery {
    let sim = SimCluster::builder()
        .control_plane_nodes(nodes)
        .version("v1.33.1")
        .mode(BootstrapMode::SelfHosted)
        .port_sharing(true)
        .timings(SimTimings::scaled(SCALE))
        .start()
        .await
        .expect("cluster starts");
    let dir = tempfile::tempdir().expect("tempdir");
    let cancel = CancellationToken::new();
    let mut agents = Vec::new();
    let mut disks = Vec::new();
    if with_checkpointer {
        for node in sim.control_plane_names() {
            let manifests_dir = sim.manifests_dir(&node).expect("dir").to_path_buf();
            let options =
                CheckpointOptions::rooted_at(&node, manifests_dir, &dir.path().join(&node), SCALE);
            disks.push(options.disk());
            let args = ClientArgs {
                kubeconfig: Some(sim.kubeconfig_path().to_path_buf()),
                context: None,
            };
            let cancel = cancel.clone();
            agents.push(tokio::spawn(async move {
                let mut quiet = |_: &CheckpointRound| {};
                checkpoint(&args, &options, &cancel, &mut quiet).await
            }));
        }
        until(|| disks.iter().all(|d| d.keeps_every_component())).await;
    }
    sim.power_cycle(OFF).await;
    let on = Instant::now();
    let mut recovery = Recovery {
        api_serving: None,
        copies_retired: None,
    };
    let real = |d: Duration| (d * SCALE).as_secs_f64();
    while on.elapsed() < WINDOW {
        if recovery.api_serving.is_none() && sim.is_api_up() {
            recovery.api_serving = Some(real(on.elapsed()));
        }
        if recovery.api_serving.is_some()
            && disks.iter().all(|d| !d.has_active_copies())
            && with_checkpointer
        {
            recovery.copies_retired = Some(real(on.elapsed()));
            break;
        }
        if !with_checkpointer && recovery.api_serving.is_some() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    cancel.cancel();
    for agent in agents {
        let _ = agent.await;
    }
    sim.shutdown().await;
    recovery
}

async fn until(mut check: impl FnMut() -> bool) {
    let deadline = Instant::now() + WINDOW;
    while !check() {
        assert!(Instant::now() < deadline, "timed out");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

fn shown(seconds: Option<f64>) -> String {
    seconds.map_or_else(
        || format!("never (in {} s)", (WINDOW * SCALE).as_secs()),
        |s| format!("{s:.1} s"),
    )
}

fn main() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");
    println!(
        "power cut of every node (off {:.0} s), self-hosted v1.33.1, simulated latencies / {SCALE}, \
         times from power-on in real seconds",
        (OFF * SCALE).as_secs_f64()
    );
    println!(
        "{:>5} {:<16} {:>16} {:>18}",
        "nodes", "checkpointer", "API serving", "copies retired"
    );
    for nodes in [1, 3] {
        for with in [false, true] {
            let recovery = runtime.block_on(run(nodes, with));
            println!(
                "{:>5} {:<16} {:>16} {:>18}",
                nodes,
                if with { "yes" } else { "no" },
                shown(recovery.api_serving),
                if with {
                    shown(recovery.copies_retired)
                } else {
                    "-".into()
                }
            );
        }
    }
    println!(
        "(the agent's grace before it starts a checkpoint, 1 s on this clock, stands for its \
         default of 10 s)"
    );
}
