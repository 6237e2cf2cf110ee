//! Power-cut benchmark (figures recorded in docs/benchmarks.md): a simulated self-hosted
//! control plane loses power on every node at once and gets it back. With the checkpointer on
//! each control-plane node as `convert to-self-hosted` installs it (a static pod whose process
//! is the `selfhost` binary: it dies with the power cut and starts again with the node), the
//! time from power-on until the API serves again and until every static copy is retired for
//! the DaemonSet pods; without one, whether the API serves within a window at all.
//!
//! Not a test. Run: `cargo bench -p selfhost-cli --bench power_cycle --profile dev`.

#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)] // a benchmark, not library code

use std::time::{Duration, Instant};

use selfhost::NodeDisk;
use selfhost_sim::bootstrap::BootstrapMode;
use selfhost_sim::{SimCluster, SimTimings};

#[path = "../src/commands/sim_checkpointer.rs"]
mod sim_checkpointer;

/// The checkpointer's image in the simulated registry: it runs the `selfhost` binary.
const IMAGE: &str = "selfhost.bench/selfhost:bench";

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
    let builder = SimCluster::builder()
        .control_plane_nodes(nodes)
        .version("v1.33.1")
        .mode(BootstrapMode::SelfHosted)
        .port_sharing(true)
        .timings(SimTimings::scaled(SCALE));
    let builder = if with_checkpointer {
        let program = env!("CARGO_BIN_EXE_selfhost").into();
        sim_checkpointer::with_checkpointer(builder, IMAGE, program, SCALE).expect("renders")
    } else {
        builder
    };
    let sim = builder.start().await.expect("cluster starts");
    let disks: Vec<NodeDisk> = if with_checkpointer {
        sim.control_plane_names()
            .iter()
            .map(|node| NodeDisk::of_kubeadm_node(&sim.node_root(node).expect("a directory")))
            .collect()
    } else {
        Vec::new()
    };
    until(|| disks.iter().all(|d| d.keeps_every_component())).await;
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
