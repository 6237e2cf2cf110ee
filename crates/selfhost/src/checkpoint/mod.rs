//! `selfhost checkpoint`: the node agent that lets a self-hosted control plane survive a
//! reboot or a power cut of every node. The kubelet runs it as a static pod on each
//! control-plane node, so it never depends on the API it protects.
//!
//! Every interval it reads what the node shows — whether an API server answers, this node's
//! pod of each self-hosted DaemonSet, the checkpoints on disk and the copies active in the
//! kubelet's manifests directory — asks [`selfhost_core::checkpoint::decide`] what to do, and
//! does it: keep a checkpoint of a pod that served, activate a checkpoint as a static pod when
//! the API is gone, retire the copy once the DaemonSet pod serves again. It remembers nothing
//! between rounds; an agent restarted anywhere carries on.

mod disk;
pub mod grant;
pub mod install;
mod leases;
mod local;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::jiff::Timestamp;
use kube::Api;
use kube::api::ListParams;
use selfhost_core::Component;
use selfhost_core::checkpoint::{
    self, CheckpointPolicy, CheckpointStep, ComponentOnNode, NodeCheckpoints, OtherProcess,
    RunningPod, copy_name,
};
use selfhost_core::component::NAMESPACE;
use selfhost_core::conversion::secret_files;
use selfhost_core::observation::{ContainerState, PodObservation};
use tokio_util::sync::CancellationToken;

pub use disk::NodeDisk;

use crate::client::Clients;
use crate::health;
use crate::node_files::{FilesError, write_secret_file};

/// The granularity of a condition's `lastTransitionTime`.
const CONDITION_GRANULARITY: std::time::Duration = std::time::Duration::from_secs(1);

/// How the agent runs on its node.
#[derive(Debug, Clone)]
pub struct CheckpointOptions {
    /// The node it runs on.
    pub node: String,
    /// Where checkpoints are kept.
    pub checkpoint_dir: PathBuf,
    /// The kubelet's static pod directory.
    pub manifests_dir: PathBuf,
    /// Where the host's root is mounted (`/` when the agent runs on the host): Secret files a
    /// checkpoint needs are written beneath it.
    pub host_root: PathBuf,
    /// How long a pod serves before it is kept, and how long the API is gone before a
    /// checkpoint is activated.
    pub policy: CheckpointPolicy,
    /// How often the node is read again.
    pub interval: Duration,
}

impl CheckpointOptions {
    /// The node's files this agent keeps and activates.
    pub fn disk(&self) -> NodeDisk {
        NodeDisk {
            checkpoint_dir: self.checkpoint_dir.clone(),
            manifests_dir: self.manifests_dir.clone(),
        }
    }
}

