//! One node's kubelet as a task: it feeds the [`Kubelet`] state machine what its pod watch
//! and its manifest directory show, advances it when something happens or when it asks to be
//! woken, and writes what it reports through the API — statuses, final deletions, mirror
//! pods, events, the node Lease and the node's conditions. Writes that find the API down are
//! reported again (statuses, mirror pods) or kept (final deletions) until it answers.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::jiff::Timestamp;
use serde_json::{Value, json};
use tokio::sync::{mpsc, watch};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::api::{CallError, ClusterApi, RETRY_WHEN_DOWN, typed, uid_mismatch};
use super::availability_recorder::AvailabilityRecorder;
use super::events::{self, Involved, Source};
use super::handover::ApiFrontEnd;
use super::leader_gated_loop::sleep_until;
use super::model::NodeContainers;
pub(crate) use super::node_input::NodeInput;
use super::process_table::ProcessTable;
use super::registry::RegistryHandle;
use crate::controllers::clock;
use crate::controllers::kubelet::{
    Kubelet, KubeletReport, NODE_LEASE_NAMESPACE, NodeState, PodRef, node_lease, parse_manifest,
    static_pod,
};
use crate::controllers::objects::condition;
use crate::resources::{LEASES, NODES, PODS};
use crate::store::{DeleteOptions, Subresource, meta};

/// The field manager and event source of kubelet writes.
const KUBELET: &str = "kubelet";

/// What a node agent is made of.
pub(crate) struct NodeAgent {
    pub kubelet: Kubelet,
    pub node: Node,
    pub api: ClusterApi,
    pub registry: RegistryHandle,
    pub process_table: Arc<ProcessTable>,
    pub recorder: AvailabilityRecorder,
    pub manifests_dir: PathBuf,
    pub scan_interval: Duration,
    /// The uids of the API pods told to the kubelet.
    pub told: BTreeSet<String>,
    /// Final deletions the API has not taken yet.
    pub pending_deletions: BTreeMap<String, PodRef>,
    /// Manifest files as last read.
    pub manifests: BTreeMap<PathBuf, Vec<u8>>,
    pub needs_relist: bool,
    /// A write found the API down: try again soon.
    pub retry: bool,
    /// The hand-over model, told of this node's apiserver processes (`None`: off).
    pub front_end: Option<Arc<ApiFrontEnd>>,
    /// The real programs its containers run.
    pub programs: super::program_runner::ProgramRunner,
}

fn name_of(node: &Node) -> String {
    node.metadata.name.clone().unwrap_or_default()
}

impl NodeAgent {
    fn node_name(&self) -> String {
        name_of(&self.node)
    }

    /// Runs until shutdown.
    pub(crate) async fn run(
        mut self,
        mut inputs: mpsc::UnboundedReceiver<NodeInput>,
        mut api_up: watch::Receiver<bool>,
        shutdown: CancellationToken,
    ) {
        let mut registry = self.registry.subscribe();
        let mut scan = tokio::time::interval(self.scan_interval);
        scan.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        self.kubelet.observe_node(&self.node);
        let mut wake_at = None;
        let mut dirty = true;
        loop {
            if dirty {
                let wakeup = self.step();
                let retry_at = self.retry.then(|| Instant::now() + RETRY_WHEN_DOWN);
                wake_at = match (wakeup, retry_at) {
                    (Some(a), Some(b)) => Some(a.min(b)),
                    (a, b) => a.or(b),
                };
            }
            dirty = true;
            tokio::select! {
                biased;
                _ = shutdown.cancelled() => return,
                input = inputs.recv() => {
                    let Some(input) = input else { return };
                    self.handle(input);
                    while let Ok(more) = inputs.try_recv() {
                        self.handle(more);
                    }
                }
                _ = api_up.changed() => {}
                _ = registry.changed() => {}
                // Nothing to do unless the directory changed.
                _ = scan.tick() => dirty = self.scan_manifests(),
                _ = sleep_until(wake_at) => {}
            }
        }
    }

    fn handle(&mut self, input: NodeInput) {
        let now = Timestamp::now();
        let down = self.kubelet.node_state() == NodeState::Down;
        match input {
            NodeInput::SetState(state) => {
                if down && state != NodeState::Down {
                    self.needs_relist = true;
                }
                self.kubelet.set_node_state(state, now);
            }
            // A machine that is off hears nothing; it relists when it comes back.
            _ if down => {}
            NodeInput::RestartKubelet => {
                self.kubelet.restart();
                self.needs_relist = true;
                // Static pods are read from disk again.
                self.manifests.clear();
            }
            NodeInput::Pod(obj) => {
                if let Some(pod) = typed::<Pod>(&obj) {
                    self.told.insert(meta::uid(&obj).to_string());
                    self.kubelet.observe_pod(&pod, now);
                }
            }
            NodeInput::Removed(uid) => {
                self.told.remove(&uid);
                self.kubelet.pod_removed(&uid, now);
            }
            NodeInput::Resync(pods) => self.resync(&pods, now),
            NodeInput::ExitProcess {
                process,
                code,
                message,
            } => self.kubelet.exit_process(process, code, &message, now),
        }
    }

