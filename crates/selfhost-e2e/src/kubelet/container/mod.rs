//! One container's life, as data: waiting, image pull failures with their back-off, a running
//! instance (with its probes and, when it is being stopped, its SIGTERM and SIGKILL), restarts
//! under the crash-loop back-off, and the end.
//!
//! Restart rules are the kubelet's: `Never` never restarts; `OnFailure` restarts after a
//! non-zero exit; `Always` restarts after any exit; an init container that exited 0 is done
//! for good; a container killed for a failed liveness or startup probe restarts unless the
//! policy is `Never`; nothing restarts in a pod being stopped. The first restart is immediate;
//! later ones wait out the back-off, counted from the exit.

use k8s_openapi::api::core::v1::Container;
use k8s_openapi::jiff::Timestamp;

use super::backoff::{Backoff, BackoffPolicy};
use super::clock::{after, earliest};
use super::config::timing;
use super::images::PullFailure;
use super::probe::{ProbeKind, Probes, Verdict};

/// Identifies one instance (one process) of a container within the kubelet's run.
pub(crate) type InstanceId = u64;

/// The exit code and reason of an instance whose end nobody saw (its process vanished while
/// the kubelet was not running), as a runtime reports it after a restart.
pub(crate) const UNKNOWN_EXIT_CODE: i32 = 255;

/// An instance that has ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Exit {
    pub exit_code: i32,
    pub reason: String,
    pub message: Option<String>,
    pub started_at: Option<Timestamp>,
    pub finished_at: Timestamp,
    pub container_id: Option<String>,
}

impl Exit {
    /// An exit with the runtime's reason for the code: `Completed` for 0, else `Error`.
    pub(crate) fn with_code(
        exit_code: i32,
        started_at: Option<Timestamp>,
        finished_at: Timestamp,
        container_id: Option<String>,
    ) -> Self {
        Exit {
            exit_code,
            reason: if exit_code == 0 { "Completed" } else { "Error" }.into(),
            message: None,
            started_at,
            finished_at,
            container_id,
        }
    }
}

/// A stop in progress for one instance.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Termination {
    pub kill_at: Timestamp,
    pub term_sent: bool,
    pub kill_sent: bool,
    /// Killed to be restarted (a failed liveness or startup probe).
    pub restart: bool,
}

/// A process of the container.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Instance {
    pub id: InstanceId,
    pub pid: u32,
    pub container_id: String,
    pub started_at: Timestamp,
    pub probes: Probes,
    pub termination: Option<Termination>,
}

/// Where the container is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Run {
    /// Not started yet, or about to restart now.
    Waiting,
    /// Its image could not be pulled at `failed_at`; tried again at `retry_at`.
    PullFailed {
        failure: PullFailure,
        failed_at: Timestamp,
        retry_at: Timestamp,
    },
    /// Its process runs.
    Running(Instance),
    /// Exited; restarts at `until` (`CrashLoopBackOff`).
    BackOff { until: Timestamp },
    /// Will not run again.
    Done,
}

/// A signal the kubelet sends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum StopSignal {
    /// SIGTERM to the container's main process.
    Term,
    /// SIGKILL to its whole process group.
    Kill,
}

/// One container of a pod.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct ContainerMachine {
    pub spec: Container,
    pub init: bool,
    pub run: Run,
    /// The restart count of the current (or latest) instance.
    pub restart_count: i32,
    /// Whether any instance ever ran (the next one then counts as a restart).
    pub ever_ran: bool,
    pub last_exit: Option<Exit>,
    pub previous_exit: Option<Exit>,
    pub image_id: Option<String>,
    crash_backoff: Backoff,
    pull_backoff: Backoff,
}

impl ContainerMachine {
    pub(crate) fn new(spec: &Container, init: bool) -> Self {
        ContainerMachine {
            spec: spec.clone(),
            init,
            run: Run::Waiting,
            restart_count: 0,
            ever_ran: false,
            last_exit: None,
            previous_exit: None,
            image_id: None,
            crash_backoff: Backoff::new(BackoffPolicy::CRASH_LOOP),
            pull_backoff: Backoff::new(BackoffPolicy::IMAGE_PULL),
        }
    }

