//! The kubelet's main loop: it learns pods from the API (pods bound to this node) and from
//! the manifests directory, starts a worker per pod, stops workers of pods that went away,
//! keeps mirror pods in step with static pods, points each pod's status at the right API
//! object, and kills what an earlier run left behind for pods nobody wants any more.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, PostParams};
use kube::runtime::utils::Backoff;
use kube::runtime::{WatchStreamExt, watcher};
use tokio::sync::{mpsc, watch};
use tokio::task::AbortHandle;

use super::api::{Outage, PodTarget, call, delete_pod};
use super::clock::after;
use super::config::{seconds, timing};
use super::manifests::{ManifestScanner, read_dir};
use super::mirrors::{Key, MirrorOp, MirrorOps, MirrorView, StaticView, mirrors, plan};
use super::pod::spec_grace;
use super::process;
use super::records::ContainerRecord;
use super::static_pods::{is_mirror_pod, mirror_hash, mirror_pod};
use super::sync::{self, StatusTarget};
use super::worker::{NodeContext, PodUpdate, PodWorker};

/// News for the agent.
#[derive(Debug)]
pub(crate) enum AgentEvent {
    /// From the watch of this node's pods.
    Api(Box<watcher::Event<Pod>>),
    /// The manifests directory now holds these static pods.
    StaticPods(Vec<Pod>),
    /// An earlier run's processes of this pod are gone.
    OrphanGone(String),
    /// A mirror pod create or delete ended.
    Mirror {
        key: Key,
        op: MirrorOp,
        result: Result<(), String>,
    },
}

/// Where the kubelet learned of a pod.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Source {
    Api,
    File,
}

fn key_of(pod: &Pod) -> Key {
    (
        pod.metadata.namespace.clone().unwrap_or_default(),
        pod.metadata.name.clone().unwrap_or_default(),
    )
}

fn uid_of(pod: &Pod) -> String {
    pod.metadata.uid.clone().unwrap_or_default()
}

/// A running pod worker and its status manager.
struct PodHandle {
    source: Source,
    key: Key,
    updates: watch::Sender<PodUpdate>,
    targets: watch::Sender<Option<StatusTarget>>,
    worker_done: bool,
    /// Gone from the API: stopped, nothing reported.
    removed: bool,
    sync: AbortHandle,
}

impl Drop for PodHandle {
    fn drop(&mut self) {
        self.sync.abort();
    }
}

impl PodHandle {
    fn update(&self, pod: &Pod, stop: Option<Duration>) {
        self.updates.send_if_modified(|current| {
            let stop = match (current.stop, stop) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            };
            let changed = current.pod != *pod || current.stop != stop;
            if changed {
                current.pod = pod.clone();
                current.stop = stop;
            }
            changed
        });
    }

    fn target(&self, target: Option<StatusTarget>) {
        self.targets.send_if_modified(|current| {
            let changed = *current != target;
            if changed {
                current.clone_from(&target);
            }
            changed
        });
    }
}

/// A kube-runtime back-off for the pod watch: short, so pods are learned soon after the
/// node's own apiserver comes back.
struct WatchBackoff {
    next: Duration,
}

impl Iterator for WatchBackoff {
    type Item = Duration;

    fn next(&mut self) -> Option<Duration> {
        let delay = self.next;
        self.next = self.next.saturating_mul(2).min(timing::WATCH_RETRY_MAX);
        Some(delay)
    }
}

impl Backoff for WatchBackoff {
    fn reset(&mut self) {
        self.next = timing::WATCH_RETRY_INITIAL;
    }
}

