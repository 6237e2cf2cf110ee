//! selfhost's engine against kubeadm's algorithm (the reference in `tests/reference`) on
//! identical one-node clusters under the measured hand-over model, with the same prober:
//! fewer failed probes, shorter failure windows, and far shorter leaderless stretches of the
//! controller-manager and the scheduler.

use std::time::Duration;

use k8s_openapi::api::apps::v1::DaemonSet;
use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use kube::api::ListParams;
use selfhost::apply::{ApplyOptions, RunOutcome};
use selfhost::observe::Observer;
use selfhost::plan::{PlanRequest, make_plan};
use selfhost::retry::RetryPolicy;
use selfhost_core::skew::SkewFlags;
use selfhost_core::{Component, KubeVersion};
use selfhost_sim::bootstrap::BootstrapMode;
use selfhost_sim::cluster::{Handovers, Leadership, ProbeReport, ProberOptions, Role};
use selfhost_sim::{SimCluster, SimTimings};
use tokio::time::Instant;

use crate::kubeadm_reference::{self as kubeadm, KubeadmTarget, KubeadmTimings};
use crate::upgrade::{images, upgrade};

/// How long any one wait of these tests may take.
const DEADLINE: Duration = Duration::from_secs(120);

/// Latencies ten times faster than real ones: a kube-apiserver joins its port in 350 ms and a
/// leader Lease lasts 1.5 s, long enough for the prober (every 10 ms) to see each window and
/// for a deliberate Lease hand-over to be told from an expiry. (At the end-to-end tests'
/// hundredfold speed a Lease lasts 150 ms, about what the engine needs to see a holder gone.)
const SCALE: u32 = 10;

/// The version both start from.
const FROM: &str = "v1.33.1";
/// The version both upgrade to.
const TO: &str = "v1.34.0";

/// What one upgrade cost, as the prober and the simulator's recorder saw it.
#[derive(Debug)]
struct Cost {
    probes: ProbeReport,
    /// The leaderless stretches per role, from the upgrade's start until it settled.
    leaderless: Vec<(Role, Vec<Duration>)>,
}

impl Cost {
    fn failed(&self) -> usize {
        self.probes.reads.failures() + self.probes.writes.failures()
    }

    fn longest_window(&self) -> Duration {
        self.probes
            .reads
            .longest_failure_window()
            .max(self.probes.writes.longest_failure_window())
    }

    /// How long reads failed in all: the sum of their failure windows.
    fn failing_time(&self) -> Duration {
        self.probes
            .reads
            .failure_windows()
            .iter()
            .map(|(from, to)| to.duration_since(*from))
            .sum()
    }

    fn gaps(&self, role: Role) -> Vec<Duration> {
        self.leaderless
            .iter()
            .filter(|(r, _)| *r == role)
            .flat_map(|(_, gaps)| gaps.iter().copied())
            .collect()
    }

    fn total_leaderless(&self) -> Duration {
        self.leaderless.iter().flat_map(|(_, gaps)| gaps).sum()
    }

    fn summary(&self) -> String {
        format!(
            "failed {} of {} probes, reads failing {:?} in all, longest window {:?}, leaderless {:?}",
            self.failed(),
            self.probes.reads.attempts() + self.probes.writes.attempts(),
            self.failing_time(),
            self.longest_window(),
            self.leaderless
        )
    }
}

/// The prober of the end-to-end tests: an object read every 10 ms, a write every 50 ms.
fn prober_options() -> ProberOptions {
    ProberOptions {
        read_path: "/api/v1/namespaces/kube-system".into(),
        ..ProberOptions::default()
    }
}

