//! One node's kubelet: the pods it runs (from the API and from manifest files), their
//! processes and ports, the statuses and deletions it reports, its mirror pods and heartbeats.

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::core::v1::{Node, NodeCondition, Pod, PodStatus};
use k8s_openapi::jiff::Timestamp;

use super::config::KubeletConfig;
use super::images::Registry;
use super::node::{NodeHealth, node_conditions};
use super::pod::{PodSource, PodWorker, Relist, grace_period};
use super::port_table::PortTable;
use super::probe::{OwnProcessReadiness, ReadinessModel};
use super::process::{Process, ProcessId};
use super::report::{ContainerView, KubeletReport, PodRef, StatusUpdate};
use super::runtime::NodeRuntime;
use super::static_pods::{self, config_hash, mirror_hash};
use crate::controllers::{clock, objects};

/// The state of the machine and its kubelet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NodeState {
    /// Running normally.
    Up,
    /// The kubelet runs and posts `Ready=False` (its container runtime is down): no pod makes
    /// progress, running processes keep running.
    NotReady,
    /// The machine is off: every process is gone, nothing is reported, nothing progresses.
    Down,
}

#[derive(Debug, Clone)]
struct MirrorRecord {
    reference: PodRef,
    hash: Option<String>,
    /// Someone deleted it through the API: the kubelet deletes it for good and recreates it.
    terminating: bool,
}

/// A simulated kubelet. Feed it what its watches deliver ([`Kubelet::observe_pod`],
/// [`Kubelet::pod_removed`]), what its manifest directory holds
/// ([`Kubelet::set_static_pods`]), and advance it in time ([`Kubelet::advance`]).
#[derive(Debug)]
pub struct Kubelet {
    config: KubeletConfig,
    state: NodeState,
    rt: NodeRuntime,
    pods: BTreeMap<String, PodWorker>,
    /// Static pods whose manifest came back, unchanged, while their pod still stops: as the
    /// kubelet restarts a static pod of the same UID, each starts afresh once that one stopped.
    restart_after_stop: BTreeMap<String, Pod>,
    acknowledged: BTreeMap<String, PodStatus>,
    mirrors: BTreeMap<(String, String), MirrorRecord>,
    node_conditions: Vec<NodeCondition>,
    node_uid: Option<String>,
    last_lease: Option<Timestamp>,
    last_status_post: Option<Timestamp>,
    posted_health: Option<NodeHealth>,
    next_ip: u32,
}

impl std::fmt::Debug for NodeRuntime {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NodeRuntime")
            .field("processes", &self.processes.len())
            .field("images", &self.images.len())
            .finish_non_exhaustive()
    }
}

impl Kubelet {
    /// A kubelet with the default readiness model.
    pub fn new(config: KubeletConfig) -> Self {
        Self::with_readiness(config, Arc::new(OwnProcessReadiness))
    }

    /// A kubelet whose readiness probes are answered by `model`.
    pub fn with_readiness(config: KubeletConfig, model: Arc<dyn ReadinessModel>) -> Self {
        Kubelet {
            rt: NodeRuntime::new(
                &config.node_name,
                config.hostname.as_deref().unwrap_or(&config.node_name),
                config.timings,
                model,
            ),
            config,
            state: NodeState::Up,
            pods: BTreeMap::new(),
            restart_after_stop: BTreeMap::new(),
            acknowledged: BTreeMap::new(),
            mirrors: BTreeMap::new(),
            node_conditions: Vec::new(),
            node_uid: None,
            last_lease: None,
            last_status_post: None,
            posted_health: None,
            next_ip: 0,
        }
    }

    /// Its configuration.
    pub fn config(&self) -> &KubeletConfig {
        &self.config
    }

    /// The machine's state.
    pub fn node_state(&self) -> NodeState {
        self.state
    }

    /// Every process on the node, by id (exited ones until their container moves on).
    pub fn processes(&self) -> impl Iterator<Item = &Process> {
        self.rt.processes.values()
    }

    /// Who holds which host port.
    pub fn ports(&self) -> &PortTable {
        &self.rt.ports
    }

    /// The uids of the pods it runs or is stopping.
    pub fn pod_uids(&self) -> impl Iterator<Item = &str> {
        self.pods.keys().map(String::as_str)
    }

