//! Admission to Ready: phases, conditions, container states, addresses, events.

use super::*;

#[test]
fn a_pod_goes_from_container_creating_to_ready_with_exact_transition_times() {
    let mut h = Harness::new();
    let uid = h.create(pod("web", APISERVER_V1));
    // t=0 admitted; t=1 sandbox; t=1..3 pull; t=3..4 create; t=4 running; t=7 Ready.
    let stages: [(f64, &str, &str, bool); 6] = [
        (0.0, "Pending", "ContainerCreating", false),
        (1.5, "Pending", "ContainerCreating", false),
        (3.5, "Pending", "ContainerCreating", false),
        (4.0, "Running", "Running", false),
        (6.9, "Running", "Running", false),
        (7.0, "Running", "Running", true),
    ];
    for (at, phase, state, ready) in stages {
        h.run_to(at);
        assert_eq!(
            (
                h.phase(&uid).as_str(),
                h.state(&uid).as_str(),
                h.container(&uid).ready
            ),
            (phase, state, ready),
            "at {at}s"
        );
    }
    assert_eq!(h.condition(&uid, "PodScheduled"), Some(("True".into(), 0)));
    assert_eq!(h.condition(&uid, "Initialized"), Some(("True".into(), 0)));
    assert_eq!(
        h.condition(&uid, "PodReadyToStartContainers"),
        Some(("True".into(), 1_000))
    );
    assert_eq!(
        h.condition(&uid, "ContainersReady"),
        Some(("True".into(), 7_000))
    );
    assert_eq!(h.condition(&uid, "Ready"), Some(("True".into(), 7_000)));
    let status = h.status(&uid);
    assert_eq!(status.start_time.map(|t| ms(t.0)), Some(0));
    assert_eq!(status.host_ip.as_deref(), Some("10.0.0.11"));
    assert_eq!(status.pod_ip.as_deref(), Some("10.244.1.2"));
    assert_eq!(status.qos_class.as_deref(), Some("BestEffort"));
    let c = h.container(&uid);
    assert_eq!(c.restart_count, 0);
    assert_eq!(c.started, Some(true));
    assert!(
        c.image_id
            .starts_with("registry.k8s.io/kube-apiserver@sha256:")
    );
    assert!(c.container_id.unwrap().starts_with("containerd://"));
    assert_eq!(
        ms(c.state.unwrap().running.unwrap().started_at.unwrap().0),
        4_000
    );
    assert_eq!(
        h.event_reasons(&uid),
        ["Pulling", "Pulled", "Created", "Started"]
    );
    let pulled = h.events.iter().find(|e| e.reason == "Pulled").unwrap();
    assert_eq!(
        pulled.message,
        format!("Successfully pulled image \"{APISERVER_V1}\" in 2s")
    );
}

#[test]
fn not_ready_conditions_name_the_unready_containers() {
    let mut h = Harness::new();
    let uid = h.create(pod("web", APISERVER_V1));
    h.run_to(5.0);
    let status = h.status(&uid);
    let ready = status
        .conditions
        .unwrap()
        .into_iter()
        .find(|c| c.type_ == "Ready")
        .unwrap();
    assert_eq!(ready.reason.as_deref(), Some("ContainersNotReady"));
    assert_eq!(
        ready.message.as_deref(),
        Some("containers with unready status: [main]")
    );
}

#[test]
fn a_present_image_is_not_pulled_again_and_host_network_pods_use_the_node_ip() {
    let mut h = Harness::new();
    let first = h.create(pod("a", APISERVER_V1));
    h.run_to(10.0);
    let mut second = apiserver("b", APISERVER_V1, false);
    second.spec.as_mut().unwrap().containers[0].command =
        Some(vec!["kube-apiserver".into(), "--secure-port=7443".into()]);
    let second = h.create(second);
    h.run_to(11.0);
    assert_eq!(
        h.state(&second),
        "ContainerCreating",
        "sandbox 1s: then start 1s, no pull"
    );
    h.run_to(12.0);
    assert_eq!(h.state(&second), "Running");
    h.run_to(15.0);
    assert!(h.container(&second).ready);
    assert_eq!(h.status(&second).pod_ip.as_deref(), Some("10.0.0.11"));
    assert_eq!(h.event_reasons(&second), ["Pulled", "Created", "Started"]);
    let pulled = h
        .events
        .iter()
        .find(|e| e.pod.uid == second && e.reason == "Pulled")
        .unwrap();
    assert_eq!(
        pulled.message,
        format!("Container image \"{APISERVER_V1}\" already present on machine")
    );
    assert!(h.container(&first).ready);
}

