//! One container's life on the node: image pull (and pull back-off), create, run, exit,
//! restart under the kubelet's crash-loop back-off, stop on pod deletion.
//!
//! An init container lives the same life with two differences: once it exits 0 it is done for
//! good, whatever the pod's restart policy (a failure restarts it unless the policy is
//! `Never`); and it has no readiness — the pod worker runs the next one when it completes.
//!
//! Every transition has a time; the pod worker asks [`ContainerMachine::next_event`] and calls
//! [`ContainerMachine::step`] at exactly that time, so statuses carry the instants things
//! happened, whatever the wiring's tick.

use k8s_openapi::api::core::v1::Container;
use k8s_openapi::jiff::Timestamp;

use super::images::{ImageBehaviour, ImageRef, InvalidImageName, Registry};
use super::process::ProcessId;
use super::report::{KubeletEvent, PodRef};
use super::runtime::NodeRuntime;
use super::stable_id::stable_hex;
use crate::controllers::clock;

/// A container instance that has exited.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Terminated {
    pub started_at: Option<Timestamp>,
    pub finished_at: Timestamp,
    pub exit_code: i32,
    pub reason: &'static str,
    pub message: Option<String>,
    pub container_id: Option<String>,
}

/// Where a container is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Stage {
    /// Waiting for the pod sandbox.
    Waiting,
    /// The image name cannot be parsed; nothing will happen.
    InvalidImage(String),
    /// Pulling since `since` until `until`.
    Pulling { since: Timestamp, until: Timestamp },
    /// The pull failed at `at` (`ErrImagePull`); after the hold it shows `ImagePullBackOff`
    /// (`backing_off`); the next attempt starts at `retry_at`.
    PullFailed {
        at: Timestamp,
        retry_at: Timestamp,
        message: String,
        backing_off: bool,
    },
    /// Policy `Never` and the image is absent.
    NeverPull,
    /// Creating and starting until the given time.
    Creating { until: Timestamp },
    /// Running as this process.
    Running {
        process: ProcessId,
        started_at: Timestamp,
    },
    /// Exited; restarting at `until` (`CrashLoopBackOff`).
    BackOff { until: Timestamp },
    /// Will not run again (restart policy, or the pod is stopping).
    Done,
}

/// What the container machine needs to know about its pod.
#[derive(Debug, Clone, Copy)]
pub(crate) struct PodContext<'a> {
    pub pod: &'a PodRef,
    pub spec: &'a k8s_openapi::api::core::v1::PodSpec,
}

impl PodContext<'_> {
    fn restart_policy(&self) -> &str {
        self.spec.restart_policy.as_deref().unwrap_or("Always")
    }

    /// `name_namespace(uid)`, as the kubelet names pods in messages.
    pub fn full_name(&self) -> String {
        format!("{}_{}({})", self.pod.name, self.pod.namespace, self.pod.uid)
    }
}

/// One container of one pod.
#[derive(Debug, Clone)]
pub(crate) struct ContainerMachine {
    pub spec: Container,
    pub image: Result<ImageRef, InvalidImageName>,
    pub behaviour: ImageBehaviour,
    pub stage: Stage,
    pub restart_count: i32,
    pub last_exit: Option<Terminated>,
    pub previous_exit: Option<Terminated>,
    pub image_id: Option<String>,
    pub container_id: Option<String>,
    pub instances: u32,
    pub ready: bool,
    pub recheck_at: Option<Timestamp>,
    pub stopping: bool,
    /// One of `spec.initContainers`.
    pub init: bool,
    /// Its current (or last) process is a one-shot invocation: no ports, no readiness.
    pub one_shot: bool,
}

impl ContainerMachine {
    pub fn new(spec: &Container) -> Self {
        ContainerMachine {
            image: ImageRef::parse(spec.image.as_deref().unwrap_or_default()),
            spec: spec.clone(),
            behaviour: ImageBehaviour::default(),
            stage: Stage::Waiting,
            restart_count: 0,
            last_exit: None,
            previous_exit: None,
            image_id: None,
            container_id: None,
            instances: 0,
            ready: false,
            recheck_at: None,
            stopping: false,
            init: false,
            one_shot: false,
        }
    }