/// Watches the pods bound to the node, forever.
pub(crate) async fn watch_pods(ctx: Arc<NodeContext>, events: mpsc::UnboundedSender<AgentEvent>) {
    let pods: Api<Pod> = Api::all(ctx.client.clone());
    let config = watcher::Config::default().fields(&format!("spec.nodeName={}", ctx.node_name));
    let stream = watcher(pods, config).backoff(WatchBackoff {
        next: timing::WATCH_RETRY_INITIAL,
    });
    let mut stream = std::pin::pin!(stream);
    let mut outage = Outage::default();
    while let Some(item) = stream.next().await {
        match item {
            Ok(event) => {
                // `Init` comes before the list is even asked for: only later events prove
                // that the API answers.
                if !matches!(event, watcher::Event::Init) {
                    outage.succeeded("watch pods");
                }
                if events.send(AgentEvent::Api(Box::new(event))).is_err() {
                    return;
                }
            }
            Err(error) => outage.failed(&error),
        }
    }
}

/// Reads the manifests directory every second, forever, reporting each change.
pub(crate) async fn scan_manifests(
    dir: std::path::PathBuf,
    node_name: String,
    events: mpsc::UnboundedSender<AgentEvent>,
) {
    let mut scanner = ManifestScanner::default();
    let mut last: Option<Vec<String>> = None;
    loop {
        let pods = scanner.pods(&read_dir(&dir), &node_name, Timestamp::now());
        let uids: Vec<String> = pods.iter().map(uid_of).collect();
        if last.as_ref() != Some(&uids) {
            last = Some(uids);
            if events.send(AgentEvent::StaticPods(pods)).is_err() {
                return;
            }
        }
        tokio::time::sleep(timing::MANIFEST_RESCAN).await;
    }
}

/// Kills what an earlier run left of a pod nobody wants: SIGTERM, SIGKILL after the minimum
/// grace period, then its records go.
async fn kill_orphan(
    ctx: Arc<NodeContext>,
    uid: String,
    records: Vec<ContainerRecord>,
    events: mpsc::UnboundedSender<AgentEvent>,
) {
    let running: Vec<&ContainerRecord> = records.iter().filter(|r| r.is_running()).collect();
    for record in &running {
        tracing::info!(pod = %format!("{}/{}", record.namespace, record.pod_name), container = %record.container, pid = record.pid, "stopping a container of a pod that is gone");
        if let Err(error) = process::terminate(record.pid) {
            tracing::debug!(pid = record.pid, %error, "cannot send SIGTERM");
        }
    }
    let deadline = after(Timestamp::now(), timing::MINIMUM_GRACE);
    while running.iter().any(|r| r.is_running()) && Timestamp::now() < deadline {
        tokio::time::sleep(timing::ADOPTED_PROCESS_POLL).await;
    }
    for record in &running {
        if let Err(error) = process::kill_group(record.pid) {
            tracing::debug!(pid = record.pid, %error, "cannot send SIGKILL");
        }
    }
    if let Err(error) = ctx.records.remove_pod(&uid) {
        tracing::warn!(%error, "cannot remove container records");
    }
    let _ = events.send(AgentEvent::OrphanGone(uid));
}

/// The agent's state.
pub(crate) struct Agent {
    ctx: Arc<NodeContext>,
    events: mpsc::UnboundedSender<AgentEvent>,
    finished: mpsc::UnboundedSender<String>,
    node_uid: watch::Receiver<Option<String>>,
    api_pods: BTreeMap<String, Pod>,
    listing: Option<BTreeMap<String, Pod>>,
    api_synced: bool,
    static_pods: Option<BTreeMap<String, Pod>>,
    handles: BTreeMap<String, PodHandle>,
    /// Records of an earlier run, by pod uid, not yet adopted or cleaned up.
    records: BTreeMap<String, Vec<ContainerRecord>>,
    /// Earlier-run pods being killed, by uid, with their key.
    orphans: BTreeMap<String, Key>,
    /// Pacing of mirror pod creates and deletes.
    mirror_ops: MirrorOps,
}

