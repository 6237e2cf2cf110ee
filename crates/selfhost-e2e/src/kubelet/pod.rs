//! One pod on the node, as data: its init containers run one at a time to completion, then its
//! containers; a stop (deletion, manifest removed, pod gone from the API) sends SIGTERM and, at
//! the end of the grace period, SIGKILL.
//!
//! The machine never does I/O. The pod worker asks it for [`Action`]s at a time, performs them,
//! and tells it what happened (a process started, exited, a probe answered).

use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::jiff::Timestamp;

use super::clock::{after, earliest};
use super::config::{seconds, timing};
use super::container::{Adopted, ContainerMachine, InstanceId, StopSignal};
use super::probe::{ProbeKind, Verdict};

/// Names a container of the pod.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum ContainerRef {
    /// `spec.initContainers[i]`.
    Init(usize),
    /// `spec.containers[i]`.
    Regular(usize),
}

/// Something the pod worker must do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Action {
    /// Pull the container's image and start a process.
    Start(ContainerRef),
    /// Send a signal to an instance.
    Signal {
        container: ContainerRef,
        instance: InstanceId,
        pid: u32,
        signal: StopSignal,
    },
    /// Run a probe against an instance.
    Probe {
        container: ContainerRef,
        instance: InstanceId,
        kind: ProbeKind,
    },
}

/// A stop under way.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Stop {
    pub requested_at: Timestamp,
    pub kill_at: Timestamp,
}

/// The grace period a stop gets: what was asked, but never less than the kubelet's minimum.
pub(crate) fn effective_grace(asked: Duration) -> Duration {
    asked.max(timing::MINIMUM_GRACE)
}

/// The pod's own grace period (`terminationGracePeriodSeconds`, default 30 s).
pub(crate) fn spec_grace(pod: &Pod) -> Duration {
    seconds(
        pod.spec
            .as_ref()
            .and_then(|s| s.termination_grace_period_seconds)
            .unwrap_or(timing::DEFAULT_GRACE_SECONDS),
    )
}

/// One pod.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct PodMachine {
    pub pod: Pod,
    pub init_containers: Vec<ContainerMachine>,
    pub containers: Vec<ContainerMachine>,
    /// When the kubelet accepted the pod (`startTime`).
    pub start_time: Timestamp,
    pub stop: Option<Stop>,
    /// Its volumes are in place; no container starts before.
    pub volumes_ready: bool,
    next_instance: InstanceId,
}

impl PodMachine {
    pub(crate) fn new(pod: Pod, now: Timestamp) -> Self {
        let spec = pod.spec.clone().unwrap_or_default();
        PodMachine {
            init_containers: spec
                .init_containers
                .iter()
                .flatten()
                .map(|c| ContainerMachine::new(c, true))
                .collect(),
            containers: spec
                .containers
                .iter()
                .map(|c| ContainerMachine::new(c, false))
                .collect(),
            pod,
            start_time: now,
            stop: None,
            volumes_ready: false,
            next_instance: 1,
        }
    }

    /// The pod's restart policy (`Always` unless it says otherwise).
    pub(crate) fn restart_policy(&self) -> String {
        self.pod
            .spec
            .as_ref()
            .and_then(|s| s.restart_policy.clone())
            .unwrap_or_else(|| "Always".into())
    }

    /// A fresh instance id.
    pub(crate) fn new_instance_id(&mut self) -> InstanceId {
        let id = self.next_instance;
        self.next_instance += 1;
        id
    }

    pub(crate) fn container(&self, at: ContainerRef) -> Option<&ContainerMachine> {
        match at {
            ContainerRef::Init(i) => self.init_containers.get(i),
            ContainerRef::Regular(i) => self.containers.get(i),
        }
    }

    pub(crate) fn container_mut(&mut self, at: ContainerRef) -> Option<&mut ContainerMachine> {
        match at {
            ContainerRef::Init(i) => self.init_containers.get_mut(i),
            ContainerRef::Regular(i) => self.containers.get_mut(i),
        }
    }

