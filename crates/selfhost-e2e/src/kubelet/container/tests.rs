//! Table-driven checks of the container state machine.

use super::*;
use crate::kubelet::clock::t;
use k8s_openapi::api::core::v1::Probe;

fn machine(init: bool) -> ContainerMachine {
    ContainerMachine::new(
        &Container {
            name: "c".into(),
            image: Some("k8s.gcr.io/kube-apiserver:v1.20.2".into()),
            ..Container::default()
        },
        init,
    )
}

fn start(c: &mut ContainerMachine, id: InstanceId, at: i64) {
    assert!(c.due_to_start(t(at)), "not due at {at}: {:?}", c.run);
    c.begin_start(t(at));
    c.started_instance(
        id,
        100 + u32::try_from(id).unwrap(),
        format!("process://n1/{id}"),
        "img".into(),
        t(at),
    );
}

#[test]
fn restart_policies_decide_what_follows_an_exit() {
    // (policy, init, exit code, restarts)
    let cases = [
        ("Always", false, 0, true),
        ("Always", false, 1, true),
        ("OnFailure", false, 0, false),
        ("OnFailure", false, 2, true),
        ("Never", false, 1, false),
        ("Always", true, 0, false),
        ("Always", true, 1, true),
        ("OnFailure", true, 1, true),
        ("Never", true, 1, false),
    ];
    for (policy, init, code, restarts) in cases {
        let mut c = machine(init);
        start(&mut c, 1, 0);
        assert!(c.exited(1, code, t(5), policy, false));
        assert_eq!(!c.is_done(), restarts, "{policy} init={init} code={code}");
        let exit = c.last_exit.clone().unwrap();
        assert_eq!(exit.reason, if code == 0 { "Completed" } else { "Error" });
        assert_eq!((exit.started_at, exit.finished_at), (Some(t(0)), t(5)));
    }
    // Nothing restarts in a pod being stopped, and stale exits are ignored.
    let mut c = machine(false);
    start(&mut c, 1, 0);
    assert!(!c.exited(9, 1, t(1), "Always", false));
    assert!(c.exited(1, 1, t(1), "Always", true));
    assert!(c.is_done());
}

#[test]
fn crash_loops_back_off_from_the_second_restart() {
    let mut c = machine(false);
    start(&mut c, 1, 0);
    assert_eq!(c.restart_count, 0);
    // First exit: restarts at once.
    c.exited(1, 1, t(1), "Always", false);
    assert_eq!(c.run, Run::Waiting);
    start(&mut c, 2, 1);
    assert_eq!(c.restart_count, 1);
    // Second exit: 10 s, then 20 s.
    c.exited(2, 1, t(2), "Always", false);
    assert_eq!(c.run, Run::BackOff { until: t(12) });
    assert!(!c.due_to_start(t(11)));
    assert_eq!(c.next_deadline(t(2), true), Some(t(12)));
    start(&mut c, 3, 12);
    c.exited(3, 1, t(13), "Always", false);
    assert_eq!(c.run, Run::BackOff { until: t(33) });
    assert_eq!(c.restart_count, 2);
    assert_eq!(c.previous_exit.as_ref().map(|e| e.finished_at), Some(t(2)));
    // Ten quiet minutes reset it.
    start(&mut c, 4, 33);
    c.exited(4, 1, t(700), "Always", false);
    assert_eq!(c.run, Run::Waiting);
}

#[test]
fn pull_failures_back_off_and_show_err_image_pull_first() {
    let mut c = machine(false);
    c.pull_failed(PullFailure::NotFound("nope".into()), t(0));
    assert_eq!(c.next_deadline(t(0), true), Some(t(2)));
    assert_eq!(c.next_deadline(t(2), true), Some(t(10)));
    assert_eq!(c.next_deadline(t(2), false), None);
    assert!(!c.due_to_start(t(9)));
    assert!(c.due_to_start(t(10)));
    c.pull_failed(PullFailure::NotFound("nope".into()), t(10));
    assert!(matches!(c.run, Run::PullFailed { retry_at, .. } if retry_at == t(30)));
    start(&mut c, 1, 30);
    assert_eq!(c.restart_count, 0);
}

#[test]
fn stopping_sends_sigterm_once_then_sigkill_at_the_deadline() {
    let mut c = machine(false);
    start(&mut c, 1, 0);
    c.stop(t(30));
    assert_eq!(c.signals_due(t(0)), [(1, 101, StopSignal::Term)]);
    assert_eq!(c.signals_due(t(1)), []);
    // A shorter grace period wins.
    c.stop(t(10));
    assert_eq!(c.next_deadline(t(1), false), Some(t(10)));
    assert_eq!(c.signals_due(t(10)), [(1, 101, StopSignal::Kill)]);
    assert_eq!(c.signals_due(t(11)), []);
    let mut idle = machine(false);
    idle.stop(t(1));
    assert!(idle.is_done());
}

#[test]
fn a_failed_liveness_probe_kills_and_restarts_even_after_a_clean_exit() {
    let mut c = machine(false);
    c.spec.liveness_probe = Some(Probe {
        failure_threshold: Some(1),
        period_seconds: Some(1),
        ..Probe::default()
    });
    start(&mut c, 1, 0);
    assert_eq!(c.probes_due(t(0)), [(1, ProbeKind::Liveness)]);
    assert_eq!(
        c.probe_result(1, ProbeKind::Liveness, Some(false), t(30)),
        Verdict::Kill
    );
    assert_eq!(c.signals_due(t(0)), [(1, 101, StopSignal::Term)]);
    c.exited(1, 0, t(1), "OnFailure", false);
    assert_eq!(c.run, Run::Waiting);
}

#[test]
fn adopted_instances_keep_running_or_count_as_exited() {
    let adopted = |alive: bool, exit: Option<Exit>| Adopted {
        id: 7,
        pid: 42,
        container_id: "process://n1/42".into(),
        image_id: None,
        started_at: t(-100),
        restart_count: 3,
        exit,
        alive,
    };
    let mut running = machine(false);
    running.adopt(adopted(true, None), t(0), "Always");
    assert_eq!(
        running.instance().map(|i| (i.pid, i.started_at)),
        Some((42, t(-100)))
    );
    assert_eq!(running.next_restart_count(), 4);
    let mut vanished = machine(false);
    vanished.adopt(adopted(false, None), t(0), "Never");
    assert!(vanished.is_done());
    assert_eq!(
        vanished
            .last_exit
            .as_ref()
            .map(|e| (e.exit_code, e.reason.as_str())),
        Some((255, "Unknown"))
    );
    let mut completed = machine(true);
    completed.adopt(
        adopted(false, Some(Exit::with_code(0, None, t(-50), None))),
        t(0),
        "Always",
    );
    assert!(completed.completed() && completed.ready());
}
