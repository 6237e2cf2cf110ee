//! Simulated clusters whose control-plane nodes run the checkpointer for real, as `convert
//! to-self-hosted` installs it and `selfhost sim` builds it: a static pod whose image holds the
//! `selfhost` binary under test, which the simulated kubelet runs as a process that dies with
//! its node and starts again with it. Shared by every test of reboots and power cuts.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use selfhost::{Component, NodeDisk};
use selfhost_sim::SimCluster;
use selfhost_sim::cluster::SimClusterBuilder;
use selfhost_sim::controllers::kubelet::ImageBehaviour;
use selfhost_sim::resources;
use selfhost_sim::store::ListOptions;
use serde_json::Value;
use tokio::task::JoinHandle;
use tokio::time::Instant;

/// What `selfhost sim` and `selfhost demo` build their checkpointers with.
#[path = "../../src/commands/sim_checkpointer.rs"]
mod sim_checkpointer;

/// The checkpointer's image in the simulated registry: the binary under test.
pub const CHECKPOINTER_IMAGE: &str = "registry.example/selfhost:checkpointer";

/// `builder` whose registry holds [`CHECKPOINTER_IMAGE`], its program the `selfhost` binary,
/// for `convert to-self-hosted --checkpointer-image` to install.
pub fn with_checkpointer_image(builder: SimClusterBuilder) -> SimClusterBuilder {
    builder.image(
        CHECKPOINTER_IMAGE,
        ImageBehaviour {
            program: Some(assert_cmd::cargo::cargo_bin("selfhost")),
            ..ImageBehaviour::default()
        },
    )
}

/// `builder` with the checkpointer's static pod on every control-plane node, as `convert
/// to-self-hosted` writes it, its clock `speed` times faster than a real one's.
pub fn with_checkpointers(builder: SimClusterBuilder, speed: u32) -> SimClusterBuilder {
    sim_checkpointer::with_checkpointer(
        builder,
        CHECKPOINTER_IMAGE,
        assert_cmd::cargo::cargo_bin("selfhost"),
        speed,
    )
    .expect("the checkpointer's manifest renders")
}

/// [`with_checkpointers`] with the agent's policy and reading interval given.
pub fn with_tuned_checkpointers(
    builder: SimClusterBuilder,
    tuning: selfhost::CheckpointTuning,
) -> SimClusterBuilder {
    sim_checkpointer::with_tuned_checkpointer(
        builder,
        CHECKPOINTER_IMAGE,
        assert_cmd::cargo::cargo_bin("selfhost"),
        Some(tuning),
    )
    .expect("the checkpointer's manifest renders")
}

/// Each control-plane node's checkpointer files.
pub fn disks(sim: &SimCluster) -> Vec<NodeDisk> {
    sim.control_plane_names()
        .iter()
        .map(|node| NodeDisk::of_kubeadm_node(&sim.node_root(node).expect("a node directory")))
        .collect()
}

