use k8s_openapi::api::apps::v1::DaemonSet;
use k8s_openapi::api::core::v1::{Pod, PodTemplateSpec};
use serde_json::{Value, json};

use super::*;

const IMAGE: &str = "registry.k8s.io/kube-apiserver:v1.34.0";

fn target_template() -> PodTemplateSpec {
    serde_json::from_value(json!({
        "metadata": {"labels": {"k8s-app": "self-hosted-kube-apiserver"}},
        "spec": {
            "hostNetwork": true,
            "nodeSelector": {"node-role.kubernetes.io/control-plane": "", "zone": "a"},
            "tolerations": [{"key": "dedicated", "operator": "Exists"}],
            "containers": [
                {"name": "sidecar", "image": "example.org/sidecar:1"},
                {"name": "kube-apiserver", "image": IMAGE,
                 "command": ["kube-apiserver", "--secure-port=6443"]}
            ]
        }
    }))
    .expect("valid template")
}

fn image() -> PrepullImage {
    PrepullImage::of(Component::ApiServer, &target_template()).expect("an image")
}

fn daemonset(generation: i64, observed: Option<i64>, desired: i32) -> DaemonSet {
    let mut ds = prepull_daemonset(&image(), "registry.k8s.io/pause:3.10.1", &target_template());
    ds.metadata.generation = Some(generation);
    ds.status = observed.map(|g| {
        serde_json::from_value(json!({
            "observedGeneration": g,
            "desiredNumberScheduled": desired,
            "currentNumberScheduled": desired,
            "numberMisscheduled": 0,
            "numberReady": 0
        }))
        .expect("valid status")
    });
    ds
}

fn pod(node: &str, status: Value) -> Pod {
    serde_json::from_value(json!({
        "metadata": {"name": format!("upgrade-prepull-kube-apiserver-{node}")},
        "spec": {
            "nodeName": node,
            "initContainers": [{"name": "kube-apiserver", "image": IMAGE}],
            "containers": [{"name": "pause", "image": "registry.k8s.io/pause:3.10.1"}]
        },
        "status": status
    }))
    .expect("valid pod")
}

