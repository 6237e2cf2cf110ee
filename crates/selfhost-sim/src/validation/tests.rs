use serde_json::{Value, json};

use super::*;
use crate::resources::{CONFIGMAPS, DAEMONSETS, LEASES, NAMESPACES, PODS};

fn daemonset() -> Value {
    json!({
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": {"name": "self-hosted-kube-apiserver", "namespace": "kube-system",
                     "labels": {"k8s-app": "self-hosted-kube-apiserver"}},
        "spec": {
            "selector": {"matchLabels": {"k8s-app": "self-hosted-kube-apiserver"}},
            "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 1, "maxSurge": 0}},
            "revisionHistoryLimit": 10,
            "template": {
                "metadata": {"labels": {"k8s-app": "self-hosted-kube-apiserver"}},
                "spec": {
                    "hostNetwork": true,
                    "restartPolicy": "Always",
                    "containers": [{
                        "name": "kube-apiserver",
                        "image": "registry.k8s.io/kube-apiserver:v1.33.2",
                        "ports": [{"containerPort": 6443, "hostPort": 6443, "protocol": "TCP"}],
                        "volumeMounts": [{"name": "k8s-certs", "mountPath": "/etc/kubernetes/pki"}]
                    }],
                    "volumes": [{"name": "k8s-certs", "hostPath": {"path": "/etc/kubernetes/pki", "type": "DirectoryOrCreate"}}]
                }
            }
        }
    })
}

fn pod() -> Value {
    json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "kube-apiserver-cp-1", "namespace": "kube-system"},
        "spec": {
            "nodeName": "cp-1",
            "restartPolicy": "Always",
            "terminationGracePeriodSeconds": 30,
            "tolerations": [{"operator": "Exists", "effect": "NoSchedule"}],
            "containers": [{"name": "kube-apiserver", "image": "registry.k8s.io/kube-apiserver:v1.32.4",
                            "command": ["kube-apiserver"]}]
        }
    })
}

/// `(field, message)` of each cause of a 422.
fn causes(result: Result<(), ApiError>) -> Vec<(String, String)> {
    let err = result.expect_err("expected 422 Invalid");
    assert_eq!((err.code, err.reason.as_str()), (422, "Invalid"));
    err.details.expect("Invalid carries details")["causes"]
        .as_array()
        .expect("causes")
        .iter()
        .map(|c| {
            (
                c["field"].as_str().unwrap_or_default().to_string(),
                c["message"].as_str().unwrap_or_default().to_string(),
            )
        })
        .collect()
}

/// `obj` with the field at `pointer` set, creating missing map keys on the way.
fn with(mut obj: Value, pointer: &str, value: Value) -> Value {
    let mut at = &mut obj;
    for segment in pointer.trim_start_matches('/').split('/') {
        at = match at {
            Value::Array(items) => &mut items[segment.parse::<usize>().expect("an index")],
            other => &mut other[segment],
        };
    }
    *at = value;
    obj
}

#[test]
fn valid_objects_are_accepted() {
    assert_eq!(validate_create(&DAEMONSETS, &daemonset()), Ok(()));
    assert_eq!(validate_create(&PODS, &pod()), Ok(()));
    assert_eq!(
        validate_update(&DAEMONSETS, &daemonset(), &daemonset()),
        Ok(())
    );
    let generated = with(
        pod(),
        "/metadata",
        json!({"generateName": "kube-proxy-", "namespace": "kube-system"}),
    );
    assert_eq!(validate_create(&PODS, &generated), Ok(()));
    // The apiserver accepts a surge together with host ports (kubernetes/kubernetes#106417).
    let surge = with(
        daemonset(),
        "/spec/updateStrategy/rollingUpdate",
        json!({"maxUnavailable": 0, "maxSurge": 1}),
    );
    assert_eq!(validate_create(&DAEMONSETS, &surge), Ok(()));
}

/// A kind, an object, and the `(field, message)` causes its creation is refused with.
type Case = (ResourceType, Value, Vec<(&'static str, &'static str)>);