    pub(crate) fn name(&self) -> &str {
        &self.spec.name
    }

    pub(crate) fn image(&self) -> &str {
        self.spec.image.as_deref().unwrap_or_default()
    }

    /// `imagePullPolicy: Never`.
    pub(crate) fn never_pull(&self) -> bool {
        self.spec.image_pull_policy.as_deref() == Some("Never")
    }

    /// The running instance.
    pub(crate) fn instance(&self) -> Option<&Instance> {
        match &self.run {
            Run::Running(instance) => Some(instance),
            _ => None,
        }
    }

    fn instance_mut(&mut self, id: InstanceId) -> Option<&mut Instance> {
        match &mut self.run {
            Run::Running(instance) if instance.id == id => Some(instance),
            _ => None,
        }
    }

    pub(crate) fn is_running(&self) -> bool {
        matches!(self.run, Run::Running(_))
    }

    pub(crate) fn is_done(&self) -> bool {
        matches!(self.run, Run::Done)
    }

    /// Ran to a successful end and will not run again (an init container that completed).
    pub(crate) fn completed(&self) -> bool {
        self.is_done() && self.last_exit.as_ref().is_some_and(|e| e.exit_code == 0)
    }

    /// The container ID of the current or latest instance.
    pub(crate) fn container_id(&self) -> Option<String> {
        match &self.run {
            Run::Running(instance) => Some(instance.container_id.clone()),
            _ => self.last_exit.as_ref().and_then(|e| e.container_id.clone()),
        }
    }

    /// Whether the container counts as started (running, startup probe passed).
    pub(crate) fn started(&self) -> bool {
        self.instance().is_some_and(|i| i.probes.started())
    }

    /// Whether it is ready: an init container once it completed, another while it runs and
    /// passes its probes.
    pub(crate) fn ready(&self) -> bool {
        if self.init {
            self.completed()
        } else {
            self.instance().is_some_and(|i| i.probes.ready())
        }
    }

    /// The crash-loop back-off's current delay.
    pub(crate) fn crash_delay(&self) -> std::time::Duration {
        self.crash_backoff.delay()
    }

    /// What follows an exit, for the log.
    pub(crate) fn run_summary(&self) -> String {
        match &self.run {
            Run::Waiting => "restarting now".into(),
            Run::BackOff { .. } => format!(
                "restarting after a back-off of {}",
                super::clock::go_duration(self.crash_delay())
            ),
            Run::Running(_) => "running".into(),
            Run::PullFailed { .. } => "waiting for its image".into(),
            Run::Done => "not restarting".into(),
        }
    }

    /// The restart count the next instance gets.
    pub(crate) fn next_restart_count(&self) -> i32 {
        if self.ever_ran {
            self.restart_count.saturating_add(1)
        } else {
            0
        }
    }

    /// Whether it should be started at `now`.
    pub(crate) fn due_to_start(&self, now: Timestamp) -> bool {
        match &self.run {
            Run::Waiting => true,
            Run::PullFailed { retry_at, .. } => *retry_at <= now,
            Run::BackOff { until } => *until <= now,
            Run::Running(_) | Run::Done => false,
        }
    }

    /// A start is attempted at `now`: a restart passes the crash-loop back-off's gate.
    pub(crate) fn begin_start(&mut self, now: Timestamp) {
        if let Some(exit) = &self.last_exit {
            self.crash_backoff.step(exit.finished_at, now);
        }
    }

    /// The pull failed at `now`.
    pub(crate) fn pull_failed(&mut self, failure: PullFailure, now: Timestamp) {
        self.pull_backoff.step(now, now);
        self.run = Run::PullFailed {
            failure,
            failed_at: now,
            retry_at: self.pull_backoff.window_end(now),
        };
    }

