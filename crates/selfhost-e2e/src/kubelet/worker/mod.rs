//! The pod worker: one task per pod that performs what its [`PodMachine`] decides (start
//! processes, signal them, run probes, set up volumes), feeds back what happened, and publishes
//! the pod's status whenever it changes. API calls never happen here, so an API outage never
//! slows a pod down.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Pod, PodCondition, PodStatus};
use k8s_openapi::jiff::Timestamp;
use kube::Client;
use tokio::sync::{mpsc, watch};

use super::clock::{after, earliest, elapsed};
use super::command::{Launch, Mount, PodFields};
use super::config::{Layout, timing};
use super::container::{Adopted, InstanceId, StopSignal, UNKNOWN_EXIT_CODE};
use super::images::ImageTarget;
use super::pod::{ContainerRef, PodMachine};
use super::probe::{ProbeKind, Verdict};
use super::prober::{ProbeOutcome, Prober};
use super::records::{ContainerRecord, RecordStore, RecordedExit};
use super::{process, status, volumes};

mod actions;

/// What every pod worker of the node shares.
pub(crate) struct NodeContext {
    pub node_name: String,
    pub node_ip: String,
    pub layout: Layout,
    pub images: PathBuf,
    pub client: Client,
    pub prober: Prober,
    pub records: RecordStore,
}

/// What the agent tells a pod worker: the pod as last seen, and whether to stop it (with
/// which grace period).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct PodUpdate {
    pub pod: Pod,
    pub stop: Option<Duration>,
}

/// What a pod worker publishes.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct PodReport {
    pub status: PodStatus,
    /// Stopped, and every process is gone.
    pub finished: bool,
}

#[derive(Debug)]
enum Event {
    /// An instance ended; `None` when its exit code is unknown (an adopted process).
    Exited {
        container: ContainerRef,
        instance: InstanceId,
        exit_code: Option<i32>,
    },
    Probed {
        container: ContainerRef,
        instance: InstanceId,
        kind: ProbeKind,
        outcome: ProbeOutcome,
    },
    Volumes(Result<(), String>),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Volumes {
    /// Set up next at this time.
    Pending(Timestamp),
    /// A set-up task runs.
    InFlight { ready: bool },
    /// In place; refreshed at this time.
    Ready(Timestamp),
}

/// What the worker keeps about a running instance beyond the machine's view.
#[derive(Debug, Clone)]
struct Running {
    pid: u32,
    start_ticks: u64,
    signalled: Option<StopSignal>,
}

/// One pod's worker.
pub(crate) struct PodWorker {
    ctx: Arc<NodeContext>,
    machine: PodMachine,
    label: String,
    updates: watch::Receiver<PodUpdate>,
    report: watch::Sender<Option<PodReport>>,
    finished: mpsc::UnboundedSender<String>,
    events_tx: mpsc::UnboundedSender<Event>,
    events: mpsc::UnboundedReceiver<Event>,
    previous_conditions: Vec<PodCondition>,
    volumes: Volumes,
    volume_error: Option<String>,
    launches: BTreeMap<ContainerRef, (ImageTarget, Launch, Vec<Mount>)>,
    running: BTreeMap<InstanceId, Running>,
    records: BTreeMap<ContainerRef, ContainerRecord>,
    pull_failures: BTreeMap<ContainerRef, String>,
}

fn pod_fields(ctx: &NodeContext, pod: &Pod) -> PodFields {
    let meta = &pod.metadata;
    PodFields {
        name: meta.name.clone().unwrap_or_default(),
        namespace: meta.namespace.clone().unwrap_or_default(),
        uid: meta.uid.clone().unwrap_or_default(),
        node_name: ctx.node_name.clone(),
        node_ip: ctx.node_ip.clone(),
        service_account: pod
            .spec
            .as_ref()
            .and_then(|s| s.service_account_name.clone())
            .unwrap_or_default(),
        labels: meta.labels.clone().unwrap_or_default(),
        annotations: meta.annotations.clone().unwrap_or_default(),
    }
}

impl PodWorker {
    /// A worker for the pod in `updates`, adopting the `recorded` containers of an earlier
    /// kubelet run. It tells `finished` the pod's uid when it is done.
    pub(crate) fn new(
        ctx: Arc<NodeContext>,
        mut updates: watch::Receiver<PodUpdate>,
        report: watch::Sender<Option<PodReport>>,
        finished: mpsc::UnboundedSender<String>,
        recorded: Vec<ContainerRecord>,
    ) -> Self {
        let now = Timestamp::now();
        let first = updates.borrow_and_update().clone();
        let pod = first.pod;
        let meta = &pod.metadata;
        let label = format!(
            "{}/{}",
            meta.namespace.as_deref().unwrap_or_default(),
            meta.name.as_deref().unwrap_or_default()
        );
        let mut machine = PodMachine::new(pod, now);
        let adopted: Vec<(String, bool, Adopted)> = recorded
            .iter()
            .map(|r| (r.container.clone(), r.init, r.adopted()))
            .collect();
        if !adopted.is_empty() {
            machine.adopt(adopted, now);
        }
        // A pod may be deleted before it ever ran here (or while the kubelet was down).
        if let Some(grace) = first.stop {
            tracing::info!(pod = %label, grace = ?grace, "stopping pod");
            machine.request_stop(now, grace);
        }
        let (events_tx, events) = mpsc::unbounded_channel();
        let mut worker = PodWorker {
            ctx,
            machine,
            label,
            updates,
            report,
            finished,
            events_tx,
            events,
            previous_conditions: Vec::new(),
            volumes: Volumes::Pending(now),
            volume_error: None,
            launches: BTreeMap::new(),
            running: BTreeMap::new(),
            records: BTreeMap::new(),
            pull_failures: BTreeMap::new(),
        };
        worker.watch_adopted(&recorded);
        worker
    }