/// Waits until `check` holds, failing the test with `what` after `patience`.
pub async fn until(patience: Duration, what: &str, mut check: impl AsyncFnMut() -> bool) {
    let deadline = Instant::now() + patience;
    while !check().await {
        assert!(Instant::now() < deadline, "no {what} within {patience:?}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Waits until every control-plane node keeps every component.
pub async fn every_node_keeps_every_component(sim: &SimCluster) {
    let disks = disks(sim);
    let patience = Duration::from_secs(60);
    let deadline = Instant::now() + patience;
    // A plain loop, not [`until`]: the campaign spawns this, and a future holding an async
    // closure's borrow is not provably `Send`.
    while !disks.iter().all(NodeDisk::keeps_every_component) {
        assert!(
            Instant::now() < deadline,
            "no checkpoint of every component on every node within {patience:?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Whether every control-plane node's checkpointer runs as `convert to-self-hosted` leaves
/// it: its mirror pod (`selfhost-checkpointer-<node>`) in the API and Ready.
pub fn every_checkpointer_ready(sim: &SimCluster) -> bool {
    sim.control_plane_names().iter().all(|node| {
        let name = format!("{}-{node}", selfhost::CHECKPOINTER_NAME);
        sim.store()
            .get_opt(&resources::PODS, "kube-system", &name)
            .and_then(|pod| pod.pointer("/status/conditions").cloned())
            .and_then(|cs| cs.as_array().cloned())
            .is_some_and(|cs| {
                cs.iter()
                    .any(|c| c["type"] == "Ready" && c["status"] == "True")
            })
    })
}

/// What each control-plane node's checkpointer printed, every run of it since the node first
/// booted, by node.
pub fn checkpointer_said(sim: &SimCluster) -> Vec<(String, Vec<String>)> {
    sim.control_plane_names()
        .into_iter()
        .map(|node| {
            let logs = sim
                .node_root(&node)
                .map(|r| r.join("var/log/containers"))
                .unwrap_or_default();
            let mut files: Vec<_> = std::fs::read_dir(&logs)
                .map(|d| {
                    d.flatten()
                        .map(|e| e.path())
                        .filter(|p| {
                            p.file_name().is_some_and(|n| {
                                n.to_string_lossy().starts_with(selfhost::CHECKPOINTER_NAME)
                            })
                        })
                        .collect()
                })
                .unwrap_or_default();
            files.sort();
            let lines = files
                .iter()
                .filter_map(|f| std::fs::read_to_string(f).ok())
                .flat_map(|text| text.lines().map(str::to_string).collect::<Vec<_>>())
                .collect();
            (node, lines)
        })
        .collect()
}

/// Whether a client reaches the API: a request over a new connection, as kubectl's.
pub async fn api_answers(sim: &SimCluster) -> bool {
    let Ok(client) = sim
        .client_with(|c| {
            c.default_retry = false;
            c.connect_timeout = Some(Duration::from_secs(1));
            c.read_timeout = Some(Duration::from_secs(2));
        })
        .await
    else {
        return false;
    };
    matches!(
        tokio::time::timeout(Duration::from_secs(2), client.apiserver_version()).await,
        Ok(Ok(_))
    )
}

/// The binaries of the control-plane components, as the kubelets report their containers.
const BINARIES: [&str; 3] = [
    "kube-apiserver",
    "kube-controller-manager",
    "kube-scheduler",
];

/// The images of each component's containers that ran Ready while the tracker watched, by
/// binary: the versions that served.
pub struct Served {
    seen: Arc<Mutex<BTreeMap<String, BTreeSet<String>>>>,
    task: JoinHandle<()>,
}

impl Served {
    /// Starts watching what every kubelet of `sim` runs.
    pub fn track(sim: Arc<SimCluster>) -> Served {
        let seen = Arc::new(Mutex::new(BTreeMap::<String, BTreeSet<String>>::new()));
        let into = seen.clone();
        let task = tokio::spawn(async move {
            loop {
                let snapshot = sim.processes();
                if let Ok(mut seen) = into.lock() {
                    for node in snapshot.nodes.values() {
                        for c in &node.containers {
                            if let (true, Some(_), Some(binary), Some(image)) =
                                (c.ready, c.process, &c.binary, &c.image)
                            {
                                seen.entry(binary.clone())
                                    .or_default()
                                    .insert(image.clone());
                            }
                        }
                    }
                }
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        });
        Served { seen, task }
    }

    /// Stops watching: the images that served, by binary.
    pub fn stop(self) -> BTreeMap<String, BTreeSet<String>> {
        self.task.abort();
        self.seen.lock().map(|s| s.clone()).unwrap_or_default()
    }
}

/// What the checkpointers would bring back, or brought back, that did not serve before
/// (`served`, images by binary): a checkpoint kept on a node's disk, or a process of a static
/// copy activated from one. Empty when they keep only versions that served.
pub fn unserved_versions(
    sim: &SimCluster,
    served: &BTreeMap<String, BTreeSet<String>>,
) -> Vec<String> {
    let none = BTreeSet::new();
    let mut out = Vec::new();
    for (node, disk) in sim.control_plane_names().iter().zip(disks(sim)) {
        for component in Component::ALL {
            if let Some(kept) = disk.checkpoint(component)
                && !served
                    .get(component.name())
                    .unwrap_or(&none)
                    .contains(&kept.image)
            {
                out.push(format!(
                    "{node} keeps {} of {}, which never served",
                    component.name(),
                    kept.image
                ));
            }
        }
    }
    let copies = running(sim, |pod| pod.starts_with("selfhost-checkpoint-kube-"));
    out.extend(
        copies
            .into_iter()
            .filter(|(_, binary, image)| !served.get(binary).unwrap_or(&none).contains(image))
            .map(|(node, _, image)| {
                format!("{node} runs a static copy of {image}, which never served")
            }),
    );
    out
}

/// Every process of a component's binary whose image is not in `allowed` (images by binary):
/// empty when each component runs only those versions.
pub fn processes_outside(
    sim: &SimCluster,
    allowed: &BTreeMap<String, BTreeSet<String>>,
) -> Vec<String> {
    let none = BTreeSet::new();
    running(sim, |_| true)
        .into_iter()
        .filter(|(_, binary, image)| !allowed.get(binary).unwrap_or(&none).contains(image))
        .map(|(node, _, image)| format!("{node} runs {image}"))
        .collect()
}

/// The processes of the components' binaries in pods `named` accepts: node, binary, image.
fn running(sim: &SimCluster, named: impl Fn(&str) -> bool) -> Vec<(String, String, String)> {
    let mut out = Vec::new();
    for (node, containers) in &sim.processes().nodes {
        for c in &containers.containers {
            if let (Some(binary), Some(image), Some(_)) = (&c.binary, &c.image, c.process)
                && BINARIES.contains(&binary.as_str())
                && named(&c.pod.name)
            {
                out.push((node.clone(), binary.clone(), image.clone()));
            }
        }
    }
    out
}

/// Waits until [`not_on`] finds nothing, or fails the test with what it finds after
/// `patience`: pods that a power cut restarted take a moment to be Ready again after a
/// re-run that had nothing left to do.
pub async fn until_on(sim: &SimCluster, version: &str, patience: Duration, what: &str) {
    let deadline = Instant::now() + patience;
    loop {
        let wrong = not_on(sim, version);
        if wrong.is_empty() {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{what}: not every component on {version} within {patience:?}: {wrong:#?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Every component on `version`, checked on the store: its DaemonSet's template, one live
/// pod on each control-plane node running it, Ready, no backup or prepull DaemonSet left,
/// and `/version`. Empty when the control plane runs `version` everywhere.
pub fn not_on(sim: &SimCluster, version: &str) -> Vec<String> {
    let mut out = Vec::new();
    let pods = sim
        .store()
        .list(&resources::PODS, &ListOptions::default())
        .expect("the store lists")
        .items;
    let daemonsets = sim
        .store()
        .list(&resources::DAEMONSETS, &ListOptions::default())
        .expect("the store lists")
        .items;
    let nodes = sim.control_plane_names().len();
    let image_of = |spec: &Value| {
        spec.pointer("/containers/0/image")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string()
    };
    for component in Component::ALL {
        let want = format!("registry.k8s.io/{}:{version}", component.name());
        let name = component.daemonset_name();
        match daemonsets
            .iter()
            .find(|d| d.pointer("/metadata/name").and_then(Value::as_str) == Some(&name))
        {
            Some(ds) if image_of(&ds["spec"]["template"]["spec"]) == want => {}
            Some(ds) => out.push(format!(
                "{name}'s template runs {}",
                image_of(&ds["spec"]["template"]["spec"])
            )),
            None => out.push(format!("{name} is gone")),
        }
        let live: Vec<&Arc<Value>> = pods
            .iter()
            .filter(|p| {
                p.pointer("/metadata/labels/k8s-app")
                    .and_then(Value::as_str)
                    == Some(&component.app_label_value())
                    && p.pointer("/metadata/deletionTimestamp").is_none()
            })
            .collect();
        if live.len() != nodes {
            out.push(format!(
                "{}: {} live pods on {nodes} control-plane nodes",
                component.name(),
                live.len()
            ));
        }
        for pod in live {
            let ready = pod
                .pointer("/status/conditions")
                .and_then(Value::as_array)
                .is_some_and(|cs| {
                    cs.iter()
                        .any(|c| c["type"] == "Ready" && c["status"] == "True")
                });
            if image_of(&pod["spec"]) != want || !ready {
                out.push(format!(
                    "pod {} runs {} (Ready: {ready})",
                    pod.pointer("/metadata/name")
                        .and_then(Value::as_str)
                        .unwrap_or(""),
                    image_of(&pod["spec"])
                ));
            }
        }
    }
    for ds in &daemonsets {
        let name = ds
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .unwrap_or("");
        if name.starts_with("temp-upgrade-") || name.starts_with("upgrade-prepull-") {
            out.push(format!("DaemonSet {name} left behind"));
        }
    }
    if sim.version() != version {
        out.push(format!("/version says {}", sim.version()));
    }
    out
}
