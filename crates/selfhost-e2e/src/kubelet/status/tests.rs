//! Table-driven checks of the status the kubelet writes.

use super::*;
use crate::kubelet::clock::t;
use crate::kubelet::container::{ContainerMachine, Exit};
use crate::kubelet::images::PullFailure;
use k8s_openapi::api::core::v1::{Container, Pod, PodReadinessGate, Probe};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};

fn pod(init: &[&str], containers: &[&str], policy: &str) -> Pod {
    let container = |name: &&str| Container {
        name: (*name).into(),
        image: Some(format!("k8s.gcr.io/{name}:v1.20.2")),
        ..Container::default()
    };
    Pod {
        metadata: ObjectMeta {
            name: Some("p".into()),
            namespace: Some("kube-system".into()),
            uid: Some("u1".into()),
            ..ObjectMeta::default()
        },
        spec: Some(PodSpec {
            init_containers: Some(init.iter().map(container).collect()),
            containers: containers.iter().map(container).collect(),
            restart_policy: Some(policy.into()),
            ..PodSpec::default()
        }),
        status: None,
    }
}

fn run(c: &mut ContainerMachine, id: u64, at: i64) {
    c.begin_start(t(at));
    c.started_instance(
        id,
        100,
        "process://n1/100".into(),
        "file:///images/x".into(),
        t(at),
    );
}

fn state_summary(s: &ContainerStatus) -> String {
    let state = s.state.clone().unwrap();
    if let Some(w) = state.waiting {
        format!("waiting:{}", w.reason.unwrap())
    } else if let Some(t) = state.terminated {
        format!("terminated:{}:{}", t.exit_code, t.reason.unwrap())
    } else {
        "running".into()
    }
}

fn condition_of(s: &PodStatus, type_: &str) -> (String, Option<String>) {
    let c = s
        .conditions
        .iter()
        .flatten()
        .find(|c| c.type_ == type_)
        .unwrap();
    (c.status.clone(), c.reason.clone())
}

#[test]
fn a_pod_goes_from_initializing_to_running_and_ready() {
    let mut m = PodMachine::new(pod(&["check"], &["pause"], "Always"), t(0));
    let s = pod_status(&m, "127.0.1.1", &[], t(0));
    assert_eq!(s.phase.as_deref(), Some("Pending"));
    assert_eq!(
        state_summary(&s.init_container_statuses.clone().unwrap()[0]),
        "waiting:PodInitializing"
    );
    assert_eq!(
        state_summary(&s.container_statuses.clone().unwrap()[0]),
        "waiting:PodInitializing"
    );
    assert_eq!(
        condition_of(&s, "Initialized"),
        ("False".into(), Some("ContainersNotInitialized".into()))
    );
    assert_eq!(
        s.conditions
            .iter()
            .flatten()
            .find(|c| c.type_ == "Initialized")
            .unwrap()
            .message
            .as_deref(),
        Some("containers with incomplete status: [check]")
    );
    run(&mut m.init_containers[0], 1, 1);
    m.init_containers[0].exited(1, 0, t(2), "Always", false);
    run(&mut m.containers[0], 2, 2);
    let later = pod_status(&m, "127.0.1.1", s.conditions.as_deref().unwrap(), t(3));
    assert_eq!(later.phase.as_deref(), Some("Running"));
    let init = &later.init_container_statuses.clone().unwrap()[0];
    assert_eq!(
        (state_summary(init), init.ready, init.started),
        ("terminated:0:Completed".into(), true, None)
    );
    let main = &later.container_statuses.clone().unwrap()[0];
    assert_eq!(
        (state_summary(main), main.ready, main.started),
        ("running".into(), true, Some(true))
    );
    assert_eq!(main.container_id.as_deref(), Some("process://n1/100"));
    for type_ in ["Initialized", "Ready", "ContainersReady", "PodScheduled"] {
        assert_eq!(condition_of(&later, type_).0, "True", "{type_}");
    }
    // Changed conditions move their transition time; PodScheduled keeps its own.
    let at = |s: &PodStatus, type_: &str| {
        s.conditions
            .iter()
            .flatten()
            .find(|c| c.type_ == type_)
            .unwrap()
            .last_transition_time
            .clone()
    };
    assert_eq!(at(&later, "Ready"), Some(Time(t(3))));
    assert_eq!(at(&later, "PodScheduled"), Some(Time(t(0))));
    assert_eq!(later.pod_ip.as_deref(), Some("127.0.1.1"));
    assert_eq!(later.start_time, Some(Time(t(0))));
    assert_eq!(later.qos_class.as_deref(), Some("BestEffort"));
}