    /// Watches the adopted processes that still run (they are not this process's children).
    fn watch_adopted(&mut self, recorded: &[ContainerRecord]) {
        let refs: Vec<(ContainerRef, InstanceId, u32)> = self
            .machine
            .all()
            .filter_map(|(at, c)| c.instance().map(|i| (at, i.id, i.pid)))
            .collect();
        for (at, id, pid) in refs {
            let Some(name) = self.machine.container(at).map(|c| c.name().to_string()) else {
                continue;
            };
            let Some(record) = recorded
                .iter()
                .find(|r| r.container == name && r.pid == pid)
            else {
                continue;
            };
            tracing::info!(pod = %self.label, container = %name, pid, "adopted a running container");
            self.running.insert(
                id,
                Running {
                    pid,
                    start_ticks: record.process_start_ticks,
                    signalled: None,
                },
            );
            self.records.insert(at, record.clone());
            let events = self.events_tx.clone();
            let start_ticks = record.process_start_ticks;
            tokio::spawn(async move {
                while process::is_alive(pid, start_ticks) {
                    tokio::time::sleep(timing::ADOPTED_PROCESS_POLL).await;
                }
                // Its exit code went to its old parent; the worker infers one.
                let _ = events.send(Event::Exited {
                    container: at,
                    instance: id,
                    exit_code: None,
                });
            });
        }
        for record in recorded {
            let at = self
                .machine
                .all()
                .find(|(_, c)| c.name() == record.container)
                .map(|(at, _)| at);
            if let Some(at) = at {
                self.records.entry(at).or_insert_with(|| record.clone());
            }
        }
    }

    /// Runs the pod until it is stopped and every process is gone (or the agent goes away).
    pub(crate) async fn run(mut self) {
        loop {
            let now = Timestamp::now();
            self.maintain_volumes(now).await;
            for action in self.machine.actions(now) {
                self.perform(action, now);
            }
            self.publish(now);
            if self.machine.finished() {
                self.finish();
                return;
            }
            let deadline = earliest(self.machine.next_deadline(now), self.volume_deadline());
            let wait = deadline.map_or(Duration::from_secs(3600), |d| {
                elapsed(now, d).max(Duration::from_millis(1))
            });
            tokio::select! {
                changed = self.updates.changed() => match changed {
                    Ok(()) => self.apply_update(),
                    // The agent is gone (the kubelet exits): leave the processes running.
                    Err(_) => return,
                },
                Some(event) = self.events.recv() => self.apply(event),
                () = tokio::time::sleep(wait) => {}
            }
            // Take in everything that is already there before acting again.
            while let Ok(event) = self.events.try_recv() {
                self.apply(event);
            }
        }
    }

    fn uid(&self) -> String {
        self.machine.pod.metadata.uid.clone().unwrap_or_default()
    }

    fn apply_update(&mut self) {
        let update = self.updates.borrow_and_update().clone();
        self.machine.pod = update.pod;
        if let Some(grace) = update.stop {
            let now = Timestamp::now();
            if self.machine.stop.is_none() {
                tracing::info!(pod = %self.label, grace = ?grace, "stopping pod");
            }
            self.machine.request_stop(now, grace);
        }
    }

    fn volume_deadline(&self) -> Option<Timestamp> {
        match self.volumes {
            Volumes::Pending(at) if self.machine.stop.is_none() => Some(at),
            Volumes::Ready(at) if volumes::needs_api(&self.machine.pod) => Some(at),
            _ => None,
        }
    }

    async fn maintain_volumes(&mut self, now: Timestamp) {
        if self.machine.stop.is_some() {
            return;
        }
        let ready = match self.volumes {
            Volumes::Pending(at) if at <= now => false,
            Volumes::Ready(at) if at <= now && volumes::needs_api(&self.machine.pod) => true,
            _ => return,
        };
        let ctx = self.ctx.clone();
        let pod = self.machine.pod.clone();
        let fields = pod_fields(&ctx, &pod);
        if volumes::needs_api(&pod) {
            // Secrets and ConfigMaps come from an API that may not answer: never wait here.
            self.volumes = Volumes::InFlight { ready };
            let events = self.events_tx.clone();
            tokio::spawn(async move {
                let result = volumes::set_up(&ctx.client, &ctx.layout, &pod, &fields).await;
                let _ = events.send(Event::Volumes(result.map_err(|e| e.to_string())));
            });
        } else {
            self.volumes = Volumes::InFlight { ready };
            let result = volumes::set_up(&ctx.client, &ctx.layout, &pod, &fields).await;
            self.apply(Event::Volumes(result.map_err(|e| e.to_string())));
        }
    }

