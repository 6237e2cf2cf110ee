//! One pod on the node: admission, sandbox, its init containers one at a time, then its
//! containers, and graceful termination.
//!
//! As the kubelet does: once the sandbox is ready, `spec.initContainers` run in order, each
//! pulled, started and run to a successful exit before the next begins; a failing one restarts
//! under the crash-loop back-off (unless the restart policy is `Never`: the pod fails). Only
//! when all have completed do the regular containers begin. A recreated sandbox (the machine
//! came back) runs them all again. Sidecars (init containers with `restartPolicy: Always`) are
//! not modelled: they run as ordinary init containers.

use std::time::Duration;

use k8s_openapi::api::core::v1::{Pod, PodCondition, PodSpec};
use k8s_openapi::jiff::Timestamp;

use super::container::{ContainerMachine, PodContext, Stage};
use super::images::Registry;
use super::report::PodRef;
use super::runtime::NodeRuntime;
use crate::controllers::objects::condition;
use crate::controllers::{clock, objects};

/// Where the kubelet learned of the pod.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum PodSource {
    /// From the API (bound to this node).
    Api,
    /// From a manifest file; its status goes to the mirror pod.
    StaticFile {
        /// The manifest's path.
        file: String,
    },
}

/// Why a pod from the API waits to be listed again before the kubelet acts on it: a kubelet
/// that starts knows its pods from the API only once it has listed them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Relist {
    /// The machine rebooted: its processes are gone and start again once the pod is listed.
    AfterReboot,
    /// Only the kubelet restarted: its containers kept running, untouched until the pod is
    /// listed (then adopted) or found gone (then stopped).
    AfterRestart,
}

/// A graceful stop in progress.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Stop {
    pub requested_at: Timestamp,
    pub kill_at: Timestamp,
}

#[derive(Debug, Clone)]
pub(crate) struct PodWorker {
    pub pod: Pod,
    pub reference: PodRef,
    pub source: PodSource,
    pub admitted_at: Option<Timestamp>,
    pub sandbox_at: Option<Timestamp>,
    pub sandbox_ready: bool,
    pub pod_ip: Option<String>,
    /// `spec.initContainers`, in order.
    pub init_containers: Vec<ContainerMachine>,
    pub containers: Vec<ContainerMachine>,
    pub conditions: Vec<PodCondition>,
    pub stop: Option<Stop>,
    pub finished_at: Option<Timestamp>,
    pub deletion_reported: bool,
    /// Gone from the API while still running: it is stopped, nothing is reported.
    pub orphaned: bool,
    /// Not yet listed again since the kubelet started: nothing is done or reported for it.
    pub awaiting_relist: Option<Relist>,
}

/// The grace period of a pod: the deletion's, else the spec's, else 30 s.
pub(crate) fn grace_period(pod: &Pod) -> Duration {
    let seconds = pod
        .metadata
        .deletion_grace_period_seconds
        .or_else(|| {
            pod.spec
                .as_ref()
                .and_then(|s| s.termination_grace_period_seconds)
        })
        .unwrap_or(30);
    clock::seconds(seconds)
}

impl PodWorker {
    pub fn new(pod: Pod, source: PodSource) -> Self {
        let containers = pod
            .spec
            .as_ref()
            .map(|s| s.containers.iter().map(ContainerMachine::new).collect())
            .unwrap_or_default();
        let init_containers = pod
            .spec
            .as_ref()
            .and_then(|s| s.init_containers.as_ref())
            .map(|c| c.iter().map(ContainerMachine::new_init).collect())
            .unwrap_or_default();
        PodWorker {
            reference: PodRef::of(&pod),
            pod,
            source,
            admitted_at: None,
            sandbox_at: None,
            sandbox_ready: false,
            pod_ip: None,
            init_containers,
            containers,
            conditions: Vec::new(),
            stop: None,
            finished_at: None,
            deletion_reported: false,
            orphaned: false,
            awaiting_relist: None,
        }
    }

    pub fn spec(&self) -> PodSpec {
        self.pod.spec.clone().unwrap_or_default()
    }

    pub fn is_host_network(&self) -> bool {
        self.pod.spec.as_ref().and_then(|s| s.host_network) == Some(true)
    }

