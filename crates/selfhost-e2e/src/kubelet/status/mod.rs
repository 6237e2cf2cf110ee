//! The pod status a kubelet 1.20 writes, built from a [`PodMachine`]: container states with the
//! kubelet's reasons and messages, the phase by its `getPhase`, the conditions by its
//! `GeneratePod*Condition`s, and times in whole seconds.

use k8s_openapi::api::core::v1::{
    ContainerState, ContainerStateRunning, ContainerStateTerminated, ContainerStateWaiting,
    ContainerStatus, PodCondition, PodIP, PodSpec, PodStatus, ResourceRequirements,
};
use k8s_openapi::jiff::Timestamp;

use super::clock::{after, go_duration, time};
use super::config::timing;
use super::container::{ContainerMachine, Exit, Run};
use super::pod::PodMachine;

/// The condition types the kubelet owns; others in the API pod (readiness gates) are kept.
const KUBELET_CONDITIONS: [&str; 4] = ["Initialized", "Ready", "ContainersReady", "PodScheduled"];

fn waiting(reason: &str, message: Option<String>) -> ContainerState {
    ContainerState {
        waiting: Some(ContainerStateWaiting {
            reason: Some(reason.into()),
            message,
        }),
        ..ContainerState::default()
    }
}

fn terminated(exit: &Exit) -> ContainerState {
    ContainerState {
        terminated: Some(ContainerStateTerminated {
            exit_code: exit.exit_code,
            reason: Some(exit.reason.clone()),
            message: exit.message.clone(),
            started_at: exit.started_at.map(time),
            finished_at: Some(time(exit.finished_at)),
            container_id: exit.container_id.clone(),
            signal: None,
        }),
        ..ContainerState::default()
    }
}

/// What identifies the pod in the kubelet's messages: `name_namespace(uid)`.
fn full_name(machine: &PodMachine) -> String {
    let meta = &machine.pod.metadata;
    format!(
        "{}_{}({})",
        meta.name.as_deref().unwrap_or_default(),
        meta.namespace.as_deref().unwrap_or_default(),
        meta.uid.as_deref().unwrap_or_default()
    )
}

/// One container's status at `now`.
fn container_status(
    c: &ContainerMachine,
    has_init_containers: bool,
    pod_full_name: &str,
    now: Timestamp,
) -> ContainerStatus {
    // Containers not created yet: `PodInitializing` in a pod with init containers.
    let not_created = if has_init_containers {
        "PodInitializing"
    } else {
        "ContainerCreating"
    };
    let (state, last) = match &c.run {
        Run::Waiting => (waiting(not_created, None), c.last_exit.as_ref()),
        Run::PullFailed {
            failure, failed_at, ..
        } => {
            let backing_off = failure.reason() == "ErrImagePull"
                && after(*failed_at, timing::PULL_ERROR_SHOWN_FOR) <= now;
            let state = if backing_off {
                waiting(
                    "ImagePullBackOff",
                    Some(format!("Back-off pulling image \"{}\"", c.image())),
                )
            } else {
                waiting(failure.reason(), Some(failure.message().to_string()))
            };
            (state, c.last_exit.as_ref())
        }
        Run::Running(instance) => (
            ContainerState {
                running: Some(ContainerStateRunning {
                    started_at: Some(time(instance.started_at)),
                }),
                ..ContainerState::default()
            },
            c.last_exit.as_ref(),
        ),
        Run::BackOff { .. } => (
            waiting(
                "CrashLoopBackOff",
                Some(format!(
                    "back-off {} restarting failed container={} pod={pod_full_name}",
                    go_duration(c.crash_delay()),
                    c.name()
                )),
            ),
            c.last_exit.as_ref(),
        ),
        Run::Done => match &c.last_exit {
            Some(exit) => (terminated(exit), c.previous_exit.as_ref()),
            None => (waiting(not_created, None), None),
        },
    };
    ContainerStatus {
        name: c.name().to_string(),
        image: c.image().to_string(),
        image_id: c.image_id.clone().unwrap_or_default(),
        container_id: c.container_id(),
        ready: c.ready(),
        started: (!c.init).then(|| c.started()),
        restart_count: c.restart_count,
        state: Some(state),
        last_state: Some(last.map(terminated).unwrap_or_default()),
        ..ContainerStatus::default()
    }
}

