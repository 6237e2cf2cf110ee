//! Init containers: one at a time, in order, each to a successful exit before the next; pull
//! failures and crash loops hold the pod in initialization; conditions and phase follow.

use super::*;

const TOOL: &str = "example.com/tool:1";
const APP: &str = "example.com/app:1";

/// A pod whose init containers are `(name, image, command)` and whose one container `main`
/// runs [`APP`].
fn initializing(name: &str, init: &[(&str, &str, &[&str])]) -> Pod {
    let mut p = pod(name, APP);
    let spec = p.spec.as_mut().unwrap();
    spec.init_containers = Some(
        init.iter()
            .map(|(name, image, command)| Container {
                name: (*name).into(),
                image: Some((*image).into()),
                command: Some(command.iter().map(|s| s.to_string()).collect()),
                ..Container::default()
            })
            .collect(),
    );
    p
}

fn harness() -> Harness {
    let mut h = Harness::new();
    h.registry.add(TOOL, ImageBehaviour::default()).unwrap();
    h.registry.add(APP, ImageBehaviour::default()).unwrap();
    h
}

/// `Running`, `Terminated:<reason>:<code>` or the waiting reason of a status.
fn shown(status: &ContainerStatus) -> String {
    let state = status.state.clone().unwrap_or_default();
    if let Some(w) = state.waiting {
        return w.reason.unwrap_or_default();
    }
    if state.running.is_some() {
        return "Running".into();
    }
    let t = state.terminated.unwrap_or_default();
    format!(
        "Terminated:{}:{}",
        t.reason.unwrap_or_default(),
        t.exit_code
    )
}

impl Harness {
    fn init(&self, uid: &str, index: usize) -> ContainerStatus {
        self.status(uid).init_container_statuses.unwrap()[index].clone()
    }

    fn starts(&self) -> Vec<(String, u64)> {
        self.events
            .iter()
            .filter(|e| e.reason == "Started")
            .map(|e| (e.message.clone(), ms(e.at)))
            .collect()
    }
}

#[test]
fn init_containers_run_one_at_a_time_to_completion_before_the_containers() {
    let mut h = harness();
    let uid = h.create(initializing(
        "web",
        &[
            ("version", APISERVER_V2, &["kube-apiserver", "--version"]),
            ("tool", TOOL, &["/bin/true"]),
        ],
    ));
    // Sandbox at 1; `version` pulls 1..3, is created 3..4 and runs 4..5 (one-shot, 1 s);
    // `tool` pulls 5..7, created 7..8, runs 8..9; then `main` pulls 9..11, runs at 12, Ready
    // at 15.
    let stages: [(f64, &str, [&str; 3], &str); 8] = [
        (2.0, "Pending", ["PodInitializing"; 3], "False"),
        (
            4.5,
            "Pending",
            ["Running", "PodInitializing", "PodInitializing"],
            "False",
        ),
        (
            6.0,
            "Pending",
            [
                "Terminated:Completed:0",
                "PodInitializing",
                "PodInitializing",
            ],
            "False",
        ),
        (
            8.5,
            "Pending",
            ["Terminated:Completed:0", "Running", "PodInitializing"],
            "False",
        ),
        (
            10.0,
            "Pending",
            [
                "Terminated:Completed:0",
                "Terminated:Completed:0",
                "PodInitializing",
            ],
            "True",
        ),
        (
            12.0,
            "Running",
            [
                "Terminated:Completed:0",
                "Terminated:Completed:0",
                "Running",
            ],
            "True",
        ),
        (
            14.9,
            "Running",
            [
                "Terminated:Completed:0",
                "Terminated:Completed:0",
                "Running",
            ],
            "True",
        ),
        (
            15.0,
            "Running",
            [
                "Terminated:Completed:0",
                "Terminated:Completed:0",
                "Running",
            ],
            "True",
        ),
    ];
    for (at, phase, [first, second, main], initialized) in stages {
        h.run_to(at);
        assert_eq!(
            (
                h.phase(&uid).as_str(),
                shown(&h.init(&uid, 0)).as_str(),
                shown(&h.init(&uid, 1)).as_str(),
                shown(&h.container(&uid)).as_str(),
                h.condition(&uid, "Initialized").unwrap().0.as_str(),
            ),
            (phase, first, second, main, initialized),
            "at {at}s"
        );
    }
    assert_eq!(
        h.starts(),
        [
            ("Started container version".to_string(), 4_000),
            ("Started container tool".to_string(), 8_000),
            ("Started container main".to_string(), 12_000),
        ]
    );
    assert_eq!(
        h.condition(&uid, "Initialized"),
        Some(("True".into(), 9_000))
    );
    assert_eq!(h.condition(&uid, "Ready"), Some(("True".into(), 15_000)));
    let version = h.init(&uid, 0);
    assert!(version.ready, "a completed init container is ready");
    assert_eq!((version.restart_count, version.started), (0, Some(false)));
    let done = version.state.unwrap().terminated.unwrap();
    assert_eq!(
        (
            ms(done.started_at.unwrap().0),
            ms(done.finished_at.unwrap().0)
        ),
        (4_000, 5_000)
    );
    assert!(
        version
            .image_id
            .starts_with("registry.k8s.io/kube-apiserver@sha256:")
    );
}

