//! The side-by-side harness of the tests and the benchmarks: an upgrade of a simulated
//! self-hosted cluster by selfhost's engine or by kubeadm's algorithm (the reference in
//! `kubeadm.rs`), measured the same way — wall time, the API requests the tool made, what two
//! probers saw (a read every 10 ms, a write every 50 ms; one on keep-alive connections, one
//! opening a new connection per request) and how long the controller-manager and the
//! scheduler went without a leader. Included by `#[path]` next to `kubeadm.rs` (as
//! `kubeadm_reference`); not product code.

#![allow(dead_code, clippy::expect_used, clippy::unwrap_used)] // each target uses a part; a harness panics on a broken run

use std::time::Duration;

use k8s_openapi::api::apps::v1::DaemonSet;
use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use kube::api::ListParams;
use selfhost::Events;
use selfhost::Observer;
use selfhost::RetryPolicy;
use selfhost::Targets;
use selfhost::{ApplyOptions, RunOutcome, apply};
use selfhost::{KubeconfigSource, connect_with};
use selfhost::{PlanRequest, make_plan};
use selfhost_core::skew::SkewFlags;
use selfhost_core::{Component, KubeVersion};
use selfhost_sim::bootstrap::BootstrapMode;
use selfhost_sim::cluster::{
    Connections, Handovers, Leadership, ProbeReport, ProberOptions, Role, SimClusterBuilder,
};
use selfhost_sim::{SimCluster, SimTimings};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::kubeadm_reference::{self as kubeadm, KubeadmTarget, KubeadmTimings};

/// How long any one wait of the harness may take.
pub const DEADLINE: Duration = Duration::from_secs(240);
/// The version every cluster starts from.
pub const FROM: &str = "v1.33.1";
/// The version every upgrade goes to.
pub const TO: &str = "v1.34.0";
/// Both roles that elect a leader.
pub const ROLES: [Role; 2] = [Role::ControllerManager, Role::Scheduler];

/// Who upgrades.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tool {
    /// selfhost's engine: `plan`, then `apply`.
    Selfhost,
    /// kubeadm's algorithm, as the reference reproduces it.
    Kubeadm,
}

/// What one upgrade cost.
#[derive(Debug)]
pub struct Cost {
    /// From the tool's start until it returned.
    pub wall: Duration,
    /// HTTP requests the tool made (the prober's are not counted).
    pub requests: u64,
    /// What the keep-alive prober saw, from the tool's start until the upgrade settled.
    pub probes: ProbeReport,
    /// What the prober opening a new connection per request saw over the same time.
    pub fresh: ProbeReport,
    /// The leaderless stretches per role over the same time.
    pub leaderless: Vec<(Role, Vec<Duration>)>,
}

impl Cost {
    /// Failed reads and writes of the prober opening a new connection per request.
    pub fn fresh_failed(&self) -> usize {
        self.fresh.reads.failures() + self.fresh.writes.failures()
    }

    /// Reads and writes the prober opening a new connection per request attempted.
    pub fn fresh_attempts(&self) -> usize {
        self.fresh.reads.attempts() + self.fresh.writes.attempts()
    }

    /// Failed reads and writes of the keep-alive prober.
    pub fn failed(&self) -> usize {
        self.probes.reads.failures() + self.probes.writes.failures()
    }

    /// Read and write attempts.
    pub fn attempts(&self) -> usize {
        self.probes.reads.attempts() + self.probes.writes.attempts()
    }

    /// The longest window of consecutive failures, reads or writes.
    pub fn longest_window(&self) -> Duration {
        self.probes
            .reads
            .longest_failure_window()
            .max(self.probes.writes.longest_failure_window())
    }

    /// The longest time without a successful read.
    pub fn longest_gap(&self) -> Duration {
        self.probes.reads.longest_gap()
    }

    /// How long reads failed in all: the sum of their failure windows.
    pub fn failing_time(&self) -> Duration {
        self.probes
            .reads
            .failure_windows()
            .iter()
            .map(|(from, to)| to.duration_since(*from))
            .sum()
    }

    /// The leaderless stretches of `role`, in order.
    pub fn gaps(&self, role: Role) -> Vec<Duration> {
        self.leaderless
            .iter()
            .filter(|(r, _)| *r == role)
            .flat_map(|(_, gaps)| gaps.iter().copied())
            .collect()
    }

    /// The longest leaderless stretch of any role.
    pub fn longest_leaderless(&self) -> Duration {
        ROLES
            .iter()
            .flat_map(|r| self.gaps(*r))
            .max()
            .unwrap_or_default()
    }

    /// Every leaderless stretch of both roles, added up.
    pub fn total_leaderless(&self) -> Duration {
        self.leaderless.iter().flat_map(|(_, gaps)| gaps).sum()
    }

