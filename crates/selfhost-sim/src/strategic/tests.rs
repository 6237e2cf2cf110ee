use serde_json::{Value, json};

use super::*;
use crate::resources::{CONFIGMAPS, DAEMONSETS, PODS};

/// A self-hosted kube-apiserver DaemonSet as the server stores it.
fn daemonset() -> Value {
    json!({
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": {
            "name": "self-hosted-kube-apiserver",
            "namespace": "kube-system",
            "labels": {"k8s-app": "self-hosted-kube-apiserver"},
            "finalizers": ["a", "b"]
        },
        "spec": {
            "selector": {"matchLabels": {"k8s-app": "self-hosted-kube-apiserver"}},
            "template": {
                "metadata": {"labels": {"k8s-app": "self-hosted-kube-apiserver"}},
                "spec": {
                    "hostNetwork": true,
                    "tolerations": [{"key": "node-role.kubernetes.io/control-plane", "effect": "NoSchedule"}],
                    "containers": [
                        {
                            "name": "kube-apiserver",
                            "image": "registry.k8s.io/kube-apiserver:v1.32.4",
                            "command": ["kube-apiserver", "--secure-port=6443"],
                            "env": [{"name": "A", "value": "1"}, {"name": "B", "value": "2"}],
                            "ports": [{"containerPort": 6443, "name": "https"}],
                            "volumeMounts": [
                                {"mountPath": "/etc/kubernetes/pki", "name": "k8s-certs", "readOnly": true},
                                {"mountPath": "/etc/ssl/certs", "name": "ca-certs", "readOnly": true}
                            ]
                        },
                        {"name": "sidecar", "image": "busybox:1.36"}
                    ],
                    "volumes": [
                        {"name": "k8s-certs", "hostPath": {"path": "/etc/kubernetes/pki", "type": "DirectoryOrCreate"}},
                        {"name": "ca-certs", "hostPath": {"path": "/etc/ssl/certs"}}
                    ]
                }
            }
        }
    })
}

fn pod_spec(ds: &Value) -> &Value {
    &ds["spec"]["template"]["spec"]
}

fn names(list: &Value, key: &str) -> Vec<String> {
    list.as_array()
        .expect("a list")
        .iter()
        .map(|i| {
            i[key]
                .as_str()
                .map_or_else(|| i[key].to_string(), str::to_string)
        })
        .collect()
}

fn patched(patch: Value) -> Value {
    strategic_merge_patch(&daemonset(), &patch, &DAEMONSETS).expect("patch applies")
}

#[test]
fn kubectl_set_image_changes_only_that_containers_image() {
    let ds = patched(json!({"spec": {"template": {"spec": {"containers": [
        {"image": "registry.k8s.io/kube-apiserver:v1.33.2", "name": "kube-apiserver"}
    ]}}}}));
    let mut expected = daemonset();
    expected["spec"]["template"]["spec"]["containers"][0]["image"] =
        json!("registry.k8s.io/kube-apiserver:v1.33.2");
    assert_eq!(ds, expected);
}

#[test]
fn kubectl_label_and_annotate_merge_and_remove_keys() {
    let ds = patched(
        json!({"metadata": {"labels": {"tier": "control-plane"}, "annotations": {"note": "x"}}}),
    );
    assert_eq!(
        ds["metadata"]["labels"],
        json!({"k8s-app": "self-hosted-kube-apiserver", "tier": "control-plane"})
    );
    assert_eq!(ds["metadata"]["annotations"], json!({"note": "x"}));
    let ds = strategic_merge_patch(
        &ds,
        &json!({"metadata": {"labels": {"tier": null}}}),
        &DAEMONSETS,
    )
    .expect("label removal");
    assert_eq!(
        ds["metadata"]["labels"],
        json!({"k8s-app": "self-hosted-kube-apiserver"})
    );
}