#[test]
fn waiting_reasons_follow_the_kubelet() {
    let mut m = PodMachine::new(pod(&[], &["kube-apiserver"], "Always"), t(0));
    let summary = |m: &PodMachine, at: i64| {
        let s = pod_status(m, "ip", &[], t(at));
        let c = s.container_statuses.unwrap()[0].clone();
        let w = c.state.clone().unwrap().waiting.unwrap_or_default();
        (
            state_summary(&c),
            w.message.unwrap_or_default(),
            s.phase.unwrap(),
        )
    };
    assert_eq!(summary(&m, 0).0, "waiting:ContainerCreating");
    m.containers[0].pull_failed(PullFailure::NotFound("rpc error: not found".into()), t(0));
    assert_eq!(
        summary(&m, 1),
        (
            "waiting:ErrImagePull".into(),
            "rpc error: not found".into(),
            "Pending".into()
        )
    );
    assert_eq!(
        summary(&m, 2),
        (
            "waiting:ImagePullBackOff".into(),
            "Back-off pulling image \"k8s.gcr.io/kube-apiserver:v1.20.2\"".into(),
            "Pending".into()
        )
    );
    run(&mut m.containers[0], 1, 10);
    m.containers[0].exited(1, 2, t(11), "Always", false);
    run(&mut m.containers[0], 2, 11);
    m.containers[0].exited(2, 2, t(12), "Always", false);
    let (state, message, phase) = summary(&m, 12);
    assert_eq!(
        (state.as_str(), phase.as_str()),
        ("waiting:CrashLoopBackOff", "Running")
    );
    assert_eq!(
        message,
        "back-off 10s restarting failed container=kube-apiserver pod=p_kube-system(u1)"
    );
    let s = pod_status(&m, "ip", &[], t(12));
    let c = &s.container_statuses.unwrap()[0];
    assert_eq!(
        (c.restart_count, c.ready, c.started),
        (1, false, Some(false))
    );
    assert_eq!(
        c.last_state.clone().unwrap().terminated.unwrap().exit_code,
        2
    );
}

#[test]
fn phases_follow_get_phase() {
    let status =
        |state: Option<Exit>, last: Option<Exit>, waiting_state: bool| -> ContainerStatus {
            let mut c = ContainerMachine::new(
                &Container {
                    name: "c".into(),
                    ..Container::default()
                },
                false,
            );
            c.last_exit = state.clone().or(last.clone());
            c.previous_exit = state.and(last);
            c.run = if waiting_state {
                Run::Waiting
            } else {
                Run::Done
            };
            container_status(&c, false, "p", t(0))
        };
    let exit = |code| Some(Exit::with_code(code, None, t(0), None));
    let ok = status(exit(0), None, false);
    let failed = status(exit(1), None, false);
    let restarting = status(None, exit(1), true);
    let fresh = status(None, None, true);
    let cases: [(&str, &[ContainerStatus], &[ContainerStatus], &str); 8] = [
        ("Always", &[], std::slice::from_ref(&fresh), "Pending"),
        ("Always", &[], std::slice::from_ref(&ok), "Running"),
        ("OnFailure", &[], std::slice::from_ref(&ok), "Succeeded"),
        ("OnFailure", &[], std::slice::from_ref(&failed), "Running"),
        ("Never", &[], &[ok.clone(), failed.clone()], "Failed"),
        (
            "Never",
            std::slice::from_ref(&failed),
            std::slice::from_ref(&fresh),
            "Failed",
        ),
        (
            "Always",
            std::slice::from_ref(&restarting),
            std::slice::from_ref(&fresh),
            "Pending",
        ),
        ("Always", &[], std::slice::from_ref(&restarting), "Running"),
    ];
    for (policy, init, regular, expected) in cases {
        assert_eq!(
            phase(policy, init, regular),
            expected,
            "{policy} {init:?} {regular:?}"
        );
    }
}

#[test]
fn readiness_probes_and_gates_decide_ready() {
    let mut p = pod(&[], &["a"], "Always");
    let spec = p.spec.as_mut().unwrap();
    spec.containers[0].readiness_probe = Some(Probe::default());
    spec.readiness_gates = Some(vec![PodReadinessGate {
        condition_type: "example.com/gate".into(),
    }]);
    let mut m = PodMachine::new(p, t(0));
    run(&mut m.containers[0], 1, 0);
    let s = pod_status(&m, "ip", &[], t(0));
    assert_eq!(
        condition_of(&s, "Ready"),
        ("False".into(), Some("ContainersNotReady".into()))
    );
    let id = m.containers[0].instance().unwrap().id;
    m.containers[0].probe_result(
        id,
        crate::kubelet::probe::ProbeKind::Readiness,
        Some(true),
        t(30),
    );
    let s = pod_status(&m, "ip", &[], t(1));
    assert_eq!(condition_of(&s, "ContainersReady"), ("True".into(), None));
    assert_eq!(
        condition_of(&s, "Ready"),
        ("False".into(), Some("ReadinessGatesNotReady".into()))
    );
    m.pod.status = Some(PodStatus {
        conditions: Some(vec![PodCondition {
            type_: "example.com/gate".into(),
            status: "True".into(),
            ..PodCondition::default()
        }]),
        ..PodStatus::default()
    });
    let s = pod_status(&m, "ip", &[], t(1));
    assert_eq!(condition_of(&s, "Ready"), ("True".into(), None));
    // The gate's condition is kept, first.
    assert_eq!(s.conditions.unwrap()[0].type_, "example.com/gate");
}
