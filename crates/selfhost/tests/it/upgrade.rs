//! End to end: the engine upgrades a simulated self-hosted control plane — with the
//! realistic hand-over model of the simulator — while a prober reads every 10 ms and writes
//! every 50 ms.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::apps::v1::DaemonSet;
use kube::Api;
use kube::api::ListParams;
use selfhost::Stamped;
use selfhost::{ApplyOptions, RunOutcome, RunReport};
use selfhost_core::Component;
use selfhost_sim::bootstrap::BootstrapMode;
use selfhost_sim::cluster::{CaughtBy, Handovers, ProbeReport, ProberOptions};
use selfhost_sim::{FaultAction, RequestMatcher, SimCluster, SimTimings};
use tokio::time::Instant;

pub const FROM: &str = "v1.33.1";
pub const TO: &str = "v1.34.0";

/// Pod latencies a hundred times faster than real ones: every ordering of the real hand-over
/// kept, short enough for a test, long enough for the prober to see a window.
pub async fn cluster(nodes: usize) -> SimCluster {
    cluster_with(nodes, Some(Handovers::measured())).await
}

/// A cluster with the given hand-over model (`None`: the idealised one, where a connection only
/// ever reaches a Ready apiserver).
pub async fn cluster_with(nodes: usize, handovers: Option<Handovers>) -> SimCluster {
    SimCluster::builder()
        .control_plane_nodes(nodes)
        .version(FROM)
        .mode(BootstrapMode::SelfHosted)
        .port_sharing(true)
        .timings(SimTimings::scaled(100))
        .handovers(handovers)
        .start()
        .await
        .expect("cluster starts")
}

/// Plans and applies an upgrade to `to`; returns the report and every event.
pub async fn upgrade(
    sim: &SimCluster,
    to: &str,
    options: ApplyOptions,
) -> (RunReport, Vec<Stamped>) {
    let (report, events, _) = run_upgrade(sim, to, options).await;
    (report, events)
}

/// [`upgrade`], also returning the moment the events' times count from (at most
/// microseconds before it).
pub async fn run_upgrade(
    sim: &SimCluster,
    to: &str,
    options: ApplyOptions,
) -> (RunReport, Vec<Stamped>, Instant) {
    crate::apply_to(sim, to, &options, |_, _| {}).await
}

/// The image each real DaemonSet runs, and whether any backup is left.
pub async fn images(sim: &SimCluster) -> (Vec<String>, bool) {
    let daemonsets: Api<DaemonSet> = Api::namespaced(sim.client(), "kube-system");
    let everything = ListParams::default();
    let all = crate::read_again("list the DaemonSets", || daemonsets.list(&everything))
        .await
        .items;
    let mut images = Vec::new();
    for component in Component::ALL {
        let ds = all
            .iter()
            .find(|d| d.metadata.name.as_deref() == Some(component.daemonset_name().as_str()));
        let image = ds
            .and_then(|d| d.spec.as_ref())
            .and_then(|s| s.template.spec.as_ref())
            .and_then(|s| s.containers[0].image.clone())
            .unwrap_or_default();
        images.push(image);
    }
    let backup_left = all.iter().any(|d| {
        d.metadata
            .name
            .as_deref()
            .is_some_and(|n| n.starts_with("temp-upgrade-"))
    });
    (images, backup_left)
}

pub fn on(version: &str) -> Vec<String> {
    Component::ALL
        .iter()
        .map(|c| format!("registry.k8s.io/{}:{version}", c.name()))
        .collect()
}

/// The availability prober: reads every 10 ms, writes every 50 ms. It reads an API object,
/// as clients do, rather than `/readyz`: an apiserver in its `--shutdown-delay-duration`
/// answers `/readyz` with 500 on purpose (so that load balancers drain it) while it still
/// serves every request.
///
/// An attempt fails after 3 s without an answer rather than the default 1 s. Every wait the
/// model forces at `scaled(100)` is far shorter (a join 17 ms, a grace period 300 ms), after
/// which the attempt fails with an error anyway, so the longer timeout cannot turn a modelled
/// outage into a success; it absorbs the stalls of a loaded two-core machine, where a 1 s
/// timer was seen firing 0.6 s late while a five-node cluster, the engine and the prober
/// shared two worker threads.
/// The prober the upgrade tests use: reads a namespace, 3 s per probe.
pub fn prober_options() -> ProberOptions {
    ProberOptions {
        read_path: "/api/v1/namespaces/kube-system".into(),
        timeout: Duration::from_secs(3),
        ..ProberOptions::default()
    }
}