impl Agent {
    pub(crate) fn new(
        ctx: Arc<NodeContext>,
        events: mpsc::UnboundedSender<AgentEvent>,
        finished: mpsc::UnboundedSender<String>,
        node_uid: watch::Receiver<Option<String>>,
        recorded: Vec<ContainerRecord>,
    ) -> Self {
        let mut records: BTreeMap<String, Vec<ContainerRecord>> = BTreeMap::new();
        for record in recorded {
            records
                .entry(record.pod_uid.clone())
                .or_default()
                .push(record);
        }
        Agent {
            ctx,
            events,
            finished,
            node_uid,
            api_pods: BTreeMap::new(),
            listing: None,
            api_synced: false,
            static_pods: None,
            handles: BTreeMap::new(),
            records,
            orphans: BTreeMap::new(),
            mirror_ops: MirrorOps::default(),
        }
    }

    /// Takes in one piece of news.
    pub(crate) fn handle(&mut self, event: AgentEvent) {
        match event {
            AgentEvent::Api(event) => self.observe(*event),
            AgentEvent::StaticPods(pods) => {
                self.static_pods = Some(pods.into_iter().map(|p| (uid_of(&p), p)).collect());
            }
            AgentEvent::OrphanGone(uid) => {
                self.orphans.remove(&uid);
            }
            AgentEvent::Mirror { key, op, result } => {
                let label = format!("{}/{}", key.0, key.1);
                match result {
                    Ok(()) => {
                        self.mirror_ops.succeeded(&key, op);
                        tracing::info!(pod = %label, "{} the mirror pod", match op {
                            MirrorOp::Create => "created",
                            MirrorOp::Delete => "deleted",
                        });
                    }
                    Err(error) => {
                        if self.mirror_ops.failed(&key, op, Timestamp::now()) {
                            tracing::warn!(pod = %label, %error, op = ?op, "mirror pod request failed; retrying");
                        }
                    }
                }
            }
        }
    }

    fn observe(&mut self, event: watcher::Event<Pod>) {
        match event {
            watcher::Event::Init => self.listing = Some(BTreeMap::new()),
            watcher::Event::InitApply(pod) => {
                self.listing
                    .get_or_insert_default()
                    .insert(uid_of(&pod), pod);
            }
            watcher::Event::InitDone => {
                if !self.api_synced {
                    tracing::info!("listed this node's pods");
                }
                self.api_pods = self.listing.take().unwrap_or_default();
                self.api_synced = true;
            }
            watcher::Event::Apply(pod) => {
                self.api_pods.insert(uid_of(&pod), pod);
            }
            watcher::Event::Delete(pod) => {
                self.api_pods.remove(&uid_of(&pod));
            }
        }
    }

    /// A pod worker finished.
    pub(crate) fn worker_finished(&mut self, uid: &str) {
        if let Some(handle) = self.handles.get_mut(uid) {
            handle.worker_done = true;
        }
    }

    fn start_worker(&mut self, pod: &Pod, source: Source, stop: Option<Duration>) {
        let uid = uid_of(pod);
        let label = format!("{}/{}", key_of(pod).0, key_of(pod).1);
        let recorded = self.records.remove(&uid).unwrap_or_default();
        tracing::info!(pod = %label, uid = %uid, source = ?source, adopting = recorded.len(), "pod added");
        let (updates, update_rx) = watch::channel(PodUpdate {
            pod: pod.clone(),
            stop,
        });
        let (report_tx, reports) = watch::channel(None);
        let (targets, target_rx) = watch::channel(None);
        let worker = PodWorker::new(
            self.ctx.clone(),
            update_rx,
            report_tx,
            self.finished.clone(),
            recorded,
        );
        tokio::spawn(worker.run());
        let sync = tokio::spawn(sync::run(
            self.ctx.client.clone(),
            label,
            reports,
            target_rx,
        ))
        .abort_handle();
        self.handles.insert(
            uid,
            PodHandle {
                source,
                key: key_of(pod),
                updates,
                targets,
                worker_done: false,
                removed: false,
                sync,
            },
        );
    }

