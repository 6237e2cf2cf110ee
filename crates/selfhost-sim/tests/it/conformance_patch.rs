//! Conformance, part 3: PATCH in its four flavours — JSON merge, JSON patch, strategic merge
//! (what kubectl sends) and server-side apply with field managers, conflicts and force.

use k8s_openapi::api::apps::v1::DaemonSet;
use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use kube::api::{Patch, PatchParams, PostParams};
use kube::{Api, ResourceExt};
use serde_json::json;

use crate::common::*;

fn images(ds: &DaemonSet) -> Vec<(String, String)> {
    ds.spec
        .as_ref()
        .unwrap()
        .template
        .spec
        .as_ref()
        .unwrap()
        .containers
        .iter()
        .map(|c| (c.name.clone(), c.image.clone().unwrap_or_default()))
        .collect()
}

fn two_containers(name: &str) -> DaemonSet {
    object(json!({
        "apiVersion": "apps/v1", "kind": "DaemonSet",
        "metadata": { "name": name },
        "spec": {
            "selector": { "matchLabels": { "app": name } },
            "template": {
                "metadata": { "labels": { "app": name } },
                "spec": { "containers": [
                    { "name": "api", "image": "api:1" },
                    { "name": "sidecar", "image": "side:1" },
                ]},
            },
        },
    }))
}

#[tokio::test]
async fn merge_patches_set_and_remove_fields() {
    let sim = sim().await;
    let cms: Api<ConfigMap> = Api::namespaced(sim.client(), "default");
    cms.create(&PostParams::default(), &configmap("c", "1"))
        .await
        .unwrap();
    let out = cms
        .patch(
            "c",
            &PatchParams::default(),
            &Patch::Merge(
                json!({"metadata": {"labels": {"a": "b"}}, "data": {"key": null, "new": "x"}}),
            ),
        )
        .await
        .unwrap();
    assert_eq!(out.labels()["a"], "b");
    let data = out.data.unwrap();
    assert!(!data.contains_key("key"));
    assert_eq!(data["new"], "x");
}

#[tokio::test]
async fn json_patches_apply_in_order_and_a_failed_test_changes_nothing() {
    let sim = sim().await;
    let cms: Api<ConfigMap> = Api::namespaced(sim.client(), "default");
    cms.create(&PostParams::default(), &configmap("c", "1"))
        .await
        .unwrap();
    let ops: json_patch::Patch = serde_json::from_value(json!([
        {"op": "test", "path": "/data/key", "value": "1"},
        {"op": "replace", "path": "/data/key", "value": "2"},
        {"op": "add", "path": "/data/other", "value": "3"},
    ]))
    .unwrap();
    let out = cms
        .patch("c", &PatchParams::default(), &Patch::<()>::Json(ops))
        .await
        .unwrap();
    assert_eq!(out.data.as_ref().unwrap()["key"], "2");
    assert_eq!(out.data.as_ref().unwrap()["other"], "3");

    let failing: json_patch::Patch = serde_json::from_value(json!([
        {"op": "replace", "path": "/data/key", "value": "9"},
        {"op": "test", "path": "/data/key", "value": "nope"},
    ]))
    .unwrap();
    let s = status(
        cms.patch("c", &PatchParams::default(), &Patch::<()>::Json(failing))
            .await,
    );
    assert_eq!(s.code, 422);
    assert_eq!(cms.get("c").await.unwrap().data.unwrap()["key"], "2");
}