fn failures(report: &ProbeReport) -> (usize, usize) {
    (report.reads.failures(), report.writes.failures())
}

/// The upgrades of this file run one at a time: each is a whole cluster, the engine and (most
/// often) a prober reading every 10 ms on two worker threads, and two at once on a two-core
/// machine stall each other's probes (a 1 s timer was seen firing 0.6 s late) — the load, not
/// the hand-over, would then decide the count of failed probes.
pub static ONE_PROBED_UPGRADE_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

async fn upgrade_with_prober(
    nodes: usize,
    handovers: Option<Handovers>,
) -> (RunReport, ProbeReport, SimCluster, Instant) {
    let _one = ONE_PROBED_UPGRADE_AT_A_TIME.lock().await;
    let sim = cluster_with(nodes, handovers).await;
    let started = Instant::now();
    let prober = sim.prober(prober_options()).await.expect("prober");
    let (report, _) = upgrade(&sim, TO, ApplyOptions::default()).await;
    let probes = prober.stop().await;
    (report, probes, sim, started)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_node_is_upgraded_and_always_has_a_serving_apiserver() {
    let (report, probes, sim, started) = upgrade_with_prober(1, Some(Handovers::measured())).await;
    assert_eq!(report.outcome, RunOutcome::Done);
    assert_eq!(images(&sim).await, (on(TO), false));
    assert!(
        !sim.recorder().was_down(started, Instant::now()),
        "there was a moment with no serving apiserver; probes failed: {:?}",
        failures(&probes)
    );
}

/// On several nodes behind a load balancer, with processes that join a shared port only once
/// they serve: zero failed probes.
async fn several_nodes_without_a_failed_probe(nodes: usize) {
    let (report, probes, sim, _) = upgrade_with_prober(nodes, None).await;
    assert_eq!(report.outcome, RunOutcome::Done);
    assert_eq!(images(&sim).await, (on(TO), false));
    let failed: Vec<_> = probes
        .reads
        .samples
        .iter()
        .chain(&probes.writes.samples)
        .filter(|s| !s.ok)
        .map(|s| s.error.clone())
        .collect();
    assert!(failed.is_empty(), "probes failed: {failed:?}");
    // The prober reads every 10 ms; on a machine busy with other tests it gets fewer turns,
    // but it must have read all along for "zero failed" to mean something.
    assert!(
        probes.reads.attempts() > 20,
        "the prober ran: {}",
        probes.reads.attempts()
    );
}

/// Every failed probe (named as the prober's header names it), with when it started, how long
/// it took and why, for an assertion's message.
fn failed_probes(probes: &ProbeReport) -> Vec<String> {
    [("read", &probes.reads), ("write", &probes.writes)]
        .into_iter()
        .flat_map(|(kind, series)| {
            series
                .samples
                .iter()
                .enumerate()
                .filter(|(_, s)| !s.ok)
                .map(move |(i, s)| {
                    format!(
                        "{kind}-{i} at {} (+{:?}), took {:?}: {}",
                        s.time,
                        s.started.duration_since(series.since),
                        s.finished.duration_since(s.started),
                        s.error.clone().unwrap_or_default()
                    )
                })
        })
        .collect()
}

/// The same under the measured hand-over model: zero failed probes. A request sent on a
/// keep-alive connection just as a stopping apiserver closes it is sent again by the prober's
/// transport, as Go's is under client-go (the prober counts those replays apart; they are
/// allowed, a failure is not).
async fn several_nodes_under_the_measured_model(nodes: usize) {
    let (report, probes, sim, started) =
        upgrade_with_prober(nodes, Some(Handovers::measured())).await;
    assert_eq!(report.outcome, RunOutcome::Done);
    assert_eq!(images(&sim).await, (on(TO), false));
    assert!(!sim.recorder().was_down(started, Instant::now()));
    let failed = failed_probes(&probes);
    assert!(
        failed.is_empty(),
        "{} probes failed ({} replayed: {:?}): {failed:#?}",
        failed.len(),
        probes.replayed(),
        probes.replay_reasons()
    );
    assert!(
        probes.reads.attempts() > 20,
        "the prober ran: {}",
        probes.reads.attempts()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_nodes_are_upgraded_with_zero_failed_probes() {
    several_nodes_without_a_failed_probe(3).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn five_nodes_are_upgraded_with_zero_failed_probes() {
    several_nodes_without_a_failed_probe(5).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_nodes_under_the_measured_handover_model() {
    several_nodes_under_the_measured_model(3).await;
}

/// Five nodes renewing five shared identity Leases: the holder of a host's Lease often changes
/// only for the moment between two renewals, which the engine sees by watching every change.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn five_nodes_under_the_measured_handover_model() {
    several_nodes_under_the_measured_model(5).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_run_after_success_changes_nothing() {
    let _one = ONE_PROBED_UPGRADE_AT_A_TIME.lock().await;
    let sim = cluster(1).await;
    let (first, _) = upgrade(&sim, TO, ApplyOptions::default()).await;
    assert_eq!(first.outcome, RunOutcome::Done);
    let (second, events) = upgrade(&sim, TO, ApplyOptions::default()).await;
    assert_eq!(second.outcome, RunOutcome::Done);
    assert!(
        !events
            .iter()
            .any(|e| matches!(e.event, selfhost::Event::Action { .. })),
        "no writes on a no-op run"
    );
}

/// The failed probes a broken target may cause: none, or only those caught by the broken
/// target's own processes — the failures the hand-over model forces on a shared port, where a
/// starting kube-apiserver takes its share of new connections before it fails.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Forced {
    /// Not one failed probe.
    Nothing,
    /// Only probes caught by the target's processes, on any node, at most this many.
    ByTheTarget(usize),
}

/// The target image of the apiserver, which the tests break.
fn target_apiserver() -> String {
    format!("registry.k8s.io/kube-apiserver:{TO}")
}

/// Every failed probe with who caught it.
pub fn failed_with_catchers(probes: &ProbeReport) -> Vec<(String, Option<CaughtBy>)> {
    let caught = probes
        .reads
        .samples
        .iter()
        .chain(&probes.writes.samples)
        .filter(|s| !s.ok)
        .map(|s| s.caught_by.clone());
    failed_probes(probes).into_iter().zip(caught).collect()
}

/// Checks the failed probes against what the broken target may cause, and returns them,
/// counted by catcher, for the test's output.
fn check_forced(probes: &ProbeReport, forced: Forced) -> BTreeMap<String, usize> {
    let failed = failed_with_catchers(probes);
    let mut by_catcher = BTreeMap::new();
    for (_, caught) in &failed {
        let key = caught
            .as_ref()
            .map_or("nobody".to_string(), ToString::to_string);
        *by_catcher.entry(key).or_insert(0) += 1;
    }
    let image = target_apiserver();
    let report = || {
        format!(
            "{} probes failed ({} replayed: {:?}), by catcher {by_catcher:#?}: {failed:#?}",
            failed.len(),
            probes.replayed(),
            probes.replay_reasons()
        )
    };
    match forced {
        Forced::Nothing => assert!(failed.is_empty(), "{}", report()),
        Forced::ByTheTarget(most) => {
            assert!(failed.len() <= most, "more than {most}: {}", report());
            for (probe, caught) in &failed {
                assert!(
                    matches!(
                        caught,
                        Some(CaughtBy::Process { image: Some(i), .. }) if *i == image
                    ),
                    "{probe} ({caught:?}) was not caught by the broken target's own process: {}",
                    report()
                );
            }
        }
    }
    by_catcher
}

async fn rollback_when(
    nodes: usize,
    handovers: Option<Handovers>,
    forced: Forced,
    break_target: impl FnOnce(&SimCluster),
) {
    let _one = ONE_PROBED_UPGRADE_AT_A_TIME.lock().await;
    let sim = cluster_with(nodes, handovers).await;
    break_target(&sim);
    let started = Instant::now();
    let prober = sim.prober(prober_options()).await.expect("prober");
    let options = ApplyOptions {
        pivot: selfhost_core::pivot::PivotOptions {
            deadline: Duration::from_secs(20),
            ..Default::default()
        },
        ..Default::default()
    };
    let (report, _) = upgrade(&sim, TO, options).await;
    let probes = prober.stop().await;
    assert!(
        matches!(
            &report.outcome,
            RunOutcome::RolledBack {
                component: Component::ApiServer,
                ..
            }
        ),
        "{:?}",
        report.outcome
    );
    assert_eq!(
        images(&sim).await,
        (on(FROM), false),
        "back on the original, nothing left"
    );
    assert!(
        !sim.recorder().was_down(started, Instant::now()),
        "there was a moment with no serving apiserver; probes failed: {:?}",
        failures(&probes)
    );
    if nodes >= 3 {
        let by_catcher = check_forced(&probes, forced);
        // Shown with --nocapture: the figures of docs/reliability.md.
        println!(
            "{nodes} nodes: {} reads, {} writes; failed by catcher: {by_catcher:?}",
            probes.reads.attempts(),
            probes.writes.attempts()
        );
    }
}

/// An unpullable target on three nodes under the measured model: not one failed probe. The
/// backup is a record only (no pod joins a node in the load balancer's rotation), the first
/// node's old pod goes with the node out of rotation, its new pod never
/// runs, and the rollback restores it there while the other nodes serve.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unpullable_target_is_rolled_back() {
    rollback_when(3, Some(Handovers::measured()), Forced::Nothing, |sim| {
        sim.registry().make_unpullable(&target_apiserver())
    })
    .await;
}

/// The target crashes 2 s (real time) after each start, after it has opened its socket on the
/// shared port, taken its share of new connections and served: the requests in flight on its
/// connections when it exits are cut, whatever the engine does. Every failed probe must be
/// caught by one of the target's own processes; the engine holds the rollout to one node
/// until each new pod serves by its own identity, which a process that crashes only later
/// does, so more than one node may run it before the first crash.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crash_looping_target_is_rolled_back() {
    rollback_when(
        3,
        Some(Handovers::measured()),
        Forced::ByTheTarget(10),
        |sim| {
            sim.registry()
                .make_crash_loop(&target_apiserver(), Duration::from_millis(20))
                .expect("a valid image name");
        },
    )
    .await;
}

/// A target that never gets Ready, on three nodes under the measured model: it never serves
/// by its own identity, and the engine's hold keeps it on the first node until the rollback
/// replaces it (the DaemonSet controller, trusting a probe another process answered, would put
/// one on every node). That node runs no backup process (a record only on several nodes),
/// so when its old pod went it left the load balancer, and with nothing on it passing /readyz it stays out until the
/// restored pod serves: not one client connection reaches the failing process (a backup
/// process there would catch its share of the node's connections and fail them).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_never_ready_target_is_rolled_back_on_three_nodes() {
    rollback_when(3, Some(Handovers::measured()), Forced::Nothing, |sim| {
        sim.registry()
            .make_never_ready(&target_apiserver())
            .expect("a valid image name");
    })
    .await;
}

/// On one node the target pod starts within the same second as the backup's process took the
/// host's identity Lease (fast latencies), so the kubelet's whole-second start times alone
/// cannot tell which process the holder is; the rollback is safe because the target pod was
/// created by our own update, made after that holder was seen. Under the measured model the
/// never-Ready process shares the port with the backup until the rollback replaces it: the
/// backup serves throughout.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_never_ready_target_is_rolled_back_on_one_node() {
    rollback_when(1, Some(Handovers::measured()), Forced::Nothing, |sim| {
        sim.registry()
            .make_never_ready(&target_apiserver())
            .expect("a valid image name");
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_upgrade_rides_out_api_faults() {
    let _one = ONE_PROBED_UPGRADE_AT_A_TIME.lock().await;
    let sim = cluster(3).await;
    // 5% of requests fail with 500, 503 or 429, or a reset; one 409 on the first DaemonSet update.
    for code in [500, 503, 429] {
        sim.faults().inject(
            RequestMatcher::any(),
            FaultAction::Status {
                code,
                retry_after: Some(0),
            },
            Some(3),
        );
    }
    sim.faults()
        .inject(RequestMatcher::any(), FaultAction::ResetConnection, Some(3));
    sim.faults().inject(
        RequestMatcher::path(
            "/apis/apps/v1/namespaces/kube-system/daemonsets/self-hosted-kube-apiserver",
        )
        .method(http::Method::PUT),
        FaultAction::Status {
            code: 409,
            retry_after: None,
        },
        Some(1),
    );
    // And the API server crashes for a moment in the middle (connections cut, then refused,
    // then back on the same port; the store survives like etcd).
    let crash = async {
        tokio::time::sleep(Duration::from_millis(300)).await;
        sim.faults().down_for(Duration::from_millis(500));
    };
    let ((report, _), ()) = tokio::join!(upgrade(&sim, TO, ApplyOptions::default()), crash);
    assert_eq!(report.outcome, RunOutcome::Done);
    assert_eq!(images(&sim).await, (on(TO), false));
}
