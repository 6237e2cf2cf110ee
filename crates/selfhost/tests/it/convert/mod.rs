//! End to end: converting a simulated kubeadm control plane to self-hosted DaemonSets, upgrading
//! it with `apply`, and converting it back, node by node, while a prober reads every 10 ms and
//! writes every 50 ms.
//!
//! The round trips and the unpullable image run under the simulator's measured hand-over model
//! (`Handovers::measured`): apiservers that join a shared port before they serve, leave it at
//! SIGTERM closing their keep-alive connections, readiness probes that lie, leaders that keep
//! their Lease. The other tests use the idealised one.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use k8s_openapi::api::apps::v1::DaemonSet;
use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::jiff::Timestamp;
use kube::Api;
use kube::api::ListParams;
use selfhost::ComponentOutcome;
use selfhost::ConversionView;
use selfhost::{ConvertReport, ConvertRequest, convert};
use selfhost::{Events, Stamped};
use selfhost_core::Component;
use selfhost_core::conversion::NODE_GATE_PREFIX;
use selfhost_core::conversion::decide::Direction;
use selfhost_sim::bootstrap::BootstrapMode;
use selfhost_sim::cluster::{Handovers, LeaderElectionTimings, ProbeReport, ProberOptions};
use selfhost_sim::{SimCluster, SimTimings};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

mod certs;
mod dry_run;
mod failures;
mod round_trip;

pub const FROM: &str = "v1.33.1";
pub const TO: &str = "v1.34.0";

/// Pod latencies a hundred times faster than real ones, leader election ten times faster (a
/// Lease lasts 1.5 s, a standby retries every 0.2 s): slow enough that a leaderless gap ended
/// by a deliberate hand-over is told apart from one that waited for the Lease to expire.
pub fn timings() -> SimTimings {
    SimTimings {
        leader_election: LeaderElectionTimings::realistic().scaled(10),
        ..SimTimings::scaled(100)
    }
}

/// A kubeadm (static pod) cluster at [`timings`], under the idealised hand-over model.
pub async fn static_cluster(nodes: usize, port_sharing: bool) -> SimCluster {
    static_cluster_with(nodes, port_sharing, None).await
}

/// The same with a given hand-over model.
pub async fn static_cluster_with(
    nodes: usize,
    port_sharing: bool,
    handovers: Option<Handovers>,
) -> SimCluster {
    let sim = SimCluster::builder()
        .control_plane_nodes(nodes)
        .version(FROM)
        .mode(BootstrapMode::Static)
        .port_sharing(port_sharing)
        .timings(timings())
        .handovers(handovers)
        .start()
        .await
        .expect("cluster starts");
    settle(&sim).await;
    sim
}

pub fn started_at(pod: &Pod) -> Option<Timestamp> {
    let status = pod.status.as_ref()?.container_statuses.as_ref()?.first()?;
    Some(
        status
            .state
            .as_ref()?
            .running
            .as_ref()?
            .started_at
            .as_ref()?
            .0,
    )
}

