//! The node's container runtime: processes, host ports, pulled images, and the kubelet's
//! back-off memory. Containers and pods drive it; it knows nothing about the API.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use k8s_openapi::api::core::v1::{Container, PodSpec};
use k8s_openapi::jiff::Timestamp;

use super::config::Timings;
use super::duration_text::parse_go_duration;
use super::front_command::{DEFAULT_DRAIN, FrontCommand};
use super::images::{ImageBehaviour, ImageRef};
use super::port_table::PortTable;
use super::ports;
use super::probe::{BindContext, ProbeContext, ProbeResult, ReadinessModel};
use super::process::{Exit, Process, ProcessId, ProcessState, one_shot_exit};
use super::report::KubeletEvent;
use super::stable_id::stable_uuid;
use crate::controllers::backoff::Backoff;
use crate::controllers::clock;

/// Exit code of a process killed by SIGKILL.
pub const SIGKILL_EXIT_CODE: i32 = 137;

pub(crate) struct NodeRuntime {
    pub node_name: String,
    /// The machine's hostname: what its processes name themselves after.
    pub hostname: String,
    pub timings: Timings,
    pub processes: BTreeMap<ProcessId, Process>,
    pub ports: PortTable,
    pub images: BTreeSet<ImageRef>,
    pub crash_backoff: Backoff<String>,
    pub pull_backoff: Backoff<String>,
    pub readiness: Arc<dyn ReadinessModel>,
    pub events: Vec<KubeletEvent>,
    next_pid: u64,
}

impl NodeRuntime {
    pub fn new(
        node_name: &str,
        hostname: &str,
        timings: Timings,
        readiness: Arc<dyn ReadinessModel>,
    ) -> Self {
        NodeRuntime {
            node_name: node_name.to_string(),
            hostname: hostname.to_string(),
            timings,
            processes: BTreeMap::new(),
            ports: PortTable::default(),
            images: BTreeSet::new(),
            crash_backoff: Backoff::new(timings.crash_loop),
            pull_backoff: Backoff::new(timings.image_pull),
            readiness,
            events: Vec::new(),
            next_pid: 1,
        }
    }

    /// Whether a container's process runs to completion by itself, and with which code: a
    /// one-shot command line, unless its image plans the process's exit itself.
    pub fn one_shot(container: &Container, behaviour: &ImageBehaviour) -> Option<i32> {
        behaviour
            .crash_after
            .is_none()
            .then(|| one_shot_exit(container))
            .flatten()
    }

    /// Starts a process for a container at `at`; it listens at once unless its image delays it.
    /// A one-shot invocation binds nothing, is never ready, and exits after
    /// [`Timings::one_shot`].
    pub fn spawn(
        &mut self,
        pod_uid: &str,
        spec: &PodSpec,
        container: &Container,
        behaviour: &ImageBehaviour,
        at: Timestamp,
    ) -> ProcessId {
        let id = ProcessId(self.next_pid);
        self.next_pid += 1;
        let one_shot = Self::one_shot(container, behaviour);
        let claim = match one_shot {
            Some(_) => ports::PortClaim::default(),
            None => ports::port_claim(spec, container),
        };
        let ready_delay = behaviour.ready_delay.unwrap_or(self.timings.ready);
        let shutdown_delay = ports::flag_value(container, "shutdown-delay-duration")
            .and_then(|v| parse_go_duration(&v))
            .map(|d| self.timings.spec_seconds(d))
            .unwrap_or_default();
        // A front's drain as its flags give it (the caller renders them on the cluster's
        // clock); its own default runs on the clock of pod-spec durations.
        let drain = FrontCommand::of(container)
            .filter(|_| one_shot.is_none())
            .map(|f| {
                f.drain
                    .unwrap_or_else(|| self.timings.spec_seconds(DEFAULT_DRAIN))
            });
        let mut process = Process {
            id,
            pod_uid: pod_uid.to_string(),
            container: container.name.clone(),
            binary: ports::binary_name(container),
            identity: format!(
                "{}_{}",
                self.hostname,
                stable_uuid(&format!("{}/{pod_uid}/{}", self.node_name, id.0))
            ),
            started_at: at,
            claim,
            listening_since: None,
            accepts_at: behaviour.accept_delay.map(|d| clock::after(at, d)),
            ready_at: (!behaviour.never_ready && one_shot.is_none())
                .then(|| clock::after(at, ready_delay)),
            shutdown_delay,
            listener_closes_at: None,
            drain,
            planned_exit: None,
            state: ProcessState::Running,
        };
        if let Some(after) = behaviour.crash_after {
            process.plan_exit(Exit {
                at: clock::after(at, after),
                code: behaviour.crash_exit_code.unwrap_or(1),
                message: None,
            });
        }
        if let Some(code) = one_shot {
            process.plan_exit(Exit {
                at: clock::after(at, self.timings.one_shot),
                code,
                message: None,
            });
        }
        self.processes.insert(id, process);
        if behaviour.listen_delay.is_zero() {
            self.listen(id, at);
        }
        id
    }

    /// When the process opens its ports, if it has not yet.
    pub fn listen_due(&self, id: ProcessId, behaviour: &ImageBehaviour) -> Option<Timestamp> {
        let process = self.processes.get(&id)?;
        (process.listening_since.is_none()
            && process.listener_closes_at.is_none()
            && !process.claim.ports.is_empty()
            && process.is_alive())
        .then(|| clock::after(process.started_at, behaviour.listen_delay))
    }

