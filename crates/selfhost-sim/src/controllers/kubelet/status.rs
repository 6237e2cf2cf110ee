//! The status a kubelet writes: container states (init containers' too) with the kubelet's
//! reasons and messages, the pod phase, conditions, addresses and start time.

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

/// One container's status at `now`. In a pod with init containers, a container that has no
/// instance yet waits with `PodInitializing` (the kubelet's default then), not
/// `ContainerCreating`.
fn container_status(
    c: &ContainerMachine,
    now: Timestamp,
    rt: &NodeRuntime,
    ctx: &PodContext<'_>,
) -> ContainerStatus {
    let image = c.spec.image.clone().unwrap_or_default();
    let has_init_containers = ctx
        .spec
        .init_containers
        .as_ref()
        .is_some_and(|c| !c.is_empty());
    let not_created = if has_init_containers {
        "PodInitializing"
    } else {
        "ContainerCreating"
    };
    let failed_before = c.last_exit.as_ref().filter(|e| e.exit_code != 0);
    let (state, last) = match &c.stage {
        // A failed init container shows its failure until the next instance runs (kubectl:
        // `Init:Error`), as the runtime still lists the exited one.
        Stage::Waiting | Stage::Pulling { .. } | Stage::Creating { .. }
            if c.init && failed_before.is_some() =>
        {
            (
                failed_before.map(terminated).unwrap_or_default(),
                c.previous_exit.as_ref(),
            )
        }
        Stage::Waiting | Stage::Pulling { .. } | Stage::Creating { .. } => {
            (waiting(not_created, None), c.last_exit.as_ref())
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
            // An init container the pod never reached.
            None if c.init => (waiting("PodInitializing", None), None),
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
    // An init container is ready once it has exited 0; a regular one when its probe passes.
    let ready = if c.init { c.completed() } else { c.ready };
    ContainerStatus {
        name: c.spec.name.clone(),
        image,
        image_id: c.image_id.clone().unwrap_or_default(),
        container_id: c.container_id.clone(),
        ready,
        started: Some(c.is_running()),
        restart_count: c.restart_count,
        state: Some(state),
        last_state: Some(last.map(terminated).unwrap_or_default()),
        ..ContainerStatus::default()
    }
}

/// The pod phase from its containers' statuses, as the kubelet's `getPhase` decides it:
/// Pending while an init container has not completed (or a container never started),
/// Failed at once when an init container failed under `Never`, Running while any container
/// runs or restarts, terminal once none will run again.
fn pod_phase(
    worker: &PodWorker,
    init: &[ContainerStatus],
    regular: &[ContainerStatus],
) -> &'static str {
    let policy = worker
        .pod
        .spec
        .as_ref()
        .and_then(|s| s.restart_policy.as_deref())
        .unwrap_or("Always");
    let terminated = |c: &ContainerStatus| c.state.as_ref()?.terminated.clone();
    let last_terminated = |c: &ContainerStatus| c.last_state.as_ref()?.terminated.clone();
    let (mut pending_init, mut failed_init) = (0, 0);
    for c in init {
        let state = c.state.clone().unwrap_or_default();
        match (state.running, terminated(c), last_terminated(c)) {
            (Some(_), _, _) => pending_init += 1,
            (None, Some(t), _) => failed_init += usize::from(t.exit_code != 0),
            (None, None, Some(last)) => failed_init += usize::from(last.exit_code != 0),
            (None, None, None) => pending_init += 1,
        }
    }
    let (mut running, mut waiting, mut stopped, mut succeeded) = (0, 0, 0, 0);
    for c in regular {
        let state = c.state.clone().unwrap_or_default();
        match (state.running, terminated(c), last_terminated(c)) {
            (Some(_), _, _) => running += 1,
            (None, Some(t), _) => {
                stopped += 1;
                succeeded += usize::from(t.exit_code == 0);
            }
            (None, None, Some(_)) => stopped += 1,
            (None, None, None) => waiting += 1,
        }
    }
    if failed_init > 0 && policy == "Never" {
        return phase::FAILED;
    }
    let regular_started = worker.containers.iter().any(ContainerMachine::has_started);
    match () {
        () if (pending_init > 0 && !regular_started) || waiting > 0 => phase::PENDING,
        () if running > 0 => phase::RUNNING,
        () if stopped > 0 => {
            // A pod being stopped is over whatever its policy.
            if worker.is_finished() || policy != "Always" {
                if stopped == succeeded {
                    return phase::SUCCEEDED;
                }
                if worker.is_finished() || policy == "Never" {
                    return phase::FAILED;
                }
            }
            phase::RUNNING
        }
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
    let statuses = |machines: &[ContainerMachine]| -> Vec<ContainerStatus> {
        machines
            .iter()
            .map(|c| container_status(c, now, rt, &ctx))
            .collect()
    };
    let init_statuses = statuses(&worker.init_containers);
    let container_statuses = statuses(&worker.containers);
    PodStatus {
        phase: Some(pod_phase(worker, &init_statuses, &container_statuses).into()),
        conditions: Some(conditions),
        init_container_statuses: (!init_statuses.is_empty()).then_some(init_statuses),
        container_statuses: Some(container_statuses),
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