#[test]
fn image_behaviours_slow_the_pull_and_the_start_or_keep_the_pod_unready() {
    let cases: [(ImageBehaviour, f64, f64); 3] = [
        (
            ImageBehaviour::slow_pull(Duration::from_secs(10)),
            12.0,
            15.0,
        ),
        (
            ImageBehaviour::slow_start(Duration::from_secs(5)),
            9.0,
            12.0,
        ),
        (
            ImageBehaviour {
                ready_delay: Some(Duration::from_secs(10)),
                ..ImageBehaviour::default()
            },
            4.0,
            14.0,
        ),
    ];
    for (behaviour, running_at, ready_at) in cases {
        let mut h = Harness::new();
        h.registry
            .add("example.com/app:1", behaviour.clone())
            .unwrap();
        let uid = h.create(pod("app", "example.com/app:1"));
        h.run_to(running_at - 0.01);
        assert_ne!(h.state(&uid), "Running", "{behaviour:?}");
        h.run_to(running_at);
        assert_eq!(h.state(&uid), "Running", "{behaviour:?}");
        h.run_to(ready_at - 0.01);
        assert!(!h.container(&uid).ready, "{behaviour:?}");
        h.run_to(ready_at);
        assert!(h.container(&uid).ready, "{behaviour:?}");
    }
    let mut h = Harness::new();
    h.registry
        .add("example.com/app:1", ImageBehaviour::never_ready())
        .unwrap();
    let uid = h.create(pod("app", "example.com/app:1"));
    h.run_to(600.0);
    assert_eq!(
        (h.phase(&uid).as_str(), h.container(&uid).ready),
        ("Running", false)
    );
}

#[test]
fn restart_policy_never_ends_in_a_terminal_phase() {
    for (code, phase) in [(0, "Succeeded"), (3, "Failed")] {
        let mut h = Harness::new();
        h.registry
            .add(
                "example.com/job:1",
                ImageBehaviour {
                    crash_after: Some(Duration::from_secs(5)),
                    crash_exit_code: Some(code),
                    ..ImageBehaviour::default()
                },
            )
            .unwrap();
        let mut p = pod("job", "example.com/job:1");
        p.spec.as_mut().unwrap().restart_policy = Some("Never".into());
        let uid = h.create(p);
        h.run_to(100.0);
        assert_eq!(h.phase(&uid), phase);
        let terminated = h.container(&uid).state.unwrap().terminated.unwrap();
        assert_eq!(terminated.exit_code, code);
        assert_eq!(
            terminated.reason.as_deref(),
            Some(if code == 0 { "Completed" } else { "Error" })
        );
        assert_eq!(h.container(&uid).restart_count, 0);
    }
}

#[test]
fn a_ready_pod_another_writer_marked_not_ready_is_reported_ready_again() {
    let mut h = Harness::new();
    let uid = h.create(pod("web", APISERVER_V1));
    h.run_to(8.0);
    assert_eq!(h.condition(&uid, "Ready"), Some(("True".into(), 7_000)));
    // The node lifecycle controller marks the pods of a node it lost not Ready.
    let marked = crate::controllers::node_lifecycle::mark_pod_not_ready(&h.api[&uid], t(9))
        .expect("a Ready pod is marked");
    let pod = h.api.get_mut(&uid).unwrap();
    pod.status = Some(marked);
    let pod = pod.clone();
    h.kubelet.observe_pod(&pod, t(9));
    h.run_to(9.5);
    assert_eq!(
        h.condition(&uid, "Ready").map(|(status, _)| status),
        Some("True".into()),
        "the kubelet writes its own view back"
    );
    // Its own write, seen again, changes nothing.
    let pod = h.api[&uid].clone();
    h.kubelet.observe_pod(&pod, h.now);
    h.run_to(10.0);
    assert!(
        h.last.status_updates.is_empty(),
        "{:?}",
        h.last.status_updates
    );
}
