//! One pod on the node: admission, sandbox, its containers, and graceful termination.

use std::time::Duration;

use k8s_openapi::api::core::v1::{Pod, PodCondition, PodSpec};
use k8s_openapi::jiff::Timestamp;

use super::container::{ContainerMachine, PodContext};
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
    pub containers: Vec<ContainerMachine>,
    pub conditions: Vec<PodCondition>,
    pub stop: Option<Stop>,
    pub finished_at: Option<Timestamp>,
    pub deletion_reported: bool,
    /// Gone from the API while still running: it is stopped, nothing is reported.
    pub orphaned: bool,
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
        PodWorker {
            reference: PodRef::of(&pod),
            pod,
            source,
            admitted_at: None,
            sandbox_at: None,
            sandbox_ready: false,
            pod_ip: None,
            containers,
            conditions: Vec::new(),
            stop: None,
            finished_at: None,
            deletion_reported: false,
            orphaned: false,
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

    /// When something in this pod next happens by itself.
    pub fn next_event(&self, rt: &NodeRuntime) -> Option<Timestamp> {
        let sandbox = self
            .sandbox_at
            .filter(|_| !self.sandbox_ready && self.admitted_at.is_some());
        self.containers
            .iter()
            .map(|c| c.next_event(rt))
            .fold(sandbox, clock::earliest)
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
        let ctx = PodContext {
            pod: &self.reference,
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
            for container in &mut self.containers {
                container.begin(at, rt, registry, &ctx);
            }
        }
        for container in &mut self.containers {
            if container.next_event(rt).is_some_and(|t| t <= at) {
                container.step(at, rt, registry, &ctx);
            }
        }
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
        for container in &mut self.containers {
            container.stop(at, stop.kill_at, rt, &ctx);
        }
        self.check_finished(at);
        self.refresh_conditions(at);
    }

    fn check_finished(&mut self, at: Timestamp) {
        if self.stop.is_some()
            && self.finished_at.is_none()
            && self.containers.iter().all(ContainerMachine::is_finished)
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
        for container in &mut self.containers {
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
            for container in &mut self.containers {
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
        }
        self.refresh_conditions(at);
    }

    /// Updates the pod conditions to what holds at `at` (transition times only move when a
    /// status flips).
    pub fn refresh_conditions(&mut self, at: Timestamp) {
        let initialized = self.admitted_at.is_some();
        objects::set_condition(
            &mut self.conditions,
            condition::POD_READY_TO_START_CONTAINERS,
            self.sandbox_ready,
            None,
            None,
            at,
        );
        objects::set_condition(
            &mut self.conditions,
            condition::INITIALIZED,
            initialized,
            None,
            None,
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