#[test]
fn keyed_lists_merge_item_by_item_and_other_lists_are_replaced() {
    // (patch of the pod template spec, field, key, expected keys in order)
    let cases: Vec<(Value, &str, &str, Vec<&str>)> = vec![
        // A new container comes first, as with the real apiserver.
        (
            json!({"containers": [{"name": "new", "image": "x"}]}),
            "containers",
            "name",
            vec!["new", "kube-apiserver", "sidecar"],
        ),
        (
            json!({"containers": [{"name": "sidecar", "$patch": "delete"}]}),
            "containers",
            "name",
            vec!["kube-apiserver"],
        ),
        (
            json!({"containers": [{"name": "only", "image": "x"}, {"$patch": "replace"}]}),
            "containers",
            "name",
            vec!["only"],
        ),
        (
            json!({"volumes": [{"name": "extra", "emptyDir": {}}]}),
            "volumes",
            "name",
            vec!["extra", "k8s-certs", "ca-certs"],
        ),
        (
            json!({"tolerations": [{"operator": "Exists"}]}),
            "tolerations",
            "operator",
            vec!["Exists"],
        ),
    ];
    for (spec_patch, field, key, expected) in cases {
        let ds = patched(json!({"spec": {"template": {"spec": spec_patch}}}));
        assert_eq!(names(&pod_spec(&ds)[field], key), expected, "{spec_patch}");
    }
    let ds = patched(
        json!({"spec": {"template": {"spec": {"containers": [{"name": "kube-apiserver", "command": ["x"]}]}}}}),
    );
    assert_eq!(
        pod_spec(&ds)["containers"][0]["command"],
        json!(["x"]),
        "command is atomic"
    );
}