    /// A new instance started at `now`.
    pub(crate) fn started_instance(
        &mut self,
        id: InstanceId,
        pid: u32,
        container_id: String,
        image_id: String,
        now: Timestamp,
    ) {
        self.restart_count = self.next_restart_count();
        self.ever_ran = true;
        self.image_id = Some(image_id);
        self.run = Run::Running(Instance {
            id,
            pid,
            container_id,
            started_at: now,
            probes: Probes::for_container(&self.spec, now),
            termination: None,
        });
    }

    /// The runtime could not start the process at `now`: an instance that exited at once.
    pub(crate) fn start_failed(&mut self, message: String, now: Timestamp, policy: &str) {
        self.restart_count = self.next_restart_count();
        self.ever_ran = true;
        let exit = Exit {
            exit_code: 128,
            reason: "StartError".into(),
            message: Some(message),
            started_at: None,
            finished_at: now,
            container_id: None,
        };
        self.previous_exit = self.last_exit.replace(exit);
        self.after_exit(now, policy, false, false);
    }

    /// The instance `id` exited with `exit_code` at `now`. Returns whether it was the
    /// current instance.
    pub(crate) fn exited(
        &mut self,
        id: InstanceId,
        exit_code: i32,
        now: Timestamp,
        policy: &str,
        stopping: bool,
    ) -> bool {
        let Some(instance) = self.instance_mut(id) else {
            return false;
        };
        let killed_to_restart = instance.termination.is_some_and(|t| t.restart);
        let exit = Exit::with_code(
            exit_code,
            Some(instance.started_at),
            now,
            Some(instance.container_id.clone()),
        );
        self.previous_exit = self.last_exit.replace(exit);
        self.after_exit(now, policy, stopping, killed_to_restart);
        true
    }

    /// Decides what follows the latest exit.
    fn after_exit(
        &mut self,
        now: Timestamp,
        policy: &str,
        stopping: bool,
        killed_to_restart: bool,
    ) {
        let Some(exit) = &self.last_exit else {
            self.run = Run::Waiting;
            return;
        };
        let failed = exit.exit_code != 0 || killed_to_restart;
        let restart = !stopping
            && match policy {
                "Never" => false,
                _ if self.init => failed,
                "OnFailure" => failed,
                _ => true,
            };
        self.run = if !restart {
            Run::Done
        } else if self.crash_backoff.in_backoff_since(exit.finished_at, now) {
            Run::BackOff {
                until: self.crash_backoff.window_end(exit.finished_at),
            }
        } else {
            Run::Waiting
        };
    }

    /// Stops the container for good: SIGTERM now, SIGKILL at `kill_at` (or earlier if a stop
    /// is already under way); a container that does not run is done at once.
    pub(crate) fn stop(&mut self, kill_at: Timestamp) {
        match &mut self.run {
            Run::Running(instance) => {
                let termination = instance.termination.get_or_insert(Termination {
                    kill_at,
                    term_sent: false,
                    kill_sent: false,
                    restart: false,
                });
                termination.kill_at = termination.kill_at.min(kill_at);
                termination.restart = false;
            }
            Run::Done => {}
            _ => self.run = Run::Done,
        }
    }

    /// Kills the instance `id` to restart it (a failed liveness or startup probe).
    fn kill_to_restart(&mut self, id: InstanceId, kill_at: Timestamp) {
        if let Some(instance) = self.instance_mut(id)
            && instance.termination.is_none()
        {
            instance.termination = Some(Termination {
                kill_at,
                term_sent: false,
                kill_sent: false,
                restart: true,
            });
        }
    }

    /// The signals due at `now` (each is sent once).
    pub(crate) fn signals_due(&mut self, now: Timestamp) -> Vec<(InstanceId, u32, StopSignal)> {
        let Run::Running(instance) = &mut self.run else {
            return Vec::new();
        };
        let Some(termination) = &mut instance.termination else {
            return Vec::new();
        };
        let mut due = Vec::new();
        if !termination.term_sent {
            termination.term_sent = true;
            due.push((instance.id, instance.pid, StopSignal::Term));
        }
        if !termination.kill_sent && termination.kill_at <= now {
            termination.kill_sent = true;
            due.push((instance.id, instance.pid, StopSignal::Kill));
        }
        due
    }