    /// Every container of every pod on the node, with its process and readiness. Init
    /// containers are not listed: they run before the pod's components and serve nothing (a
    /// completed `kube-apiserver --version` is no apiserver).
    pub fn containers(&self) -> Vec<ContainerView> {
        let mut views = Vec::new();
        for worker in self.pods.values() {
            for c in &worker.containers {
                let process = match c.stage {
                    super::container::Stage::Running { process, .. } => Some(process),
                    _ => None,
                };
                let running = process.and_then(|id| self.rt.processes.get(&id));
                views.push(ContainerView {
                    pod: worker.reference.clone(),
                    container: c.spec.name.clone(),
                    binary: super::ports::binary_name(&c.spec),
                    image: c.spec.image.clone(),
                    command_line: c
                        .spec
                        .command
                        .iter()
                        .flatten()
                        .chain(c.spec.args.iter().flatten())
                        .cloned()
                        .collect(),
                    process,
                    identity: running.map(|p| p.identity.clone()),
                    started_at: running.map(|p| p.started_at),
                    // A one-shot invocation (`--version`) never serves, so it never counts
                    // as a component that opened its ports (it would join leader election).
                    listening_since: running.filter(|_| !c.one_shot).and_then(|p| {
                        p.listening_since
                            .or_else(|| p.claim.ports.is_empty().then_some(p.started_at))
                    }),
                    stopping: running.is_some_and(|p| {
                        matches!(p.state, super::process::ProcessState::Stopping { .. })
                    }),
                    terminating: worker.stop.is_some(),
                    ready: c.ready && self.state != NodeState::Down,
                    host_mounts: super::report::host_mounts(&worker.pod, &c.spec),
                });
            }
        }
        views
    }

    /// Puts an image on the node as if pulled before (kubeadm pre-pulls the control plane):
    /// containers using it start without a pull.
    ///
    /// # Errors
    /// The name is not a valid image reference.
    pub fn preload_image(&mut self, image: &str) -> Result<(), super::images::InvalidImageName> {
        self.rt
            .images
            .insert(super::images::ImageRef::parse(image)?);
        Ok(())
    }

    /// The status it would write for a pod (by its uid on the node) at `now`.
    pub fn pod_status(&self, uid: &str, now: Timestamp) -> Option<PodStatus> {
        let worker = self.pods.get(uid)?;
        Some(super::status::pod_status(
            worker,
            now,
            &self.config.node_ip,
            &self.rt,
        ))
    }

    /// The Node as the API holds it (the kubelet needs its uid to own mirror pods).
    pub fn observe_node(&mut self, node: &Node) {
        self.node_uid.clone_from(&node.metadata.uid);
    }

    /// A pod from the API (add or update). Pods bound elsewhere are ignored; mirror pods are
    /// remembered, not run.
    pub fn observe_pod(&mut self, pod: &Pod, now: Timestamp) {
        if self.state == NodeState::Down {
            return;
        }
        let bound_here = pod.spec.as_ref().and_then(|s| s.node_name.as_deref())
            == Some(self.config.node_name.as_str());
        if !bound_here {
            return;
        }
        let reference = PodRef::of(pod);
        self.reconcile_readiness(&reference.uid, pod);
        if static_pods::is_mirror_pod(pod) {
            let key = (reference.namespace.clone(), reference.name.clone());
            self.mirrors.insert(
                key,
                MirrorRecord {
                    hash: mirror_hash(pod).map(str::to_string),
                    terminating: objects::is_terminating(&pod.metadata),
                    reference,
                },
            );
            return;
        }
        match self.pods.get_mut(&reference.uid) {
            Some(worker) => {
                worker.pod = pod.clone();
                // Listed again: a rebooted machine's pod starts over, a restarted kubelet's
                // running pod is adopted as it is.
                if worker.awaiting_relist.take() == Some(Relist::AfterReboot) {
                    worker.machine_up(now, &mut self.rt);
                }
                if objects::is_terminating(&pod.metadata) {
                    worker.request_stop(now, grace_period(pod), &mut self.rt);
                }
            }
            None => {
                if objects::is_pod_terminal(pod) {
                    return;
                }
                let mut worker = PodWorker::new(pod.clone(), PodSource::Api);
                if objects::is_terminating(&pod.metadata) {
                    // Deleted before it ever ran here: nothing to stop.
                    worker.request_stop(now, grace_period(pod), &mut self.rt);
                } else {
                    worker.admit(now, &self.rt);
                }
                self.pods.insert(reference.uid, worker);
            }
        }
    }

