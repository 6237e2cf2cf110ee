//! The status a kubelet writes: container states with the kubelet's reasons and messages,
//! the pod phase, conditions, addresses and start time.

use k8s_openapi::api::core::v1::{
    ContainerState, ContainerStateRunning, ContainerStateTerminated, ContainerStateWaiting,
    ContainerStatus, HostIP, PodIP, PodStatus, ResourceRequirements,
};
use k8s_openapi::jiff::Timestamp;

use super::container::{ContainerMachine, PodContext, Stage, Terminated};
use super::duration_text::go_duration;
use super::pod::PodWorker;
use super::runtime::NodeRuntime;
use crate::controllers::clock;
use crate::controllers::objects::phase;

fn waiting(reason: &str, message: Option<String>) -> ContainerState {
    ContainerState {
        waiting: Some(ContainerStateWaiting {
            reason: Some(reason.into()),
            message,
        }),
        ..ContainerState::default()
    }
}

fn terminated(exit: &Terminated) -> ContainerState {
    ContainerState {
        terminated: Some(ContainerStateTerminated {
            exit_code: exit.exit_code,
            reason: Some(exit.reason.into()),
            message: exit.message.clone(),
            started_at: exit.started_at.map(clock::time),
            finished_at: Some(clock::time(exit.finished_at)),
            container_id: exit.container_id.clone(),
            signal: None,
        }),
        ..ContainerState::default()
    }
}

/// One container's status at `now`.
fn container_status(
    c: &ContainerMachine,
    now: Timestamp,
    rt: &NodeRuntime,
    ctx: &PodContext<'_>,
) -> ContainerStatus {
    let image = c.spec.image.clone().unwrap_or_default();
    let (state, last) = match &c.stage {
        Stage::Waiting | Stage::Pulling { .. } | Stage::Creating { .. } => {
            (waiting("ContainerCreating", None), c.last_exit.as_ref())
        }
        Stage::InvalidImage(message) => (
            waiting("InvalidImageName", Some(message.clone())),
            c.last_exit.as_ref(),
        ),
        Stage::NeverPull => (
            waiting(
                "ErrImageNeverPull",
                Some(format!(
                    "Container image \"{image}\" is not present with pull policy of Never"
                )),
            ),
            c.last_exit.as_ref(),
        ),
        Stage::PullFailed {
            message,
            backing_off,
            ..
        } => {
            let state = if *backing_off {
                waiting(
                    "ImagePullBackOff",
                    Some(format!(
                        "Back-off pulling image \"{image}\": ErrImagePull: {message}"
                    )),
                )
            } else {
                waiting("ErrImagePull", Some(message.clone()))
            };
            (state, c.last_exit.as_ref())
        }
        Stage::Running { started_at, .. } => (
            ContainerState {
                running: Some(ContainerStateRunning {
                    started_at: Some(clock::time(*started_at)),
                }),
                ..ContainerState::default()
            },
            c.last_exit.as_ref(),
        ),
        Stage::BackOff { .. } => {
            let delay = rt
                .crash_backoff
                .delay(&format!("{}/{}", ctx.pod.uid, c.spec.name));
            let message = format!(
                "back-off {} restarting failed container={} pod={}",
                go_duration(delay),
                c.spec.name,
                ctx.full_name()
            );
            (
                waiting("CrashLoopBackOff", Some(message)),
                c.last_exit.as_ref(),
            )
        }
        Stage::Done => match &c.last_exit {
            Some(exit) => (terminated(exit), c.previous_exit.as_ref()),
            None => (
                terminated(&Terminated {
                    started_at: None,
                    finished_at: now,
                    exit_code: 137,
                    reason: "ContainerStatusUnknown",
                    message: Some(
                        "The container could not be located when the pod was terminated".into(),
                    ),
                    container_id: None,
                }),
                None,
            ),
        },
    };
    ContainerStatus {
        name: c.spec.name.clone(),
        image,
        image_id: c.image_id.clone().unwrap_or_default(),
        container_id: c.container_id.clone(),
        ready: c.ready,
        started: Some(c.is_running()),
        restart_count: c.restart_count,
        state: Some(state),
        last_state: Some(last.map(terminated).unwrap_or_default()),
        ..ContainerStatus::default()
    }
}