    /// The probes due at `now`.
    pub(crate) fn probes_due(&mut self, now: Timestamp) -> Vec<(InstanceId, ProbeKind)> {
        match &mut self.run {
            Run::Running(instance) if !self.init => {
                let stopping = instance.termination.is_some();
                let id = instance.id;
                instance
                    .probes
                    .due(now, stopping)
                    .into_iter()
                    .map(|kind| (id, kind))
                    .collect()
            }
            _ => Vec::new(),
        }
    }

    /// A probe result for instance `id`; a failed liveness or startup probe kills it with
    /// `kill_at` as the SIGKILL deadline. Returns the verdict for logging.
    pub(crate) fn probe_result(
        &mut self,
        id: InstanceId,
        kind: ProbeKind,
        success: Option<bool>,
        kill_at: Timestamp,
    ) -> Verdict {
        let Some(instance) = self.instance_mut(id) else {
            return Verdict::Unchanged;
        };
        let Some(success) = success else {
            instance.probes.discard(kind);
            return Verdict::Unchanged;
        };
        let verdict = instance.probes.record(kind, success);
        if verdict == Verdict::Kill {
            self.kill_to_restart(id, kill_at);
        }
        verdict
    }

    /// When this container next changes by itself (after `now`); restarts count only when it
    /// `may_start`.
    pub(crate) fn next_deadline(&self, now: Timestamp, may_start: bool) -> Option<Timestamp> {
        match &self.run {
            Run::PullFailed {
                failed_at,
                retry_at,
                ..
            } => {
                let shown_until = after(*failed_at, timing::PULL_ERROR_SHOWN_FOR);
                earliest(
                    may_start.then_some(*retry_at),
                    (shown_until > now).then_some(shown_until),
                )
            }
            Run::BackOff { until } => may_start.then_some(*until),
            Run::Running(instance) => {
                let kill = instance
                    .termination
                    .filter(|t| !t.kill_sent)
                    .map(|t| t.kill_at);
                let probes = (!self.init)
                    .then(|| instance.probes.next_at(instance.termination.is_some()))
                    .flatten();
                earliest(kill, probes)
            }
            Run::Waiting | Run::Done => None,
        }
    }

    /// Takes over an instance recorded by an earlier run of the kubelet.
    pub(crate) fn adopt(&mut self, adopted: Adopted, now: Timestamp, policy: &str) {
        self.restart_count = adopted.restart_count;
        self.ever_ran = true;
        self.image_id = adopted.image_id;
        match (adopted.exit, adopted.alive) {
            (Some(exit), _) => {
                self.last_exit = Some(exit);
                self.after_exit(now, policy, false, false);
            }
            (None, true) => {
                self.run = Run::Running(Instance {
                    id: adopted.id,
                    pid: adopted.pid,
                    container_id: adopted.container_id,
                    started_at: adopted.started_at,
                    probes: Probes::for_container(&self.spec, adopted.started_at),
                    termination: None,
                });
            }
            (None, false) => {
                self.last_exit = Some(Exit {
                    exit_code: UNKNOWN_EXIT_CODE,
                    reason: "Unknown".into(),
                    message: None,
                    started_at: Some(adopted.started_at),
                    finished_at: now,
                    container_id: Some(adopted.container_id),
                });
                self.after_exit(now, policy, false, false);
            }
        }
    }

    /// An init container with no record in a pod whose containers already ran: it completed.
    pub(crate) fn assume_completed(&mut self, finished_at: Timestamp) {
        self.ever_ran = true;
        self.last_exit = Some(Exit::with_code(0, None, finished_at, None));
        self.run = Run::Done;
    }
}

/// A container instance found in the records of an earlier run of the kubelet.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Adopted {
    pub id: InstanceId,
    pub pid: u32,
    pub container_id: String,
    pub image_id: Option<String>,
    pub started_at: Timestamp,
    pub restart_count: i32,
    /// How it ended, if the earlier run saw it end.
    pub exit: Option<Exit>,
    /// Whether its process still runs.
    pub alive: bool,
}

#[cfg(test)]
mod tests;
