//! Reboots and power cuts in a run: the checkpointers every campaign cluster runs bring the
//! control plane back on versions that served, and leave each node, at the end, keeping what
//! its DaemonSets run and no static copy active.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use selfhost_core::Component;
use selfhost_sim::SimCluster;
use selfhost_sim::resources;
use selfhost_sim::store::ListOptions;
use serde_json::Value;
use tokio::time::Instant;

use super::invariants::str_at;
use super::scenario::Scenario;
use crate::checkpointed;

/// How long the control plane may take to serve again after a power cut: its checkpointers'
/// grace and a kube-apiserver's start, on a loaded machine.
pub const BACK_WITHIN: Duration = Duration::from_secs(60);

/// How long, once the tool is done, each node's checkpointer may take to keep what runs and
/// retire its copies (a soak and a few reads, on a loaded machine).
const SETTLE_WITHIN: Duration = Duration::from_secs(30);

/// The images that served before a power cut, by binary: what the tracker saw Ready, without
/// the broken target, which never serves whatever a readiness probe on a shared port says.
pub fn served(
    seen: BTreeMap<String, BTreeSet<String>>,
    scenario: &Scenario,
) -> BTreeMap<String, BTreeSet<String>> {
    let mut served = seen;
    if let Some((component, _)) = scenario.broken {
        let broken = format!("registry.k8s.io/{}:{}", component.name(), scenario.to);
        if let Some(images) = served.get_mut(component.name()) {
            images.remove(&broken);
        }
    }
    served
}

/// The run's two versions of each component, by binary: nothing else may ever run.
fn either_version(scenario: &Scenario) -> BTreeMap<String, BTreeSet<String>> {
    Component::ALL
        .into_iter()
        .map(|c| {
            let image = |v: &str| format!("registry.k8s.io/{}:{v}", c.name());
            (
                c.name().to_string(),
                BTreeSet::from([image(&scenario.from), image(&scenario.to)]),
            )
        })
        .collect()
}

