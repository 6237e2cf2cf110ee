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
    until(
        Duration::from_secs(60),
        "checkpoint of every component on every node",
        async || disks.iter().all(NodeDisk::keeps_every_component),
    )
    .await;
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

/// What runs a component's binary that did not serve before (`served`), on which node, and
/// which kept checkpoint is of an image that never served: empty when the cluster came back
/// on versions that served.
pub fn unserved_versions(
    sim: &SimCluster,
    served: &BTreeMap<String, BTreeSet<String>>,
) -> Vec<String> {
    let mut out = Vec::new();
    let none = BTreeSet::new();
    for (node, containers) in &sim.processes().nodes {
        for c in &containers.containers {
            let (Some(binary), Some(image)) = (&c.binary, &c.image) else {
                continue;
            };
            if BINARIES.contains(&binary.as_str())
                && c.process.is_some()
                && !served.get(binary).unwrap_or(&none).contains(image)
            {
                out.push(format!("{node} runs {image}, which never served"));
            }
        }
    }
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
    out
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
