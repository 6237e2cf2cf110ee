//! Signals that a rollout is failing and will not recover by waiting.

use std::fmt;
use std::time::Duration;

use k8s_openapi::jiff::Timestamp;
use serde::Serialize;

use crate::observation::{ContainerState, PodObservation, time};

/// Waiting reasons that mean the image cannot be obtained or used. The kubelet retries pulls,
/// but a wrong tag or a missing image does not fix itself, and kube-apiserver pods that cannot
/// start only prolong the time the backup must serve alone.
pub const IMAGE_FAILURE_REASONS: &[&str] = &[
    "ErrImagePull",
    "ImagePullBackOff",
    "InvalidImageName",
    "ErrImageNeverPull",
    "CreateContainerConfigError",
    "CreateContainerError",
];

/// Why the pod cannot start, if it is stuck until someone changes something (a pull that
/// fails, a bad configuration): the waiting reasons that make a rollout fail at once.
pub fn stuck(pod: &PodObservation) -> Option<String> {
    pod.containers.iter().find_map(|c| {
        let reason = c.state.waiting_reason()?;
        IMAGE_FAILURE_REASONS.contains(&reason).then(|| {
            let node = pod.node.as_deref().unwrap_or("(unscheduled)");
            format!("{node}: pod {} cannot start: {reason}", pod.name)
        })
    })
}

/// Waiting reasons of a container that keeps exiting.
pub const CRASH_LOOP_REASONS: &[&str] = &["CrashLoopBackOff", "RunContainerError"];

/// How long after the API answers again a control-plane process may still exit because of
/// the outage: a leader that could not renew its Lease exits at its renew deadline, up to one
/// retry period (2 s in client-go) after the API is back, and the kubelet's clock may be a
/// second off ours.
pub const OUTAGE_SETTLE: Duration = Duration::from_secs(5);

/// From when a container's exits count towards a crash loop: after this run started (an
/// exit before it happened while nobody watched the API) and [`OUTAGE_SETTLE`] after the API
/// last answered again (`unreachable_until`). kube-controller-manager and kube-scheduler exit
/// when they cannot reach the API — at start, or when they cannot renew their leader Lease —
/// and kube-apiserver when its etcd is gone, whatever their image; such exits are the
/// outage's, and the kubelet's back-off makes them look like a crash loop for a while after
/// it. An image that really crash-loops exits again once the API answers, and then counts.
pub fn exits_count_after(
    run_started_at: Timestamp,
    unreachable_until: Option<Timestamp>,
) -> Timestamp {
    unreachable_until
        .map(|until| time::after(until, OUTAGE_SETTLE))
        .map_or(run_started_at, |settled| settled.max(run_started_at))
}

/// How eagerly a crash loop counts as failure.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct SignalPolicy {
    /// Restarts of one container from which its pod counts as crash-looping. A real
    /// kube-apiserver sharing its port occasionally exits once at start (loopback TLS
    /// cross-talk), so one restart alone is not a failure.
    pub crash_loop_restarts: i32,
    /// Ignore crash loops entirely: used for backup pods that are expected to crash-loop on an
    /// occupied port until the old pod leaves (no port sharing on the live template).
    pub ignore_crash_loops: bool,
    /// A container whose latest exit happened at or before this moment is not judged
    /// crash-looping (see [`exits_count_after`]); `None` judges every exit. A container
    /// whose exit time is unknown is judged by its restarts alone.
    pub exits_count_after: Option<Timestamp>,
}

/// One reason to stop waiting and roll back.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case", tag = "signal")]
pub enum FailureSignal {
    /// A container's image cannot be pulled or used.
    Image {
        /// The pod.
        pod: String,
        /// Its node.
        node: Option<String>,
        /// The container.
        container: String,
        /// The kubelet's reason, e.g. `ImagePullBackOff`.
        reason: String,
        /// The kubelet's message, e.g. the registry's answer.
        message: Option<String>,
    },
    /// A container keeps exiting.
    CrashLoop {
        /// The pod.
        pod: String,
        /// Its node.
        node: Option<String>,
        /// The container.
        container: String,
        /// Its restart count.
        restarts: i32,
        /// Why it last terminated (`Error`, `OOMKilled`...).
        last_termination: Option<String>,
    },
    /// The rollout did not complete in time.
    Deadline {
        /// When the clock started.
        since: Timestamp,
        /// The allowed duration, in seconds.
        allowed_seconds: u64,
        /// What was still missing.
        pending: Vec<String>,
    },
}

impl FailureSignal {
    /// A deadline signal.
    pub fn deadline(since: Timestamp, allowed: Duration, pending: Vec<String>) -> Self {
        FailureSignal::Deadline {
            since,
            allowed_seconds: allowed.as_secs(),
            pending,
        }
    }
}

impl fmt::Display for FailureSignal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let on = |node: &Option<String>| node.as_deref().unwrap_or("(unscheduled)").to_string();
        match self {
            FailureSignal::Image {
                pod,
                node,
                container,
                reason,
                message,
            } => {
                write!(f, "{}: pod {pod} container {container}: {reason}", on(node))?;
                if let Some(message) = message {
                    write!(f, " ({message})")?;
                }
                Ok(())
            }
            FailureSignal::CrashLoop {
                pod,
                node,
                container,
                restarts,
                last_termination,
            } => {
                write!(
                    f,
                    "{}: pod {pod} container {container} is crash-looping ({restarts} restarts",
                    on(node)
                )?;
                if let Some(reason) = last_termination {
                    write!(f, ", last exit: {reason}")?;
                }
                f.write_str(")")
            }
            FailureSignal::Deadline {
                since,
                allowed_seconds,
                pending,
            } => {
                write!(
                    f,
                    "not complete {allowed_seconds}s after {since}: {}",
                    pending.join("; ")
                )
            }
        }
    }
}

/// The failure signals shown by `pods` (terminating pods are ignored: they are going anyway).
pub fn failure_signals<'a>(
    pods: impl IntoIterator<Item = &'a PodObservation>,
    policy: SignalPolicy,
) -> Vec<FailureSignal> {
    let mut signals = Vec::new();
    for pod in pods.into_iter().filter(|p| !p.is_terminating()) {
        for container in &pod.containers {
            let reason = container.state.waiting_reason();
            if let Some(reason) = reason.filter(|r| IMAGE_FAILURE_REASONS.contains(r)) {
                let message = match &container.state {
                    ContainerState::Waiting { message, .. } => message.clone(),
                    _ => None,
                };
                signals.push(FailureSignal::Image {
                    pod: pod.name.clone(),
                    node: pod.node.clone(),
                    container: container.name.clone(),
                    reason: reason.to_string(),
                    message,
                });
                continue;
            }
            let crash_looping = reason.is_some_and(|r| CRASH_LOOP_REASONS.contains(&r))
                || !matches!(container.state, ContainerState::Running { .. });
            let exit_counts = match (policy.exits_count_after, container.last_exit_at) {
                (Some(after), Some(exited)) => exited > after,
                _ => true,
            };
            if !policy.ignore_crash_loops
                && crash_looping
                && exit_counts
                && container.restart_count >= policy.crash_loop_restarts
            {
                signals.push(FailureSignal::CrashLoop {
                    pod: pod.name.clone(),
                    node: pod.node.clone(),
                    container: container.name.clone(),
                    restarts: container.restart_count,
                    last_termination: container.last_termination.clone(),
                });
            }
        }
    }
    signals
}
