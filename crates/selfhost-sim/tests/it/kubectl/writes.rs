//! What a user changes: apply, set image, label, annotate, the three patch types, and
//! deletion with each cascade policy. Results are read back through kube-rs.

use k8s_openapi::api::apps::v1::DaemonSet;
use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use kube::api::PostParams;
use selfhost_sim::{SimServer, SimServerOptions};
use serde_json::{Value, json};

use super::{APISERVER_DAEMONSET, Kubectl, cluster, path_arg};
use crate::common::{eventually, is_gone, object};

const DS: &str = "self-hosted-kube-apiserver";

async fn daemonset(sim: &SimServer) -> Value {
    let ds = Api::<DaemonSet>::namespaced(sim.client(), "kube-system")
        .get(DS)
        .await
        .expect("read the DaemonSet through kube-rs");
    serde_json::to_value(ds).expect("a DaemonSet is JSON")
}

fn container(ds: &Value) -> &Value {
    &ds["spec"]["template"]["spec"]["containers"][0]
}

#[tokio::test]
async fn apply_creates_then_leaves_alone_then_configures_a_daemonset() {
    let sim = SimServer::start(SimServerOptions::default())
        .await
        .expect("the simulator starts");
    let Some(kubectl) = Kubectl::for_sim(&sim, "apply -f") else {
        return;
    };
    let manifest = kubectl.file("apiserver.yaml", APISERVER_DAEMONSET);
    let out = kubectl
        .run(&["apply", "-f", path_arg(&manifest), "-v=6"])
        .await;
    assert!(out.success, "{}", out.stderr);
    assert_eq!(
        out.stdout.trim(),
        "daemonset.apps/self-hosted-kube-apiserver created"
    );
    // The OpenAPI v3 documents tell kubectl to leave --validate=strict to the server.
    assert!(
        out.stderr.contains("fieldValidation=Strict"),
        "{}",
        out.stderr
    );
    let created = daemonset(&sim).await;
    assert!(
        created["metadata"]["annotations"]["kubectl.kubernetes.io/last-applied-configuration"]
            .is_string(),
        "client-side apply records what it applied"
    );
    assert_eq!(
        created["spec"]["revisionHistoryLimit"], 10,
        "server defaults are applied"
    );
    assert_eq!(created["metadata"]["generation"], 1);

    let out = kubectl.ok(&["apply", "-f", path_arg(&manifest)]).await;
    assert_eq!(
        out.trim(),
        "daemonset.apps/self-hosted-kube-apiserver unchanged"
    );

    let upgraded = APISERVER_DAEMONSET
        .replace("kube-apiserver:v1.32.4", "kube-apiserver:v1.33.2")
        .replace("            - --permit-port-sharing=true\n", "");
    let manifest = kubectl.file("apiserver-upgraded.yaml", &upgraded);
    let run = kubectl.run(&["apply", "-f", path_arg(&manifest)]).await;
    assert!(
        run.success && run.stderr.is_empty(),
        "no warning, e.g. about OpenAPI: {}",
        run.stderr
    );
    let out = run.stdout;
    assert_eq!(
        out.trim(),
        "daemonset.apps/self-hosted-kube-apiserver configured"
    );
    let configured = daemonset(&sim).await;
    assert_eq!(
        container(&configured)["image"],
        "registry.k8s.io/kube-apiserver:v1.33.2"
    );
    let command = container(&configured)["command"]
        .as_array()
        .expect("command")
        .clone();
    assert!(
        !command.contains(&json!("--permit-port-sharing=true")),
        "removed flag is gone"
    );
    assert!(command.contains(&json!("--secure-port=6443")));
    assert_eq!(
        container(&configured)["volumeMounts"],
        container(&created)["volumeMounts"]
    );
    assert_eq!(configured["metadata"]["generation"], 2);
}

#[tokio::test]
async fn set_image_changes_only_that_containers_image() {
    let sim = cluster().await;
    let Some(kubectl) = Kubectl::for_sim(&sim, "set image") else {
        return;
    };
    let before = daemonset(&sim).await;
    let out = kubectl
        .ok(&[
            "set",
            "image",
            "-n",
            "kube-system",
            "ds/self-hosted-kube-apiserver",
            "kube-apiserver=registry.k8s.io/kube-apiserver:v1.33.2",
        ])
        .await;
    assert_eq!(
        out.trim(),
        "daemonset.apps/self-hosted-kube-apiserver image updated"
    );
    let mut after = daemonset(&sim).await;
    assert_eq!(
        container(&after)["image"],
        "registry.k8s.io/kube-apiserver:v1.33.2"
    );
    after["spec"]["template"]["spec"]["containers"][0]["image"] =
        container(&before)["image"].clone();
    assert_eq!(
        after["spec"], before["spec"],
        "nothing else in the spec changed"
    );
}