    /// Accepts the pod at `at`: the sandbox is being set up.
    pub fn admit(&mut self, at: Timestamp, rt: &NodeRuntime) {
        self.admitted_at = Some(at);
        self.sandbox_at = Some(clock::after(at, rt.timings.sandbox));
        let scheduled = objects::pod_condition(&self.pod, condition::POD_SCHEDULED).cloned();
        self.conditions = scheduled
            .into_iter()
            .filter(|c| c.status == "True")
            .collect();
        objects::set_condition(
            &mut self.conditions,
            condition::POD_SCHEDULED,
            true,
            None,
            None,
            at,
        );
        self.refresh_conditions(at);
    }

    /// Every container, init containers first.
    pub fn all_containers(&self) -> impl Iterator<Item = &ContainerMachine> {
        self.init_containers.iter().chain(&self.containers)
    }

    /// When something in this pod next happens by itself.
    pub fn next_event(&self, rt: &NodeRuntime) -> Option<Timestamp> {
        let sandbox = self
            .sandbox_at
            .filter(|_| !self.sandbox_ready && self.admitted_at.is_some());
        self.all_containers()
            .map(|c| c.next_event(rt))
            .fold(sandbox, clock::earliest)
    }

    /// Begins what may begin now: the first init container that has not completed, once the
    /// one before it has; the regular containers once all have.
    fn begin_due(
        &mut self,
        at: Timestamp,
        rt: &mut NodeRuntime,
        registry: &Registry,
        ctx: &PodContext<'_>,
    ) {
        if !self.sandbox_ready || self.stop.is_some() {
            return;
        }
        let waiting = |c: &ContainerMachine| matches!(c.stage, Stage::Waiting);
        if let Some(next) = self.init_containers.iter_mut().find(|c| !c.completed()) {
            // A failed one under `Never` is finished without completing: nothing follows it.
            if waiting(next) {
                next.begin(at, rt, registry, ctx);
            }
            return;
        }
        for container in self.containers.iter_mut().filter(|c| waiting(c)) {
            container.begin(at, rt, registry, ctx);
        }
    }

    /// Applies everything due at `at`.
    pub fn step(
        &mut self,
        at: Timestamp,
        rt: &mut NodeRuntime,
        registry: &Registry,
        pod_ip: &mut dyn FnMut() -> String,
    ) {
        let spec = self.spec();
        let reference = self.reference.clone();
        let ctx = PodContext {
            pod: &reference,
            spec: &spec,
        };
        if !self.sandbox_ready
            && self.sandbox_at.is_some_and(|t| t <= at)
            && self.admitted_at.is_some()
        {
            self.sandbox_ready = true;
            if self.pod_ip.is_none() {
                self.pod_ip = Some(pod_ip());
            }
        }
        self.begin_due(at, rt, registry, &ctx);
        for container in self
            .init_containers
            .iter_mut()
            .chain(self.containers.iter_mut())
        {
            if container.next_event(rt).is_some_and(|t| t <= at) {
                container.step(at, rt, registry, &ctx);
            }
        }
        // An init container that completed just now lets the next one (or the pod's
        // containers) begin at the same instant.
        self.begin_due(at, rt, registry, &ctx);
        self.check_finished(at);
        self.refresh_conditions(at);
    }

    /// Starts (or shortens) a graceful stop at `at`.
    pub fn request_stop(&mut self, at: Timestamp, grace: Duration, rt: &mut NodeRuntime) {
        let kill_at = clock::after(at, rt.timings.spec_seconds(grace));
        let stop = match self.stop {
            Some(earlier) => Stop {
                requested_at: earlier.requested_at,
                kill_at: earlier.kill_at.min(kill_at),
            },
            None => Stop {
                requested_at: at,
                kill_at,
            },
        };
        self.stop = Some(stop);
        let spec = self.spec();
        let ctx = PodContext {
            pod: &self.reference,
            spec: &spec,
        };
        for container in self
            .init_containers
            .iter_mut()
            .chain(self.containers.iter_mut())
        {
            container.stop(at, stop.kill_at, rt, &ctx);
        }
        self.check_finished(at);
        self.refresh_conditions(at);
    }

    fn check_finished(&mut self, at: Timestamp) {
        if self.stop.is_some()
            && self.finished_at.is_none()
            && self.all_containers().all(ContainerMachine::is_finished)
        {
            self.finished_at = Some(at);
            // The sandbox goes with the last container.
            self.sandbox_ready = false;
        }
    }

