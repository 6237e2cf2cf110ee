//! What a user with a typo in a manifest sees: kubectl's default `--validate=strict` asks the
//! server to reject unknown fields, `--validate=warn` gets them dropped with a warning, and
//! `--validate=false` gets them dropped silently.

use k8s_openapi::api::apps::v1::DaemonSet;
use kube::Api;
use selfhost_sim::{SimServer, SimServerOptions};
use serde_json::Value;

use super::{APISERVER_DAEMONSET, Kubectl, path_arg};

const DS: &str = "self-hosted-kube-apiserver";

/// The fixture with `spec.bogus` and a misspelt container field.
fn manifest_with_typos() -> String {
    let with_bogus = APISERVER_DAEMONSET.replacen("spec:\n", "spec:\n  bogus: true\n", 1);
    assert_ne!(
        with_bogus, APISERVER_DAEMONSET,
        "the fixture has a top-level spec"
    );
    let typo = with_bogus.replacen("image: ", "imagePullPolicyx: Always\n          image: ", 1);
    assert_ne!(typo, with_bogus, "the fixture has a container image");
    typo
}

async fn stored(sim: &SimServer) -> Option<Value> {
    Api::<DaemonSet>::namespaced(sim.client(), "kube-system")
        .get_opt(DS)
        .await
        .expect("read through kube-rs")
        .map(|ds| serde_json::to_value(ds).expect("JSON"))
}

#[tokio::test]
async fn apply_with_a_typo_fails_in_the_apiservers_words_and_creates_nothing() {
    let sim = SimServer::start(SimServerOptions::default())
        .await
        .expect("the simulator starts");
    let Some(kubectl) = Kubectl::for_sim(&sim, "apply with a typo") else {
        return;
    };
    let manifest = kubectl.file("typo.yaml", &manifest_with_typos());
    let out = kubectl.run(&["apply", "-f", path_arg(&manifest)]).await;
    assert!(!out.success, "{}", out.stdout);
    assert!(
        out.stderr.contains(&format!(
            r#"Error from server (BadRequest): error when creating "{}": DaemonSet in version "v1" cannot be handled as a DaemonSet: strict decoding error: unknown field "spec.bogus", unknown field "spec.template.spec.containers[0].imagePullPolicyx""#,
            path_arg(&manifest)
        )),
        "{}",
        out.stderr
    );
    assert!(stored(&sim).await.is_none());
}

#[tokio::test]
async fn apply_with_validation_off_or_warning_drops_the_typos() {
    let sim = SimServer::start(SimServerOptions::default())
        .await
        .expect("the simulator starts");
    let Some(kubectl) = Kubectl::for_sim(&sim, "apply --validate=false") else {
        return;
    };
    let manifest = kubectl.file("typo.yaml", &manifest_with_typos());
    let out = kubectl
        .run(&["apply", "-f", path_arg(&manifest), "--validate=false"])
        .await;
    assert!(out.success, "{}", out.stderr);
    assert!(out.stderr.is_empty(), "no warning: {}", out.stderr);
    assert_eq!(out.stdout.trim(), format!("daemonset.apps/{DS} created"));
    let ds = stored(&sim).await.expect("created");
    assert!(ds["spec"].get("bogus").is_none());

    // Applying again (a strategic merge patch) with warnings: nothing changes, and kubectl
    // relays what the server dropped.
    let out = kubectl
        .run(&["apply", "-f", path_arg(&manifest), "--validate=warn"])
        .await;
    assert!(out.success, "{}", out.stderr);
    assert!(
        out.stderr
            .contains(r#"Warning: unknown field "spec.bogus""#)
            && out.stderr.contains(
                r#"Warning: unknown field "spec.template.spec.containers[0].imagePullPolicyx""#
            ),
        "{}",
        out.stderr
    );
}

#[tokio::test]
async fn applying_a_typo_to_an_existing_object_is_an_invalid_patch() {
    let sim = SimServer::start(SimServerOptions::default())
        .await
        .expect("the simulator starts");
    let Some(kubectl) = Kubectl::for_sim(&sim, "apply a typo as a patch") else {
        return;
    };
    let manifest = kubectl.file("apiserver.yaml", APISERVER_DAEMONSET);
    kubectl.ok(&["apply", "-f", path_arg(&manifest)]).await;
    let before = stored(&sim).await.expect("created");
    let manifest = kubectl.file("typo.yaml", &manifest_with_typos());
    let out = kubectl.run(&["apply", "-f", path_arg(&manifest)]).await;
    assert!(!out.success, "{}", out.stdout);
    // kubectl words a 422 without a kind as "The request is invalid"; the value is the
    // strategic merge patch kubectl computed, as Go prints a map.
    assert!(
        out.stderr
            .contains(r#"The request is invalid: patch: Invalid value: "map[metadata:map["#)
            && out.stderr.contains(
                r#"strict decoding error: unknown field "spec.bogus", unknown field "spec.template.spec.containers[0].imagePullPolicyx""#
            ),
        "{}",
        out.stderr
    );
    assert_eq!(
        stored(&sim).await.expect("still there")["metadata"]["resourceVersion"],
        before["metadata"]["resourceVersion"],
        "nothing was written"
    );
}

#[tokio::test]
async fn server_side_apply_with_a_typo_is_a_schema_error() {
    let sim = SimServer::start(SimServerOptions::default())
        .await
        .expect("the simulator starts");
    let Some(kubectl) = Kubectl::for_sim(&sim, "apply --server-side with a typo") else {
        return;
    };
    let manifest = kubectl.file("typo.yaml", &manifest_with_typos());
    let out = kubectl
        .run(&["apply", "--server-side", "-f", path_arg(&manifest)])
        .await;
    assert!(!out.success, "{}", out.stdout);
    assert!(
        out.stderr.contains(&format!(
            "Error from server: failed to create typed patch object (kube-system/{DS}; apps/v1, Kind=DaemonSet): errors:\n  .spec.bogus: field not declared in schema\n  .spec.template.spec.containers[name=\"kube-apiserver\"].imagePullPolicyx: field not declared in schema"
        )),
        "{}",
        out.stderr
    );
    assert!(stored(&sim).await.is_none());
}