    /// Brings workers, mirror pods and status targets in line with what is known now.
    pub(crate) fn reconcile(&mut self) {
        let now = Timestamp::now();
        self.reconcile_api_pods();
        self.reconcile_static_pods();
        self.reconcile_mirrors(now);
        self.clean_up_orphans();
        self.handles
            .retain(|_, h| !(h.worker_done && (h.source == Source::File || h.removed)));
    }

    fn reconcile_api_pods(&mut self) {
        if !self.api_synced {
            return;
        }
        let pods: Vec<Pod> = self
            .api_pods
            .values()
            .filter(|p| !is_mirror_pod(p))
            .cloned()
            .collect();
        for pod in &pods {
            let uid = uid_of(pod);
            let deleting = pod.metadata.deletion_timestamp.is_some();
            let stop =
                deleting.then(|| seconds(pod.metadata.deletion_grace_period_seconds.unwrap_or(0)));
            let target = StatusTarget {
                pod: PodTarget::of(pod),
                observed: pod.status.clone(),
                delete_when_finished: deleting,
            };
            if !self.handles.contains_key(&uid) {
                let phase = pod.status.as_ref().and_then(|s| s.phase.as_deref());
                if matches!(phase, Some("Succeeded" | "Failed")) && !deleting {
                    continue;
                }
                self.start_worker(pod, Source::Api, stop);
            }
            if let Some(handle) = self.handles.get(&uid) {
                handle.update(pod, stop);
                handle.target(Some(target));
            }
        }
        for (uid, handle) in &mut self.handles {
            if handle.source == Source::Api && !handle.removed && !self.api_pods.contains_key(uid) {
                tracing::info!(pod = %format!("{}/{}", handle.key.0, handle.key.1), "pod removed from the API; stopping it");
                handle.removed = true;
                handle.target(None);
                let pod = handle.updates.borrow().pod.clone();
                handle.update(&pod, Some(Duration::ZERO));
            }
        }
    }

    fn reconcile_static_pods(&mut self) {
        let Some(desired) = self.static_pods.clone() else {
            return;
        };
        for (uid, handle) in &self.handles {
            if handle.source == Source::File && !desired.contains_key(uid) {
                let pod = handle.updates.borrow().pod.clone();
                if handle.updates.borrow().stop.is_none() {
                    tracing::info!(pod = %format!("{}/{}", handle.key.0, handle.key.1), "static pod removed from the manifests; stopping it");
                }
                handle.update(&pod, Some(spec_grace(&pod)));
            }
        }
        for (uid, pod) in &desired {
            if self.handles.contains_key(uid) {
                continue;
            }
            // A static pod waits until no other pod of its name still runs here.
            let key = key_of(pod);
            let busy = self.handles.values().any(|h| h.key == key)
                || self.orphans.values().any(|k| *k == key);
            if !busy {
                self.start_worker(pod, Source::File, None);
            }
        }
    }