    /// Whether every container stopped after a stop request.
    pub fn is_finished(&self) -> bool {
        self.finished_at.is_some()
    }

    /// The machine went down: every process is gone, the sandbox too.
    pub fn machine_down(&mut self, at: Timestamp) {
        for container in self
            .init_containers
            .iter_mut()
            .chain(self.containers.iter_mut())
        {
            container.machine_down(at);
        }
        self.sandbox_ready = false;
        self.sandbox_at = None;
        self.refresh_conditions(at);
    }

    /// The machine is back at `at`: the sandbox is recreated and the containers restart.
    pub fn machine_up(&mut self, at: Timestamp, rt: &mut NodeRuntime) {
        if self.admitted_at.is_none() {
            return;
        }
        if self.stop.is_some() {
            let spec = self.spec();
            let ctx = PodContext {
                pod: &self.reference,
                spec: &spec,
            };
            for container in self
                .init_containers
                .iter_mut()
                .chain(self.containers.iter_mut())
            {
                container.stop(at, at, rt, &ctx);
            }
            self.check_finished(at);
        } else {
            self.sandbox_at = Some(clock::after(at, rt.timings.sandbox));
            for container in &mut self.containers {
                if container.last_exit.is_some() && !container.is_finished() {
                    container.restart_count += 1;
                }
            }
            // A new sandbox runs every init container again (one that failed for good under
            // `Never` stays failed: the pod is over).
            let failed_for_good = self
                .init_containers
                .iter()
                .any(|c| c.is_finished() && !c.completed());
            if !failed_for_good {
                for container in &mut self.init_containers {
                    if container.last_exit.is_some() {
                        container.restart_count += 1;
                    }
                    if !matches!(container.stage, Stage::InvalidImage(_)) {
                        container.stage = Stage::Waiting;
                    }
                }
            }
        }
        self.refresh_conditions(at);
    }

    /// Updates the pod conditions to what holds at `at` (transition times only move when a
    /// status flips).
    pub fn refresh_conditions(&mut self, at: Timestamp) {
        objects::set_condition(
            &mut self.conditions,
            condition::POD_READY_TO_START_CONTAINERS,
            self.sandbox_ready,
            None,
            None,
            at,
        );
        // As the kubelet judges it: initialized once every init container has exited 0, or
        // for good once any regular container has run.
        let incomplete: Vec<&str> = self
            .init_containers
            .iter()
            .filter(|c| !c.completed())
            .map(|c| c.spec.name.as_str())
            .collect();
        let initialized =
            incomplete.is_empty() || self.containers.iter().any(ContainerMachine::has_started);
        let message = (!initialized).then(|| {
            format!(
                "containers with incomplete status: [{}]",
                incomplete.join(" ")
            )
        });
        objects::set_condition(
            &mut self.conditions,
            condition::INITIALIZED,
            initialized,
            (!initialized).then_some("ContainersNotInitialized"),
            message.as_deref(),
            at,
        );
        let unready: Vec<&str> = self
            .containers
            .iter()
            .filter(|c| !c.ready)
            .map(|c| c.spec.name.as_str())
            .collect();
        let terminal = self.is_finished();
        let (reason, message) = match (terminal, unready.is_empty()) {
            (true, _) => (Some("PodCompleted"), None),
            (false, true) => (None, None),
            (false, false) => (
                Some("ContainersNotReady"),
                Some(format!(
                    "containers with unready status: [{}]",
                    unready.join(" ")
                )),
            ),
        };
        let all_ready = unready.is_empty() && !terminal;
        objects::set_condition(
            &mut self.conditions,
            condition::CONTAINERS_READY,
            all_ready,
            reason,
            message.as_deref(),
            at,
        );
        let gates_pass = self
            .pod
            .spec
            .as_ref()
            .and_then(|s| s.readiness_gates.as_deref())
            .unwrap_or_default()
            .iter()
            .all(|gate| {
                objects::pod_condition(&self.pod, &gate.condition_type)
                    .is_some_and(|c| c.status == "True")
            });
        let (reason, message) = match (all_ready, gates_pass) {
            (true, false) => (
                Some("ReadinessGatesNotReady"),
                Some("corresponding condition of pod readiness gate is not true".to_string()),
            ),
            _ => (reason, message),
        };
        objects::set_condition(
            &mut self.conditions,
            condition::READY,
            all_ready && gates_pass,
            reason,
            message.as_deref(),
            at,
        );
    }
}