fn ready(node: &str) -> Pod {
    pod(
        node,
        json!({"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}),
    )
}

fn init_waiting(node: &str, reason: &str, message: &str) -> Pod {
    pod(
        node,
        json!({"phase": "Pending",
               "conditions": [{"type": "Ready", "status": "False"}],
               "initContainerStatuses": [{"name": "kube-apiserver", "image": IMAGE, "imageID": "",
                   "ready": false, "restartCount": 0,
                   "state": {"waiting": {"reason": reason, "message": message}}}]}),
    )
}

#[test]
fn the_daemonset_selects_its_own_labels_on_control_plane_nodes_where_the_component_runs() {
    let ds = daemonset(1, None, 0);
    assert_eq!(
        ds.metadata.name.as_deref(),
        Some("upgrade-prepull-kube-apiserver")
    );
    assert_eq!(ds.metadata.namespace.as_deref(), Some("kube-system"));
    let spec = ds.spec.expect("spec");
    let labels = prepull_labels(Component::ApiServer);
    assert_eq!(spec.selector.match_labels.as_ref(), Some(&labels));
    let template = spec.template;
    assert_eq!(
        template.metadata.and_then(|m| m.labels).as_ref(),
        Some(&labels),
        "the selector must match the template's labels (kubeadm v1.9's had none)"
    );
    assert!(
        !labels.contains_key("k8s-app"),
        "no label the self-hosted or backup selectors could match"
    );
    let pod = template.spec.expect("pod spec");
    let selector = pod.node_selector.expect("node selector");
    assert_eq!(
        selector
            .get("node-role.kubernetes.io/control-plane")
            .map(String::as_str),
        Some("")
    );
    assert_eq!(
        selector.get("zone").map(String::as_str),
        Some("a"),
        "the target's placement"
    );
    let tolerated: Vec<_> = pod
        .tolerations
        .iter()
        .flatten()
        .filter_map(|t| t.key.clone())
        .collect();
    for key in [
        "dedicated",
        "node-role.kubernetes.io/control-plane",
        "node-role.kubernetes.io/master",
    ] {
        assert!(tolerated.iter().any(|k| k == key), "{key} in {tolerated:?}");
    }
    assert_eq!(
        pod.host_network, None,
        "no host ports: nothing to contend with"
    );
    let init = pod.init_containers.expect("init container");
    assert_eq!(init.len(), 1);
    assert_eq!(init[0].image.as_deref(), Some(IMAGE));
    assert_eq!(
        init[0].command,
        Some(vec!["kube-apiserver".to_string(), "--version".to_string()]),
        "the image's own binary, which prints its version and exits"
    );
    assert_eq!(pod.containers.len(), 1);
    assert_eq!(pod.containers[0].name, PAUSE_CONTAINER);
    assert_eq!(
        pod.containers[0].image.as_deref(),
        Some("registry.k8s.io/pause:3.10.1")
    );
    assert_eq!(pod.automount_service_account_token, Some(false));
}

#[test]
fn the_image_is_the_components_container_and_its_binary_defaults_to_the_component_name() {
    let cases = [
        (
            json!([{"name": "kube-scheduler", "image": "r/kube-scheduler:v1", "command": ["/usr/local/bin/kube-scheduler"]}]),
            Some(("r/kube-scheduler:v1", "/usr/local/bin/kube-scheduler")),
        ),
        (
            json!([{"name": "other", "image": "r/s:v1"}]),
            Some(("r/s:v1", "kube-scheduler")),
        ),
        (json!([{"name": "kube-scheduler", "image": ""}]), None),
        (json!([]), None),
    ];
    for (containers, expected) in cases {
        let template: PodTemplateSpec =
            serde_json::from_value(json!({"spec": {"containers": containers}})).expect("valid");
        let got = PrepullImage::of(Component::Scheduler, &template);
        assert_eq!(
            got.as_ref().map(|i| (i.image.as_str(), i.binary.as_str())),
            expected,
            "{containers}"
        );
    }
}

#[test]
fn the_pause_image_comes_from_the_component_images_registry_with_the_releases_tag() {
    let cases = [
        (
            "registry.k8s.io/kube-apiserver:v1.34.0",
            "v1.34.0",
            "registry.k8s.io/pause:3.10.1",
        ),
        (
            "registry.k8s.io/kube-apiserver:v1.33.1",
            "v1.33.1",
            "registry.k8s.io/pause:3.10",
        ),
        (
            "mirror.local:5000/k8s/kube-apiserver:v1.29.0",
            "v1.29.0",
            "mirror.local:5000/k8s/pause:3.9",
        ),
        (
            "registry.k8s.io/kube-apiserver@sha256:abc",
            "v1.31.0",
            "registry.k8s.io/pause:3.10",
        ),
        (
            "kube-apiserver:v1.32.0",
            "v1.32.0",
            "registry.k8s.io/pause:3.10",
        ),
    ];
    for (image, version, expected) in cases {
        let version = KubeVersion::parse(version).expect("version");
        assert_eq!(pause_image(image, &version), expected, "{image}");
    }
}

#[test]
fn judging_the_pods() {
    let pulled = |nodes: &[&str]| PrepullState::Pulled {
        nodes: nodes.iter().map(|n| n.to_string()).collect(),
    };
    let pull_failure = |node: &str, reason: &str, message: Option<&str>| PullFailure {
        component: Component::ApiServer,
        node: node.to_string(),
        image: IMAGE.to_string(),
        reason: reason.to_string(),
        message: message.map(str::to_string),
    };
    let not_found = "rpc error: code = NotFound desc = failed to pull and unpack image";
    let mut terminating = ready("cp-3");
    terminating.metadata.deletion_timestamp =
        Some(serde_json::from_value(json!("2026-01-01T00:00:00Z")).expect("time"));
    let wrong_arch = pod(
        "cp-2",
        json!({"phase": "Pending",
               "initContainerStatuses": [{"name": "kube-apiserver", "image": IMAGE, "imageID": "x",
                   "ready": false, "restartCount": 2,
                   "state": {"waiting": {"reason": "CrashLoopBackOff"}},
                   "lastState": {"terminated": {"exitCode": 255, "reason": "Error",
                       "message": "exec format error"}}}]}),
    );
    let pause_missing = pod(
        "cp-1",
        json!({"phase": "Pending",
               "initContainerStatuses": [{"name": "kube-apiserver", "image": IMAGE, "imageID": "x",
                   "ready": true, "restartCount": 0,
                   "state": {"terminated": {"exitCode": 0, "reason": "Completed"}}}],
               "containerStatuses": [{"name": "pause", "image": "registry.k8s.io/pause:3.10.1",
                   "imageID": "", "ready": false, "restartCount": 0,
                   "state": {"waiting": {"reason": "ImagePullBackOff", "message": "Back-off pulling image"}}}]}),
    );
    let cases: Vec<(&str, Option<DaemonSet>, Vec<Pod>, PrepullState)> = vec![
        (
            "every wanted node Ready",
            Some(daemonset(1, Some(1), 2)),
            vec![ready("cp-2"), ready("cp-1")],
            pulled(&["cp-1", "cp-2"]),
        ),
        (
            "a node still pulling",
            Some(daemonset(1, Some(1), 2)),
            vec![ready("cp-1"), init_waiting("cp-2", "PodInitializing", "")],
            PrepullState::Waiting {
                pending: vec!["kube-apiserver: cp-2: kube-apiserver PodInitializing".into()],
            },
        ),
        (
            "a pod not created yet",
            Some(daemonset(1, Some(1), 2)),
            vec![ready("cp-1")],
            PrepullState::Waiting {
                pending: vec!["kube-apiserver: 1 pod(s) not created yet".into()],
            },
        ),
        (
            "a terminating pod does not count",
            Some(daemonset(1, Some(1), 2)),
            vec![ready("cp-1"), terminating],
            PrepullState::Waiting {
                pending: vec!["kube-apiserver: 1 pod(s) not created yet".into()],
            },
        ),
        (
            "the controller has not seen the DaemonSet",
            Some(daemonset(2, Some(1), 2)),
            vec![],
            PrepullState::Waiting {
                pending: vec![
                    "upgrade-prepull-kube-apiserver: the DaemonSet controller has not seen it yet"
                        .into(),
                ],
            },
        ),
        (
            "no DaemonSet yet",
            None,
            vec![],
            PrepullState::Waiting {
                pending: vec!["upgrade-prepull-kube-apiserver: not created yet".into()],
            },
        ),
        (
            "a pull error on one node fails at once, with the kubelet's words",
            Some(daemonset(1, Some(1), 3)),
            vec![
                ready("cp-1"),
                init_waiting("cp-3", "ErrImagePull", not_found),
            ],
            PrepullState::Failed {
                failures: vec![pull_failure("cp-3", "ErrImagePull", Some(not_found))],
            },
        ),
        (
            "back-off after a failed pull; every failing node is named",
            Some(daemonset(1, Some(1), 3)),
            vec![
                init_waiting("cp-2", "ImagePullBackOff", "Back-off pulling image"),
                init_waiting("cp-1", "ErrImagePull", not_found),
                ready("cp-3"),
            ],
            PrepullState::Failed {
                failures: vec![
                    pull_failure("cp-1", "ErrImagePull", Some(not_found)),
                    pull_failure("cp-2", "ImagePullBackOff", Some("Back-off pulling image")),
                ],
            },
        ),
        (
            "an invalid name",
            Some(daemonset(1, Some(1), 1)),
            vec![init_waiting("cp-1", "InvalidImageName", "")],
            PrepullState::Failed {
                failures: vec![pull_failure("cp-1", "InvalidImageName", None)],
            },
        ),
        (
            "pulled, but the binary does not run on this node",
            Some(daemonset(1, Some(1), 1)),
            vec![wrong_arch],
            PrepullState::Failed {
                failures: vec![pull_failure(
                    "cp-2",
                    "`--version` exited 255",
                    Some("exec format error"),
                )],
            },
        ),
        (
            "the pause image is missing",
            Some(daemonset(1, Some(1), 1)),
            vec![pause_missing],
            PrepullState::Failed {
                failures: vec![PullFailure {
                    image: "registry.k8s.io/pause:3.10.1".into(),
                    ..pull_failure("cp-1", "ImagePullBackOff", Some("Back-off pulling image"))
                }],
            },
        ),
    ];
    for (name, ds, pods, expected) in cases {
        assert_eq!(
            judge(Component::ApiServer, ds.as_ref(), &pods),
            expected,
            "{name}"
        );
    }
}

#[test]
fn a_daemonset_that_selects_no_node_is_a_failure_not_a_pass() {
    let got = judge(Component::ApiServer, Some(&daemonset(1, Some(1), 0)), &[]);
    let PrepullState::Failed { failures } = got else {
        panic!("expected a failure, got {got:?}");
    };
    assert_eq!(failures.len(), 1);
    assert!(
        failures[0]
            .to_string()
            .contains("selects no control-plane node"),
        "{}",
        failures[0]
    );
}

#[test]
fn the_check_names_image_and_node_and_says_how_to_run_it_when_not_run() {
    let failed = images_pullable_check(&PrepullOutcome::Failed {
        failures: vec![PullFailure {
            component: Component::ApiServer,
            node: "cp-2".into(),
            image: IMAGE.into(),
            reason: "ErrImagePull".into(),
            message: Some("not found".into()),
        }],
    });
    assert_eq!(failed.id.id(), "images-pullable");
    assert_eq!(failed.verdict, Verdict::Fail);
    assert_eq!(
        failed.message,
        format!("node cp-2 cannot pull {IMAGE} (ErrImagePull: not found)")
    );
    assert!(failed.fix.is_some());

    let not_run = images_pullable_check(&PrepullOutcome::NotRun {
        reason: "not run: pass --prepull".into(),
    });
    assert_eq!(not_run.verdict, Verdict::NotRun);
    assert_eq!(not_run.message, "not run: pass --prepull");

    let pulled = images_pullable_check(&PrepullOutcome::Pulled {
        images: vec![image()],
        nodes: BTreeMap::from([(Component::ApiServer, vec!["cp-1".into(), "cp-2".into()])]),
    });
    assert_eq!(pulled.verdict, Verdict::Pass);
    assert_eq!(
        pulled.message,
        format!("{IMAGE} pulled and runs on 2 node(s)")
    );

    let timed_out = images_pullable_check(&PrepullOutcome::TimedOut {
        waited_seconds: 300,
        pending: vec!["kube-apiserver: cp-2: kube-apiserver PodInitializing".into()],
    });
    assert_eq!(timed_out.verdict, Verdict::Fail);
    assert!(timed_out.message.contains("cp-2"), "{}", timed_out.message);
}

#[test]
fn the_same_failure_on_several_nodes_and_components_is_one_phrase() {
    let failure = |component, node: &str, image: &str| PullFailure {
        component,
        node: node.into(),
        image: image.into(),
        reason: "ErrImagePull".into(),
        message: Some("not found".into()),
    };
    let pause = "registry.k8s.io/pause:3.10.1";
    let text = describe_failures(&[
        failure(Component::ApiServer, "cp-2", pause),
        failure(Component::Scheduler, "cp-1", pause),
        failure(Component::ControllerManager, "cp-1", pause),
        failure(Component::Scheduler, "cp-3", "r/kube-scheduler:v9"),
    ]);
    assert_eq!(
        text,
        "node cp-3 cannot pull r/kube-scheduler:v9 (ErrImagePull: not found); \
         nodes cp-1, cp-2 cannot pull registry.k8s.io/pause:3.10.1 (ErrImagePull: not found)",
        "one phrase per image, in image order"
    );
}

#[test]
fn an_unscheduled_pod_is_named_by_the_node_it_is_meant_for() {
    let meant: Pod = serde_json::from_value(json!({
        "metadata": {"name": "upgrade-prepull-kube-apiserver-x1"},
        "spec": {
            "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [{"matchFields": [
                    {"key": "metadata.name", "operator": "In", "values": ["cp-2"]}]}]}}},
            "containers": [{"name": "pause", "image": "registry.k8s.io/pause:3.10.1"}]
        },
        "status": {"phase": "Pending"}
    }))
    .expect("valid pod");
    let mut nowhere = meant.clone();
    if let Some(spec) = nowhere.spec.as_mut() {
        spec.affinity = None;
    }
    let got = judge(
        Component::ApiServer,
        Some(&daemonset(1, Some(1), 2)),
        &[meant, nowhere],
    );
    assert_eq!(
        got,
        PrepullState::Waiting {
            pending: vec![
                "kube-apiserver: cp-2: Pending".into(),
                "kube-apiserver: pod upgrade-prepull-kube-apiserver-x1 (not scheduled): Pending"
                    .into(),
            ]
        }
    );
}