fn is_terminated(s: &ContainerStatus) -> Option<&ContainerStateTerminated> {
    s.state.as_ref()?.terminated.as_ref()
}

fn last_terminated(s: &ContainerStatus) -> Option<&ContainerStateTerminated> {
    s.last_state.as_ref()?.terminated.as_ref()
}

fn is_running(s: &ContainerStatus) -> bool {
    s.state.as_ref().is_some_and(|s| s.running.is_some())
}

/// The pod phase, as the kubelet's `getPhase` decides it from the container statuses.
pub(crate) fn phase(
    policy: &str,
    init: &[ContainerStatus],
    regular: &[ContainerStatus],
) -> &'static str {
    let (mut pending_init, mut failed_init) = (0, 0);
    for s in init {
        if is_running(s) {
            pending_init += 1;
        } else if let Some(t) = is_terminated(s) {
            failed_init += usize::from(t.exit_code != 0);
        } else if let Some(t) = last_terminated(s) {
            failed_init += usize::from(t.exit_code != 0);
        } else {
            pending_init += 1;
        }
    }
    let (mut running, mut waiting, mut stopped, mut succeeded) = (0, 0, 0, 0);
    for s in regular {
        if is_running(s) {
            running += 1;
        } else if let Some(t) = is_terminated(s) {
            stopped += 1;
            succeeded += usize::from(t.exit_code == 0);
        } else if last_terminated(s).is_some() {
            stopped += 1;
        } else {
            waiting += 1;
        }
    }
    if failed_init > 0 && policy == "Never" {
        return "Failed";
    }
    if pending_init > 0 || waiting > 0 {
        return "Pending";
    }
    if running > 0 {
        return "Running";
    }
    if stopped > 0 {
        if policy == "Always" {
            return "Running";
        }
        if stopped == succeeded {
            return "Succeeded";
        }
        if policy == "Never" {
            return "Failed";
        }
        return "Running";
    }
    "Pending"
}

fn condition(type_: &str, ok: bool, reason: Option<&str>, message: Option<String>) -> PodCondition {
    PodCondition {
        type_: type_.into(),
        status: if ok { "True" } else { "False" }.into(),
        reason: reason.map(str::to_string),
        message,
        ..PodCondition::default()
    }
}

fn names(list: &[&str]) -> String {
    format!("[{}]", list.join(" "))
}

/// The kubelet's conditions (`Initialized`, `Ready`, `ContainersReady`, `PodScheduled`),
/// without transition times.
fn kubelet_conditions(
    spec: &PodSpec,
    phase: &str,
    init: &[ContainerStatus],
    regular: &[ContainerStatus],
    api_conditions: &[PodCondition],
) -> Vec<PodCondition> {
    let succeeded = phase == "Succeeded";
    let incomplete: Vec<&str> = init
        .iter()
        .filter(|s| !s.ready)
        .map(|s| s.name.as_str())
        .collect();
    let initialized = match () {
        () if init.is_empty() => condition("Initialized", true, None, None),
        () if succeeded => condition("Initialized", true, Some("PodCompleted"), None),
        () if !incomplete.is_empty() => condition(
            "Initialized",
            false,
            Some("ContainersNotInitialized"),
            Some(format!(
                "containers with incomplete status: {}",
                names(&incomplete)
            )),
        ),
        () => condition("Initialized", true, None, None),
    };
    let unready: Vec<&str> = regular
        .iter()
        .filter(|s| !s.ready)
        .map(|s| s.name.as_str())
        .collect();
    let containers_ready = match () {
        () if succeeded => condition("ContainersReady", false, Some("PodCompleted"), None),
        () if !unready.is_empty() => condition(
            "ContainersReady",
            false,
            Some("ContainersNotReady"),
            Some(format!(
                "containers with unready status: {}",
                names(&unready)
            )),
        ),
        () => condition("ContainersReady", true, None, None),
    };
    let ready = if containers_ready.status != "True" {
        PodCondition {
            type_: "Ready".into(),
            ..containers_ready.clone()
        }
    } else {
        let gates: Vec<String> = spec
            .readiness_gates
            .iter()
            .flatten()
            .filter_map(|gate| {
                let wanted = &gate.condition_type;
                match api_conditions.iter().find(|c| c.type_ == *wanted) {
                    None => Some(format!(
                        "corresponding condition of pod readiness gate \"{wanted}\" does not exist."
                    )),
                    Some(c) if c.status != "True" => Some(format!(
                        "the status of pod readiness gate \"{wanted}\" is not \"True\", but {}",
                        c.status
                    )),
                    Some(_) => None,
                }
            })
            .collect();
        if gates.is_empty() {
            condition("Ready", true, None, None)
        } else {
            condition(
                "Ready",
                false,
                Some("ReadinessGatesNotReady"),
                Some(gates.join(", ")),
            )
        }
    };
    vec![
        initialized,
        ready,
        containers_ready,
        condition("PodScheduled", true, None, None),
    ]
}