    /// Lists the node's pods again (after the machine was off).
    fn relist(&mut self) -> Result<(), CallError> {
        let node = self.node_name();
        let pods = self.api.list(&PODS, None)?;
        let mine: Vec<Arc<Value>> = pods
            .items
            .into_iter()
            .filter(|p| p["spec"]["nodeName"] == *node)
            .collect();
        self.resync(&mine, Timestamp::now());
        Ok(())
    }

    /// Takes `pods` as everything bound here: new ones are observed, vanished ones removed.
    fn resync(&mut self, pods: &[Arc<Value>], now: Timestamp) {
        let mut seen = BTreeSet::new();
        for obj in pods {
            if let Some(pod) = typed::<Pod>(obj) {
                self.kubelet.observe_pod(&pod, now);
                seen.insert(meta::uid(obj).to_string());
            }
        }
        for uid in self.told.difference(&seen) {
            self.kubelet.pod_removed(uid, now);
        }
        self.told = seen;
    }

    /// Reads the manifest directory; whether it changed (and was handed to the kubelet).
    fn scan_manifests(&mut self) -> bool {
        let mut files = BTreeMap::new();
        if let Ok(entries) = std::fs::read_dir(&self.manifests_dir) {
            for entry in entries.flatten() {
                let path = entry.path();
                let hidden = entry.file_name().to_string_lossy().starts_with('.');
                if hidden || !path.is_file() {
                    continue;
                }
                if let Ok(content) = std::fs::read(&path) {
                    files.insert(path, content);
                }
            }
        }
        if files == self.manifests {
            return false;
        }
        let node = self.node_name();
        let now = Timestamp::now();
        let mut pods = Vec::new();
        for (path, content) in &files {
            let file = path.to_string_lossy();
            match parse_manifest(content, &file) {
                Ok(manifest) => pods.push(static_pod(&manifest, &file, &node, now)),
                Err(e) => tracing::warn!(node, error = %e, "static pod manifest skipped"),
            }
        }
        self.kubelet.set_static_pods(&pods, now);
        self.manifests = files;
        true
    }

    /// Advances the kubelet to now and writes its report; when to wake it next.
    fn step(&mut self) -> Option<Instant> {
        self.retry = false;
        if self.needs_relist && self.kubelet.node_state() != NodeState::Down {
            match self.relist() {
                Ok(()) => self.needs_relist = false,
                Err(_) => self.retry = true,
            }
        }
        let now = Timestamp::now();
        let report = self.kubelet.advance(&self.registry.read(), now);
        let node = self.node_name();
        for update in &report.status_updates {
            let ready = update
                .status
                .conditions
                .iter()
                .flatten()
                .any(|c| c.type_ == condition::READY && c.status == "True");
            let phase = update.status.phase.as_deref().unwrap_or("Pending");
            self.recorder.record_pod(&node, &update.pod, phase, ready);
        }
        for done in &report.finished_deletions {
            self.recorder.record_pod(&node, done, "Removed", false);
        }
        let wakeup = report.next_wakeup;
        // What runs now decides whether the API answers these very writes.
        if let Some(front_end) = &self.front_end {
            front_end.publish(&node, &self.kubelet);
        }
        let containers = self.kubelet.containers();
        self.programs.sync(&self.registry.read(), &containers);
        self.process_table.publish(
            &node,
            NodeContainers {
                state: self.kubelet.node_state(),
                containers,
            },
        );
        self.write(report);
        wakeup.map(|at| Instant::now() + clock::elapsed(Timestamp::now(), at))
    }

    fn note(&mut self, result: Result<(), CallError>, what: &str) {
        match result {
            Ok(()) => {}
            Err(CallError::Unreachable) => self.retry = true,
            Err(e) => {
                tracing::debug!(node = %self.node_name(), error = %e, what, "kubelet write refused")
            }
        }
    }