#[test]
fn creation_refusals_name_the_field_and_say_why() {
    let cases: Vec<Case> = vec![
        (
            DAEMONSETS,
            with(daemonset(), "/metadata/name", json!("Self-Hosted")),
            vec![(
                "metadata.name",
                "Invalid value: \"Self-Hosted\": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')",
            )],
        ),
        (
            PODS,
            with(pod(), "/metadata", json!({"namespace": "kube-system"})),
            vec![(
                "metadata.name",
                "Required value: name or generateName is required",
            )],
        ),
        (
            DAEMONSETS,
            with(daemonset(), "/spec/selector", json!(null)),
            vec![(
                "spec.template.metadata.labels",
                "Invalid value: map[string]string{\"k8s-app\":\"self-hosted-kube-apiserver\"}: `selector` does not match template `labels`",
            )],
        ),
        (
            DAEMONSETS,
            with(daemonset(), "/spec/selector", json!({})),
            vec![(
                "spec.selector",
                "Invalid value: v1.LabelSelector{MatchLabels:map[string]string(nil), MatchExpressions:[]v1.LabelSelectorRequirement(nil)}: empty selector is invalid for daemonset",
            )],
        ),
        (
            DAEMONSETS,
            with(
                daemonset(),
                "/spec/template/metadata/labels",
                json!({"k8s-app": "other"}),
            ),
            vec![(
                "spec.template.metadata.labels",
                "Invalid value: map[string]string{\"k8s-app\":\"other\"}: `selector` does not match template `labels`",
            )],
        ),
        (
            DAEMONSETS,
            with(
                daemonset(),
                "/spec/updateStrategy/rollingUpdate",
                json!({"maxUnavailable": 1, "maxSurge": 1}),
            ),
            vec![(
                "spec.updateStrategy.rollingUpdate.maxSurge",
                "Invalid value: 1: may not be set when maxUnavailable is non-zero",
            )],
        ),
        (
            DAEMONSETS,
            with(
                daemonset(),
                "/spec/updateStrategy/rollingUpdate",
                json!({"maxUnavailable": "0%", "maxSurge": 0}),
            ),
            vec![(
                "spec.updateStrategy.rollingUpdate.maxUnavailable",
                "Required value: cannot be 0 when maxSurge is 0",
            )],
        ),
        (
            DAEMONSETS,
            with(
                daemonset(),
                "/spec/template/spec/restartPolicy",
                json!("Never"),
            ),
            vec![(
                "spec.template.spec.restartPolicy",
                "Unsupported value: \"Never\": supported values: \"Always\"",
            )],
        ),
        (
            DAEMONSETS,
            with(
                daemonset(),
                "/spec/template/spec/containers/0/ports/0/hostPort",
                json!(7443),
            ),
            vec![(
                "spec.template.spec.containers[0].ports[0].hostPort",
                "Invalid value: 7443: must match `containerPort` when `hostNetwork` is true",
            )],
        ),
        (
            DAEMONSETS,
            with(daemonset(), "/spec/template/spec/volumes", json!([])),
            vec![(
                "spec.template.spec.containers[0].volumeMounts[0].name",
                "Not found: \"k8s-certs\"",
            )],
        ),
        (
            PODS,
            with(pod(), "/spec/containers", json!([])),
            vec![("spec.containers", "Required value")],
        ),
        (
            PODS,
            with(
                pod(),
                "/spec/containers",
                json!([{"name": "a", "image": ""}, {"name": "a", "image": "x"}]),
            ),
            vec![
                ("spec.containers[0].image", "Required value"),
                ("spec.containers[1].name", "Duplicate value: \"a\""),
            ],
        ),
        (
            PODS,
            with(pod(), "/metadata/labels", json!({"tier": "control plane"})),
            vec![(
                "metadata.labels",
                "Invalid value: \"control plane\": a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')",
            )],
        ),
        (
            NAMESPACES,
            json!({"metadata": {"name": "kube.system"}}),
            vec![(
                "metadata.name",
                "Invalid value: \"kube.system\": a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')",
            )],
        ),
        (
            LEASES,
            json!({"metadata": {"name": "kube-scheduler"}, "spec": {"leaseDurationSeconds": 0}}),
            vec![(
                "spec.leaseDurationSeconds",
                "Invalid value: 0: must be greater than 0",
            )],
        ),
        (
            CONFIGMAPS,
            json!({"metadata": {"name": "c"}, "data": {"bad key": "x"}}),
            vec![(
                "data[bad key]",
                "Invalid value: \"bad key\": a valid config key must consist of alphanumeric characters, '-', '_' or '.' (e.g. 'key.name',  or 'KEY_NAME',  or 'key-name', regex used for validation is '[-._a-zA-Z0-9]+')",
            )],
        ),
    ];
    for (rt, obj, expected) in cases {
        let got = causes(validate_create(&rt, &obj));
        let expected: Vec<(String, String)> = expected
            .into_iter()
            .map(|(f, m)| (f.to_string(), m.to_string()))
            .collect();
        assert_eq!(got, expected, "{obj}");
    }
}

#[test]
fn the_whole_message_reads_like_the_apiservers() {
    let err = validate_create(
        &DAEMONSETS,
        &with(
            daemonset(),
            "/spec/template/metadata/labels",
            json!({"k8s-app": "x"}),
        ),
    )
    .expect_err("mismatch");
    assert_eq!(
        err.message,
        "DaemonSet.apps \"self-hosted-kube-apiserver\" is invalid: spec.template.metadata.labels: Invalid value: map[string]string{\"k8s-app\":\"x\"}: `selector` does not match template `labels`"
    );
}