/// The pod phase from its containers (upstream `getPhase`): Pending until every container has
/// started once, Running while any runs or restarts, terminal once none will run again.
fn pod_phase(worker: &PodWorker) -> &'static str {
    let policy = worker
        .pod
        .spec
        .as_ref()
        .and_then(|s| s.restart_policy.as_deref())
        .unwrap_or("Always");
    let (mut never_started, mut running, mut restarting, mut succeeded, mut failed) =
        (0, 0, 0, 0, 0);
    for c in &worker.containers {
        match (&c.stage, &c.last_exit) {
            (Stage::Running { .. }, _) => running += 1,
            (Stage::Done, Some(exit)) if exit.exit_code == 0 => succeeded += 1,
            (Stage::Done, _) => failed += 1,
            (_, Some(_)) => restarting += 1,
            (_, None) => never_started += 1,
        }
    }
    if worker.is_finished() {
        return if failed == 0 {
            phase::SUCCEEDED
        } else {
            phase::FAILED
        };
    }
    match () {
        () if never_started > 0 => phase::PENDING,
        () if running > 0 || restarting > 0 => phase::RUNNING,
        () if failed == 0 && succeeded > 0 => phase::SUCCEEDED,
        () if policy == "Never" => phase::FAILED,
        () if succeeded + failed > 0 => phase::RUNNING,
        () => phase::PENDING,
    }
}

fn qos_class(worker: &PodWorker) -> &'static str {
    let containers = worker
        .pod
        .spec
        .as_ref()
        .map(|s| s.containers.as_slice())
        .unwrap_or_default();
    let resources: Vec<ResourceRequirements> = containers
        .iter()
        .map(|c| c.resources.clone().unwrap_or_default())
        .collect();
    let empty = |r: &ResourceRequirements| {
        r.requests.as_ref().is_none_or(|m| m.is_empty())
            && r.limits.as_ref().is_none_or(|m| m.is_empty())
    };
    if resources.iter().all(empty) {
        return "BestEffort";
    }
    let guaranteed = resources.iter().all(|r| {
        let limits = r.limits.clone().unwrap_or_default();
        ["cpu", "memory"].iter().all(|k| limits.contains_key(*k))
            && r.requests
                .as_ref()
                .is_none_or(|req| req.iter().all(|(k, v)| limits.get(k) == Some(v)))
    });
    if guaranteed {
        "Guaranteed"
    } else {
        "Burstable"
    }
}

/// The pod's status at `now`.
pub(crate) fn pod_status(
    worker: &PodWorker,
    now: Timestamp,
    node_ip: &str,
    rt: &NodeRuntime,
) -> PodStatus {
    let spec = worker.spec();
    let ctx = PodContext {
        pod: &worker.reference,
        spec: &spec,
    };
    let pod_ip = if worker.is_host_network() {
        worker.sandbox_ready.then(|| node_ip.to_string())
    } else {
        worker
            .pod_ip
            .clone()
            .filter(|_| worker.sandbox_ready || worker.is_finished())
    };
    let mut conditions = worker.conditions.clone();
    conditions.sort_by_key(|c| {
        [
            "PodReadyToStartContainers",
            "Initialized",
            "Ready",
            "ContainersReady",
            "PodScheduled",
        ]
        .iter()
        .position(|t| *t == c.type_)
    });
    PodStatus {
        phase: Some(pod_phase(worker).into()),
        conditions: Some(conditions),
        container_statuses: Some(
            worker
                .containers
                .iter()
                .map(|c| container_status(c, now, rt, &ctx))
                .collect(),
        ),
        host_ip: worker.admitted_at.map(|_| node_ip.to_string()),
        host_ips: worker.admitted_at.map(|_| {
            vec![HostIP {
                ip: node_ip.to_string(),
            }]
        }),
        pod_ips: pod_ip.clone().map(|ip| vec![PodIP { ip }]),
        pod_ip,
        start_time: worker.admitted_at.map(clock::time),
        qos_class: Some(qos_class(worker).into()),
        ..PodStatus::default()
    }
}
