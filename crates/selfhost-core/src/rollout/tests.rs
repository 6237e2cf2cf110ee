//! Rollout completeness, template comparison and failure signals.

use k8s_openapi::api::core::v1::PodTemplateSpec;
use proptest::prelude::*;
use serde_json::json;

use super::*;
use crate::observation::{ContainerObservation, ContainerState, DaemonSetCounters, PodObservation};

fn ds(generation: i64, status: DaemonSetCounters) -> DaemonSetObservation {
    DaemonSetObservation {
        name: "self-hosted-kube-scheduler".into(),
        uid: None,
        resource_version: None,
        generation: Some(generation),
        template_generation: Some(generation),
        current_revision_hash: None,
        annotations: Default::default(),
        labels: Default::default(),
        selector: Default::default(),
        created: None,
        deleting_since: None,
        template: PodTemplateSpec::default(),
        update_strategy: None,
        min_ready_seconds: None,
        revision_history_limit: None,
        status,
        pods: vec![],
    }
}

fn counters(
    observed: i64,
    desired: i32,
    updated: i32,
    ready: i32,
    available: i32,
) -> DaemonSetCounters {
    DaemonSetCounters {
        observed_generation: Some(observed),
        desired,
        current: desired,
        updated,
        ready,
        available,
        unavailable: desired - available,
        misscheduled: 0,
    }
}

#[test]
fn kubectls_rule_and_ours() {
    let rows = [
        (
            "spec not observed",
            counters(1, 3, 3, 3, 3),
            Some("observe generation 2"),
            Some("observe generation 2"),
        ),
        (
            "not all updated",
            counters(2, 3, 2, 3, 3),
            Some("2 of 3 new pods"),
            Some("2 of 3 new pods"),
        ),
        (
            "not all available",
            counters(2, 3, 3, 3, 2),
            Some("2 of 3 updated pods"),
            Some("2 of 3 updated pods"),
        ),
        (
            "available but not Ready",
            counters(2, 3, 3, 2, 3),
            None,
            Some("2 of 3 pods"),
        ),
        ("converged", counters(2, 3, 3, 3, 3), None, None),
    ];
    for (case, status, kubectl, ours) in rows {
        let ds = ds(2, status);
        let got = kubectl_rollout_complete(&ds).err();
        assert_eq!(got.is_some(), kubectl.is_some(), "{case}: kubectl {got:?}");
        if let (Some(got), Some(want)) = (&got, kubectl) {
            assert!(got.contains(want), "{case}: {got}");
        }
        let got = status_converged(&ds).err();
        assert_eq!(got.is_some(), ours.is_some(), "{case}: ours {got:?}");
        if let (Some(got), Some(want)) = (&got, ours) {
            assert!(got.contains(want), "{case}: {got}");
        }
    }
}

fn template(value: serde_json::Value) -> PodTemplateSpec {
    serde_json::from_value(value).expect("template")
}

fn rendered() -> PodTemplateSpec {
    template(json!({
        "metadata": {"labels": {"k8s-app": "self-hosted-kube-apiserver"}},
        "spec": {
            "hostNetwork": true,
            "containers": [{
                "name": "kube-apiserver",
                "image": "registry.k8s.io/kube-apiserver:v1.33.1",
                "command": ["kube-apiserver", "--a=1", "--b=2"],
                "ports": [{"containerPort": 6443}],
                "env": [{"name": "HOST_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.hostIP"}}}],
                "livenessProbe": {"httpGet": {"port": 6443, "path": "/livez", "scheme": "HTTPS"}, "failureThreshold": 8}
            }],
            "volumes": [
                {"name": "certs", "hostPath": {"path": "/etc/kubernetes/pki"}},
                {"name": "token", "secret": {"secretName": "t"}}
            ],
            "serviceAccountName": "kube-apiserver"
        }
    }))
}

/// What the API server returns for [`rendered`].
fn stored() -> PodTemplateSpec {
    template(json!({
        "metadata": {"labels": {"k8s-app": "self-hosted-kube-apiserver"}, "creationTimestamp": null},
        "spec": {
            "hostNetwork": true,
            "containers": [{
                "name": "kube-apiserver",
                "image": "registry.k8s.io/kube-apiserver:v1.33.1",
                "imagePullPolicy": "IfNotPresent",
                "command": ["kube-apiserver", "--a=1", "--b=2"],
                "ports": [{"containerPort": 6443, "protocol": "TCP"}],
                "env": [{"name": "HOST_IP", "valueFrom": {"fieldRef": {"apiVersion": "v1", "fieldPath": "status.hostIP"}}}],
                "livenessProbe": {"httpGet": {"port": 6443, "path": "/livez", "scheme": "HTTPS"}, "failureThreshold": 8,
                                  "timeoutSeconds": 1, "periodSeconds": 10, "successThreshold": 1},
                "resources": {},
                "terminationMessagePath": "/dev/termination-log",
                "terminationMessagePolicy": "File"
            }],
            "volumes": [
                {"name": "certs", "hostPath": {"path": "/etc/kubernetes/pki", "type": ""}},
                {"name": "token", "secret": {"secretName": "t", "defaultMode": 420}}
            ],
            "serviceAccountName": "kube-apiserver",
            "serviceAccount": "kube-apiserver",
            "dnsPolicy": "ClusterFirst",
            "restartPolicy": "Always",
            "schedulerName": "default-scheduler",
            "securityContext": {},
            "terminationGracePeriodSeconds": 30
        }
    }))
}