    /// One of the pod's init containers.
    pub fn new_init(spec: &Container) -> Self {
        ContainerMachine {
            init: true,
            ..Self::new(spec)
        }
    }

    pub(super) fn image_text(&self) -> &str {
        self.spec.image.as_deref().unwrap_or_default()
    }

    fn backoff_key(&self, ctx: &PodContext<'_>) -> String {
        format!("{}/{}", ctx.pod.uid, self.spec.name)
    }

    pub(super) fn event(
        &self,
        rt: &mut NodeRuntime,
        ctx: &PodContext<'_>,
        at: Timestamp,
        warning: bool,
        reason: &'static str,
        message: String,
    ) {
        rt.events.push(KubeletEvent {
            pod: ctx.pod.clone(),
            warning,
            reason,
            message,
            at,
        });
    }

    /// The sandbox is ready (or the container restarts): pull if needed, then create.
    pub fn begin(
        &mut self,
        at: Timestamp,
        rt: &mut NodeRuntime,
        registry: &Registry,
        ctx: &PodContext<'_>,
    ) {
        if self.stopping {
            self.stage = Stage::Done;
            return;
        }
        let image = match &self.image {
            Ok(image) => image.clone(),
            Err(invalid) => {
                self.stage = Stage::InvalidImage(invalid.to_string());
                self.event(rt, ctx, at, true, "InspectFailed", invalid.to_string());
                self.event(
                    rt,
                    ctx,
                    at,
                    true,
                    "Failed",
                    "Error: InvalidImageName".into(),
                );
                return;
            }
        };
        let present = rt.images.contains(&image);
        match self.pull_policy() {
            "Never" if !present => {
                self.stage = Stage::NeverPull;
                let message = format!(
                    "Container image \"{}\" is not present with pull policy of Never",
                    self.image_text()
                );
                self.event(rt, ctx, at, true, "ErrImageNeverPull", message);
            }
            "Always" => self.pull(at, rt, registry, &image, ctx),
            _ if !present => self.pull(at, rt, registry, &image, ctx),
            _ => {
                let message = format!(
                    "Container image \"{}\" already present on machine",
                    self.image_text()
                );
                self.event(rt, ctx, at, false, "Pulled", message);
                self.behaviour = registry.lookup(&image).cloned().unwrap_or_default();
                self.create(at, rt);
            }
        }
    }

    pub(super) fn create(&mut self, at: Timestamp, rt: &NodeRuntime) {
        let delay = rt.timings.start + self.behaviour.extra_start_delay;
        self.stage = Stage::Creating {
            until: clock::after(at, delay),
        };
    }

    /// When this container next changes by itself.
    pub fn next_event(&self, rt: &NodeRuntime) -> Option<Timestamp> {
        match &self.stage {
            Stage::Pulling { until, .. } | Stage::Creating { until } | Stage::BackOff { until } => {
                Some(*until)
            }
            Stage::PullFailed {
                at,
                retry_at,
                backing_off,
                ..
            } => {
                let hold_end = clock::after(*at, rt.timings.pull_error_hold);
                Some(if !backing_off && hold_end < *retry_at {
                    hold_end
                } else {
                    *retry_at
                })
            }
            Stage::Running { process, .. } => {
                let exit = rt
                    .processes
                    .get(process)
                    .and_then(|p| p.planned_exit.as_ref())
                    .map(|e| e.at);
                let listen = rt.listen_due(*process, &self.behaviour);
                let close = rt.listener_close_due(*process);
                let sockets = clock::earliest(listen, close);
                clock::earliest(clock::earliest(exit, sockets), self.recheck_at)
            }
            Stage::Waiting | Stage::InvalidImage(_) | Stage::NeverPull | Stage::Done => None,
        }
    }