#[tokio::test]
async fn strategic_patches_merge_containers_by_name_like_kubectl_set_image() {
    let sim = sim().await;
    let ds: Api<DaemonSet> = Api::namespaced(sim.client(), "kube-system");
    ds.create(&PostParams::default(), &two_containers("d"))
        .await
        .unwrap();
    let set_image = json!({"spec": {"template": {"spec": {"containers": [{"name": "sidecar", "image": "side:2"}]}}}});
    let out = ds
        .patch("d", &PatchParams::default(), &Patch::Strategic(set_image))
        .await
        .unwrap();
    assert_eq!(
        images(&out),
        [
            ("api".into(), "api:1".into()),
            ("sidecar".into(), "side:2".into())
        ]
    );

    let delete_sidecar = json!({"spec": {"template": {"spec": {"containers": [{"name": "sidecar", "$patch": "delete"}]}}}});
    let out = ds
        .patch(
            "d",
            &PatchParams::default(),
            &Patch::Strategic(delete_sidecar),
        )
        .await
        .unwrap();
    assert_eq!(images(&out), [("api".to_string(), "api:1".to_string())]);

    // A merge patch of the same list replaces it wholesale, as RFC 7386 says.
    let merge = json!({"spec": {"template": {"spec": {"containers": [{"name": "solo", "image": "solo:1"}]}}}});
    let out = ds
        .patch("d", &PatchParams::default(), &Patch::Merge(merge))
        .await
        .unwrap();
    assert_eq!(images(&out), [("solo".to_string(), "solo:1".to_string())]);
}

#[tokio::test]
async fn patches_that_break_validation_are_rejected_with_422() {
    let sim = sim().await;
    let ds: Api<DaemonSet> = Api::namespaced(sim.client(), "kube-system");
    ds.create(&PostParams::default(), &daemonset("d", "img:1"))
        .await
        .unwrap();
    let new_selector = json!({"spec": {"selector": {"matchLabels": {"app": "other"}}, "template": {"metadata": {"labels": {"app": "other"}}}}});
    let s = status(
        ds.patch("d", &PatchParams::default(), &Patch::Merge(new_selector))
            .await,
    );
    assert_eq!((s.code, s.reason.as_str()), (422, "Invalid"));
    assert!(s.message.contains("spec.selector"), "{}", s.message);
    assert!(s.message.contains("field is immutable"), "{}", s.message);
}

#[tokio::test]
async fn a_patch_carrying_a_stale_resource_version_conflicts() {
    let sim = sim().await;
    let cms: Api<ConfigMap> = Api::namespaced(sim.client(), "default");
    let created = cms
        .create(&PostParams::default(), &configmap("c", "1"))
        .await
        .unwrap();
    cms.patch(
        "c",
        &PatchParams::default(),
        &Patch::Merge(json!({"data": {"key": "2"}})),
    )
    .await
    .unwrap();
    let stale =
        json!({"metadata": {"resourceVersion": created.resource_version()}, "data": {"key": "3"}});
    let s = status(
        cms.patch("c", &PatchParams::default(), &Patch::Merge(stale))
            .await,
    );
    assert_eq!((s.code, s.reason.as_str()), (409, "Conflict"));
}

