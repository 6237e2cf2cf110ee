//! One control-plane node of three reboots in the middle of `selfhost apply`, behind the load
//! balancer, while clients of both kinds read and write through it: the upgrade finishes on
//! every node, and no client request fails.

use std::sync::Arc;
use std::time::Duration;

use selfhost_sim::bootstrap::BootstrapMode;
use selfhost_sim::cluster::{
    CaughtBy, Connections, Handovers, ProbeReport, ProbeSample, ProberOptions,
};
use selfhost_sim::{SimCluster, SimTimings};
use tokio::time::Instant;

use crate::checkpointed;

/// How much faster than real ones the pods, the Leases and the checkpointers live: as fast as
/// the measured hand-over model keeps its meaning on a busy two-core machine.
const SPEED: u32 = 20;
/// How long the node is off: longer than the node monitor's grace (2 s here), as a real reboot
/// outlasts the controller-manager's 40 s, so the node is marked unreachable and tainted.
const OFF: Duration = Duration::from_secs(4);
/// At most this many runs of `apply`: the first, and re-runs after a stop that names the
/// command to continue.
const RUNS: usize = 3;

/// A prober as `selfhost demo` runs one: it reads an API object and writes its own ConfigMap,
/// with a timeout that measures the cluster rather than a loaded machine.
fn prober_options(connections: Connections, config_map: &str) -> ProberOptions {
    ProberOptions {
        read_interval: Duration::from_millis(10),
        write_interval: Duration::from_millis(50),
        read_path: "/api/v1/namespaces/kube-system".into(),
        timeout: Duration::from_secs(2),
        config_map: config_map.into(),
        connections,
        ..ProberOptions::default()
    }
}

/// What a prober saw, for messages: failed reads and writes, replays, and why each failed.
fn figures(report: &ProbeReport) -> String {
    let errors: Vec<String> = report
        .reads
        .samples
        .iter()
        .chain(&report.writes.samples)
        .filter(|s| !s.ok)
        .map(|s| {
            format!(
                "{} (caught by {:?})",
                s.error.clone().unwrap_or_default(),
                s.caught_by
            )
        })
        .collect();
    format!(
        "{} of {} reads and {} of {} writes failed, {} replayed by the transport {:?}; failures: {errors:#?}",
        report.reads.failures(),
        report.reads.samples.len(),
        report.writes.failures(),
        report.writes.samples.len(),
        report.replayed(),
        report.replay_reasons()
    )
}

/// The node that reboots.
const NODE: &str = "cp-2";

/// Whether a failed probe was in flight on the rebooting node when its power went: a request
/// a machine takes down with it, whatever the tool does (on real machines it hangs until the
/// client's timeout rather than being reset). Anything else is the upgrade's.
fn lost_with_the_machine(sample: &ProbeSample, power_off: Instant) -> bool {
    matches!(&sample.caught_by, Some(CaughtBy::Process { node, .. }) if node == NODE)
        && sample.started <= power_off
        && sample.finished >= power_off
}

/// The failed probes the upgrade is to blame for: every one not lost with the machine.
fn blamed(report: &ProbeReport, power_off: Instant) -> (usize, usize) {
    let count = |samples: &[ProbeSample]| {
        samples
            .iter()
            .filter(|s| !s.ok && !lost_with_the_machine(s, power_off))
            .count()
    };
    (count(&report.reads.samples), count(&report.writes.samples))
}

