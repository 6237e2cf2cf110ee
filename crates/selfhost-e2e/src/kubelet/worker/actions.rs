//! What a pod worker does on its machine's behalf: start a container's process (resolve the
//! image, build the command line, open the log, record the instance), signal it, probe it.

use k8s_openapi::jiff::Timestamp;

use super::{Event, PodWorker, Running, pod_fields};
use crate::kubelet::command;
use crate::kubelet::container::{InstanceId, StopSignal};
use crate::kubelet::images;
use crate::kubelet::pod::{Action, ContainerRef};
use crate::kubelet::probe::ProbeKind;
use crate::kubelet::prober::exec_launch;
use crate::kubelet::records::ContainerRecord;
use crate::kubelet::static_pods::CONFIG_SOURCE_ANNOTATION;
use crate::kubelet::{process, volumes};

impl PodWorker {
    pub(super) fn perform(&mut self, action: Action, now: Timestamp) {
        match action {
            Action::Start(at) => self.start(at, now),
            Action::Signal {
                instance, signal, ..
            } => self.signal(instance, signal),
            Action::Probe {
                container,
                instance,
                kind,
            } => self.probe(container, instance, kind),
        }
    }

    fn start(&mut self, at: ContainerRef, now: Timestamp) {
        let Some(container) = self.machine.container(at) else {
            return;
        };
        let spec = container.spec.clone();
        let image = container.image().to_string();
        let restart_count = container.next_restart_count();
        let target = match images::resolve(&self.ctx.images, &image, container.never_pull()) {
            Ok(target) => target,
            Err(failure) => {
                if self.pull_failures.get(&at) != Some(&failure.message().to_string()) {
                    tracing::warn!(pod = %self.label, container = %spec.name, %image, reason = failure.reason(), "cannot pull the image");
                    self.pull_failures.insert(at, failure.message().to_string());
                }
                if let Some(c) = self.machine.container_mut(at) {
                    c.pull_failed(failure, now);
                }
                return;
            }
        };
        self.pull_failures.remove(&at);
        let pod = &self.machine.pod;
        let meta = &pod.metadata;
        let (namespace, name, uid) = (
            meta.namespace.clone().unwrap_or_default(),
            meta.name.clone().unwrap_or_default(),
            meta.uid.clone().unwrap_or_default(),
        );
        let sources = volumes::volume_sources(&self.ctx.layout, pod);
        let mounts = volumes::mounts(&spec, &sources);
        let fields = pod_fields(&self.ctx, pod);
        let launch = command::launch(
            &spec,
            &target,
            &fields,
            &mounts,
            self.ctx.layout.pod_dir(&uid),
        );
        let log = self
            .ctx
            .layout
            .log_path(&namespace, &name, &uid, &spec.name, restart_count);
        let policy = self.machine.restart_policy();
        let static_pod = meta
            .annotations
            .as_ref()
            .and_then(|a| a.get(CONFIG_SOURCE_ANNOTATION))
            .is_some_and(|s| s == "file");
        let spawned = match process::spawn(&launch, &log) {
            Ok(spawned) => spawned,
            Err(error) => {
                tracing::warn!(pod = %self.label, container = %spec.name, %error, "cannot start the container");
                if let Some(c) = self.machine.container_mut(at) {
                    c.start_failed(error.to_string(), now, &policy);
                }
                return;
            }
        };
        let id = self.machine.new_instance_id();
        let pid = spawned.pid;
        let container_id = format!("process://{}/{pid}", self.ctx.node_name);
        let image_id = target.image_id(&image);
        if let Some(c) = self.machine.container_mut(at) {
            c.started_instance(id, pid, container_id.clone(), image_id.clone(), now);
        }
        tracing::info!(
            pod = %self.label,
            container = %spec.name,
            pid,
            restart_count,
            program = %launch.program.display(),
            "container started"
        );
        let record = ContainerRecord {
            pod_uid: uid,
            namespace,
            pod_name: name,
            container: spec.name.clone(),
            init: matches!(at, ContainerRef::Init(_)),
            static_pod,
            pid,
            process_start_ticks: spawned.start_ticks,
            started_at_ms: now.as_millisecond(),
            restart_count,
            container_id,
            image_id,
            exit: None,
        };
        if let Err(error) = self.ctx.records.save(&record) {
            tracing::warn!(%error, "cannot record a started container");
        }
        self.records.insert(at, record);
        self.running.insert(
            id,
            Running {
                pid,
                start_ticks: spawned.start_ticks,
                signalled: None,
            },
        );
        self.launches.insert(at, (target, launch, mounts));
        let events = self.events_tx.clone();
        let mut child = spawned.child;
        tokio::spawn(async move {
            let exit_code = child.wait().await.ok().map(process::exit_code);
            let _ = events.send(Event::Exited {
                container: at,
                instance: id,
                exit_code,
            });
        });
    }

    fn signal(&mut self, id: InstanceId, signal: StopSignal) {
        let Some(running) = self.running.get_mut(&id) else {
            return;
        };
        running.signalled = Some(signal);
        let result = match signal {
            // Only the process it started: a pid that now belongs to another is left alone.
            StopSignal::Term if process::is_alive(running.pid, running.start_ticks) => {
                process::terminate(running.pid)
            }
            StopSignal::Term => Ok(()),
            StopSignal::Kill => process::kill_group(running.pid),
        };
        tracing::info!(pod = %self.label, pid = running.pid, signal = ?signal, "signalled container");
        if let Err(error) = result {
            tracing::warn!(pod = %self.label, pid = running.pid, %error, "cannot signal the container");
        }
    }

    fn probe(&mut self, at: ContainerRef, id: InstanceId, kind: ProbeKind) {
        let Some(container) = self.machine.container(at) else {
            return;
        };
        let spec = container.spec.clone();
        let Some(probe) = kind.of(&spec).cloned() else {
            return;
        };
        let exec = self
            .launches
            .get(&at)
            .and_then(|(target, launch, mounts)| exec_launch(&probe, target, launch, mounts));
        let prober = self.ctx.prober.clone();
        let pod_ip = self.ctx.node_ip.clone();
        let events = self.events_tx.clone();
        tokio::spawn(async move {
            let outcome = prober.run(&probe, &spec, &pod_ip, exec).await;
            let _ = events.send(Event::Probed {
                container: at,
                instance: id,
                kind,
                outcome,
            });
        });
    }
}