#[tokio::test]
async fn server_side_apply_creates_then_owns_what_it_applies() {
    let sim = sim().await;
    let ds: Api<DaemonSet> = Api::namespaced(sim.client(), "kube-system");
    let ours = PatchParams::apply("selfhost");
    let created = ds
        .patch("d", &ours, &Patch::Apply(two_containers("d")))
        .await
        .unwrap();
    assert_eq!(created.metadata.generation, Some(1));
    let managers = created.metadata.managed_fields.clone().unwrap();
    assert_eq!(managers.len(), 1);
    assert_eq!(managers[0].manager.as_deref(), Some("selfhost"));
    assert_eq!(managers[0].operation.as_deref(), Some("Apply"));

    // Applying the same configuration again changes nothing.
    let again = ds
        .patch("d", &ours, &Patch::Apply(two_containers("d")))
        .await
        .unwrap();
    assert_eq!(again.resource_version(), created.resource_version());

    // Another manager setting a field we own to another value conflicts...
    let mut theirs = two_containers("d");
    theirs
        .spec
        .as_mut()
        .unwrap()
        .template
        .spec
        .as_mut()
        .unwrap()
        .containers[0]
        .image = Some("api:2".into());
    let s = status(
        ds.patch(
            "d",
            &PatchParams::apply("someone-else"),
            &Patch::Apply(theirs.clone()),
        )
        .await,
    );
    assert_eq!((s.code, s.reason.as_str()), (409, "Conflict"));
    assert!(
        s.message
            .starts_with(r#"Apply failed with 1 conflict: conflict with "selfhost""#),
        "{}",
        s.message
    );
    assert!(
        s.message
            .contains(r#".spec.template.spec.containers[name="api"].image"#),
        "{}",
        s.message
    );

    // ...unless forced, which takes the field over.
    let forced = ds
        .patch(
            "d",
            &PatchParams::apply("someone-else").force(),
            &Patch::Apply(theirs),
        )
        .await
        .unwrap();
    assert_eq!(images(&forced)[0], ("api".to_string(), "api:2".to_string()));
    assert_eq!(forced.metadata.generation, Some(2));
    let s = status(
        ds.patch("d", &ours, &Patch::Apply(two_containers("d")))
            .await,
    );
    assert_eq!(s.code, 409, "the field now belongs to the forcing manager");
}

#[tokio::test]
async fn server_side_apply_removes_fields_its_manager_stopped_applying() {
    let sim = sim().await;
    let cms: Api<ConfigMap> = Api::namespaced(sim.client(), "default");
    let pp = PatchParams::apply("me");
    let with_two: ConfigMap = object(
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": {"a": "1", "b": "2"}}),
    );
    cms.patch("c", &pp, &Patch::Apply(with_two)).await.unwrap();
    let with_one: ConfigMap = object(
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": {"a": "1"}}),
    );
    let out = cms.patch("c", &pp, &Patch::Apply(with_one)).await.unwrap();
    assert_eq!(out.data.unwrap().keys().collect::<Vec<_>>(), ["a"]);
}

#[tokio::test]
async fn server_side_apply_requires_a_field_manager_and_honours_dry_run() {
    let sim = sim().await;
    let pods: Api<Pod> = Api::namespaced(sim.client(), "default");
    let s = status(
        pods.patch(
            "p",
            &PatchParams::default(),
            &Patch::Apply(pod("p", json!({}), None)),
        )
        .await,
    );
    assert_eq!((s.code, s.reason.as_str()), (422, "Invalid"));
    assert_eq!(
        s.message,
        r#"PatchOptions.meta.k8s.io "" is invalid: fieldManager: Required value: is required for apply patch"#
    );

    let dry = PatchParams::apply("me").dry_run();
    let out = pods
        .patch("p", &dry, &Patch::Apply(pod("p", json!({}), None)))
        .await
        .unwrap();
    assert_eq!(out.name_any(), "p");
    assert!(is_gone(&pods, "p").await, "a dry-run apply creates nothing");

    // kube-rs refuses `force` on other patch types itself; kubectl or curl can send it.
    pods.create(&PostParams::default(), &pod("p", json!({}), None))
        .await
        .unwrap();
    let req = http::Request::patch("/api/v1/namespaces/default/pods/p?force=true")
        .header("content-type", "application/merge-patch+json")
        .body(b"{}".to_vec())
        .unwrap();
    let s = status(sim.client().request_text(req).await);
    assert_eq!((s.code, s.reason.as_str()), (422, "Invalid"));
    assert!(
        s.message
            .ends_with("force: Forbidden: may not be specified for non-apply patch"),
        "{}",
        s.message
    );
}

#[tokio::test]
async fn unknown_patch_content_types_are_415() {
    let sim = sim().await;
    let cms: Api<ConfigMap> = Api::namespaced(sim.client(), "default");
    cms.create(&PostParams::default(), &configmap("c", "1"))
        .await
        .unwrap();
    let req = http::Request::patch("/api/v1/namespaces/default/configmaps/c")
        .header("content-type", "text/plain")
        .body(b"{}".to_vec())
        .unwrap();
    let s = status(sim.client().request_text(req).await);
    assert_eq!((s.code, s.reason.as_str()), (415, "UnsupportedMediaType"));
}