    fn apply(&mut self, event: Event) {
        let now = Timestamp::now();
        match event {
            Event::Volumes(result) => {
                let was_ready = matches!(self.volumes, Volumes::InFlight { ready: true });
                match result {
                    Ok(()) => {
                        if self.volume_error.take().is_some() {
                            tracing::info!(pod = %self.label, "volumes are set up");
                        }
                        self.machine.volumes_ready = true;
                        self.volumes = Volumes::Ready(after(now, timing::VOLUME_REFRESH));
                    }
                    Err(error) => {
                        if self.volume_error.as_ref() != Some(&error) {
                            tracing::warn!(pod = %self.label, %error, "cannot set up volumes; retrying");
                        }
                        self.volume_error = Some(error);
                        self.volumes = if was_ready {
                            Volumes::Ready(after(now, timing::VOLUME_RETRY))
                        } else {
                            Volumes::Pending(after(now, timing::VOLUME_RETRY))
                        };
                    }
                }
            }
            Event::Exited {
                container,
                instance,
                exit_code,
            } => self.exited(container, instance, exit_code, now),
            Event::Probed {
                container,
                instance,
                kind,
                outcome,
            } => self.probed(container, instance, kind, outcome, now),
        }
    }

    fn exited(&mut self, at: ContainerRef, id: InstanceId, exit_code: Option<i32>, now: Timestamp) {
        let Some(running) = self.running.remove(&id) else {
            return;
        };
        // An unknown code (an adopted process): a stop the kubelet asked for is taken as obeyed.
        let exit_code = match (exit_code, running.signalled) {
            (Some(code), _) => code,
            (None, Some(StopSignal::Kill)) => 137,
            (None, Some(StopSignal::Term)) => 0,
            (None, None) => UNKNOWN_EXIT_CODE,
        };
        // Whatever the main process left behind in its group goes with it, as a runtime
        // tears down the whole container.
        if let Err(error) = process::kill_group(running.pid) {
            tracing::debug!(pid = running.pid, %error, "cannot clean up the process group");
        }
        if !self.machine.exited(at, id, exit_code, now) {
            return;
        }
        let Some(container) = self.machine.container(at) else {
            return;
        };
        tracing::info!(
            pod = %self.label,
            container = %container.name(),
            pid = running.pid,
            exit_code,
            next = %container.run_summary(),
            "container exited"
        );
        if let Some(record) = self.records.get_mut(&at) {
            record.exit = Some(RecordedExit {
                exit_code,
                reason: if exit_code == 0 { "Completed" } else { "Error" }.into(),
                finished_at_ms: now.as_millisecond(),
            });
            if let Err(error) = self.ctx.records.save(record) {
                tracing::warn!(%error, "cannot record a container exit");
            }
        }
    }

    fn probed(
        &mut self,
        at: ContainerRef,
        id: InstanceId,
        kind: ProbeKind,
        outcome: ProbeOutcome,
        now: Timestamp,
    ) {
        let verdict = self
            .machine
            .probe_result(at, id, kind, outcome.success, now);
        let name = self
            .machine
            .container(at)
            .map(|c| c.name().to_string())
            .unwrap_or_default();
        match verdict {
            Verdict::Changed(true) => {
                tracing::info!(pod = %self.label, container = %name, "{} probe succeeded", kind.name())
            }
            Verdict::Changed(false) => {
                tracing::info!(pod = %self.label, container = %name, detail = %outcome.detail, "{} probe failed", kind.name());
            }
            Verdict::Kill => tracing::warn!(
                pod = %self.label,
                container = %name,
                detail = %outcome.detail,
                "{} probe failed; the container will be restarted", kind.name()
            ),
            Verdict::Unchanged if outcome.success == Some(false) => {
                tracing::debug!(pod = %self.label, container = %name, detail = %outcome.detail, "{} probe failed", kind.name());
            }
            Verdict::Unchanged => {}
        }
    }

    fn publish(&mut self, now: Timestamp) {
        let status = status::pod_status(
            &self.machine,
            &self.ctx.node_ip,
            &self.previous_conditions,
            now,
        );
        let report = PodReport {
            finished: self.machine.finished(),
            status,
        };
        if self.report.borrow().as_ref() == Some(&report) {
            return;
        }
        self.previous_conditions = report.status.conditions.clone().unwrap_or_default();
        self.report.send_replace(Some(report));
    }

    fn finish(&mut self) {
        let uid = self.uid();
        tracing::info!(pod = %self.label, "pod stopped");
        if let Err(error) = self.ctx.records.remove_pod(&uid) {
            tracing::warn!(%error, "cannot remove the pod's container records");
        }
        let _ = self.finished.send(uid);
    }
}