    /// A pod disappeared from the API. A pod still running is stopped with its grace period
    /// (its processes linger until they exit); nothing more is reported for it.
    pub fn pod_removed(&mut self, uid: &str, now: Timestamp) {
        self.mirrors.retain(|_, m| m.reference.uid != uid);
        self.acknowledged.remove(uid);
        let Some(worker) = self.pods.get_mut(uid) else {
            return;
        };
        if worker.source != PodSource::Api {
            return;
        }
        // Gone while the machine was off: nothing of it runs any more.
        if worker.is_finished() || worker.awaiting_relist == Some(Relist::AfterReboot) {
            self.pods.remove(uid);
            return;
        }
        // Known now, as gone: a restarted kubelet stops what it still runs of it.
        worker.awaiting_relist = None;
        worker.orphaned = true;
        let grace = grace_period(&worker.pod);
        worker.request_stop(now, grace, &mut self.rt);
    }

    /// The static pods its manifest directory holds now (each built with
    /// [`static_pods::static_pod`]). New ones start (after a terminating pod of the same name
    /// has stopped); removed or changed ones stop with their grace period.
    pub fn set_static_pods(&mut self, pods: &[Pod], now: Timestamp) {
        let wanted: BTreeMap<String, &Pod> = pods
            .iter()
            .filter_map(|p| Some((config_hash(p)?.to_string(), p)))
            .collect();
        let stale: Vec<String> = self
            .pods
            .iter()
            .filter(|(uid, w)| {
                matches!(w.source, PodSource::StaticFile { .. }) && !wanted.contains_key(*uid)
            })
            .map(|(uid, _)| uid.clone())
            .collect();
        for uid in stale {
            if let Some(worker) = self.pods.get_mut(&uid) {
                let grace = grace_period(&worker.pod);
                worker.request_stop(now, grace, &mut self.rt);
            }
        }
        self.restart_after_stop
            .retain(|hash, _| wanted.contains_key(hash));
        for (hash, pod) in wanted {
            match self.pods.get(&hash) {
                Some(worker) if worker.stop.is_some() => {
                    self.restart_after_stop.insert(hash, pod.clone());
                }
                Some(_) => {}
                None => self.start_static_pod(hash, pod),
            }
        }
        self.admit_static_pods(now);
    }

    fn start_static_pod(&mut self, hash: String, pod: &Pod) {
        let file = objects::annotations(&pod.metadata)
            .get(static_pods::CONFIG_SOURCE_ANNOTATION)
            .cloned()
            .unwrap_or_default();
        self.pods.insert(
            hash,
            PodWorker::new(pod.clone(), PodSource::StaticFile { file }),
        );
    }

    /// Starts afresh each static pod whose manifest came back while it stopped, now that it
    /// has.
    fn restart_stopped_static_pods(&mut self, now: Timestamp) {
        let stopped: Vec<String> = self
            .restart_after_stop
            .keys()
            .filter(|hash| !self.pods.contains_key(*hash))
            .cloned()
            .collect();
        if stopped.is_empty() {
            return;
        }
        for hash in stopped {
            if let Some(pod) = self.restart_after_stop.remove(&hash) {
                self.start_static_pod(hash, &pod);
            }
        }
        self.admit_static_pods(now);
    }

    /// Static pods wait until no other pod of the same name is still stopping.
    fn admit_static_pods(&mut self, now: Timestamp) {
        let busy: Vec<(String, String)> = self
            .pods
            .values()
            .filter(|w| w.admitted_at.is_some() && !w.is_finished())
            .map(|w| (w.reference.namespace.clone(), w.reference.name.clone()))
            .collect();
        for worker in self.pods.values_mut() {
            let name = (
                worker.reference.namespace.clone(),
                worker.reference.name.clone(),
            );
            if worker.admitted_at.is_none() && worker.stop.is_none() && !busy.contains(&name) {
                worker.admit(now, &self.rt);
            }
        }
    }

    /// Switches the machine's state at `now`.
    pub fn set_node_state(&mut self, state: NodeState, now: Timestamp) {
        if state == self.state {
            return;
        }
        match (self.state, state) {
            (_, NodeState::Down) => {
                self.rt.kill_all(now);
                for worker in self.pods.values_mut() {
                    worker.machine_down(now);
                }
            }
            (NodeState::Down, _) => {
                // A rebooted kubelet starts its static pods from disk at once; a pod from the
                // API only once it has listed it again, which needs an API that answers.
                self.forget_api_pods(Relist::AfterReboot);
                for worker in self.pods.values_mut() {
                    if worker.awaiting_relist.is_none() {
                        worker.machine_up(now, &mut self.rt);
                    }
                }
                self.last_lease = None;
            }
            _ => {}
        }
        self.state = state;
    }