#[test]
fn a_daemonsets_selector_is_immutable() {
    let old = daemonset();
    let new = with(
        with(
            old.clone(),
            "/spec/selector",
            json!({"matchLabels": {"k8s-app": "x"}}),
        ),
        "/spec/template/metadata/labels",
        json!({"k8s-app": "x"}),
    );
    assert_eq!(
        causes(validate_update(&DAEMONSETS, &old, &new)),
        [(
            "spec.selector".to_string(),
            "Invalid value: v1.LabelSelector{MatchLabels:map[string]string{\"k8s-app\":\"x\"}, MatchExpressions:[]v1.LabelSelectorRequirement(nil)}: field is immutable".to_string()
        )]
    );
    // An empty matchExpressions list is the same selector.
    let same = with(old.clone(), "/spec/selector/matchExpressions", json!([]));
    assert_eq!(validate_update(&DAEMONSETS, &old, &same), Ok(()));
    let renamed = with(old.clone(), "/metadata/name", json!("other"));
    assert_eq!(
        causes(validate_update(&DAEMONSETS, &old, &renamed))[0].1,
        "Invalid value: \"other\": field is immutable"
    );
}

#[test]
fn pod_updates_may_change_only_images_deadlines_and_added_tolerations() {
    let old = pod();
    let allowed = [
        with(
            old.clone(),
            "/spec/containers/0/image",
            json!("registry.k8s.io/kube-apiserver:v1.33.2"),
        ),
        with(
            old.clone(),
            "/spec/tolerations",
            json!([{"operator": "Exists", "effect": "NoSchedule"}, {"key": "x", "operator": "Exists"}]),
        ),
        with(old.clone(), "/metadata/labels", json!({"a": "b"})),
    ];
    for new in allowed {
        assert_eq!(validate_update(&PODS, &old, &new), Ok(()), "{new}");
    }
    let command = with(
        old.clone(),
        "/spec/containers/0/command",
        json!(["kube-apiserver", "--v=2"]),
    );
    let refused = causes(validate_update(&PODS, &old, &command));
    assert_eq!(refused.len(), 1);
    assert_eq!(refused[0].0, "spec");
    assert!(refused[0].1.starts_with(
        "Forbidden: pod updates may not change fields other than `spec.containers[*].image`,`spec.initContainers[*].image`,`spec.activeDeadlineSeconds`,`spec.tolerations` (only additions to existing tolerations),`spec.terminationGracePeriodSeconds` (allow it to be set to 1 if it was previously negative)\n"
    ));
    assert!(
        refused[0].1.ends_with(
            "\n- spec.containers[0].command: [\"kube-apiserver\"]\n+ spec.containers[0].command: [\"kube-apiserver\",\"--v=2\"]"
        ),
        "{}",
        refused[0].1
    );

    let moved = with(old.clone(), "/spec/nodeName", json!("cp-2"));
    assert!(
        causes(validate_update(&PODS, &old, &moved))[0]
            .1
            .contains("- spec.nodeName: \"cp-1\"\n+ spec.nodeName: \"cp-2\"")
    );
    let removed = with(old.clone(), "/spec/tolerations", json!([]));
    assert_eq!(
        causes(validate_update(&PODS, &old, &removed))[0],
        (
            "spec.tolerations".to_string(),
            "Forbidden: existing toleration can not be modified except its tolerationSeconds"
                .to_string()
        )
    );
    let added = with(
        old.clone(),
        "/spec/containers",
        json!([old["spec"]["containers"][0], {"name": "b", "image": "b"}]),
    );
    assert_eq!(
        causes(validate_update(&PODS, &old, &added)),
        [(
            "spec.containers".to_string(),
            "Forbidden: pod updates may not add or remove containers".to_string()
        )]
    );
}

#[test]
fn status_writes_check_identity_and_counters_only() {
    let old = with(
        daemonset(),
        "/spec/selector",
        json!({"matchLabels": {"k8s-app": "self-hosted-kube-apiserver"}}),
    );
    let mut new = old.clone();
    new["spec"]["template"]["spec"]["containers"] = json!([]);
    new["status"] = json!({"numberReady": 1, "observedGeneration": 1});
    assert_eq!(validate_status_update(&DAEMONSETS, &old, &new), Ok(()));
    new["status"]["numberReady"] = json!(-1);
    assert_eq!(
        causes(validate_status_update(&DAEMONSETS, &old, &new)),
        [(
            "status.numberReady".to_string(),
            "Invalid value: -1: must be greater than or equal to 0".to_string()
        )]
    );
}