/// The targets our engine plans, as kubeadm would have written them.
async fn kubeadm_targets(sim: &SimCluster) -> Vec<KubeadmTarget> {
    let clients = crate::clients(sim.kubeconfig_path()).await;
    let mut observer = Observer::start(&clients);
    observer
        .ready(Duration::from_secs(20))
        .await
        .expect("watches list");
    let request = PlanRequest {
        version: KubeVersion::parse(TO).expect("version"),
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
    Component::ALL
        .iter()
        .map(|c| KubeadmTarget {
            component: c.name().to_string(),
            template: kubeadm::kubeadm_template(&targets.templates[c]),
        })
        .collect()
}

/// Waits until no backup DaemonSet or pod is left and both roles have a leader: the moment an
/// upgrade has settled, whoever ran it.
async fn settled(sim: &SimCluster) {
    let daemonsets: Api<DaemonSet> = Api::namespaced(sim.client(), "kube-system");
    let pods: Api<Pod> = Api::namespaced(sim.client(), "kube-system");
    let backups = ListParams::default().labels("temp-upgrade-component");
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let no_backup = daemonsets
            .list(&backups)
            .await
            .is_ok_and(|l| l.items.is_empty())
            && pods.list(&backups).await.is_ok_and(|l| l.items.is_empty());
        let led = [Role::ControllerManager, Role::Scheduler]
            .into_iter()
            .all(|r| matches!(sim.leader(r), Leadership::Held(_)));
        if no_backup && led {
            return;
        }
        assert!(Instant::now() < deadline, "the upgrade never settled");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Makes the cluster's apiserver the one kubeadm built — without the graceful-shutdown flags
/// selfhost writes (`--shutdown-delay-duration`), as on the measured control plane — with
/// the self-hosting model off, so that nothing of this change is measured.
async fn as_kubeadm_built(sim: &SimCluster) {
    sim.set_self_hosting_model(false);
    let daemonsets: Api<DaemonSet> = Api::namespaced(sim.client(), "kube-system");
    let name = Component::ApiServer.daemonset_name();
    let mut ds = daemonsets
        .get(&name)
        .await
        .expect("the apiserver DaemonSet");
    let spec = ds.spec.as_mut().expect("a spec");
    spec.template = kubeadm::kubeadm_template(&spec.template);
    let changed = daemonsets
        .replace(&name, &Default::default(), &ds)
        .await
        .expect("the template is replaced");
    let generation = changed.metadata.generation;
    let pods: Api<Pod> = Api::namespaced(sim.client(), "kube-system");
    let listing = ListParams::default().labels(&Component::ApiServer.label_query());
    let nodes = sim.nodes().len();
    let deadline = Instant::now() + DEADLINE;
    loop {
        let rolled_out = daemonsets.get(&name).await.is_ok_and(|d| {
            let status = d.status.unwrap_or_default();
            status.observed_generation == generation
                && status.updated_number_scheduled == Some(nodes as i32)
                && status.number_ready == nodes as i32
        });
        let settled = pods.list(&listing).await.is_ok_and(|l| {
            l.items.len() == nodes
                && l.items
                    .iter()
                    .all(|p| p.metadata.deletion_timestamp.is_none())
        });
        let processes = sim.handover().map_or(0, |h| h.processes().len());
        if rolled_out && settled && processes == nodes {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the kubeadm-built apiserver never rolled out"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    sim.set_self_hosting_model(true);
    leaders(sim).await;
}

/// Waits until both roles have a leader.
async fn leaders(sim: &SimCluster) {
    let deadline = Instant::now() + DEADLINE;
    while ![Role::ControllerManager, Role::Scheduler]
        .into_iter()
        .all(|r| matches!(sim.leader(r), Leadership::Held(_)))
    {
        assert!(Instant::now() < deadline, "no leaders");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Who upgrades.
#[derive(Debug, Clone, Copy)]
enum Tool {
    Selfhost,
    Kubeadm,
}

/// Upgrades a fresh one-node cluster as kubeadm built it, under the measured model, with
/// `tool`, and measures it from the upgrade's start until it settled.
async fn measure(tool: Tool) -> Cost {
    let sim = SimCluster::builder()
        .control_plane_nodes(1)
        .version(FROM)
        .mode(BootstrapMode::SelfHosted)
        .port_sharing(true)
        .timings(SimTimings::scaled(SCALE))
        .handovers(Handovers::measured())
        .start()
        .await
        .expect("cluster starts");
    as_kubeadm_built(&sim).await;
    let targets = kubeadm_targets(&sim).await;
    let prober = sim.prober(prober_options()).await.expect("prober");
    let started = Instant::now();
    match tool {
        Tool::Selfhost => {
            let (report, _) = upgrade(&sim, TO, ApplyOptions::default()).await;
            assert_eq!(report.outcome, RunOutcome::Done);
        }
        Tool::Kubeadm => {
            let client = sim.client();
            let timings = KubeadmTimings::scaled(SCALE);
            let run = kubeadm::upgrade(&client, &targets, &timings);
            tokio::time::timeout(DEADLINE, run)
                .await
                .expect("kubeadm's algorithm finishes in time")
                .unwrap_or_else(|e| panic!("kubeadm's algorithm failed: {e}"));
        }
    }
    settled(&sim).await;
    let ended = Instant::now();
    let probes = prober.stop().await;
    let (running, backup_left) = images(&sim).await;
    assert!(!backup_left, "{tool:?} left a backup");
    assert!(
        running.iter().all(|image| image.ends_with(TO)),
        "{tool:?} upgraded everything: {running:?}"
    );
    let leaderless = [Role::ControllerManager, Role::Scheduler]
        .into_iter()
        .map(|role| {
            let gaps = sim
                .recorder()
                .leaderless_intervals(role, started, ended)
                .iter()
                .map(|(a, b)| b.duration_since(*a))
                .collect();
            (role, gaps)
        })
        .collect();
    sim.shutdown().await;
    Cost { probes, leaderless }
}

/// The leader Lease's duration on these clusters: what a hand-over costs when the Lease is
/// left to expire.
fn lease() -> Duration {
    SimTimings::scaled(SCALE).leader_election.lease_duration
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_node_upgrade_costs_far_less_than_kubeadms_algorithm() {
    let ours = measure(Tool::Selfhost).await;
    let theirs = measure(Tool::Kubeadm).await;
    println!("selfhost: {}", ours.summary());
    println!("kubeadm:  {}", theirs.summary());

    // kubeadm's two windows (the old, then the backup apiserver leaves while its successor
    // has joined the port but does not serve yet) are really there: the comparison is not
    // against nothing.
    assert!(
        theirs.failed() >= 10 && theirs.longest_window() >= Duration::from_millis(50),
        "kubeadm's algorithm lost probes: {}",
        theirs.summary()
    );
    assert!(
        ours.failed() * 2 <= theirs.failed(),
        "at most half kubeadm's failed probes (measured: 0–3 against 27–44): {} against {}",
        ours.failed(),
        theirs.failed()
    );
    // A prober connection the engine's hand-overs close may reconnect to a joining apiserver
    // and wait out the rest of its join, so one window of the engine's can be as long as one
    // of kubeadm's; in all, clearly less time fails (measured: 0–130 ms against 250–440 ms).
    assert!(
        ours.failing_time() * 3 <= theirs.failing_time() * 2,
        "reads failing at most two thirds as long: {:?} against {:?}",
        ours.failing_time(),
        theirs.failing_time()
    );

    // kubeadm leaves every hand-over to a Lease expiry; the engine hands the Lease over once
    // the holder is confirmed gone, at least from the old pod to the backup's.
    let lease = lease();
    for role in [Role::ControllerManager, Role::Scheduler] {
        let theirs_gaps = theirs.gaps(role);
        assert_eq!(
            theirs_gaps.len(),
            2,
            "{role:?}: old to backup, backup to new"
        );
        assert!(
            theirs_gaps.iter().all(|g| *g >= lease * 3 / 4),
            "{role:?}: kubeadm waits out the Lease each time: {theirs_gaps:?}"
        );
        let first = ours.gaps(role).first().copied().unwrap_or_default();
        assert!(
            first * 2 <= lease,
            "{role:?}: the engine hands the Lease to the backup: {:?}",
            ours.gaps(role)
        );
    }
    assert!(
        ours.total_leaderless() * 3 <= theirs.total_leaderless() * 2,
        "leaderless {:?} against kubeadm's {:?}",
        ours.total_leaderless(),
        theirs.total_leaderless()
    );
}

/// Issue 7's target: each controller-manager or scheduler hand-over ends within about a retry
/// period, not a Lease. The hand-over from the backup's pod to the new one often waits the
/// Lease out: the new pod's container `startedAt` has one-second precision, so when it
/// started within the second the backup's process acquired the Lease, the engine cannot
/// rule it out as the holder and (rightly, for safety) does not touch the Lease.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "the backup-to-new Lease hand-over often waits out the Lease (startedAt has one-second precision); see the doc comment"]
async fn every_leader_hand_over_is_shorter_than_half_a_lease() {
    let ours = measure(Tool::Selfhost).await;
    println!("selfhost: {}", ours.summary());
    for role in [Role::ControllerManager, Role::Scheduler] {
        let gaps = ours.gaps(role);
        assert!(gaps.iter().all(|g| *g * 2 <= lease()), "{role:?}: {gaps:?}");
    }
}