/// Cuts the power of every node for `off_for`, waits until the API serves again and checks
/// that the checkpointers brought it back on versions in `served` and that nothing runs but
/// the run's two versions. Returns when the power went, when the API served again (`None`:
/// never), and what came back that should not have.
pub async fn cut(
    sim: &SimCluster,
    scenario: &Scenario,
    off_for: Duration,
    served: &BTreeMap<String, BTreeSet<String>>,
) -> (Instant, Option<Instant>, Vec<String>) {
    let off = Instant::now();
    sim.power_cycle(off_for).await;
    let deadline = Instant::now() + BACK_WITHIN;
    while !checkpointed::api_answers(sim).await {
        if Instant::now() > deadline {
            return (
                off,
                None,
                vec![format!(
                    "the control plane did not serve again within {BACK_WITHIN:?} of the power \
                     coming back"
                )],
            );
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let back = Instant::now();
    let mut unserved = checkpointed::unserved_versions(sim, served);
    unserved.extend(checkpointed::processes_outside(
        sim,
        &either_version(scenario),
    ));
    let unserved = unserved
        .into_iter()
        .map(|v| format!("after the power cut: {v}"))
        .collect();
    (off, Some(back), unserved)
}

/// Whether every control-plane pod in the store is Ready: after a reboot the tool's last run
/// may have ended while the node's pods started again.
fn control_plane_ready(sim: &SimCluster) -> bool {
    let pods = listed(sim, &resources::PODS);
    Component::ALL.into_iter().all(|c| {
        pods.iter()
            .filter(|p| {
                p.pointer("/metadata/labels/k8s-app")
                    .and_then(Value::as_str)
                    == Some(&c.app_label_value())
            })
            .all(|p| {
                p.pointer("/status/conditions")
                    .and_then(Value::as_array)
                    .is_some_and(|cs| {
                        cs.iter()
                            .any(|c| c["type"] == "Ready" && c["status"] == "True")
                    })
            })
    })
}

/// Waits, as an operator does after a reboot, until every node is Ready, every DaemonSet
/// counts every control-plane node and every control-plane pod is Ready again.
pub async fn settle_after_reboot(sim: &SimCluster) -> Vec<String> {
    let deadline = Instant::now() + SETTLE_WITHIN;
    while !(super::invariants::settled_after_not_ready(sim) && control_plane_ready(sim)) {
        if Instant::now() > deadline {
            return vec![format!(
                "the cluster did not settle within {SETTLE_WITHIN:?} of the reboot"
            )];
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    Vec::new()
}

/// Each component's DaemonSet template image, from the store.
fn template_images(sim: &SimCluster) -> BTreeMap<Component, String> {
    Component::ALL
        .into_iter()
        .filter_map(|c| {
            let ds =
                sim.store()
                    .get_opt(&resources::DAEMONSETS, "kube-system", &c.daemonset_name())?;
            let image = ds
                .pointer("/spec/template/spec/containers/0/image")
                .and_then(Value::as_str)?
                .to_string();
            Some((c, image))
        })
        .collect()
}

/// What a later power cut would bring back that the cluster no longer runs: each node keeps
/// every component at the image its DaemonSet runs, and has no static copy active, within
/// [`SETTLE_WITHIN`] of the tool's end.
pub async fn checkpoint_violations(sim: &SimCluster) -> Vec<String> {
    let disks = checkpointed::disks(sim);
    let nodes = sim.control_plane_names();
    let wrong = || {
        let want = template_images(sim);
        let mut out = Vec::new();
        for (node, disk) in nodes.iter().zip(&disks) {
            if disk.has_active_copies() {
                out.push(format!("{node} still runs a checkpoint's static copy"));
            }
            for (component, image) in &want {
                let kept = disk.checkpoint(*component).map(|k| k.image);
                if kept.as_ref() != Some(image) {
                    out.push(format!(
                        "{node} keeps {component} at {kept:?}, its DaemonSet runs {image}"
                    ));
                }
            }
        }
        // A retired copy's mirror pod leaves the API once its kubelet has stopped it.
        out.extend(
            copies_in_the_api(sim)
                .into_iter()
                .map(|pod| format!("the mirror pod {pod} of a retired copy is still in the API")),
        );
        out
    };
    let deadline = Instant::now() + SETTLE_WITHIN;
    loop {
        let mut out = wrong();
        if out.is_empty() {
            return out;
        }
        if Instant::now() > deadline {
            out.extend(what_each_node_runs(sim));
            return out;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// What each node's kubelet runs of the checkpointer and the kube-apiserver, for a violation's
/// message: whether the agent runs at all tells a stopped agent from one that decided wrongly,
/// and the kube-apiservers' states what it decided on.
fn what_each_node_runs(sim: &SimCluster) -> Vec<String> {
    let snapshot = sim.processes();
    let (all_pods, all_leases) = (
        listed(sim, &resources::PODS),
        listed(sim, &resources::LEASES),
    );
    sim.control_plane_names()
        .into_iter()
        .map(|node| {
            let runs: Vec<String> = snapshot
                .nodes
                .get(&node)
                .map(|n| n.containers.as_slice())
                .unwrap_or_default()
                .iter()
                .filter(|c| {
                    c.pod.name.starts_with(selfhost::CHECKPOINTER_NAME)
                        || c.binary.as_deref() == Some("kube-apiserver")
                })
                .map(|c| {
                    format!(
                        "{} process {:?} started {:?} listening {:?} ready {} stopping {} \
                         identity {:?}",
                        c.pod.name,
                        c.process,
                        c.started_at,
                        c.listening_since,
                        c.ready,
                        c.stopping,
                        c.identity
                    )
                })
                .collect();
            let pods: Vec<String> = all_pods
                .iter()
                .filter(|p| {
                    p.pointer("/spec/nodeName").and_then(Value::as_str) == Some(node.as_str())
                        && str_at(p, "/metadata/name").contains("kube-apiserver")
                })
                .map(|p| {
                    format!(
                        "{} conditions {} containers {}",
                        str_at(p, "/metadata/name"),
                        p.pointer("/status/conditions").cloned().unwrap_or_default(),
                        p.pointer("/status/containerStatuses")
                            .cloned()
                            .unwrap_or_default()
                    )
                })
                .collect();
            let leases: Vec<String> = all_leases
                .iter()
                .filter(|l| {
                    l.pointer("/metadata/labels/kubernetes.io~1hostname")
                        .and_then(Value::as_str)
                        == Some(node.as_str())
                })
                .map(|l| format!("{} {}", str_at(l, "/metadata/name"), l["spec"]))
                .collect();
            format!(
                "(the kubelet on {node} runs: {runs:#?}; its kube-apiserver pods in the API: \
                 {pods:#?}; its identity Leases: {leases:#?})"
            )
        })
        .collect()
}

/// Every object of `resource` in the store (none when it cannot list).
fn listed(sim: &SimCluster, resource: &resources::ResourceType) -> Vec<std::sync::Arc<Value>> {
    sim.store()
        .list(resource, &ListOptions::default())
        .map(|l| l.items)
        .unwrap_or_default()
}

/// The mirror pods of checkpoints' static copies in the API.
fn copies_in_the_api(sim: &SimCluster) -> Vec<String> {
    let copy_prefixes: Vec<String> = Component::ALL
        .into_iter()
        .map(|c| format!("{}-", selfhost_core::checkpoint::copy_name(c)))
        .collect();
    listed(sim, &resources::PODS)
        .iter()
        .filter_map(|pod| pod.pointer("/metadata/name").and_then(Value::as_str))
        .filter(|name| copy_prefixes.iter().any(|p| name.starts_with(p.as_str())))
        .map(str::to_string)
        .collect()
}
