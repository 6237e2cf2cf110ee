//! End to end: converting a simulated kubeadm control plane to self-hosted DaemonSets, upgrading
//! it with `apply`, and converting it back, node by node, while a prober reads every 10 ms and
//! writes every 50 ms.
//!
//! These run under the simulator's idealised hand-over model (a connection only ever reaches a
//! serving apiserver; identity Leases follow readiness). Under the measured model an apiserver
//! that joins a shared port beside a static one sometimes never publishes its identity Lease
//! (see the report of the conversion work), and the conversion then — rightly — refuses to hand
//! over and restores the node; that would make these tests fail for the simulator's reason.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use k8s_openapi::api::apps::v1::DaemonSet;
use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::jiff::Timestamp;
use kube::Api;
use kube::api::ListParams;
use selfhost::apply::{ApplyOptions, RunOutcome};
use selfhost::convert::observe::ConversionView;
use selfhost::convert::{ComponentOutcome, ConvertReport, ConvertRequest, convert};
use selfhost::events::{Event, Events, Stamped};
use selfhost_core::Component;
use selfhost_core::conversion::NODE_GATE_PREFIX;
use selfhost_core::conversion::decide::Direction;
use selfhost_sim::bootstrap::BootstrapMode;
use selfhost_sim::cluster::{Handovers, ProbeReport, ProberOptions};
use selfhost_sim::{SimCluster, SimTimings};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

const FROM: &str = "v1.33.1";
const TO: &str = "v1.34.0";

/// A kubeadm (static pod) cluster with latencies a hundred times faster than real ones.
pub async fn static_cluster(nodes: usize, port_sharing: bool) -> SimCluster {
    let sim = SimCluster::builder()
        .control_plane_nodes(nodes)
        .version(FROM)
        .mode(BootstrapMode::Static)
        .port_sharing(port_sharing)
        .timings(SimTimings::scaled(100))
        .handovers(None::<Handovers>)
        .start()
        .await
        .expect("cluster starts");
    settle(&sim).await;
    sim
}

