//! Pods and their containers, reduced to what the pivot decides on.

use k8s_openapi::jiff::Timestamp;
use serde::Serialize;

/// One pod of the real or the backup DaemonSet.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PodObservation {
    /// Its name.
    pub name: String,
    /// Its uid (the precondition of a delete).
    pub uid: Option<String>,
    /// The node it is bound to, if any.
    pub node: Option<String>,
    /// Its `pod-template-generation` label.
    pub template_generation: Option<i64>,
    /// Its `controller-revision-hash` label.
    pub revision_hash: Option<String>,
    /// `status.phase`.
    pub phase: Option<String>,
    /// Whether the Ready condition is True.
    pub ready: bool,
    /// When the Ready condition last changed (`lastTransitionTime`).
    pub ready_since: Option<Timestamp>,
    /// When it was created.
    pub created: Option<Timestamp>,
    /// `status.startTime`: when the kubelet accepted it.
    pub start_time: Option<Timestamp>,
    /// When its deletion was requested: the pod is Terminating.
    pub deleting_since: Option<Timestamp>,
    /// The grace period of that deletion, in seconds.
    pub deletion_grace_seconds: Option<i64>,
    /// The pod spec's `terminationGracePeriodSeconds`.
    pub termination_grace_seconds: Option<i64>,
    /// Its containers, in spec order, with their status where the kubelet reported one.
    pub containers: Vec<ContainerObservation>,
}

impl PodObservation {
    /// Whether the pod is being deleted.
    pub fn is_terminating(&self) -> bool {
        self.deleting_since.is_some()
    }

    /// The container that runs the component: the one named after it, else the first one.
    pub fn main_container(&self, name: &str) -> Option<&ContainerObservation> {
        self.containers
            .iter()
            .find(|c| c.name == name)
            .or_else(|| self.containers.first())
    }

    /// When the component's process started, if the main container is running.
    pub fn process_started_at(&self, name: &str) -> Option<Timestamp> {
        match self.main_container(name)?.state {
            ContainerState::Running { started_at } => started_at,
            _ => None,
        }
    }

    /// Whether the component's process is running.
    pub fn is_running(&self, name: &str) -> bool {
        self.main_container(name)
            .is_some_and(|c| matches!(c.state, ContainerState::Running { .. }))
    }

    /// Whether the kubelet reports every container as stopped: the pod's processes are gone.
    pub fn processes_stopped(&self) -> bool {
        !self.containers.is_empty()
            && self
                .containers
                .iter()
                .all(|c| matches!(c.state, ContainerState::Terminated { .. }))
    }
}

/// One container of a pod.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ContainerObservation {
    /// Its name.
    pub name: String,
    /// The image the spec asks for.
    pub image: String,
    /// Its `ready` flag.
    pub ready: bool,
    /// `restartCount`.
    pub restart_count: i32,
    /// Its current state.
    pub state: ContainerState,
    /// Why it last terminated, if it ever did (`lastState.terminated.reason`, e.g. `Error`).
    pub last_termination: Option<String>,
    /// When its latest process exited (the kubelet's clock, second precision): the current
    /// state's `finishedAt` while it is stopped, else `lastState.terminated.finishedAt`.
    pub last_exit_at: Option<Timestamp>,
}

/// A container's current state as the kubelet reports it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case", tag = "state")]
pub enum ContainerState {
    /// Not running yet or between restarts.
    Waiting {
        /// e.g. `ContainerCreating`, `ErrImagePull`, `ImagePullBackOff`, `CrashLoopBackOff`.
        reason: Option<String>,
        /// The kubelet's message, e.g. the pull error.
        message: Option<String>,
    },
    /// Running since `started_at`.
    Running {
        /// When the current process started (second precision, the kubelet's clock).
        started_at: Option<Timestamp>,
    },
    /// Stopped.
    Terminated {
        /// e.g. `Completed`, `Error`.
        reason: Option<String>,
        /// The process's exit code.
        exit_code: i32,
        /// When it stopped.
        finished_at: Option<Timestamp>,
    },
    /// No status reported yet (the kubelet has not seen the pod, or the node stopped
    /// reporting).
    Unknown,
}

impl ContainerState {
    /// The waiting reason, if the container is waiting.
    pub fn waiting_reason(&self) -> Option<&str> {
        match self {
            ContainerState::Waiting { reason, .. } => reason.as_deref(),
            _ => None,
        }
    }
}