#[test]
fn a_template_equals_its_server_defaulted_form() {
    assert!(templates_equal(&rendered(), &stored()));
    assert_eq!(first_difference(&rendered(), &stored()), None);
    assert_eq!(template_hash(&rendered()), template_hash(&stored()));
}

/// Case, an edit of the stored template, the path of the difference it makes.
type Edit = (&'static str, fn(&mut serde_json::Value), &'static str);

#[test]
fn real_changes_are_differences() {
    let change = |f: fn(&mut serde_json::Value)| {
        let mut value = serde_json::to_value(stored()).expect("json");
        f(&mut value);
        first_difference(&stored(), &template(value)).map(|d| d.path)
    };
    let rows: [Edit; 6] = [
        (
            "image",
            |v| {
                v["spec"]["containers"][0]["image"] =
                    json!("registry.k8s.io/kube-apiserver:v1.33.2")
            },
            "spec.containers[0].image",
        ),
        (
            "a dropped probe",
            |v| {
                v["spec"]["containers"][0]
                    .as_object_mut()
                    .expect("c")
                    .remove("livenessProbe");
            },
            "spec.containers[0].livenessProbe",
        ),
        (
            "flag order",
            |v| v["spec"]["containers"][0]["command"] = json!(["kube-apiserver", "--b=2", "--a=1"]),
            "spec.containers[0].command[1]",
        ),
        (
            "an added flag",
            |v| {
                v["spec"]["containers"][0]["command"] =
                    json!(["kube-apiserver", "--a=1", "--b=2", "--c=3"])
            },
            "spec.containers[0].command[3]",
        ),
        (
            "a label",
            |v| v["metadata"]["labels"]["tier"] = json!("control-plane"),
            "metadata.labels.tier",
        ),
        (
            "a non-default grace period",
            |v| v["spec"]["terminationGracePeriodSeconds"] = json!(60),
            "spec.terminationGracePeriodSeconds",
        ),
    ];
    for (case, f, path) in rows {
        assert_eq!(change(f).as_deref(), Some(path), "{case}");
    }
}

#[test]
fn an_untagged_image_is_pulled_always() {
    let with_policy = |image: &str, policy: &str| {
        template(
            json!({"spec": {"containers": [{"name": "c", "image": image, "imagePullPolicy": policy}]}}),
        )
    };
    let without =
        |image: &str| template(json!({"spec": {"containers": [{"name": "c", "image": image}]}}));
    assert!(templates_equal(
        &without("kube-apiserver"),
        &with_policy("kube-apiserver", "Always")
    ));
    assert!(templates_equal(
        &without("reg:5000/kube-apiserver:latest"),
        &with_policy("reg:5000/kube-apiserver:latest", "Always")
    ));
    assert!(templates_equal(
        &without("reg:5000/kube-apiserver:v1.33.1"),
        &with_policy("reg:5000/kube-apiserver:v1.33.1", "IfNotPresent")
    ));
    assert!(templates_equal(
        &without("kube-apiserver@sha256:abc"),
        &with_policy("kube-apiserver@sha256:abc", "IfNotPresent")
    ));
    assert!(!templates_equal(
        &without("kube-apiserver"),
        &with_policy("kube-apiserver", "IfNotPresent")
    ));
}

/// The hash is stored in annotations and compared by later releases: it must not change.
#[test]
fn the_template_hash_is_stable() {
    assert_eq!(
        template_hash(&PodTemplateSpec::default()),
        "08f44b07b5901a25"
    );
    assert_eq!(template_hash(&rendered()).len(), 16);
    assert_ne!(
        template_hash(&rendered()),
        template_hash(&PodTemplateSpec::default())
    );
}

proptest! {
    /// Normalising is idempotent: a normalised template read back normalises to itself.
    #[test]
    fn normalising_twice_changes_nothing(
        image in "[a-z]{1,8}(:[a-z0-9.]{1,6})?",
        probe: bool,
        grace in proptest::option::of(0i64..100),
        ports in proptest::collection::vec(1i32..65535, 0..3),
    ) {
        let mut container = json!({"name": "c", "image": image,
            "ports": ports.iter().map(|p| json!({"containerPort": p})).collect::<Vec<_>>()});
        if probe {
            container["readinessProbe"] = json!({"httpGet": {"port": 80}});
        }
        let mut spec = json!({"containers": [container]});
        if let Some(grace) = grace {
            spec["terminationGracePeriodSeconds"] = json!(grace);
        }
        let once = normalize(&template(json!({"spec": spec})));
        let twice = normalize(&template(once.clone()));
        prop_assert_eq!(once, twice);
    }
}