    /// The kubelet process restarts while the machine stays up: the containers keep
    /// running, but the kubelet acts on (and reports) a pod from the API only once it has
    /// listed it again; one found gone then is stopped. Static pods are read from disk again
    /// and carry on; mirror pods and written statuses are learnt again from the API.
    pub fn restart(&mut self) {
        if self.state == NodeState::Down {
            return;
        }
        self.forget_api_pods(Relist::AfterRestart);
        self.last_lease = None;
        self.last_status_post = None;
        self.posted_health = None;
    }

    /// What a kubelet that starts knows: no back-off history, no mirror pods, no statuses it
    /// wrote, and its API pods only once listed again.
    fn forget_api_pods(&mut self, why: Relist) {
        self.rt.crash_backoff =
            crate::controllers::backoff::Backoff::new(self.config.timings.crash_loop);
        self.rt.pull_backoff =
            crate::controllers::backoff::Backoff::new(self.config.timings.image_pull);
        self.mirrors.clear();
        self.acknowledged.clear();
        for worker in self.pods.values_mut() {
            if worker.source == PodSource::Api {
                worker.awaiting_relist = Some(why);
            }
        }
    }

    /// A process ends itself at `now` with `code` and `message` (a leader that lost its Lease
    /// exits, say); its container restarts under the crash-loop back-off as after any other
    /// exit. A process that is gone already is left alone.
    pub fn exit_process(&mut self, id: ProcessId, code: i32, message: &str, now: Timestamp) {
        if self.state == NodeState::Down {
            return;
        }
        if let Some(process) = self.rt.processes.get_mut(&id)
            && process.is_alive()
        {
            process.plan_exit(super::process::Exit {
                at: now,
                code,
                // A process that ends quietly leaves no termination message.
                message: (!message.is_empty()).then(|| message.to_string()),
            });
        }
    }

    /// Forgets the status written for `uid` when the API's readiness of the pod is not that
    /// status's: another writer changed it (the node lifecycle controller marks the pods of a
    /// node it lost not Ready), and the kubelet's status manager reconciles the API with its
    /// own view, as upstream's periodic sync does, so the pod's status is written again.
    fn reconcile_readiness(&mut self, uid: &str, pod: &Pod) {
        let ready = |status: Option<&PodStatus>| {
            status
                .and_then(|s| s.conditions.as_ref())
                .and_then(|c| c.iter().find(|c| c.type_ == "Ready"))
                .map(|c| c.status.clone())
        };
        if let Some(written) = self.acknowledged.get(uid)
            && ready(Some(written)) != ready(pod.status.as_ref())
        {
            self.acknowledged.remove(uid);
        }
    }

    /// Records that a status was written, so it is not reported again.
    pub fn acknowledge_status(&mut self, uid: &str, status: &PodStatus) {
        self.acknowledged.insert(uid.to_string(), status.clone());
    }

    /// Moves every pod forward to `now` and reports what the API should learn.
    pub fn advance(&mut self, registry: &Registry, now: Timestamp) -> KubeletReport {
        let mut report = KubeletReport::default();
        if self.state == NodeState::Down {
            return report;
        }
        if self.state == NodeState::Up {
            self.run_until(registry, now);
        }
        self.collect_deletions(&mut report);
        self.restart_stopped_static_pods(now);
        self.collect_statuses(&mut report, now);
        self.collect_mirrors(&mut report);
        report.events = std::mem::take(&mut self.rt.events);
        self.heartbeat(&mut report, now);
        if self.state == NodeState::Up {
            let pending = self
                .pods
                .values()
                .filter(|w| w.awaiting_relist.is_none())
                .filter_map(|w| w.next_event(&self.rt))
                .min();
            report.next_wakeup = clock::earliest(report.next_wakeup, pending);
        }
        report
    }

    fn run_until(&mut self, registry: &Registry, now: Timestamp) {
        let [a, b, c] = self.config.pod_subnet;
        loop {
            let due = self
                .pods
                .iter()
                .filter(|(_, w)| w.awaiting_relist.is_none())
                .filter_map(|(uid, w)| Some((w.next_event(&self.rt)?, uid.clone())))
                .min();
            let Some((at, uid)) = due.filter(|(at, _)| *at <= now) else {
                break;
            };
            let next_ip = &mut self.next_ip;
            let mut allocate = || {
                // .1 is the gateway; addresses .2 to .254 are handed out in turn.
                let host = 2 + *next_ip % 253;
                *next_ip += 1;
                format!("{a}.{b}.{c}.{host}")
            };
            if let Some(worker) = self.pods.get_mut(&uid) {
                worker.step(at, &mut self.rt, registry, &mut allocate);
            }
            self.admit_static_pods(at);
        }
    }