/// Waits until every static kube-apiserver has run for two seconds: nobody converts a cluster
/// in the second it boots, and the kubelet reports process starts in whole seconds, so a
/// DaemonSet apiserver started in the same second as the static one could not be told apart.
pub async fn settle(sim: &SimCluster) {
    let pods: Api<Pod> = Api::namespaced(sim.client(), "kube-system");
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        // A booting cluster may reset a connection now and then: ask again until the deadline.
        let list = pods
            .list(&ListParams::default().labels("component=kube-apiserver"))
            .await;
        let settled = list.is_ok_and(|list| {
            !list.items.is_empty()
                && list.items.iter().all(|p| {
                    started_at(p).is_some_and(|t| Timestamp::now().duration_since(t).as_secs() >= 2)
                })
        });
        if settled {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "the static control plane settles"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

pub fn request(sim: &SimCluster, direction: Direction, node: &str) -> ConvertRequest {
    let dir = sim.manifests_dir(node).expect("static node");
    let mut request = ConvertRequest::new(direction, node, dir);
    request.deadline = Duration::from_secs(60);
    request
}

/// Runs one conversion; returns its report and every event.
pub async fn run(sim: &SimCluster, request: &ConvertRequest) -> (ConvertReport, Vec<Stamped>) {
    run_with(sim, request, |_| {}).await
}

/// Runs one conversion, calling `on_event` as each event happens.
pub async fn run_with(
    sim: &SimCluster,
    request: &ConvertRequest,
    mut on_event: impl FnMut(&Stamped) + Send + 'static,
) -> (ConvertReport, Vec<Stamped>) {
    let clients = crate::clients(sim.kubeconfig_path()).await;
    let mut view = ConversionView::start(&clients.api);
    view.ready(Duration::from_secs(20))
        .await
        .expect("watches list");
    let (sender, mut receiver) = tokio::sync::mpsc::unbounded_channel::<Stamped>();
    let collected = tokio::spawn(async move {
        let mut events = Vec::new();
        while let Some(event) = receiver.recv().await {
            on_event(&event);
            events.push(event);
        }
        events
    });
    let events = Events::to(sender);
    let cancel = CancellationToken::new();
    let run = convert(&clients, &mut view, request, &events, &cancel);
    let report = tokio::time::timeout(Duration::from_secs(150), run)
        .await
        .expect("finishes in time")
        .expect("runs");
    drop(events);
    (report, collected.await.expect("collector"))
}

pub fn assert_done(report: &ConvertReport, what: &str) {
    assert_eq!(report.components.len(), 3, "{what}: {report:#?}");
    for (component, outcome) in &report.components {
        assert!(
            matches!(outcome, ComponentOutcome::Done { .. }),
            "{what}: {component}: {outcome:?}"
        );
    }
}

/// What runs the control plane, as a user would check with kubectl.
#[derive(Debug, PartialEq)]
pub struct ControlPlane {
    /// Per node and component: `static <image>` or `daemonset <image>`, Ready pods only.
    pub running: BTreeMap<(String, Component), Vec<String>>,
    /// The self-hosted DaemonSets and backups left.
    pub daemonsets: Vec<String>,
    /// The gate labels left on nodes.
    pub gate_labels: Vec<String>,
}

pub fn is_ready(pod: &Pod) -> bool {
    pod.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

pub async fn control_plane(sim: &SimCluster) -> ControlPlane {
    let pods: Api<Pod> = Api::namespaced(sim.client(), "kube-system");
    let mut running: BTreeMap<(String, Component), Vec<String>> = BTreeMap::new();
    for pod in pods.list(&ListParams::default()).await.expect("pods").items {
        let Some(spec) = pod.spec.as_ref() else {
            continue;
        };
        let Some(component) = spec
            .containers
            .first()
            .and_then(|c| c.name.parse::<Component>().ok())
        else {
            continue;
        };
        if !is_ready(&pod) || pod.metadata.deletion_timestamp.is_some() {
            continue;
        }
        let kind = if pod
            .metadata
            .annotations
            .as_ref()
            .is_some_and(|a| a.contains_key("kubernetes.io/config.mirror"))
        {
            "static"
        } else {
            "daemonset"
        };
        let image = spec.containers[0].image.clone().unwrap_or_default();
        let node = spec.node_name.clone().unwrap_or_default();
        running
            .entry((node, component))
            .or_default()
            .push(format!("{kind} {image}"));
    }
    let daemonsets: Api<DaemonSet> = Api::namespaced(sim.client(), "kube-system");
    let daemonsets = daemonsets
        .list(&ListParams::default())
        .await
        .expect("daemonsets")
        .items
        .into_iter()
        .filter_map(|d| d.metadata.name)
        .collect();
    let nodes: Api<Node> = Api::all(sim.client());
    let mut gate_labels = Vec::new();
    for node in nodes
        .list(&ListParams::default())
        .await
        .expect("nodes")
        .items
    {
        for key in node.metadata.labels.unwrap_or_default().into_keys() {
            if key.starts_with(NODE_GATE_PREFIX) {
                gate_labels.push(format!(
                    "{}:{key}",
                    node.metadata.name.clone().unwrap_or_default()
                ));
            }
        }
    }
    ControlPlane {
        running,
        daemonsets,
        gate_labels,
    }
}

/// Every node runs exactly one Ready pod of every component, of `kind` at `version`.
pub fn expected(
    sim: &SimCluster,
    kind: &str,
    version: &str,
) -> BTreeMap<(String, Component), Vec<String>> {
    let mut out = BTreeMap::new();
    for node in sim.nodes() {
        for component in Component::ALL {
            out.insert(
                (node.name.clone(), component),
                vec![format!(
                    "{kind} registry.k8s.io/{}:{version}",
                    component.name()
                )],
            );
        }
    }
    out
}

/// Waits until the control plane looks like `wanted` (pods that just became Ready may still
/// be reported as not Ready for a moment after a run ends).
pub async fn wait_for(
    sim: &SimCluster,
    wanted: &BTreeMap<(String, Component), Vec<String>>,
) -> ControlPlane {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let seen = control_plane(sim).await;
        if &seen.running == wanted || Instant::now() > deadline {
            return seen;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

pub fn prober_options() -> ProberOptions {
    ProberOptions {
        read_path: "/api/v1/namespaces/kube-system".into(),
        ..ProberOptions::default()
    }
}

/// The probes that failed because the API did not serve them: refused, reset or answered with
/// an error. A probe that got no answer within the prober's 1 s is left out and counted on
/// stderr: in this model an API without a serving apiserver refuses connections at once, so a
/// timeout is the machine's load (these tests share two cores with everything else), not a gap.
pub fn failed(report: &ProbeReport) -> Vec<String> {
    let all: Vec<String> = report
        .reads
        .samples
        .iter()
        .chain(&report.writes.samples)
        .filter(|s| !s.ok)
        .map(|s| s.error.clone().unwrap_or_default())
        .collect();
    let (slow, failed): (Vec<String>, Vec<String>) = all
        .into_iter()
        .partition(|e| e.starts_with("no answer within"));
    if !slow.is_empty() {
        eprintln!("{} probes timed out on a loaded machine", slow.len());
    }
    failed
}

pub fn manifests(sim: &SimCluster, node: &str) -> Vec<String> {
    let dir: PathBuf = sim.manifests_dir(node).expect("dir").to_path_buf();
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .expect("manifests dir")
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

pub const ALL_MANIFESTS: [&str; 3] = [
    "kube-apiserver.yaml",
    "kube-controller-manager.yaml",
    "kube-scheduler.yaml",
];