    /// One line for people.
    pub fn summary(&self) -> String {
        format!(
            "wall {:?}, {} requests, failed {} of {} probes, reads failing {:?} in all, longest \
             window {:?}, leaderless {:?}",
            self.wall,
            self.requests,
            self.failed(),
            self.attempts(),
            self.failing_time(),
            self.longest_window(),
            self.leaderless
        )
    }
}

/// A self-hosted cluster of `nodes` control-plane nodes with port sharing, latencies `scale`
/// times faster than real ones and the measured hand-over model, made as kubeadm built it
/// (see [`as_kubeadm_built`]).
pub async fn kubeadm_built_cluster(nodes: usize, scale: u32) -> SimCluster {
    let sim = measured_cluster(nodes, scale).await;
    as_kubeadm_built(&sim).await;
    sim
}

/// A self-hosted cluster of `nodes` control-plane nodes at [`FROM`] with port sharing,
/// latencies `scale` times faster than real ones and the measured hand-over model, as
/// selfhost builds it.
pub async fn measured_cluster(nodes: usize, scale: u32) -> SimCluster {
    measured_builder(nodes, scale)
        .start()
        .await
        .expect("cluster starts")
}

/// The builder of [`measured_cluster`], for a caller that adds to it (an API front).
pub fn measured_builder(nodes: usize, scale: u32) -> SimClusterBuilder {
    SimCluster::builder()
        .control_plane_nodes(nodes)
        .version(FROM)
        .mode(BootstrapMode::SelfHosted)
        .port_sharing(true)
        .timings(SimTimings::scaled(scale))
        .handovers(Handovers::measured())
}