fn pod(state: ContainerState, restarts: i32, terminating: bool) -> PodObservation {
    PodObservation {
        name: "p".into(),
        uid: None,
        node: Some("cp-1".into()),
        template_generation: Some(1),
        revision_hash: None,
        phase: None,
        ready: false,
        ready_since: None,
        created: None,
        start_time: None,
        deleting_since: terminating.then(|| "2026-01-01T00:00:00Z".parse().expect("time")),
        deletion_grace_seconds: None,
        termination_grace_seconds: None,
        containers: vec![ContainerObservation {
            name: "kube-apiserver".into(),
            image: String::new(),
            ready: false,
            restart_count: restarts,
            state,
            last_termination: None,
            last_exit_at: None,
        }],
    }
}

fn waiting(reason: &str) -> ContainerState {
    ContainerState::Waiting {
        reason: Some(reason.into()),
        message: Some("detail".into()),
    }
}

#[test]
fn failure_signals_are_image_errors_and_crash_loops_past_the_threshold() {
    let strict = SignalPolicy {
        crash_loop_restarts: 3,
        ignore_crash_loops: false,
        exits_count_after: None,
    };
    let lenient = SignalPolicy {
        ignore_crash_loops: true,
        ..strict
    };
    let running = ContainerState::Running { started_at: None };
    let rows = [
        (
            "image pull back-off",
            pod(waiting("ImagePullBackOff"), 0, false),
            strict,
            Some("ImagePullBackOff (detail)"),
        ),
        (
            "invalid image name",
            pod(waiting("InvalidImageName"), 0, false),
            lenient,
            Some("InvalidImageName"),
        ),
        (
            "missing config",
            pod(waiting("CreateContainerConfigError"), 0, false),
            strict,
            Some("CreateContainerConfigError"),
        ),
        (
            "crash loop at the threshold",
            pod(waiting("CrashLoopBackOff"), 3, false),
            strict,
            Some("3 restarts"),
        ),
        (
            "crash loop below it",
            pod(waiting("CrashLoopBackOff"), 2, false),
            strict,
            None,
        ),
        (
            "crash loop expected",
            pod(waiting("CrashLoopBackOff"), 9, false),
            lenient,
            None,
        ),
        (
            "restarted but running now",
            pod(running, 5, false),
            strict,
            None,
        ),
        (
            "creating",
            pod(waiting("ContainerCreating"), 0, false),
            strict,
            None,
        ),
        (
            "terminating pods are going anyway",
            pod(waiting("ImagePullBackOff"), 0, true),
            strict,
            None,
        ),
    ];
    for (case, pod, policy, want) in rows {
        let signals = failure_signals([&pod], policy);
        match want {
            None => assert!(signals.is_empty(), "{case}: {signals:?}"),
            Some(text) => {
                assert_eq!(signals.len(), 1, "{case}: {signals:?}");
                assert!(
                    signals[0].to_string().contains(text),
                    "{case}: {}",
                    signals[0]
                );
            }
        }
    }
}

/// Exits an API outage forced do not make a crash loop: only a container whose latest exit
/// came after the cut-off counts.
#[test]
fn exits_count_towards_a_crash_loop_only_after_the_api_answered_for_a_while() {
    let at = |s: i64| k8s_openapi::jiff::Timestamp::from_second(1_700_000_000 + s).expect("time");
    let settle = i64::try_from(OUTAGE_SETTLE.as_secs()).expect("small");
    // The cut-off: run start, or the outage's end plus the settle time, whichever is later.
    let cut_offs = [
        ("no outage seen", at(0), None, at(0)),
        ("an outage before the run", at(100), Some(at(50)), at(100)),
        (
            "an outage during the run",
            at(0),
            Some(at(50)),
            at(50 + settle),
        ),
    ];
    for (case, run, until, want) in cut_offs {
        assert_eq!(exits_count_after(run, until), want, "{case}");
    }
    let policy = |after: i64| SignalPolicy {
        crash_loop_restarts: 3,
        ignore_crash_loops: false,
        exits_count_after: Some(at(after)),
    };
    let crash_looping = |exited: Option<i64>| {
        let mut p = pod(waiting("CrashLoopBackOff"), 4, false);
        p.containers[0].last_exit_at = exited.map(at);
        p
    };
    let rows = [
        (
            "exited before the cut-off",
            crash_looping(Some(10)),
            20,
            false,
        ),
        ("exited at the cut-off", crash_looping(Some(20)), 20, false),
        ("exited after it", crash_looping(Some(21)), 20, true),
        ("exit time unknown", crash_looping(None), 20, true),
    ];
    for (case, pod, after, signalled) in rows {
        let signals = failure_signals([&pod], policy(after));
        assert_eq!(!signals.is_empty(), signalled, "{case}: {signals:?}");
    }
}