#[test]
fn nested_keyed_lists_merge_by_their_own_keys() {
    let ds = patched(json!({"spec": {"template": {"spec": {"containers": [{
        "name": "kube-apiserver",
        "env": [{"name": "B", "value": null, "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}}, {"name": "C", "value": "3"}],
        "ports": [{"containerPort": 6443, "hostPort": 6443}],
        "volumeMounts": [{"mountPath": "/etc/ssl/certs", "readOnly": false}]
    }]}}}}));
    let container = &pod_spec(&ds)["containers"][0];
    assert_eq!(
        container["env"],
        json!([
            {"name": "A", "value": "1"},
            {"name": "B", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}},
            {"name": "C", "value": "3"}
        ])
    );
    assert_eq!(
        container["ports"],
        json!([{"containerPort": 6443, "name": "https", "hostPort": 6443}])
    );
    assert_eq!(
        container["volumeMounts"][1],
        json!({"mountPath": "/etc/ssl/certs", "name": "ca-certs", "readOnly": false})
    );
    assert_eq!(pod_spec(&ds)["containers"][1]["name"], "sidecar");
}

#[test]
fn client_side_apply_patches_honour_order_retain_keys_and_deletions() {
    // What kubectl apply sends after the image changed, env B was dropped, the volume became
    // an emptyDir, and the sidecar was moved first.
    let ds = patched(json!({
        "metadata": {"annotations": {"kubectl.kubernetes.io/last-applied-configuration": "{}"}},
        "spec": {"template": {"spec": {
            "$setElementOrder/containers": [{"name": "sidecar"}, {"name": "kube-apiserver"}],
            "$setElementOrder/volumes": [{"name": "k8s-certs"}, {"name": "ca-certs"}],
            "containers": [{
                "$setElementOrder/env": [{"name": "A"}],
                "env": [{"$patch": "delete", "name": "B"}],
                "image": "registry.k8s.io/kube-apiserver:v1.33.2",
                "name": "kube-apiserver"
            }],
            "volumes": [{"$retainKeys": ["emptyDir", "name"], "emptyDir": {}, "name": "ca-certs"}]
        }}}
    }));
    let spec = pod_spec(&ds);
    assert_eq!(
        names(&spec["containers"], "name"),
        ["sidecar", "kube-apiserver"]
    );
    let apiserver = &spec["containers"][1];
    assert_eq!(apiserver["image"], "registry.k8s.io/kube-apiserver:v1.33.2");
    assert_eq!(apiserver["env"], json!([{"name": "A", "value": "1"}]));
    assert_eq!(
        spec["volumes"][1],
        json!({"name": "ca-certs", "emptyDir": {}})
    );
    assert_eq!(names(&spec["volumes"], "name"), ["k8s-certs", "ca-certs"]);
    assert!(
        ds["metadata"]["annotations"]["kubectl.kubernetes.io/last-applied-configuration"]
            .is_string()
    );
}

#[test]
fn scalar_merge_lists_are_sets() {
    let add = patched(json!({"metadata": {"finalizers": ["b", "c"]}}));
    assert_eq!(add["metadata"]["finalizers"], json!(["a", "b", "c"]));
    let add = patched(json!({"metadata": {"finalizers": ["c"]}}));
    assert_eq!(
        add["metadata"]["finalizers"],
        json!(["c", "a", "b"]),
        "new items come first"
    );
    let remove = patched(json!({"metadata": {"$deleteFromPrimitiveList/finalizers": ["a"]}}));
    assert_eq!(remove["metadata"]["finalizers"], json!(["b"]));
    let ordered = patched(json!({"metadata": {"$setElementOrder/finalizers": ["b", "a"]}}));
    assert_eq!(ordered["metadata"]["finalizers"], json!(["b", "a"]));
    let cm = json!({"metadata": {"name": "c"}});
    let untouched = strategic_merge_patch(
        &cm,
        &json!({"metadata": {"$deleteFromPrimitiveList/finalizers": ["a"]}}),
        &CONFIGMAPS,
    )
    .expect("nothing to delete from");
    assert_eq!(untouched, cm);
}

#[test]
fn map_directives_replace_or_empty_a_map() {
    let ds =
        patched(json!({"spec": {"selector": {"$patch": "replace", "matchLabels": {"x": "y"}}}}));
    assert_eq!(ds["spec"]["selector"], json!({"matchLabels": {"x": "y"}}));
    let ds = patched(json!({"spec": {"template": {"metadata": {"$patch": "delete"}}}}));
    assert_eq!(ds["spec"]["template"]["metadata"], json!({}));
    let ds = patched(json!({"spec": {"template": {"spec": {"hostNetwork": null}}}}));
    assert!(pod_spec(&ds).get("hostNetwork").is_none());
}

#[test]
fn new_values_carry_no_directives_or_nulls() {
    let cm = json!({"metadata": {"name": "c"}});
    let patch = json!({"data": {"a": "1", "b": null}, "metadata": {"ownerReferences": [
        {"uid": "u1", "name": "o"}, {"uid": "u2", "$patch": "delete"}
    ]}});
    let out = strategic_merge_patch(&cm, &patch, &CONFIGMAPS).expect("applies");
    assert_eq!(out["data"], json!({"a": "1"}));
    assert_eq!(
        out["metadata"]["ownerReferences"],
        json!([{"uid": "u1", "name": "o"}])
    );
}

#[test]
fn pod_status_conditions_merge_by_type() {
    let pod = json!({"status": {"phase": "Pending", "conditions": [
        {"type": "PodScheduled", "status": "True"}, {"type": "Ready", "status": "False"}
    ]}});
    let out = strategic_merge_patch(
        &pod,
        &json!({"status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}}),
        &PODS,
    )
    .expect("applies");
    assert_eq!(
        out["status"]["conditions"],
        json!([{"type": "PodScheduled", "status": "True"}, {"type": "Ready", "status": "True"}])
    );
}

#[test]
fn malformed_patches_are_refused_with_the_apiservers_words() {
    let cases: Vec<(Value, &str, u16)> = vec![
        (json!([1]), "invalid JSON document", 400),
        (
            json!({"spec": {"template": {"spec": {"containers": [{"image": "x"}]}}}}),
            "map: map[image:x] does not contain declared merge key: name",
            500,
        ),
        (
            json!({"spec": {"template": {"spec": {"containers": [{"name": "a", "$patch": "merge"}]}}}}),
            "merging lists cannot yet be specified in the patch",
            500,
        ),
        (
            json!({"spec": {"$patch": "explode"}}),
            "unknown patch type: explode in map: map[$patch:explode]",
            500,
        ),
        (
            json!({"spec": {"$retainKeys": ["selector"], "minReadySeconds": 5}}),
            "invalid patch format of retainKeys",
            400,
        ),
        (
            json!({"metadata": {"$deleteFromPrimitiveList": ["a"]}}),
            "invalid patch format of primitive list",
            400,
        ),
        (
            json!({"metadata": {"finalizers": [["a"]]}}),
            "lists of lists are not supported",
            422,
        ),
        (
            json!({"spec": {"template": {"spec": {
                "$setElementOrder/containers": [{"name": "kube-apiserver"}],
                "containers": [{"name": "sidecar", "image": "y"}]
            }}}}),
            "The order in patch list:\n[map[image:y name:sidecar]]\n doesn't match $setElementOrder list:\n[map[name:kube-apiserver]]\n",
            500,
        ),
    ];
    for (patch, message, code) in cases {
        let err = strategic_merge_patch(&daemonset(), &patch, &DAEMONSETS).expect_err(message);
        assert_eq!(err.to_string(), message);
        assert_eq!(err.to_api_error().code, code, "{message}");
    }
}