    fn write(&mut self, report: KubeletReport) {
        for mirror in &report.mirror_pods_to_delete {
            let options = DeleteOptions {
                grace_period_seconds: Some(0),
                precondition_uid: Some(mirror.uid.clone()),
                ..DeleteOptions::default()
            };
            let result = self
                .api
                .delete(&PODS, &mirror.namespace, &mirror.name, &options);
            let result = result.map(|_| ()).or_else(ignore_gone);
            self.note(result, "mirror pod delete");
        }
        for mirror in &report.mirror_pods_to_create {
            let result = self.create_mirror(mirror);
            self.note(result, "mirror pod create");
        }
        for update in &report.status_updates {
            let status = serde_json::to_value(&update.status).unwrap_or(Value::Null);
            let pod = &update.pod;
            let written = self.api.modify(
                &PODS,
                &pod.namespace,
                &pod.name,
                Subresource::Status,
                KUBELET,
                |cur| {
                    if meta::uid(cur) != pod.uid {
                        return Err(uid_mismatch(&PODS, &pod.name, &pod.uid, meta::uid(cur)));
                    }
                    let mut new = cur.clone();
                    new["status"] = status;
                    Ok(new)
                },
            );
            match written {
                // A pod that is gone or replaced will not take this status ever: done with it.
                Ok(_) => self.kubelet.acknowledge_status(&pod.uid, &update.status),
                Err(e) if e.is_not_found() || e.is_conflict() => {
                    self.kubelet.acknowledge_status(&pod.uid, &update.status);
                }
                Err(e) => self.note(Err(e), "pod status"),
            }
        }
        for done in report.finished_deletions {
            self.pending_deletions.insert(done.uid.clone(), done);
        }
        let pending: Vec<PodRef> = self.pending_deletions.values().cloned().collect();
        for pod in pending {
            let options = DeleteOptions {
                grace_period_seconds: Some(0),
                precondition_uid: Some(pod.uid.clone()),
                ..DeleteOptions::default()
            };
            let result = self.api.delete(&PODS, &pod.namespace, &pod.name, &options);
            match result.map(|_| ()).or_else(ignore_gone) {
                Ok(()) => {
                    self.pending_deletions.remove(&pod.uid);
                }
                Err(e) => self.note(Err(e), "final pod delete"),
            }
        }
        let node = self.node_name();
        for event in &report.events {
            let involved = Involved {
                api_version: "v1",
                kind: "Pod",
                namespace: event.pod.namespace.clone(),
                name: event.pod.name.clone(),
                uid: event.pod.uid.clone(),
            };
            let source = Source {
                component: KUBELET,
                host: Some(&node),
            };
            events::record(
                &self.api,
                source,
                &involved,
                event.warning,
                event.reason,
                &event.message,
            );
        }
        if let Some(at) = report.lease_renewal {
            let result = self.renew_lease(at);
            self.note(result, "node lease");
        }
        if let Some(status) = &report.node_status {
            let conditions = serde_json::to_value(&status.conditions).unwrap_or(Value::Null);
            let result = self
                .api
                .modify(&NODES, "", &node, Subresource::Status, KUBELET, |cur| {
                    let mut new = cur.clone();
                    new["status"]["conditions"] = conditions;
                    Ok(new)
                })
                .map(|_| ());
            self.note(result, "node status");
        }
    }

    fn create_mirror(&mut self, mirror: &Pod) -> Result<(), CallError> {
        let namespace = mirror.metadata.namespace.clone().unwrap_or_default();
        let body = serde_json::to_value(mirror).unwrap_or(Value::Null);
        match self.api.create(&PODS, &namespace, body, KUBELET) {
            Ok(created) => {
                if let Some(pod) = typed::<Pod>(&created) {
                    self.told.insert(meta::uid(&created).to_string());
                    self.kubelet.observe_pod(&pod, Timestamp::now());
                }
                Ok(())
            }
            // Our watch will show the one that exists.
            Err(e) if e.is_conflict() => Ok(()),
            Err(e) => Err(e),
        }
    }

    fn renew_lease(&self, at: Timestamp) -> Result<(), CallError> {
        let node = self.node_name();
        let duration = self.kubelet.config().timings.lease_duration;
        let lease = node_lease(&self.node, at, duration);
        let spec = serde_json::to_value(&lease.spec).unwrap_or(Value::Null);
        let renewed = self.api.modify(
            &LEASES,
            NODE_LEASE_NAMESPACE,
            &node,
            Subresource::Main,
            KUBELET,
            |cur| {
                let mut new = cur.clone();
                new["spec"] = spec.clone();
                Ok(new)
            },
        );
        match renewed {
            Ok(_) => Ok(()),
            Err(e) if e.is_not_found() => {
                let body = serde_json::to_value(&lease).unwrap_or(json!({}));
                self.api
                    .create(&LEASES, NODE_LEASE_NAMESPACE, body, KUBELET)
                    .map(|_| ())
            }
            Err(e) => Err(e),
        }
    }
}

fn ignore_gone(e: CallError) -> Result<(), CallError> {
    if e.is_not_found() || e.is_conflict() {
        Ok(())
    } else {
        Err(e)
    }
}