    fn reconcile_mirrors(&mut self, now: Timestamp) {
        if !self.api_synced {
            return;
        }
        let mirror_pods: BTreeMap<Key, &Pod> = self
            .api_pods
            .values()
            .filter(|p| is_mirror_pod(p))
            .map(|p| (key_of(p), p))
            .collect();
        let views: BTreeMap<Key, MirrorView> = mirror_pods
            .iter()
            .map(|(key, p)| {
                let view = MirrorView {
                    hash: mirror_hash(p).map(str::to_string),
                    terminating: p.metadata.deletion_timestamp.is_some(),
                };
                (key.clone(), view)
            })
            .collect();
        // The static pod that runs under each name (stopping ones included: their status
        // still goes to their mirror).
        let running: BTreeMap<Key, StaticView> = self
            .handles
            .iter()
            .filter(|(_, h)| h.source == Source::File && !h.worker_done)
            .map(|(uid, h)| {
                let view = StaticView {
                    uid: uid.clone(),
                    stopping: h.updates.borrow().stop.is_some(),
                };
                (h.key.clone(), view)
            })
            .collect();
        for handle in self.handles.values().filter(|h| h.source == Source::File) {
            let target = running.get(&handle.key).and_then(|s| {
                let mirror = mirror_pods.get(&handle.key)?;
                let view = views.get(&handle.key)?;
                mirrors(view, s).then(|| StatusTarget {
                    pod: PodTarget::of(mirror),
                    observed: mirror.status.clone(),
                    delete_when_finished: false,
                })
            });
            handle.target(target);
        }
        let (delete, create) = plan(&views, &running);
        for key in delete {
            let Some(mirror) = mirror_pods.get(&key) else {
                continue;
            };
            if !self.mirror_ops.may_send(&key, MirrorOp::Delete, now) {
                continue;
            }
            self.mirror_ops.sent(&key, MirrorOp::Delete, now);
            let (client, target, events) = (
                self.ctx.client.clone(),
                PodTarget::of(mirror),
                self.events.clone(),
            );
            tokio::spawn(async move {
                let result = delete_pod(&client, &target)
                    .await
                    .map_err(|e| e.to_string());
                let _ = events.send(AgentEvent::Mirror {
                    key,
                    op: MirrorOp::Delete,
                    result,
                });
            });
        }
        let Some(node_uid) = self.node_uid.borrow().clone() else {
            return;
        };
        for key in create {
            let Some(handle) = self
                .handles
                .values()
                .find(|h| h.source == Source::File && h.key == key && !h.worker_done)
            else {
                continue;
            };
            if !self.mirror_ops.may_send(&key, MirrorOp::Create, now) {
                continue;
            }
            self.mirror_ops.sent(&key, MirrorOp::Create, now);
            let pod = mirror_pod(&handle.updates.borrow().pod, &self.ctx.node_name, &node_uid);
            let (client, events) = (self.ctx.client.clone(), self.events.clone());
            tokio::spawn(async move {
                let pods: Api<Pod> = Api::namespaced(client, &key.0);
                let created = call(
                    format!("create mirror pod {}/{}", key.0, key.1),
                    pods.create(&PostParams::default(), &pod),
                )
                .await;
                let result = match created {
                    // Already there: the watch will show it.
                    Err(e) if e.api_status() == Some(409) => Ok(()),
                    other => other.map(|_| ()).map_err(|e| e.to_string()),
                };
                let _ = events.send(AgentEvent::Mirror {
                    key,
                    op: MirrorOp::Create,
                    result,
                });
            });
        }
        self.mirror_ops.expire(now);
    }

    /// Earlier-run pods nobody wants: static ones once the manifests were read, API ones once
    /// the API listed the node's pods.
    fn clean_up_orphans(&mut self) {
        let static_uids: Option<BTreeSet<String>> = self
            .static_pods
            .as_ref()
            .map(|p| p.keys().cloned().collect());
        let orphaned: Vec<String> = self
            .records
            .iter()
            .filter(|(uid, records)| {
                let is_static = records.iter().any(|r| r.static_pod);
                if is_static {
                    static_uids.as_ref().is_some_and(|s| !s.contains(*uid))
                } else {
                    self.api_synced && !self.api_pods.contains_key(*uid)
                }
            })
            .map(|(uid, _)| uid.clone())
            .collect();
        for uid in orphaned {
            let Some(records) = self.records.remove(&uid) else {
                continue;
            };
            let key = records
                .first()
                .map(|r| (r.namespace.clone(), r.pod_name.clone()))
                .unwrap_or_default();
            self.orphans.insert(uid.clone(), key);
            tokio::spawn(kill_orphan(
                self.ctx.clone(),
                uid,
                records,
                self.events.clone(),
            ));
        }
    }
}