fn started_at(pod: &Pod) -> Option<Timestamp> {
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
async fn settle(sim: &SimCluster) {
    let pods: Api<Pod> = Api::namespaced(sim.client(), "kube-system");
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let list = pods
            .list(&ListParams::default().labels("component=kube-apiserver"))
            .await
            .expect("list");
        let settled = !list.items.is_empty()
            && list.items.iter().all(|p| {
                started_at(p).is_some_and(|t| Timestamp::now().duration_since(t).as_secs() >= 2)
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
    request.deadline = Duration::from_secs(30);
    request
}

/// Runs one conversion; returns its report and every event.
pub async fn run(sim: &SimCluster, request: &ConvertRequest) -> (ConvertReport, Vec<Stamped>) {
    run_with(sim, request, |_| {}).await
}

/// Runs one conversion, calling `on_event` as each event happens.
async fn run_with(
    sim: &SimCluster,
    request: &ConvertRequest,
    mut on_event: impl FnMut(&Stamped) + Send + 'static,
) -> (ConvertReport, Vec<Stamped>) {
    let clients = crate::clients(sim.kubeconfig_path()).await;
    let mut view = ConversionView::start(&clients.api);
    view.ready(Duration::from_secs(20))
        .await
        .expect("watches list");
    let (sender, mut receiver) = tokio::sync::mpsc::unbounded_channel();
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

fn assert_done(report: &ConvertReport, what: &str) {
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

fn is_ready(pod: &Pod) -> bool {
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

fn prober_options() -> ProberOptions {
    ProberOptions {
        read_path: "/api/v1/namespaces/kube-system".into(),
        ..ProberOptions::default()
    }
}

fn failed(report: &ProbeReport) -> Vec<String> {
    report
        .reads
        .samples
        .iter()
        .chain(&report.writes.samples)
        .filter(|s| !s.ok)
        .map(|s| s.error.clone().unwrap_or_default())
        .collect()
}

fn manifests(sim: &SimCluster, node: &str) -> Vec<String> {
    let dir: PathBuf = sim.manifests_dir(node).expect("dir").to_path_buf();
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .expect("manifests dir")
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

const ALL_MANIFESTS: [&str; 3] = [
    "kube-apiserver.yaml",
    "kube-controller-manager.yaml",
    "kube-scheduler.yaml",
];

/// The gaps the engine measured (no port sharing), per component.
fn gaps(reports: &[ConvertReport]) -> Vec<f64> {
    reports
        .iter()
        .flat_map(|r| r.components.iter())
        .filter_map(|(_, o)| match o {
            ComponentOutcome::Done {
                handover_gap_seconds,
                ..
            } => *handover_gap_seconds,
            _ => None,
        })
        .collect()
}

/// The whole journey on `nodes` nodes: static → self-hosted (node by node) → `apply` to the
/// next minor → static again. Returns the failed probes of each phase and the measured gaps.
async fn round_trip(nodes: usize, port_sharing: bool) -> (Vec<Vec<String>>, Vec<f64>, Duration) {
    let sim = static_cluster(nodes, port_sharing).await;
    let names: Vec<String> = sim.nodes().iter().map(|n| n.name.clone()).collect();
    let mut failed_probes = Vec::new();
    let mut reports = Vec::new();
    let mut longest = Duration::ZERO;

    // 1. To self-hosted, one node at a time.
    let prober = sim.prober(prober_options()).await.expect("prober");
    for node in &names {
        let (report, events) = run(&sim, &request(&sim, Direction::ToSelfHosted, node)).await;
        assert_done(&report, &format!("to-self-hosted on {node}"));
        assert!(
            events.iter().any(
                |e| matches!(&e.event, Event::Action { step, .. } if step == "move-manifest-aside")
            ),
            "the manifests were moved aside"
        );
        assert!(
            manifests(&sim, node).is_empty(),
            "{node}: {:?}",
            manifests(&sim, node)
        );
        let backups: Vec<String> = std::fs::read_dir(&report.backup_dir)
            .expect("backup dir")
            .filter_map(|e| e.ok())
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
        for file in ALL_MANIFESTS {
            assert!(
                backups.iter().any(|b| b == file),
                "{node}: {file} kept in the backup"
            );
        }
        reports.push(report);
    }
    let probes = prober.stop().await;
    longest = longest.max(probes.reads.longest_failure_window());
    failed_probes.push(failed(&probes));
    let seen = wait_for(&sim, &expected(&sim, "daemonset", FROM)).await;
    assert_eq!(seen.running, expected(&sim, "daemonset", FROM));
    assert_eq!(seen.daemonsets.len(), 3, "{:?}", seen.daemonsets);

    // 2. A second run changes nothing.
    let (again, events) = run(&sim, &request(&sim, Direction::ToSelfHosted, &names[0])).await;
    assert_done(&again, "a second to-self-hosted");
    assert!(
        !events
            .iter()
            .any(|e| matches!(e.event, Event::Action { .. })),
        "a converted node needs no action"
    );

    // 3. The self-hosted control plane upgrades (its probe figures are the upgrade engine's
    // to assert; here: the API never went down).
    let started = Instant::now();
    let (upgrade, _) = crate::upgrade::upgrade(&sim, TO, ApplyOptions::default()).await;
    assert_eq!(upgrade.outcome, RunOutcome::Done);
    assert!(
        !sim.recorder().was_down(started, Instant::now()),
        "apply kept the API up"
    );
    let seen = wait_for(&sim, &expected(&sim, "daemonset", TO)).await;
    assert_eq!(seen.running, expected(&sim, "daemonset", TO));

    // 4. Back to static, one node at a time.
    let prober = sim.prober(prober_options()).await.expect("prober");
    for node in &names {
        let (report, _) = run(&sim, &request(&sim, Direction::ToStatic, node)).await;
        assert_done(&report, &format!("to-static on {node}"));
        assert_eq!(manifests(&sim, node), ALL_MANIFESTS);
    }
    let probes = prober.stop().await;
    longest = longest.max(probes.reads.longest_failure_window());
    failed_probes.push(failed(&probes));
    let seen = wait_for(&sim, &expected(&sim, "static", TO)).await;
    assert_eq!(
        seen.running,
        expected(&sim, "static", TO),
        "static pods at {TO}"
    );
    assert_eq!(seen.daemonsets, Vec::<String>::new(), "no DaemonSet left");
    assert_eq!(seen.gate_labels, Vec::<String>::new(), "no label left");
    (failed_probes, gaps(&reports), longest)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_node_with_port_sharing_converts_both_ways_without_a_failed_probe() {
    let (failed, gaps, _) = round_trip(1, true).await;
    assert!(
        gaps.is_empty(),
        "with port sharing there is no gap: {gaps:?}"
    );
    for (phase, failed) in ["to self-hosted", "to static"].iter().zip(&failed) {
        assert!(failed.is_empty(), "{phase}: {failed:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_node_without_port_sharing_has_a_gap_of_at_most_one_pod_start() {
    let (failed, gaps, longest) = round_trip(1, false).await;
    eprintln!(
        "hand-over gaps (s): {gaps:?}; longest failed-probe window: {longest:?}; failed probes per phase: {:?}",
        failed.iter().map(Vec::len).collect::<Vec<_>>()
    );
    assert_eq!(
        gaps.len(),
        3,
        "one measured hand-over per component: {gaps:?}"
    );
    // One pod start at these timings is a fraction of a second; the kubelet's first
    // crash-loop back-off (10 s / 100) comes on top at most once.
    assert!(longest < Duration::from_secs(2), "longest gap {longest:?}");
    assert!(
        failed[1].is_empty(),
        "back to static (the DaemonSet template shares its port): {:?}",
        failed[1]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_nodes_with_port_sharing_convert_both_ways_without_a_failed_probe() {
    let (failed, gaps, _) = round_trip(3, true).await;
    assert!(gaps.is_empty(), "{gaps:?}");
    for (phase, failed) in ["to self-hosted", "to static"].iter().zip(&failed) {
        assert!(failed.is_empty(), "{phase}: {failed:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_nodes_without_port_sharing_convert_both_ways_without_a_failed_probe() {
    let (failed, gaps, _) = round_trip(3, false).await;
    assert_eq!(gaps.len(), 9, "{gaps:?}");
    for (phase, failed) in ["to self-hosted", "to static"].iter().zip(&failed) {
        assert!(failed.is_empty(), "{phase}: {failed:?}");
    }
}

/// Rewrites the static manifests of `node` so that the kubelet pulls their image on every
/// start, and waits for the restarted static pods: then a DaemonSet pod of the same image
/// needs the registry, while the running static pods do not.
async fn pull_always(sim: &SimCluster, node: &str) {
    let dir = sim.manifests_dir(node).expect("dir").to_path_buf();
    for file in ALL_MANIFESTS {
        let path = dir.join(file);
        let text = std::fs::read_to_string(&path).expect("manifest");
        let changed = text.replace("imagePullPolicy: IfNotPresent", "imagePullPolicy: Always");
        assert_ne!(text, changed, "{file} names a pull policy");
        std::fs::write(&path, changed).expect("write");
    }
    // The API is down while the one node's apiserver restarts: ask until it answers.
    let pods: Api<Pod> = Api::namespaced(sim.client(), "kube-system");
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let restarted = pods
            .list(&ListParams::default().labels("tier=control-plane"))
            .await
            .is_ok_and(|list| {
                list.items.len() == 3
                    && list.items.iter().all(|p| {
                        is_ready(p)
                            && p.spec.as_ref().is_some_and(|s| {
                                s.containers[0].image_pull_policy.as_deref() == Some("Always")
                            })
                            && started_at(p)
                                .is_some_and(|t| Timestamp::now().duration_since(t).as_secs() >= 2)
                    })
            });
        if restarted {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "the static pods restart with the new policy"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unpullable_image_leaves_the_static_pods_serving_and_exits_rolled_back() {
    let sim = static_cluster(1, true).await;
    pull_always(&sim, "cp-1").await;
    let before = wait_for(&sim, &expected(&sim, "static", FROM)).await;
    assert_eq!(before.running, expected(&sim, "static", FROM));
    sim.registry()
        .make_unpullable(&format!("registry.k8s.io/kube-apiserver:{FROM}"));
    let started = Instant::now();
    let prober = sim.prober(prober_options()).await.expect("prober");
    let (report, _) = run(&sim, &request(&sim, Direction::ToSelfHosted, "cp-1")).await;
    let probes = prober.stop().await;
    let (component, outcome) = report.first_problem().expect("a failure");
    assert_eq!(*component, Component::ApiServer);
    let ComponentOutcome::RolledBack { reason } = outcome else {
        panic!("expected a rollback: {outcome:?}");
    };
    assert!(
        reason.contains("ErrImagePull") || reason.contains("ImagePullBackOff"),
        "{reason}"
    );
    assert!(
        !sim.recorder().was_down(started, Instant::now()),
        "the API never went down"
    );
    assert!(failed(&probes).is_empty(), "{:?}", failed(&probes));
    let after = wait_for(&sim, &expected(&sim, "static", FROM)).await;
    assert_eq!(after.running, expected(&sim, "static", FROM));
    assert_eq!(after.daemonsets, Vec::<String>::new());
    assert_eq!(after.gate_labels, Vec::<String>::new());
    assert_eq!(manifests(&sim, "cp-1"), ALL_MANIFESTS);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_daemonset_pod_that_never_serves_after_the_hand_over_gets_the_static_pod_back() {
    let sim = static_cluster(3, false).await;
    let image = format!("registry.k8s.io/kube-scheduler:{FROM}");
    let started = Instant::now();
    let prober = sim.prober(prober_options()).await.expect("prober");
    let mut request = request(&sim, Direction::ToSelfHosted, "cp-2");
    request.deadline = Duration::from_secs(5);
    // The scheduler's image is broken for every process started from now on (the running
    // static pods keep going), and mended as soon as the engine decides to restore — before it
    // moves the manifest back, so the static pod restarts from a good image. Without port
    // sharing the DaemonSet pod can only be found not to serve after the hand-over, when the
    // static pod has left the port.
    sim.registry()
        .make_never_ready(&image)
        .expect("known image");
    let registry = sim.registry().clone();
    let (report, events) = run_with(&sim, &request, move |e| {
        if matches!(&e.event, Event::Step { component: Component::Scheduler, step, .. } if step == "restore") {
            registry.add_image(&image).expect("known image");
        }
    })
    .await;
    let probes = prober.stop().await;
    let (component, outcome) = report.first_problem().expect("a failure");
    assert_eq!(*component, Component::Scheduler, "{report:#?}");
    assert!(
        matches!(outcome, ComponentOutcome::RolledBack { .. }),
        "{outcome:?}"
    );
    assert!(
        events
            .iter()
            .any(|e| matches!(&e.event, Event::Action { step, .. } if step == "restore-manifest")),
        "the hand-over had happened and was undone"
    );
    assert!(!sim.recorder().was_down(started, Instant::now()));
    assert!(failed(&probes).is_empty(), "{:?}", failed(&probes));
    let mut wanted = expected(&sim, "static", FROM);
    for component in [Component::ApiServer, Component::ControllerManager] {
        wanted.insert(
            ("cp-2".to_string(), component),
            vec![format!(
                "daemonset registry.k8s.io/{}:{FROM}",
                component.name()
            )],
        );
    }
    let after = wait_for(&sim, &wanted).await;
    assert_eq!(
        after.running, wanted,
        "cp-2 keeps the components converted before"
    );
    assert_eq!(manifests(&sim, "cp-2"), ["kube-scheduler.yaml"]);
    assert!(
        !after
            .daemonsets
            .contains(&Component::Scheduler.daemonset_name())
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_input_is_refused_and_changes_nothing() {
    use selfhost::convert::ConvertError;
    let sim = static_cluster(1, true).await;
    let dir = sim.manifests_dir("cp-1").expect("dir").to_path_buf();
    let clients = crate::clients(sim.kubeconfig_path()).await;
    let before = control_plane(&sim).await;
    let attempt = |request: ConvertRequest| {
        let clients = &clients;
        async move {
            let mut view = ConversionView::start(&clients.api);
            view.ready(Duration::from_secs(20)).await.expect("watches");
            convert(
                clients,
                &mut view,
                &request,
                &Events::none(),
                &CancellationToken::new(),
            )
            .await
        }
    };

    let missing = ConvertRequest::new(Direction::ToSelfHosted, "cp-1", dir.join("nope"));
    let err = attempt(missing).await.expect_err("no such directory");
    assert!(
        err.is_bad_input() && err.to_string().contains("does not exist"),
        "{err}"
    );

    let unknown = ConvertRequest::new(Direction::ToSelfHosted, "cp-9", &dir);
    let err = attempt(unknown).await.expect_err("no such node");
    assert!(
        matches!(err, ConvertError::UnknownNode(_)) && err.is_bad_input(),
        "{err}"
    );

    // A component missing on disk (moved away by hand): refused, before any change.
    let scheduler = dir.join("kube-scheduler.yaml");
    let aside = dir
        .parent()
        .expect("parent")
        .join("kube-scheduler.yaml.by-hand");
    std::fs::rename(&scheduler, &aside).expect("move");
    let report = attempt(ConvertRequest::new(Direction::ToSelfHosted, "cp-1", &dir))
        .await
        .expect("runs");
    let (component, outcome) = report.first_problem().expect("refused");
    assert_eq!(*component, Component::Scheduler);
    assert!(
        matches!(outcome, ComponentOutcome::Refused { .. }),
        "{outcome:?}"
    );
    std::fs::rename(&aside, &scheduler).expect("move back");

    // A manifest that is not a Pod.
    let original = std::fs::read_to_string(&scheduler).expect("read");
    std::fs::write(
        &scheduler,
        "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: x}\n",
    )
    .expect("write");
    let err = attempt(ConvertRequest::new(Direction::ToSelfHosted, "cp-1", &dir))
        .await
        .expect_err("not a pod");
    assert!(
        err.is_bad_input() && err.to_string().contains("kind Pod"),
        "{err}"
    );
    std::fs::write(&scheduler, original).expect("restore");

    let after = wait_for(&sim, &before.running).await;
    assert_eq!(after, before, "nothing changed");
    assert_eq!(manifests(&sim, "cp-1"), ALL_MANIFESTS);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn certificates_go_into_secrets_and_come_back_as_files() {
    use std::os::unix::fs::PermissionsExt;

    use k8s_openapi::api::core::v1::Secret;
    use selfhost_core::daemonset::{certificate_secrets, kubeconfig_secrets};

    let sim = static_cluster(1, true).await;
    let root = tempfile::tempdir().expect("scratch host");
    let mut written = Vec::new();
    for (dir, table) in [
        ("etc/kubernetes/pki", certificate_secrets()),
        ("etc/kubernetes", kubeconfig_secrets()),
    ] {
        for secret in table {
            for (key, file) in secret.files {
                let path = root.path().join(dir).join(&file);
                std::fs::create_dir_all(path.parent().expect("parent")).expect("dir");
                let content = format!("not a real {file}");
                std::fs::write(&path, &content).expect("write");
                written.push((secret.name.clone(), key, format!("/{dir}/{file}"), content));
            }
        }
    }
    let mut to_self_hosted = request(&sim, Direction::ToSelfHosted, "cp-1");
    to_self_hosted.certs_in_secrets = true;
    to_self_hosted.host_root = root.path().to_path_buf();
    let (report, _) = run(&sim, &to_self_hosted).await;
    assert_done(&report, "to-self-hosted with certificates in Secrets");

    let secrets: Api<Secret> = Api::namespaced(sim.client(), "kube-system");
    for (name, key, _, content) in &written {
        let secret = secrets.get(name).await.expect("uploaded");
        let data = secret.data.unwrap_or_default();
        assert_eq!(
            data.get(key).map(|b| b.0.clone()),
            Some(content.clone().into_bytes()),
            "{name}/{key}"
        );
    }
    let daemonsets: Api<DaemonSet> = Api::namespaced(sim.client(), "kube-system");
    let apiserver = daemonsets
        .get(&Component::ApiServer.daemonset_name())
        .await
        .expect("DaemonSet");
    let volumes = apiserver
        .spec
        .and_then(|s| s.template.spec)
        .and_then(|s| s.volumes)
        .unwrap_or_default();
    let certs = volumes
        .iter()
        .find(|v| v.name == "k8s-certs")
        .expect("volume");
    assert!(
        certs.projected.is_some() && certs.host_path.is_none(),
        "{certs:?}"
    );

    // The node loses its files; converting back writes them from the Secrets.
    std::fs::remove_dir_all(root.path().join("etc")).expect("wipe");
    let mut to_static = request(&sim, Direction::ToStatic, "cp-1");
    to_static.host_root = root.path().to_path_buf();
    let (report, events) = run(&sim, &to_static).await;
    assert_done(&report, "to-static writing files from Secrets");
    assert!(events.iter().any(
        |e| matches!(&e.event, Event::Action { detail, .. } if detail.contains("from Secrets"))
    ));
    let needed = [
        "/etc/kubernetes/pki/apiserver.key",
        "/etc/kubernetes/pki/apiserver-etcd-client.key",
        "/etc/kubernetes/pki/etcd/ca.crt",
        "/etc/kubernetes/pki/ca.crt",
        "/etc/kubernetes/scheduler.conf",
        "/etc/kubernetes/controller-manager.conf",
    ];
    for path in needed {
        let (_, _, _, content) = written.iter().find(|w| w.2 == path).expect("known file");
        let on_disk = root.path().join(path.trim_start_matches('/'));
        assert_eq!(
            std::fs::read_to_string(&on_disk).expect(path),
            *content,
            "{path}"
        );
        let mode = std::fs::metadata(&on_disk)
            .expect("meta")
            .permissions()
            .mode()
            & 0o777;
        let private = path.ends_with(".key") || path.ends_with(".conf");
        assert_eq!(mode, if private { 0o600 } else { 0o644 }, "{path}");
    }
    let manifest = std::fs::read_to_string(
        sim.manifests_dir("cp-1")
            .expect("dir")
            .join("kube-apiserver.yaml"),
    )
    .expect("manifest");
    assert!(manifest.contains("path: /etc/kubernetes/pki"), "{manifest}");
    assert!(!manifest.contains("projected"), "{manifest}");
}
