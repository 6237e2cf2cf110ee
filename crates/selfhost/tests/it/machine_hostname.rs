//! Nodes named apart from their machines: every process sees its machine's hostname, here one
//! shared by every node and no node's name (a test bed on one machine; nodes named by
//! `--hostname-override`), so no Lease holder or apiserver identity names a node. The engine
//! places them where it can (the only node of a one-node cluster) and reasons over every node
//! where it cannot: the upgrade completes, and no controller-manager or scheduler Lease is left
//! to expire.

use std::time::Duration;

use selfhost::RunOutcome;
use selfhost_sim::bootstrap::BootstrapMode;
use selfhost_sim::cluster::Handovers;
use selfhost_sim::{SimCluster, SimTimings};

use crate::handover::{FACTOR, SEVERAL_NODES_FACTOR, leaderless_during_upgrade_of};
use crate::upgrade::{FROM, TO, images, on};

/// The hostname of every node's machine.
const MACHINE: &str = "vm_abc";
/// A leader Lease of the processes the simulator bootstraps: what a standby waits when the
/// Lease is left to expire.
const LEASE_DURATION: Duration = Duration::from_secs(15);

/// A self-hosted cluster of `nodes` control-plane nodes whose machines are all [`MACHINE`],
/// under the measured hand-over model, `factor` times faster than real.
async fn cluster(nodes: usize, factor: u32) -> SimCluster {
    SimCluster::builder()
        .control_plane_nodes(nodes)
        .version(FROM)
        .mode(BootstrapMode::SelfHosted)
        .port_sharing(true)
        .timings(SimTimings::scaled(factor))
        .handovers(Some(Handovers::measured()))
        .process_hostname(MACHINE)
        .start()
        .await
        .expect("cluster starts")
}

/// Upgrades the cluster and checks it: done, every component on the target, no backup left,
/// and every leaderless stretch of both roles shorter than a lease duration.
async fn upgrades_without_waiting_out_a_lease(nodes: usize, factor: u32) {
    let sim = cluster(nodes, factor).await;
    let (report, gaps) = leaderless_during_upgrade_of(&sim, factor).await;
    assert_eq!(report.outcome, RunOutcome::Done);
    assert_eq!(images(&sim).await, (on(TO), false));
    let lease = LEASE_DURATION / factor;
    eprintln!("{nodes} node(s) on one machine hostname: leaderless stretches {gaps:?}");
    for (role, gaps) in &gaps {
        assert!(
            gaps.iter().all(|gap| *gap < lease),
            "{role:?}: {gaps:?}, a Lease left to expire ({lease:?} at 1/{factor} of real time)"
        );
    }
}

/// At the clock of the one-node leaderless tests (`handover.rs`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_one_node_whose_machine_is_named_otherwise_every_component_upgrades() {
    upgrades_without_waiting_out_a_lease(1, FACTOR).await;
}

/// At the clock of the several-node leaderless tests, and for one more reason: with no node
/// to tell, a new pod's process can be ruled out as the holder only by its start, which the
/// kubelet reports in whole seconds. At real pod latencies a new pod (its image pulled in
/// 3 s) starts seconds after the acquisition that let the controller-manager create it; at a
/// tenth of them all three start within that second, none can be told from the holder, and
/// the Lease is left to expire (safe, a lease duration at worst: what this test would report).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_three_nodes_sharing_one_machine_hostname_every_component_upgrades() {
    upgrades_without_waiting_out_a_lease(3, SEVERAL_NODES_FACTOR).await;
}