#[test]
fn while_initializing_the_conditions_name_the_incomplete_init_containers() {
    let mut h = harness();
    let uid = h.create(initializing(
        "web",
        &[("first", TOOL, &["true"]), ("second", TOOL, &["true"])],
    ));
    h.run_to(2.0);
    let condition = |h: &Harness, type_: &str| {
        h.status(&uid)
            .conditions
            .unwrap()
            .into_iter()
            .find(|c| c.type_ == type_)
            .unwrap()
    };
    let initialized = condition(&h, "Initialized");
    assert_eq!(
        (
            initialized.status.as_str(),
            initialized.reason.as_deref(),
            initialized.message.as_deref()
        ),
        (
            "False",
            Some("ContainersNotInitialized"),
            Some("containers with incomplete status: [first second]")
        )
    );
    h.run_to(5.5);
    assert_eq!(
        condition(&h, "Initialized").message.as_deref(),
        Some("containers with incomplete status: [second]")
    );
    let ready = condition(&h, "Ready");
    assert_eq!(
        (ready.status.as_str(), ready.message.as_deref()),
        ("False", Some("containers with unready status: [main]"))
    );
    assert_eq!(
        h.condition(&uid, "PodReadyToStartContainers").unwrap().0,
        "True"
    );
}

#[test]
fn an_unpullable_init_image_holds_the_pod_with_the_registrys_message_until_it_exists() {
    let mut h = harness();
    let missing = "registry.k8s.io/kube-scheduler:v9.9.9";
    let uid = h.create(initializing(
        "web",
        &[("version", missing, &["kube-scheduler", "--version"])],
    ));
    h.run_to(3.0);
    let waiting = h.init(&uid, 0).state.unwrap().waiting.unwrap();
    assert_eq!(waiting.reason.as_deref(), Some("ErrImagePull"));
    assert_eq!(
        waiting.message.unwrap(),
        format!(
            "rpc error: code = NotFound desc = failed to pull and unpack image \"{missing}\": \
             failed to resolve reference \"{missing}\": {missing}: not found"
        )
    );
    h.run_to(10.0);
    assert_eq!(shown(&h.init(&uid, 0)), "ImagePullBackOff");
    assert_eq!(shown(&h.container(&uid)), "PodInitializing");
    assert_eq!(h.phase(&uid), "Pending");
    let app_pulls = h
        .events
        .iter()
        .filter(|e| e.reason == "Pulling" && e.message.contains(APP))
        .count();
    assert_eq!(
        app_pulls, 0,
        "the container's image waits for initialization"
    );

    h.registry.add(missing, ImageBehaviour::default()).unwrap();
    // The retry at 13 s pulls 13..15, creates 15..16, runs 16..17; `main` pulls 17..19,
    // starts at 20.
    h.run_to(20.0);
    assert_eq!(shown(&h.init(&uid, 0)), "Terminated:Completed:0");
    assert_eq!(shown(&h.container(&uid)), "Running");
}