    /// Every container with its reference, init containers first.
    pub(crate) fn all(&self) -> impl Iterator<Item = (ContainerRef, &ContainerMachine)> {
        let init = self
            .init_containers
            .iter()
            .enumerate()
            .map(|(i, c)| (ContainerRef::Init(i), c));
        let regular = self
            .containers
            .iter()
            .enumerate()
            .map(|(i, c)| (ContainerRef::Regular(i), c));
        init.chain(regular)
    }

    fn refs(&self) -> Vec<ContainerRef> {
        self.all().map(|(r, _)| r).collect()
    }

    /// Takes over containers recorded by an earlier run of the kubelet (each gets a fresh
    /// instance id). When a regular container ran, init containers without a record count as
    /// completed.
    pub(crate) fn adopt(&mut self, adopted: Vec<(String, bool, Adopted)>, now: Timestamp) {
        let policy = self.restart_policy();
        let mut earliest_regular: Option<Timestamp> = None;
        for (name, init, mut record) in adopted {
            record.id = self.new_instance_id();
            let started_at = record.started_at;
            let list = if init {
                &mut self.init_containers
            } else {
                &mut self.containers
            };
            if let Some(container) = list.iter_mut().find(|c| c.name() == name) {
                container.adopt(record, now, &policy);
                if !init {
                    earliest_regular = earliest(earliest_regular, Some(started_at));
                }
            }
        }
        if let Some(first) = earliest_regular {
            for container in self.init_containers.iter_mut().filter(|c| !c.ever_ran) {
                container.assume_completed(first);
            }
        }
    }

    /// Stops the pod at `now` with `grace` (at least the kubelet's minimum); an earlier stop
    /// keeps its start and the earlier deadline.
    pub(crate) fn request_stop(&mut self, now: Timestamp, grace: Duration) {
        let kill_at = after(now, effective_grace(grace));
        let stop = match self.stop {
            Some(earlier) => Stop {
                requested_at: earlier.requested_at,
                kill_at: earlier.kill_at.min(kill_at),
            },
            None => Stop {
                requested_at: now,
                kill_at,
            },
        };
        self.stop = Some(stop);
        for container in self.init_containers.iter_mut().chain(&mut self.containers) {
            container.stop(stop.kill_at);
        }
    }

    /// Whether a stop was asked and every process is gone.
    pub(crate) fn finished(&self) -> bool {
        self.stop.is_some() && self.all().all(|(_, c)| !c.is_running())
    }

    /// What to do at `now`. Each action is handed out once; the worker reports back.
    pub(crate) fn actions(&mut self, now: Timestamp) -> Vec<Action> {
        let mut actions = Vec::new();
        for at in self.refs() {
            let Some(container) = self.container_mut(at) else {
                continue;
            };
            for (instance, pid, signal) in container.signals_due(now) {
                actions.push(Action::Signal {
                    container: at,
                    instance,
                    pid,
                    signal,
                });
            }
        }
        if self.stop.is_none() && self.volumes_ready {
            match self.init_containers.iter().position(|c| !c.completed()) {
                Some(i) => {
                    let next = &mut self.init_containers[i];
                    // A failed one under `Never` is done without completing: the pod failed.
                    if next.due_to_start(now) {
                        next.begin_start(now);
                        actions.push(Action::Start(ContainerRef::Init(i)));
                    }
                }
                None => {
                    for (i, container) in self.containers.iter_mut().enumerate() {
                        if container.due_to_start(now) {
                            container.begin_start(now);
                            actions.push(Action::Start(ContainerRef::Regular(i)));
                        }
                    }
                }
            }
        }
        for at in self.refs() {
            let Some(container) = self.container_mut(at) else {
                continue;
            };
            for (instance, kind) in container.probes_due(now) {
                actions.push(Action::Probe {
                    container: at,
                    instance,
                    kind,
                });
            }
        }
        actions
    }