/// Why one step of the agent could not be carried out; the agent says so and tries again at
/// its next round.
#[derive(Debug, thiserror::Error)]
pub enum CheckpointError {
    /// A file could not be read or written.
    #[error(transparent)]
    Files(#[from] FilesError),
    /// The pod to keep is no longer there, or cannot be turned into a static pod.
    #[error("{0}")]
    Pod(String),
    /// Reading a Secret the pod mounts failed.
    #[error("{0}")]
    Api(#[from] crate::api_call::ApiCallError),
}

/// What one round did for one component, for the agent's log.
#[derive(Debug, Clone, PartialEq)]
pub struct CheckpointRound {
    /// The component.
    pub component: Component,
    /// The step decided.
    pub step: CheckpointStep,
    /// Why it could not be carried out, if it could not.
    pub failed: Option<String>,
}

/// Runs the agent until `cancel`; `report` hears every step that changes something, and
/// every change of what a component waits for.
pub async fn run(
    clients: &Clients,
    options: &CheckpointOptions,
    cancel: &CancellationToken,
    report: &mut (dyn FnMut(&CheckpointRound) + Send),
) {
    let disk = options.disk();
    let mut unreachable_since: Option<Timestamp> = None;
    let mut last: BTreeMap<Component, String> = BTreeMap::new();
    let mut lease_reader = leases::LeaseReader::default();
    loop {
        let pods = match node_pods(clients, &options.node).await {
            Reading::Pods(pods) => Some(pods),
            Reading::Unreachable => None,
            Reading::Unlisted(why) => {
                // An API that answers is no reason to start a copy, and nothing is known of
                // the pods to keep or retire: this round decides nothing.
                tracing::warn!(error = %why, "listing this node's pods failed; the API answers");
                unreachable_since = None;
                tokio::select! {
                    () = cancel.cancelled() => return,
                    () = tokio::time::sleep(options.interval) => {}
                }
                continue;
            }
        };
        let now = Timestamp::now();
        let api = match &pods {
            Some(_) => {
                unreachable_since = None;
                checkpoint::Api::Answers
            }
            None => checkpoint::Api::Unreachable {
                since: *unreachable_since.get_or_insert(now),
            },
        };
        // Only without an API does it matter whether the node's own processes run.
        let local = match &pods {
            Some(_) => BTreeMap::new(),
            None => local::local_processes(&disk).await,
        };
        let leases = match &pods {
            Some(_) => lease_reader.read(clients, &options.node).await,
            None => None,
        };
        let mut components = BTreeMap::new();
        for component in Component::ALL {
            let shown = pods.as_ref().and_then(|p| p.get(&component));
            let mut active = disk.active(component);
            if let Some(copy) = active.as_mut() {
                let mirror = format!("{}-{}", copy_name(component), options.node);
                copy.mirror_pod = shown.is_some_and(|s| s.others.iter().any(|o| o.pod == mirror));
            }
            let daemonset_pod = shown.and_then(|s| s.daemonset.as_ref()).map(|pod| {
                let outage_began = active
                    .as_ref()
                    .map(|a| outage_began(a.since, options.policy.api_grace));
                running_pod(component, pod, outage_began)
            });
            components.insert(
                component,
                ComponentOnNode {
                    daemonset_pod,
                    checkpoint: disk.checkpoint(component),
                    active,
                    local_process_serving: local.get(&component).copied().unwrap_or(false),
                    static_manifest: disk.has_kubeadm_manifest(component),
                    other_processes: shown.map(|s| s.others.clone()).unwrap_or_default(),
                },
            );
        }
        let observation = NodeCheckpoints {
            now,
            api,
            components,
            leases,
        };
        for (component, step) in checkpoint::decide(&observation, &options.policy) {
            let failed = act(clients, options, &disk, &pods, component, &step, now)
                .await
                .err()
                .map(|e| e.to_string());
            let line = step.to_string();
            let changed = step.changes_static_pods()
                || matches!(
                    step,
                    CheckpointStep::Keep { .. } | CheckpointStep::HandOver { .. }
                );
            if changed || failed.is_some() || last.get(&component) != Some(&line) {
                report(&CheckpointRound {
                    component,
                    step,
                    failed,
                });
                last.insert(component, line);
            }
        }
        tokio::select! {
            () = cancel.cancelled() => return,
            () = tokio::time::sleep(options.interval) => {}
        }
    }
}

/// What one read of the node found.
enum Reading {
    /// No API server answers.
    Unreachable,
    /// An API server answers, but this node's pods could not be listed (a 429, a 500, a
    /// denial): the API is not gone, and nothing is known of the pods.
    Unlisted(String),
    /// What the API shows of each component on this node.
    Pods(BTreeMap<Component, ShownOnNode>),
}

/// What the API shows of one component on this node.
#[derive(Default)]
struct ShownOnNode {
    /// The pod of its self-hosted DaemonSet.
    daemonset: Option<Pod>,
    /// Its process in every other pod (a backup's, an active copy's or kubeadm's mirror pod).
    others: Vec<OtherProcess>,
}

/// This node's pods of each component: its self-hosted DaemonSet's and every other. A probe
/// first, so that a dead API is known within its timeout; a list that fails after it answered
/// does not make the API unreachable.
async fn node_pods(clients: &Clients, node: &str) -> Reading {
    let ready = health::readyz(&clients.probe).await;
    if !ready.healthy && ready.checks.is_empty() {
        return Reading::Unreachable;
    }
    let api: Api<Pod> = Api::namespaced(clients.probe.clone(), NAMESPACE);
    let on_node = ListParams::default().fields(&format!("spec.nodeName={node}"));
    let pods = match api.list(&on_node).await {
        Ok(pods) => pods,
        Err(e) => return Reading::Unlisted(e.to_string()),
    };
    let mut found: BTreeMap<Component, ShownOnNode> = BTreeMap::new();
    for component in Component::ALL {
        let daemonset = component.daemonset_name();
        let shown = found.entry(component).or_default();
        for pod in &pods.items {
            let ours = pod
                .metadata
                .owner_references
                .iter()
                .flatten()
                .any(|o| o.kind == "DaemonSet" && o.name == daemonset);
            if ours && shown.daemonset.is_none() {
                shown.daemonset = Some(pod.clone());
                continue;
            }
            let observed = PodObservation::from_pod(pod);
            let runs_component = observed
                .containers
                .iter()
                .any(|c| c.name == component.name());
            if runs_component {
                shown.others.push(OtherProcess {
                    pod: observed.name.clone(),
                    state: process_of(component, &observed),
                });
            }
        }
    }
    Reading::Pods(found)
}

/// The component's container in a pod, as its kubelet reports it.
fn process_of(component: Component, pod: &PodObservation) -> ContainerState {
    pod.main_container(component.name())
        .map_or(ContainerState::Unknown, |c| c.state.clone())
}

/// The latest the outage that led to a copy activated at `activated` can have begun: the
/// agent activates only after the API grace without an API.
fn outage_began(activated: Timestamp, api_grace: std::time::Duration) -> Timestamp {
    activated
        .saturating_sub(api_grace)
        .unwrap_or(Timestamp::MIN)
}

/// Whether a Ready condition that turned true at `ready_since` (whole seconds) may have turned
/// so after `outage_began`: news from the pod, not a status kept from before the outage.
fn is_news(ready_since: Timestamp, outage_began: Timestamp) -> bool {
    ready_since
        .saturating_add(CONDITION_GRANULARITY)
        .is_ok_and(|latest| latest > outage_began)
}

/// A pod as the decisions see it: Ready since its Ready condition turned true. With a copy
/// active, a Ready from before the outage that led to it is the status the API kept from
/// before the node went down, not news from the pod: it does not count. That outage began at
/// least the API grace before the activation (`outage_began`), so a transition inside the
/// grace is news, even one the kubelet posted while this agent still found no API (its
/// kube-apiserver starting on this node as the copy activates). Condition times are whole
/// seconds, so a transition in the second before counts as fresh too.
fn running_pod(component: Component, pod: &Pod, outage_began: Option<Timestamp>) -> RunningPod {
    let ready_since = pod
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .and_then(|c| c.iter().find(|c| c.type_ == "Ready" && c.status == "True"))
        .and_then(|c| c.last_transition_time.as_ref())
        .map(|t| t.0);
    let ready_since =
        ready_since.filter(|since| outage_began.is_none_or(|began| is_news(*since, began)));
    let labels = pod.metadata.labels.clone().unwrap_or_default();
    RunningPod {
        uid: pod.metadata.uid.clone().unwrap_or_default(),
        revision: labels
            .get("controller-revision-hash")
            .cloned()
            .unwrap_or_default(),
        image: pod
            .spec
            .as_ref()
            .and_then(|s| s.containers.first())
            .and_then(|c| c.image.clone())
            .unwrap_or_default(),
        ready_since,
        process: process_of(component, &PodObservation::from_pod(pod)),
    }
}

async fn act(
    clients: &Clients,
    options: &CheckpointOptions,
    disk: &NodeDisk,
    pods: &Option<BTreeMap<Component, ShownOnNode>>,
    component: Component,
    step: &CheckpointStep,
    now: Timestamp,
) -> Result<(), CheckpointError> {
    match step {
        CheckpointStep::Keep {
            pod_uid,
            revision,
            image,
        } => {
            let pod = pods
                .as_ref()
                .and_then(|p| p.get(&component))
                .and_then(|s| s.daemonset.as_ref())
                .filter(|p| p.metadata.uid.as_deref() == Some(pod_uid.as_str()))
                .ok_or_else(|| CheckpointError::Pod(format!("pod {pod_uid} is gone")))?;
            let copy = checkpoint::static_copy(component, pod)
                .map_err(|e| CheckpointError::Pod(e.to_string()))?;
            write_secret_files(clients, options, pod).await?;
            let host_ip = pod.status.as_ref().and_then(|s| s.host_ip.as_deref());
            disk.keep(component, &copy, revision, image, host_ip, now)?;
        }
        CheckpointStep::Activate { .. } => disk.activate(component, now)?,
        CheckpointStep::Retire { .. } => disk.retire(component)?,
        CheckpointStep::HandOver {
            lease,
            resource_version,
            ..
        } => {
            leases::release(disk, &options.host_root, component, lease, resource_version).await?;
        }
        CheckpointStep::Wait { .. } | CheckpointStep::Nothing { .. } => {}
    }
    Ok(())
}

/// Writes the files the pod reads from Secrets to the host, where they are missing, so that
/// its static copy finds them without the API. Their contents are never logged.
async fn write_secret_files(
    clients: &Clients,
    options: &CheckpointOptions,
    pod: &Pod,
) -> Result<(), CheckpointError> {
    let Some(spec) = pod.spec.as_ref() else {
        return Ok(());
    };
    let secrets: Api<k8s_openapi::api::core::v1::Secret> =
        Api::namespaced(clients.api.clone(), NAMESPACE);
    for file in secret_files(spec) {
        if options
            .host_root
            .join(file.path.trim_start_matches('/'))
            .exists()
        {
            continue;
        }
        let secret = crate::retry::with_retries(
            &format!("get Secret {NAMESPACE}/{}", file.secret),
            &crate::retry::RetryPolicy::default(),
            || secrets.get(&file.secret),
        )
        .await?;
        let content = secret
            .data
            .as_ref()
            .and_then(|d| d.get(&file.key))
            .ok_or_else(|| {
                CheckpointError::Pod(format!(
                    "Secret {NAMESPACE}/{} has no key {:?} for {}",
                    file.secret, file.key, file.path
                ))
            })?;
        write_secret_file(&options.host_root, &file.path, &content.0, file.mode)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(seconds: f64) -> Timestamp {
        Timestamp::from_nanosecond((seconds * 1e9) as i128 + 1_800_000_000_000_000_000)
            .expect("a timestamp")
    }

    /// A copy activated at 100 s after a 10 s grace: a Ready from inside the grace is news
    /// (the kubelet posted it while the agent still found no API), one from before the outage
    /// is the status the API kept, and whole-second condition times round in the pod's favour
    /// by at most a second.
    #[test]
    fn a_ready_condition_counts_when_it_may_have_turned_during_the_outage() {
        let began = outage_began(at(100.2), std::time::Duration::from_secs(10));
        assert_eq!(began, at(90.2));
        for (ready_since, news) in [
            (at(99.0), true),
            (at(91.0), true),
            (at(90.0), true),
            (at(89.0), false),
            (at(40.0), false),
        ] {
            assert_eq!(is_news(ready_since, began), news, "{ready_since}");
        }
    }
}