#[test]
fn a_failing_init_container_restarts_under_back_off_and_the_pod_stays_pending() {
    let mut h = harness();
    let broken = "example.com/broken:1";
    h.registry
        .add(
            broken,
            ImageBehaviour::crash_looping(Duration::from_secs(2)),
        )
        .unwrap();
    let uid = h.create(initializing(
        "web",
        &[("version", broken, &["broken", "--version"])],
    ));
    // Started at 4, exits 1 at 6 (the image's fate wins over `--version`), restarted at once:
    // created 6..7, exits at 9; then 10 s of back-off until 19.
    h.run_to(6.5);
    let init = h.init(&uid, 0);
    assert_eq!(
        (shown(&init).as_str(), init.restart_count, init.ready),
        ("Terminated:Error:1", 1, false),
        "the failure shows until the next instance runs (kubectl: Init:Error)"
    );
    h.run_to(10.0);
    let init = h.init(&uid, 0);
    assert_eq!(
        (shown(&init).as_str(), init.restart_count),
        ("CrashLoopBackOff", 1)
    );
    assert_eq!(
        init.state.unwrap().waiting.unwrap().message.as_deref(),
        Some("back-off 10s restarting failed container=version pod=web_kube-system(uid-web)")
    );
    let last = init.last_state.unwrap().terminated.unwrap();
    assert_eq!((last.exit_code, last.reason.as_deref()), (1, Some("Error")));
    assert_eq!(h.phase(&uid), "Pending");
    assert_eq!(shown(&h.container(&uid)), "PodInitializing");
    assert_eq!(h.condition(&uid, "Initialized").unwrap().0, "False");
    assert_eq!(h.condition(&uid, "Ready").unwrap().0, "False");

    // Fixed in the registry: the next instance (at 19, created at 20) prints its version and
    // exits 0 at 21, and the pod goes on.
    h.registry.add(broken, ImageBehaviour::default()).unwrap();
    h.run_to(30.0);
    let init = h.init(&uid, 0);
    assert_eq!(
        (shown(&init).as_str(), init.restart_count),
        ("Terminated:Completed:0", 2)
    );
    assert_eq!(
        h.condition(&uid, "Initialized"),
        Some(("True".into(), 21_000))
    );
    assert_eq!(shown(&h.container(&uid)), "Running");
    assert!(h.container(&uid).ready);
}

#[test]
fn under_restart_policy_never_a_failed_init_container_fails_the_pod() {
    let mut h = harness();
    let mut p = initializing(
        "once",
        &[("check", TOOL, &["false"]), ("after", TOOL, &["true"])],
    );
    p.spec.as_mut().unwrap().restart_policy = Some("Never".into());
    let uid = h.create(p);
    h.run_to(60.0);
    assert_eq!(h.phase(&uid), "Failed");
    assert_eq!(shown(&h.init(&uid, 0)), "Terminated:Error:1");
    assert_eq!(h.init(&uid, 0).restart_count, 0);
    assert_eq!(shown(&h.init(&uid, 1)), "PodInitializing");
    assert_eq!(shown(&h.container(&uid)), "PodInitializing");
    assert_eq!(
        h.starts(),
        [("Started container check".to_string(), 4_000)],
        "nothing runs after the failure"
    );
}