    /// Applies the transition due at `at`.
    pub fn step(
        &mut self,
        at: Timestamp,
        rt: &mut NodeRuntime,
        registry: &Registry,
        ctx: &PodContext<'_>,
    ) {
        match self.stage.clone() {
            Stage::Pulling { since, until } if until <= at => {
                self.finish_pull(since, at, rt, registry, ctx);
            }
            Stage::PullFailed { retry_at, .. } if retry_at <= at => {
                if let Ok(image) = self.image.clone() {
                    self.pull(at, rt, registry, &image, ctx);
                }
            }
            Stage::PullFailed {
                at: failed_at,
                retry_at,
                message,
                backing_off: false,
            } => {
                // ErrImagePull turns into ImagePullBackOff: only the status text changes.
                self.stage = Stage::PullFailed {
                    at: failed_at,
                    retry_at,
                    message,
                    backing_off: true,
                };
                let message = format!("Back-off pulling image \"{}\"", self.image_text());
                self.event(rt, ctx, at, false, "BackOff", message);
            }
            Stage::Creating { until } if until <= at => self.start(at, rt, ctx),
            Stage::BackOff { until } if until <= at => {
                let key = self.backoff_key(ctx);
                if let Some(exit) = &self.last_exit {
                    rt.crash_backoff.step(&key, exit.finished_at, at);
                }
                self.restart(at, rt, registry, ctx);
            }
            Stage::Running { process, .. } => self.step_running(process, at, rt, registry, ctx),
            _ => {}
        }
    }

    fn start(&mut self, at: Timestamp, rt: &mut NodeRuntime, ctx: &PodContext<'_>) {
        if self.stopping {
            self.stage = Stage::Done;
            return;
        }
        self.instances += 1;
        self.container_id = Some(format!(
            "containerd://{}",
            stable_hex(
                &format!("{}/{}/{}", ctx.pod.uid, self.spec.name, self.instances),
                64
            )
        ));
        self.event(
            rt,
            ctx,
            at,
            false,
            "Created",
            format!("Created container: {}", self.spec.name),
        );
        self.one_shot = NodeRuntime::one_shot(&self.spec, &self.behaviour).is_some();
        let process = rt.spawn(&ctx.pod.uid, ctx.spec, &self.spec, &self.behaviour, at);
        self.event(
            rt,
            ctx,
            at,
            false,
            "Started",
            format!("Started container {}", self.spec.name),
        );
        self.stage = Stage::Running {
            process,
            started_at: at,
        };
        self.ready = false;
        self.recheck_at = None;
        self.reprobe(process, at, rt);
    }

    fn reprobe(&mut self, process: ProcessId, at: Timestamp, rt: &NodeRuntime) {
        if self.init || self.one_shot {
            // Nothing to probe: an init container's readiness is its successful exit, and a
            // one-shot process serves nothing.
            self.ready = false;
            self.recheck_at = None;
            return;
        }
        let result = rt.probe(process, &self.spec, &self.behaviour, at);
        self.ready = result.ready;
        self.recheck_at = result.recheck_at.filter(|t| *t > at);
    }

    fn step_running(
        &mut self,
        process: ProcessId,
        at: Timestamp,
        rt: &mut NodeRuntime,
        registry: &Registry,
        ctx: &PodContext<'_>,
    ) {
        if rt
            .listen_due(process, &self.behaviour)
            .is_some_and(|t| t <= at)
        {
            rt.listen(process, at);
        }
        if rt.listener_close_due(process).is_some_and(|t| t <= at) {
            rt.close_listener(process, at);
        }
        let exit_due = rt
            .processes
            .get(&process)
            .and_then(|p| p.planned_exit.as_ref())
            .is_some_and(|e| e.at <= at);
        if exit_due {
            let started_at = rt.processes.get(&process).map(|p| p.started_at);
            if let Some(exit) = rt.reap(process) {
                rt.forget(process);
                let reason = if exit.code == 0 { "Completed" } else { "Error" };
                self.exited(
                    Terminated {
                        started_at,
                        finished_at: exit.at,
                        exit_code: exit.code,
                        reason,
                        message: exit.message,
                        container_id: self.container_id.clone(),
                    },
                    rt,
                    registry,
                    ctx,
                );
            }
            return;
        }
        self.reprobe(process, at, rt);
    }