    /// When a stopping process closes its listening sockets, while it still holds them.
    pub fn listener_close_due(&self, id: ProcessId) -> Option<Timestamp> {
        let process = self.processes.get(&id)?;
        let at = process.listener_closes_at?;
        (process.is_alive() && self.holds_ports(id)).then_some(at)
    }

    /// Whether the process holds any port now.
    fn holds_ports(&self, id: ProcessId) -> bool {
        self.processes.get(&id).is_some_and(|p| {
            p.claim
                .ports
                .iter()
                .any(|port| self.ports.holders(*port).contains(&id))
        })
    }

    /// The process closes its listening sockets at `at` and goes on running.
    pub fn close_listener(&mut self, id: ProcessId, at: Timestamp) {
        self.ports.release(id);
        if let Some(process) = self.processes.get_mut(&id) {
            process.listener_closes_at = Some(at);
        }
    }

    /// Opens the process's ports; a refused bind makes it exit at once with the bind error.
    pub fn listen(&mut self, id: ProcessId, at: Timestamp) {
        let Some(process) = self.processes.get_mut(&id) else {
            return;
        };
        if process.claim.ports.is_empty() || process.listening_since.is_some() {
            return;
        }
        match self.ports.bind(id, &process.claim) {
            Ok(()) => {
                process.listening_since = Some(at);
                let verdict = self.processes.get(&id).and_then(|process| {
                    self.readiness.after_bind(&BindContext {
                        now: at,
                        process,
                        processes: &self.processes,
                        ports: &self.ports,
                    })
                });
                if let (Some(exit), Some(process)) = (verdict, self.processes.get_mut(&id)) {
                    process.plan_exit(exit);
                }
            }
            Err(refused) => process.plan_exit(Exit {
                at,
                code: 1,
                message: Some(format!(
                    "failed to create listener: failed to listen on {}: {refused}",
                    ports::listen_text(refused.address, refused.port.port)
                )),
            }),
        }
    }

    /// Sends SIGTERM at `at`; the process exits after its stop delay (a front: after its
    /// drain, or earlier when told it has drained), or is killed at `kill_at`.
    pub fn stop(
        &mut self,
        id: ProcessId,
        at: Timestamp,
        kill_at: Timestamp,
        behaviour: &ImageBehaviour,
    ) {
        let stop_delay = behaviour.stop_delay.unwrap_or(self.timings.stop);
        let Some(process) = self.processes.get_mut(&id) else {
            return;
        };
        let kill_at = match &process.state {
            ProcessState::Exited(_) => return,
            ProcessState::Stopping {
                kill_at: earlier, ..
            } => kill_at.min(*earlier),
            ProcessState::Running => kill_at,
        };
        let signalled_at = match &process.state {
            ProcessState::Stopping { signalled_at, .. } => *signalled_at,
            _ => at,
        };
        process.state = ProcessState::Stopping {
            signalled_at,
            kill_at,
        };
        // A front stops accepting at once and drains; it never ignores SIGTERM.
        let closes_listener = behaviour.closes_listener_on_sigterm || process.drain.is_some();
        if closes_listener && process.listener_closes_at.is_none() {
            let close_at = clock::after(signalled_at, process.shutdown_delay).min(kill_at);
            process.listener_closes_at = Some(close_at.max(at));
        }
        let graceful = clock::after(signalled_at, process.drain.unwrap_or(stop_delay));
        let ignores = behaviour.ignores_sigterm && process.drain.is_none();
        let exit = if ignores || graceful >= kill_at {
            Exit {
                at: kill_at.max(at),
                code: SIGKILL_EXIT_CODE,
                message: None,
            }
        } else {
            Exit {
                at: graceful.max(at),
                code: 0,
                message: None,
            }
        };
        // A shorter grace period replaces a later planned stop; a crash due earlier stays.
        if let Some(planned) = &process.planned_exit
            && planned.at > exit.at
        {
            process.planned_exit = None;
        }
        process.plan_exit(exit);
    }

    /// The process's exit is due at or before `at`: it exits and its ports are free.
    pub fn reap(&mut self, id: ProcessId) -> Option<Exit> {
        let process = self.processes.get_mut(&id)?;
        let exit = process.planned_exit.take()?;
        process.state = ProcessState::Exited(exit.clone());
        self.ports.release(id);
        Some(exit)
    }

    /// Every live process dies at once (the machine went down).
    pub fn kill_all(&mut self, at: Timestamp) {
        let ids: Vec<ProcessId> = self.processes.keys().copied().collect();
        for id in ids {
            if let Some(process) = self.processes.get_mut(&id)
                && process.is_alive()
            {
                process.planned_exit = None;
                process.state = ProcessState::Exited(Exit {
                    at,
                    code: 255,
                    message: None,
                });
                self.ports.release(id);
            }
        }
    }

    /// Forgets exited processes nobody refers to any more.
    pub fn forget(&mut self, id: ProcessId) {
        if self.processes.get(&id).is_some_and(|p| !p.is_alive()) {
            self.processes.remove(&id);
        }
    }

    /// Asks the readiness model about a container's process.
    pub fn probe(
        &self,
        id: ProcessId,
        container: &Container,
        behaviour: &ImageBehaviour,
        now: Timestamp,
    ) -> ProbeResult {
        let Some(process) = self.processes.get(&id) else {
            return ProbeResult {
                ready: false,
                recheck_at: None,
            };
        };
        self.readiness.probe(&ProbeContext {
            now,
            process,
            container,
            behaviour,
            timings: &self.timings,
            processes: &self.processes,
            ports: &self.ports,
        })
    }
}