    fn collect_deletions(&mut self, report: &mut KubeletReport) {
        let mut gone = Vec::new();
        for (uid, worker) in &mut self.pods {
            if !worker.is_finished() || worker.awaiting_relist.is_some() {
                continue;
            }
            match &worker.source {
                PodSource::Api if worker.orphaned => gone.push(uid.clone()),
                PodSource::Api if !worker.deletion_reported => {
                    worker.deletion_reported = true;
                    report.finished_deletions.push(worker.reference.clone());
                }
                PodSource::Api => {}
                PodSource::StaticFile { .. } => gone.push(uid.clone()),
            }
        }
        for uid in gone {
            self.pods.remove(&uid);
        }
    }

    /// Where a pod's status goes: the API pod, or the mirror of a static pod.
    fn status_target(&self, worker: &PodWorker) -> Option<PodRef> {
        match worker.source {
            PodSource::Api if worker.orphaned => None,
            PodSource::Api => Some(worker.reference.clone()),
            PodSource::StaticFile { .. } => {
                let key = (
                    worker.reference.namespace.clone(),
                    worker.reference.name.clone(),
                );
                let mirror = self.mirrors.get(&key)?;
                (mirror.hash.as_deref() == Some(worker.reference.uid.as_str()))
                    .then(|| mirror.reference.clone())
            }
        }
    }

    fn collect_statuses(&mut self, report: &mut KubeletReport, now: Timestamp) {
        for worker in self.pods.values() {
            let idle = worker.admitted_at.is_none() && worker.stop.is_none();
            if idle || worker.awaiting_relist.is_some() {
                continue;
            }
            let Some(target) = self.status_target(worker) else {
                continue;
            };
            let status = super::status::pod_status(worker, now, &self.config.node_ip, &self.rt);
            if self.acknowledged.get(&target.uid) != Some(&status) {
                report.status_updates.push(StatusUpdate {
                    pod: target,
                    status,
                });
            }
        }
    }

    fn collect_mirrors(&mut self, report: &mut KubeletReport) {
        let live: BTreeMap<(String, String), &PodWorker> = self
            .pods
            .values()
            .filter(|w| {
                matches!(w.source, PodSource::StaticFile { .. })
                    && w.admitted_at.is_some()
                    && !w.is_finished()
            })
            .map(|w| ((w.reference.namespace.clone(), w.reference.name.clone()), w))
            .collect();
        for (key, mirror) in &self.mirrors {
            let matches = !mirror.terminating
                && live
                    .get(key)
                    .is_some_and(|w| mirror.hash.as_deref() == Some(w.reference.uid.as_str()));
            if !matches {
                report.mirror_pods_to_delete.push(mirror.reference.clone());
            }
        }
        let Some(node_uid) = self.node_uid.as_deref() else {
            return;
        };
        for (key, worker) in live {
            if worker.stop.is_none() && !self.mirrors.contains_key(&key) {
                report.mirror_pods_to_create.push(static_pods::mirror_pod(
                    &worker.pod,
                    &self.config.node_name,
                    node_uid,
                ));
            }
        }
    }

    fn heartbeat(&mut self, report: &mut KubeletReport, now: Timestamp) {
        let timings = self.config.timings;
        let lease_due = self
            .last_lease
            .is_none_or(|last| clock::after(last, timings.lease_renew_interval) <= now);
        if lease_due {
            self.last_lease = Some(now);
            report.lease_renewal = Some(now);
        }
        let health = if self.state == NodeState::Up {
            NodeHealth::Ready
        } else {
            NodeHealth::NotReady
        };
        let post_due = self.posted_health != Some(health)
            || self
                .last_status_post
                .is_none_or(|last| clock::after(last, timings.node_status_report_interval) <= now);
        if post_due {
            self.node_conditions = node_conditions(&self.node_conditions, health, now);
            self.posted_health = Some(health);
            self.last_status_post = Some(now);
            report.node_status = Some(k8s_openapi::api::core::v1::NodeStatus {
                conditions: Some(self.node_conditions.clone()),
                ..Default::default()
            });
        }
        let next_lease = self
            .last_lease
            .map(|l| clock::after(l, timings.lease_renew_interval));
        let next_post = self
            .last_status_post
            .map(|l| clock::after(l, timings.node_status_report_interval));
        report.next_wakeup = clock::earliest(next_lease, next_post);
    }
}