#[tokio::test]
async fn label_and_annotate_add_change_and_remove_keys() {
    let sim = cluster().await;
    let Some(kubectl) = Kubectl::for_sim(&sim, "label/annotate") else {
        return;
    };
    let ns = ["-n", "kube-system"];
    let steps: &[(&[&str], &str)] = &[
        (
            &["label", "ds", DS, "tier=control-plane"],
            "daemonset.apps/self-hosted-kube-apiserver labeled",
        ),
        (
            &["annotate", "ds", DS, "selfhost.dev/note=pivot"],
            "daemonset.apps/self-hosted-kube-apiserver annotated",
        ),
        (
            &["label", "ds", DS, "--overwrite", "tier=node"],
            "daemonset.apps/self-hosted-kube-apiserver labeled",
        ),
        (
            &["label", "ds", DS, "k8s-app-"],
            "daemonset.apps/self-hosted-kube-apiserver unlabeled",
        ),
    ];
    for (args, expected) in steps {
        let mut args = args.to_vec();
        args.extend_from_slice(&ns);
        assert_eq!(kubectl.ok(&args).await.trim(), *expected, "{args:?}");
    }
    let ds = daemonset(&sim).await;
    assert_eq!(ds["metadata"]["labels"], json!({"tier": "node"}));
    assert_eq!(ds["metadata"]["annotations"]["selfhost.dev/note"], "pivot");

    let refused = kubectl
        .run(&["label", "ds", DS, "tier=control-plane", "-n", "kube-system"])
        .await;
    assert!(!refused.success, "an existing label needs --overwrite");
    let invalid = kubectl
        .run(&["label", "ds", DS, "bad=has space", "-n", "kube-system"])
        .await;
    assert!(!invalid.success);
}

#[tokio::test]
async fn patch_applies_merge_json_and_strategic_patches() {
    let sim = cluster().await;
    let Some(kubectl) = Kubectl::for_sim(&sim, "patch") else {
        return;
    };
    let patch = |kind: &'static str, body: &'static str| {
        [
            "patch",
            "ds",
            DS,
            "-n",
            "kube-system",
            "--type",
            kind,
            "-p",
            body,
        ]
    };
    let out = kubectl
        .ok(&patch("merge", r#"{"spec":{"minReadySeconds":5}}"#))
        .await;
    assert_eq!(
        out.trim(),
        "daemonset.apps/self-hosted-kube-apiserver patched"
    );
    kubectl
        .ok(&patch(
            "json",
            r#"[{"op":"replace","path":"/spec/revisionHistoryLimit","value":3}]"#,
        ))
        .await;
    kubectl
        .ok(&patch(
            "strategic",
            r#"{"spec":{"template":{"spec":{"containers":[{"name":"kube-apiserver","env":[{"name":"GOMAXPROCS","value":"2"}]}]}}}}"#,
        ))
        .await;
    let ds = daemonset(&sim).await;
    assert_eq!(ds["spec"]["minReadySeconds"], 5);
    assert_eq!(ds["spec"]["revisionHistoryLimit"], 3);
    let env: Vec<&str> = container(&ds)["env"]
        .as_array()
        .expect("env")
        .iter()
        .filter_map(|e| e["name"].as_str())
        .collect();
    assert_eq!(
        env,
        ["GOMAXPROCS", "HOST_IP"],
        "env merged by name, the new one first"
    );
    assert_eq!(
        container(&ds)["image"],
        "registry.k8s.io/kube-apiserver:v1.32.4"
    );

    let unchanged = kubectl
        .ok(&patch("merge", r#"{"spec":{"minReadySeconds":5}}"#))
        .await;
    assert_eq!(
        unchanged.trim(),
        "daemonset.apps/self-hosted-kube-apiserver patched (no change)"
    );
    let immutable = kubectl
        .run(&patch(
            "merge",
            r#"{"spec":{"selector":{"matchLabels":{"k8s-app":"other"}}}}"#,
        ))
        .await;
    assert!(!immutable.success);
    assert!(
        immutable.stderr.contains("field is immutable"),
        "{}",
        immutable.stderr
    );
}

/// The DaemonSet's uid and an unbound pod it owns (unbound pods are deleted at once, so the
/// garbage collector needs no kubelet).
async fn owned_pod(sim: &SimServer) -> String {
    let uid = daemonset(sim).await["metadata"]["uid"]
        .as_str()
        .expect("uid")
        .to_string();
    let pod: Pod = object(json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "self-hosted-kube-apiserver-x7k2p", "labels": {"k8s-app": DS},
                     "ownerReferences": [{"apiVersion": "apps/v1", "kind": "DaemonSet", "name": DS, "uid": uid,
                                          "controller": true, "blockOwnerDeletion": true}]},
        "spec": {"containers": [{"name": "kube-apiserver", "image": "registry.k8s.io/kube-apiserver:v1.32.4"}]}
    }));
    Api::<Pod>::namespaced(sim.client(), "kube-system")
        .create(&PostParams::default(), &pod)
        .await
        .expect("create the owned pod");
    uid
}

#[tokio::test]
async fn delete_honours_each_cascade_policy() {
    for cascade in ["orphan", "background", "foreground"] {
        let sim = cluster().await;
        let Some(kubectl) = Kubectl::for_sim(&sim, "delete --cascade") else {
            return;
        };
        owned_pod(&sim).await;
        let out = kubectl
            .ok(&[
                "delete",
                "ds",
                DS,
                "-n",
                "kube-system",
                &format!("--cascade={cascade}"),
            ])
            .await;
        assert_eq!(
            out.trim(),
            "daemonset.apps \"self-hosted-kube-apiserver\" deleted",
            "{cascade}"
        );
        let daemonsets: Api<DaemonSet> = Api::namespaced(sim.client(), "kube-system");
        assert!(
            is_gone(&daemonsets, DS).await,
            "kubectl waits until the DaemonSet is gone ({cascade})"
        );
        let pods: Api<Pod> = Api::namespaced(sim.client(), "kube-system");
        let pod = "self-hosted-kube-apiserver-x7k2p";
        if cascade == "orphan" {
            let orphan = pods.get(pod).await.expect("an orphaned pod stays");
            assert!(
                orphan
                    .metadata
                    .owner_references
                    .unwrap_or_default()
                    .is_empty()
            );
        } else {
            eventually(&format!("the pod is collected ({cascade})"), || async {
                is_gone(&pods, pod).await.then_some(())
            })
            .await;
        }
        sim.shutdown().await;
    }
}