/// Makes the cluster's apiserver the one kubeadm built — without the graceful-shutdown flags
/// selfhost writes (`--shutdown-delay-duration`), as on the measured control plane — with
/// the self-hosting model off, so that nothing of this change is measured.
pub async fn as_kubeadm_built(sim: &SimCluster) {
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
    let count = i32::try_from(nodes).expect("a few nodes");
    let deadline = Instant::now() + DEADLINE;
    loop {
        let rolled_out = daemonsets.get(&name).await.is_ok_and(|d| {
            let status = d.status.unwrap_or_default();
            status.observed_generation == generation
                && status.updated_number_scheduled == Some(count)
                && status.number_ready == count
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
    until_led(sim).await;
}

/// Waits until both roles have a leader.
pub async fn until_led(sim: &SimCluster) {
    let deadline = Instant::now() + DEADLINE;
    while !ROLES
        .iter()
        .all(|r| matches!(sim.leader(*r), Leadership::Held(_)))
    {
        assert!(Instant::now() < deadline, "no leaders");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// The prober of the end-to-end tests: an object read every 10 ms (not `/readyz`, which an
/// apiserver in its shutdown delay fails on purpose while it serves), a write every 50 ms, on
/// keep-alive connections.
pub fn prober_options() -> ProberOptions {
    ProberOptions {
        read_path: "/api/v1/namespaces/kube-system".into(),
        ..ProberOptions::default()
    }
}

/// The same prober opening a new connection per request, writing a ConfigMap of its own.
pub fn fresh_prober_options() -> ProberOptions {
    ProberOptions {
        connections: Connections::NewPerRequest,
        config_map: "selfhost-fresh-prober".into(),
        ..prober_options()
    }
}

/// The engine's `plan` to [`TO`]: the observer it watched with, and the targets.
async fn plan(sim: &SimCluster) -> (selfhost::Clients, Observer, Targets) {
    plan_to(sim, TO).await
}

/// The engine's `plan` to `to`, which must proceed: the observer it watched with, and the
/// targets.
pub async fn plan_to(sim: &SimCluster, to: &str) -> (selfhost::Clients, Observer, Targets) {
    let source = KubeconfigSource::Flag(sim.kubeconfig_path().into());
    let clients = connect_with(&source, None).await.expect("connects");
    let mut observer = Observer::start(&clients);
    observer.ready(DEADLINE).await.expect("watches list");
    let request = PlanRequest {
        version: KubeVersion::parse(to).expect("version"),
        config_file: None,
        flags: SkewFlags::default(),
        accept_downtime: false,
        certificate_warning: selfhost::DEFAULT_CERTIFICATE_WARNING,
        etcd: None,
        assume_from: None,
    };
    let (plan, targets, _) = make_plan(
        &mut observer,
        &clients.api,
        &request,
        &RetryPolicy::default(),
    )
    .await
    .expect("plan");
    assert!(plan.proceeds, "{:#?}", plan.preflight);
    (clients, observer, targets)
}

/// The targets the engine plans, as kubeadm would have written them.
pub async fn kubeadm_targets(sim: &SimCluster) -> Vec<KubeadmTarget> {
    let (_, _, targets) = plan(sim).await;
    Component::ALL
        .iter()
        .map(|c| KubeadmTarget {
            component: c.name().to_string(),
            template: kubeadm::kubeadm_template(&targets.templates[c]),
        })
        .collect()
}

/// Requests the prober makes (it reads a namespace and patches, or first creates, a
/// ConfigMap; neither tool does any of these).
fn prober_requests(sim: &SimCluster) -> u64 {
    let m = sim.metrics();
    m.requests("get", "namespaces")
        + m.requests("patch", "configmaps")
        + m.requests("create", "configmaps")
}

/// Requests since the cluster started that were not the prober's.
pub fn tool_requests(sim: &SimCluster) -> u64 {
    sim.metrics().total() - prober_requests(sim)
}

/// Upgrades `sim` to [`TO`] with `tool` while the prober runs, and measures it until the
/// upgrade has settled (no backup left, both roles led). `scale` is the cluster's time scale
/// (kubeadm's intervals shrink with it).
pub async fn upgrade(sim: &SimCluster, tool: Tool, scale: u32) -> Cost {
    let kubeadm_targets = match tool {
        Tool::Kubeadm => kubeadm_targets(sim).await,
        Tool::Selfhost => Vec::new(),
    };
    let prober = sim.prober(prober_options()).await.expect("prober");
    let fresh_prober = sim.prober(fresh_prober_options()).await.expect("prober");
    let before = tool_requests(sim);
    let started = Instant::now();
    match tool {
        Tool::Selfhost => {
            let (clients, mut observer, targets) = plan(sim).await;
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
            let report = tokio::time::timeout(DEADLINE, run)
                .await
                .expect("the engine finishes in time")
                .expect("the engine runs");
            assert_eq!(report.outcome, RunOutcome::Done);
        }
        Tool::Kubeadm => {
            let client = sim.client();
            let timings = KubeadmTimings::scaled(scale);
            let run = kubeadm::upgrade(&client, &kubeadm_targets, &timings);
            tokio::time::timeout(DEADLINE, run)
                .await
                .expect("kubeadm's algorithm finishes in time")
                .unwrap_or_else(|e| panic!("kubeadm's algorithm failed: {e}"));
        }
    }
    let wall = started.elapsed();
    let requests = tool_requests(sim) - before;
    settled(sim).await;
    let ended = Instant::now();
    let probes = prober.stop().await;
    let fresh = fresh_prober.stop().await;
    assert_upgraded(sim, tool).await;
    let leaderless = leaderless(sim, started, ended);
    Cost {
        wall,
        requests,
        probes,
        fresh,
        leaderless,
    }
}

/// The leaderless stretches of each role between `started` and `ended`, as the simulator
/// recorded them.
pub fn leaderless(
    sim: &SimCluster,
    started: Instant,
    ended: Instant,
) -> Vec<(Role, Vec<Duration>)> {
    ROLES
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
        .collect()
}

/// Waits until no backup DaemonSet or pod is left and both roles have a leader: the moment an
/// upgrade has settled, whoever ran it.
async fn settled(sim: &SimCluster) {
    let daemonsets: Api<DaemonSet> = Api::namespaced(sim.client(), "kube-system");
    let pods: Api<Pod> = Api::namespaced(sim.client(), "kube-system");
    let backups = ListParams::default().labels("temp-upgrade-component");
    let deadline = Instant::now() + DEADLINE;
    loop {
        let no_backup = daemonsets
            .list(&backups)
            .await
            .is_ok_and(|l| l.items.is_empty())
            && pods.list(&backups).await.is_ok_and(|l| l.items.is_empty());
        let led = ROLES
            .iter()
            .all(|r| matches!(sim.leader(*r), Leadership::Held(_)));
        if no_backup && led {
            return;
        }
        assert!(Instant::now() < deadline, "the upgrade never settled");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Every real DaemonSet runs the target version and no backup is left.
async fn assert_upgraded(sim: &SimCluster, tool: Tool) {
    let daemonsets: Api<DaemonSet> = Api::namespaced(sim.client(), "kube-system");
    for component in Component::ALL {
        let ds = daemonsets
            .get(&component.daemonset_name())
            .await
            .expect("the DaemonSet");
        let image = ds
            .spec
            .and_then(|s| s.template.spec)
            .and_then(|s| s.containers.first().and_then(|c| c.image.clone()))
            .unwrap_or_default();
        assert!(
            image.ends_with(TO),
            "{tool:?} upgraded {component}: {image}"
        );
    }
}