    /// Whether the container may start now: the pod runs, its volumes are there, and it is
    /// the first init container that has not completed, or a container after all of them.
    fn may_start(&self, at: ContainerRef) -> bool {
        let first_incomplete = self.init_containers.iter().position(|c| !c.completed());
        self.stop.is_none()
            && self.volumes_ready
            && match at {
                ContainerRef::Init(i) => first_incomplete == Some(i),
                ContainerRef::Regular(_) => first_incomplete.is_none(),
            }
    }

    /// When something next happens by itself.
    pub(crate) fn next_deadline(&self, now: Timestamp) -> Option<Timestamp> {
        self.all()
            .map(|(at, c)| c.next_deadline(now, self.may_start(at)))
            .fold(None, earliest)
    }

    /// An instance exited with `exit_code` at `now`.
    pub(crate) fn exited(
        &mut self,
        at: ContainerRef,
        id: InstanceId,
        exit_code: i32,
        now: Timestamp,
    ) -> bool {
        let policy = self.restart_policy();
        let stopping = self.stop.is_some();
        self.container_mut(at)
            .is_some_and(|c| c.exited(id, exit_code, now, &policy, stopping))
    }

    /// A probe answered (`None`: it could not run). A failed liveness or startup probe kills
    /// the container with the pod's grace period.
    pub(crate) fn probe_result(
        &mut self,
        at: ContainerRef,
        id: InstanceId,
        kind: ProbeKind,
        success: Option<bool>,
        now: Timestamp,
    ) -> Verdict {
        let kill_at = after(now, effective_grace(spec_grace(&self.pod)));
        self.container_mut(at).map_or(Verdict::Unchanged, |c| {
            c.probe_result(id, kind, success, kill_at)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kubelet::clock::t;
    use crate::kubelet::container::Run;
    use crate::kubelet::images::PullFailure;
    use k8s_openapi::api::core::v1::{Container, PodSpec};

    pub(crate) fn pod(init: &[&str], containers: &[&str], policy: &str) -> Pod {
        let container = |name: &&str| Container {
            name: (*name).into(),
            image: Some(format!("k8s.gcr.io/{name}:v1.20.2")),
            ..Container::default()
        };
        Pod {
            spec: Some(PodSpec {
                init_containers: Some(init.iter().map(container).collect()),
                containers: containers.iter().map(container).collect(),
                restart_policy: Some(policy.into()),
                termination_grace_period_seconds: Some(5),
                ..PodSpec::default()
            }),
            ..Pod::default()
        }
    }

    fn start_all(m: &mut PodMachine, at: i64) -> Vec<ContainerRef> {
        let mut started = Vec::new();
        for action in m.actions(t(at)) {
            if let Action::Start(c) = action {
                let id = m.new_instance_id();
                let pid = 1000 + u32::try_from(id).unwrap();
                m.container_mut(c).unwrap().started_instance(
                    id,
                    pid,
                    format!("process://n1/{pid}"),
                    "img".into(),
                    t(at),
                );
                started.push(c);
            }
        }
        started
    }

    fn instance(m: &PodMachine, c: ContainerRef) -> InstanceId {
        m.container(c).unwrap().instance().unwrap().id
    }

    #[test]
    fn init_containers_run_one_at_a_time_before_the_containers() {
        let mut m = PodMachine::new(pod(&["a", "b"], &["x", "y"], "Always"), t(0));
        // Nothing starts before the volumes are in place.
        assert_eq!(m.actions(t(0)), []);
        m.volumes_ready = true;
        assert_eq!(start_all(&mut m, 0), [ContainerRef::Init(0)]);
        assert_eq!(start_all(&mut m, 1), []);
        let a = instance(&m, ContainerRef::Init(0));
        // A failed init container restarts; the next one waits.
        m.exited(ContainerRef::Init(0), a, 1, t(1));
        assert_eq!(start_all(&mut m, 1), [ContainerRef::Init(0)]);
        let a = instance(&m, ContainerRef::Init(0));
        m.exited(ContainerRef::Init(0), a, 0, t(2));
        assert_eq!(start_all(&mut m, 2), [ContainerRef::Init(1)]);
        let b = instance(&m, ContainerRef::Init(1));
        m.exited(ContainerRef::Init(1), b, 0, t(3));
        assert_eq!(
            start_all(&mut m, 3),
            [ContainerRef::Regular(0), ContainerRef::Regular(1)]
        );
        assert!(m.init_containers.iter().all(ContainerMachine::completed));
    }

    #[test]
    fn a_failed_init_container_under_never_ends_the_pod() {
        let mut m = PodMachine::new(pod(&["a"], &["x"], "Never"), t(0));
        m.volumes_ready = true;
        start_all(&mut m, 0);
        let a = instance(&m, ContainerRef::Init(0));
        m.exited(ContainerRef::Init(0), a, 1, t(1));
        assert_eq!(start_all(&mut m, 100), []);
        assert_eq!(m.next_deadline(t(1)), None);
    }

    #[test]
    fn a_stop_signals_every_process_and_finishes_when_they_are_gone() {
        let mut m = PodMachine::new(pod(&[], &["x", "y"], "Always"), t(0));
        m.volumes_ready = true;
        start_all(&mut m, 0);
        // A grace period below the minimum is raised to it.
        m.request_stop(t(10), Duration::ZERO);
        let signals = |m: &mut PodMachine, at: i64| -> Vec<(ContainerRef, StopSignal)> {
            m.actions(t(at))
                .into_iter()
                .filter_map(|a| match a {
                    Action::Signal {
                        container, signal, ..
                    } => Some((container, signal)),
                    _ => None,
                })
                .collect()
        };
        assert_eq!(
            signals(&mut m, 10),
            [
                (ContainerRef::Regular(0), StopSignal::Term),
                (ContainerRef::Regular(1), StopSignal::Term)
            ]
        );
        let x = instance(&m, ContainerRef::Regular(0));
        m.exited(ContainerRef::Regular(0), x, 0, t(11));
        assert!(!m.finished());
        assert_eq!(m.next_deadline(t(11)), Some(t(12)));
        assert_eq!(
            signals(&mut m, 12),
            [(ContainerRef::Regular(1), StopSignal::Kill)]
        );
        let y = instance(&m, ContainerRef::Regular(1));
        m.exited(ContainerRef::Regular(1), y, 137, t(12));
        assert!(m.finished());
        assert!(m.containers.iter().all(ContainerMachine::is_done));
        // Nothing starts again.
        assert_eq!(m.actions(t(100)), []);
    }

    #[test]
    fn a_stop_before_anything_ran_finishes_at_once() {
        let mut m = PodMachine::new(pod(&["a"], &["x"], "Always"), t(0));
        m.containers[0].pull_failed(PullFailure::NotFound("no".into()), t(0));
        m.request_stop(t(1), Duration::from_secs(30));
        assert!(m.finished());
        assert_eq!(m.containers[0].run, Run::Done);
    }

    #[test]
    fn adopted_containers_skip_the_init_containers() {
        let mut m = PodMachine::new(pod(&["a"], &["x"], "Always"), t(0));
        let record = Adopted {
            id: 5,
            pid: 77,
            container_id: "process://n1/77".into(),
            image_id: None,
            started_at: t(-60),
            restart_count: 2,
            exit: None,
            alive: true,
        };
        m.adopt(vec![("x".into(), false, record)], t(0));
        m.volumes_ready = true;
        assert!(m.init_containers[0].completed());
        assert_eq!(start_all(&mut m, 0), []);
        assert_eq!(m.containers[0].instance().map(|i| i.pid), Some(77));
        let adopted = m.containers[0].instance().unwrap().id;
        assert!(m.new_instance_id() > adopted);
    }
}