/// Reboots cp-2 right after the `nth` `kind` event of `component`'s `step` in the first run
/// of `apply v1.34.0`, and checks what an operator and the clients see.
// The demos' lock orders whole tests, each on its own thread: holding it across this test's
// awaits blocks no other task of this runtime.
#[allow(clippy::await_holding_lock)]
async fn reboot_during_apply(
    kind: &'static str,
    component: &'static str,
    step: &'static str,
    nth: usize,
) {
    let _one = crate::demo::ONE_DEMO_AT_A_TIME
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    let builder = SimCluster::builder()
        .control_plane_nodes(3)
        .version("v1.33.1")
        .mode(BootstrapMode::SelfHosted)
        .port_sharing(true)
        .timings(SimTimings::scaled(SPEED))
        .handovers(Handovers::measured());
    let sim = Arc::new(
        checkpointed::with_checkpointers(builder, SPEED)
            .start()
            .await
            .expect("cluster starts"),
    );
    checkpointed::every_node_keeps_every_component(&sim).await;
    let mut probers = Vec::new();
    for (connections, name) in [
        (Connections::KeepAlive, "prober-keep-alive"),
        (Connections::NewPerRequest, "prober-new-connections"),
    ] {
        let prober = sim
            .prober(prober_options(connections, name))
            .await
            .expect("a prober");
        probers.push((connections, prober));
    }
    checkpointed::until(
        Duration::from_secs(30),
        "answer to both probers",
        async || {
            probers.iter().all(|(_, p)| {
                let report = p.report();
                report.reads.samples.iter().any(|s| s.ok)
                    && report.writes.samples.iter().any(|s| s.ok)
            })
        },
    )
    .await;

    let started = Instant::now();
    let (reached_tx, reached_rx) = tokio::sync::oneshot::channel::<()>();
    let reached = std::sync::Mutex::new((0, Some(reached_tx)));
    let first = crate::run_json_events(
        sim.kubeconfig_path().to_path_buf(),
        ["apply", "v1.34.0", "--yes"].map(Into::into).to_vec(),
        move |event| {
            if crate::is_event(event, kind, component, step)
                && let Ok(mut reached) = reached.lock()
            {
                reached.0 += 1;
                if reached.0 == nth
                    && let Some(tx) = reached.1.take()
                {
                    let _ = tx.send(());
                }
            }
            false
        },
    );
    let reboot = async {
        if reached_rx.await.is_ok() {
            let at = Instant::now();
            sim.reboot(NODE, OFF).await.expect("the node reboots");
            Some(at)
        } else {
            None
        }
    };
    let ((mut events, mut code), rebooted_at) = tokio::join!(first, reboot);
    let power_off = rebooted_at
        .unwrap_or_else(|| panic!("the run reached {component}/{step}: {:?}", events.last()));
    let mut runs = 1;
    while code != Some(0) && runs < RUNS {
        let message = events.last().map(|e| e.to_string()).unwrap_or_default();
        assert!(
            code == Some(4) && message.contains("Continue with"),
            "run {runs} stops with a message that names the command to continue: \
             exit {code:?}, {message}"
        );
        (events, code) = crate::run_json_events(
            sim.kubeconfig_path().to_path_buf(),
            ["apply", "v1.34.0", "--yes"].map(Into::into).to_vec(),
            |_| false,
        )
        .await;
        runs += 1;
    }
    let took = started.elapsed();
    let mut reports = Vec::new();
    for (connections, prober) in probers {
        reports.push((connections, prober.stop().await));
    }
    let shown: Vec<String> = reports
        .iter()
        .map(|(c, r)| format!("{}: {}", c.describe(), figures(r)))
        .collect();
    eprintln!(
        "{NODE} rebooted {:.1} s into apply, after {component}/{step} #{nth}; {runs} run(s), {:.1} s; {}",
        (power_off - started).as_secs_f64(),
        took.as_secs_f64(),
        shown.join("; ")
    );
    assert_eq!(
        code,
        Some(0),
        "apply finishes: {:?}",
        events.last().map(|e| e.to_string())
    );
    let wrong = checkpointed::not_on(&sim, "v1.34.0");
    assert!(wrong.is_empty(), "every component on v1.34.0: {wrong:#?}");
    for (connections, report) in &reports {
        assert_eq!(
            blamed(report, power_off),
            (0, 0),
            "no read or write fails but those in flight on {NODE} when its power went; {}: {}",
            connections.describe(),
            figures(report)
        );
    }
    if let Ok(sim) = Arc::try_unwrap(sim) {
        sim.shutdown().await;
    }
}

/// cp-2 goes while cp-1's kube-apiserver is being replaced: one node serves alone for a while.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_rebooting_while_the_apiservers_roll_costs_no_request() {
    reboot_during_apply("action", "kube-apiserver", "delete-old-pod", 1).await;
}

/// The node reboots while its own kube-apiserver is being replaced.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_rebooting_in_its_own_apiservers_turn_costs_no_request() {
    reboot_during_apply("step", "kube-apiserver", "delete-old-pod", 2).await;
}

/// The node reboots while the controller-manager's backup and new pods hand over.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_rebooting_in_the_controller_managers_pivot_costs_no_request() {
    reboot_during_apply("action", "kube-controller-manager", "update-real", 1).await;
}