/// Gives each condition its transition time: kept from `previous` (or else from the API)
/// while its status is the same, `now` when it changed.
fn with_transition_times(
    conditions: Vec<PodCondition>,
    previous: &[PodCondition],
    api: &[PodCondition],
    now: Timestamp,
) -> Vec<PodCondition> {
    conditions
        .into_iter()
        .map(|mut c| {
            let kept = previous
                .iter()
                .chain(api)
                .find(|p| p.type_ == c.type_)
                .filter(|p| p.status == c.status)
                .and_then(|p| p.last_transition_time.clone());
            c.last_transition_time = Some(kept.unwrap_or_else(|| time(now)));
            c
        })
        .collect()
}

/// The pod's QoS class, as the apiserver computes it.
fn qos_class(spec: &PodSpec) -> &'static str {
    let resources: Vec<ResourceRequirements> = spec
        .init_containers
        .iter()
        .flatten()
        .chain(&spec.containers)
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

/// The status of the pod at `now`. `previous` is the last status built for it (it keeps
/// condition transition times); the API pod's own conditions come from `machine.pod`.
pub(crate) fn pod_status(
    machine: &PodMachine,
    node_ip: &str,
    previous: &[PodCondition],
    now: Timestamp,
) -> PodStatus {
    let spec = machine.pod.spec.clone().unwrap_or_default();
    let api_conditions: Vec<PodCondition> = machine
        .pod
        .status
        .as_ref()
        .and_then(|s| s.conditions.clone())
        .unwrap_or_default();
    let has_init = !machine.init_containers.is_empty();
    let pod_name = full_name(machine);
    let statuses = |list: &[ContainerMachine]| -> Vec<ContainerStatus> {
        list.iter()
            .map(|c| container_status(c, has_init, &pod_name, now))
            .collect()
    };
    let init = statuses(&machine.init_containers);
    let regular = statuses(&machine.containers);
    let phase = phase(&machine.restart_policy(), &init, &regular);
    let ours = kubelet_conditions(&spec, phase, &init, &regular, &api_conditions);
    let mut conditions: Vec<PodCondition> = api_conditions
        .iter()
        .filter(|c| !KUBELET_CONDITIONS.contains(&c.type_.as_str()))
        .cloned()
        .collect();
    conditions.extend(with_transition_times(ours, previous, &api_conditions, now));
    PodStatus {
        phase: Some(phase.into()),
        conditions: Some(conditions),
        host_ip: Some(node_ip.to_string()),
        pod_ip: Some(node_ip.to_string()),
        pod_ips: Some(vec![PodIP {
            ip: node_ip.to_string(),
        }]),
        start_time: Some(time(machine.start_time)),
        init_container_statuses: has_init.then_some(init),
        container_statuses: Some(regular),
        qos_class: Some(qos_class(&spec).into()),
        ..PodStatus::default()
    }
}

#[cfg(test)]
mod tests;