    fn exited(
        &mut self,
        exit: Terminated,
        rt: &mut NodeRuntime,
        registry: &Registry,
        ctx: &PodContext<'_>,
    ) {
        let at = exit.finished_at;
        let code = exit.exit_code;
        self.previous_exit = self.last_exit.take();
        self.last_exit = Some(exit);
        self.ready = false;
        self.recheck_at = None;
        let restart = match ctx.restart_policy() {
            "Never" => false,
            // An init container that completed never runs again.
            _ if self.init => code != 0,
            "OnFailure" => code != 0,
            _ => true,
        };
        if self.stopping || !restart {
            self.stage = Stage::Done;
            return;
        }
        let key = self.backoff_key(ctx);
        if rt.crash_backoff.in_backoff_since(&key, at, at) {
            let until = rt.crash_backoff.window_end(&key, at).unwrap_or(at);
            self.stage = Stage::BackOff { until };
            let message = format!(
                "Back-off restarting failed container {} in pod {}",
                self.spec.name,
                ctx.full_name()
            );
            self.event(rt, ctx, at, true, "BackOff", message);
        } else {
            rt.crash_backoff.step(&key, at, at);
            self.restart(at, rt, registry, ctx);
        }
    }

    fn restart(
        &mut self,
        at: Timestamp,
        rt: &mut NodeRuntime,
        registry: &Registry,
        ctx: &PodContext<'_>,
    ) {
        self.restart_count += 1;
        self.stage = Stage::Waiting;
        // The new instance runs the image as the registry describes it now.
        if let Ok(image) = &self.image
            && let Some(behaviour) = registry.lookup(image)
        {
            self.behaviour = behaviour.clone();
        }
        // A restart pulls again only when the policy says Always.
        if self.pull_policy() == "Always" {
            self.begin(at, rt, registry, ctx);
        } else {
            self.create(at, rt);
        }
    }

    /// The pod is being deleted: SIGTERM the process (SIGKILL at `kill_at`); nothing restarts.
    pub fn stop(
        &mut self,
        at: Timestamp,
        kill_at: Timestamp,
        rt: &mut NodeRuntime,
        ctx: &PodContext<'_>,
    ) {
        let first = !self.stopping;
        self.stopping = true;
        match self.stage {
            Stage::Running { process, .. } => {
                if first {
                    let message = format!("Stopping container {}", self.spec.name);
                    self.event(rt, ctx, at, false, "Killing", message);
                }
                rt.stop(process, at, kill_at, &self.behaviour);
                self.reprobe(process, at, rt);
            }
            Stage::Done => {}
            _ => self.stage = Stage::Done,
        }
    }

    /// The machine went down at `at`: the process is gone and the container starts over when
    /// the node comes back (its exit shows as `Unknown`, code 255, as after a reboot).
    pub fn machine_down(&mut self, at: Timestamp) {
        if let Stage::Running { started_at, .. } = self.stage {
            self.previous_exit = self.last_exit.take();
            self.last_exit = Some(Terminated {
                started_at: Some(started_at),
                finished_at: at,
                exit_code: 255,
                reason: "Unknown",
                message: None,
                container_id: self.container_id.clone(),
            });
        }
        self.ready = false;
        self.recheck_at = None;
        if !matches!(self.stage, Stage::Done | Stage::InvalidImage(_)) {
            self.stage = Stage::Waiting;
        }
    }

    /// Whether the container will never change again.
    pub fn is_finished(&self) -> bool {
        matches!(self.stage, Stage::Done)
    }

    /// Whether it ran to a successful end and will not run again (an init container that
    /// completed).
    pub fn completed(&self) -> bool {
        self.is_finished() && self.last_exit.as_ref().is_some_and(|e| e.exit_code == 0)
    }

    /// Whether any instance of it ever ran, or it was ended for good (its status is then
    /// terminated): what tells the kubelet a pod was initialized before.
    pub fn has_started(&self) -> bool {
        self.is_running() || self.is_finished() || self.last_exit.is_some()
    }

    /// Whether its process is running (including stopping).
    pub fn is_running(&self) -> bool {
        matches!(self.stage, Stage::Running { .. })
    }
}