#[test]
fn a_completed_init_container_is_not_rerun_when_the_container_restarts() {
    let mut h = harness();
    let crashing = "example.com/crash:1";
    h.registry
        .add(
            crashing,
            ImageBehaviour::crash_looping(Duration::from_secs(2)),
        )
        .unwrap();
    let mut p = initializing("web", &[("version", TOOL, &["tool", "--version"])]);
    p.spec.as_mut().unwrap().containers[0].image = Some(crashing.into());
    let uid = h.create(p);
    h.run_to(60.0);
    let init_starts = h
        .starts()
        .iter()
        .filter(|(message, _)| message.ends_with("version"))
        .count();
    assert_eq!(init_starts, 1);
    assert!(h.container(&uid).restart_count >= 2);
    assert_eq!(h.phase(&uid), "Running");
    assert_eq!(
        h.condition(&uid, "Initialized"),
        Some(("True".into(), 5_000))
    );
}

#[test]
fn deleting_an_initializing_pod_stops_its_init_container_and_starts_nothing_else() {
    let mut h = harness();
    // A server as init container never completes: the pod initializes until deleted.
    let uid = h.create(initializing(
        "stuck",
        &[("wait", TOOL, &["tool", "--serve"])],
    ));
    h.run_to(10.0);
    assert_eq!(shown(&h.init(&uid, 0)), "Running");
    h.delete(&uid, Some(5));
    h.run_to(20.0);
    assert_eq!(h.deleted, [uid]);
    assert_eq!(h.starts(), [("Started container wait".to_string(), 4_000)]);
}

#[test]
fn one_shot_processes_bind_no_port_and_are_never_ready() {
    let mut h = harness();
    let mut p = apiserver("probe", APISERVER_V1, false);
    p.spec.as_mut().unwrap().containers[0].command =
        Some(vec!["kube-apiserver".into(), "--version".into()]);
    let uid = h.create(p);
    h.run_to(4.5);
    assert_eq!(h.state(&uid), "Running");
    assert_eq!(
        h.kubelet.ports().ports().count(),
        0,
        "`--version` listens nowhere"
    );
    let view = h.kubelet.containers().pop().unwrap();
    assert_eq!(
        view.listening_since, None,
        "it never takes part as a server"
    );
    // It exits 0 at 5 and, as a regular container under `Always`, is restarted like any
    // exited one; its readiness never passes.
    h.run_to(5.5);
    let c = h.container(&uid);
    assert_eq!(
        (h.state(&uid).as_str(), c.restart_count),
        ("ContainerCreating", 1)
    );
    let last = c.last_state.unwrap().terminated.unwrap();
    assert_eq!(
        (last.exit_code, last.reason.as_deref()),
        (0, Some("Completed"))
    );
    h.run_to(8.0);
    assert_eq!(h.state(&uid), "CrashLoopBackOff");
    assert!(!h.container(&uid).ready);
}

#[test]
fn a_machine_that_comes_back_runs_the_init_containers_again_first() {
    let mut h = harness();
    let uid = h.create(initializing(
        "web",
        &[("version", TOOL, &["tool", "--version"])],
    ));
    // `version` runs 4..5; `main` pulls 5..7 and starts at 8.
    h.run_to(20.0);
    h.kubelet.set_node_state(NodeState::Down, h.now);
    h.run_to(30.0);
    h.kubelet.set_node_state(NodeState::Up, h.now);
    h.relist();
    // A new sandbox at 31: `version` (its image on the node) is created 31..32 and runs
    // 32..33, then `main` is created 33..34.
    h.run_to(32.5);
    assert_eq!(shown(&h.init(&uid, 0)), "Running");
    assert_eq!(shown(&h.container(&uid)), "PodInitializing");
    assert_eq!(h.phase(&uid), "Running", "its containers ran before");
    assert_eq!(h.condition(&uid, "Initialized").unwrap().0, "True");
    h.run_to(40.0);
    assert_eq!(
        h.starts(),
        [
            ("Started container version".to_string(), 4_000),
            ("Started container main".to_string(), 8_000),
            ("Started container version".to_string(), 32_000),
            ("Started container main".to_string(), 34_000),
        ]
    );
    assert_eq!(h.init(&uid, 0).restart_count, 1);
}
