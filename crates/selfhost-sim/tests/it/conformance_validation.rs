//! Conformance, part 6: server-side field validation. `fieldValidation=Strict` rejects
//! fields a kind does not have and fields a body repeats; `Warn` (also what a request
//! without the parameter gets) accepts the object without them and says so in `Warning`
//! headers; `Ignore` drops them silently. Create and update answer 400, patches 422.
//!
//! kube-rs `PostParams` has no `fieldValidation`, so creates and updates go as raw requests
//! through the kube-rs client (which also shows the `Warning` headers).

use http::{Method, Request, StatusCode};
use k8s_openapi::api::apps::v1::DaemonSet;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Patch, PatchParams, PostParams};
use kube::client::Body;
use kube::{Api, Client};
use serde_json::{Value, json};

use crate::common::*;

/// What the server answered to one raw request.
struct Answer {
    status: StatusCode,
    warnings: Vec<String>,
    body: Value,
}

async fn send(
    client: &Client,
    method: Method,
    uri: &str,
    content_type: &str,
    body: &Value,
) -> Answer {
    let request = Request::builder()
        .method(method)
        .uri(uri)
        .header(http::header::CONTENT_TYPE, content_type)
        .body(Body::from(serde_json::to_vec(body).unwrap()))
        .unwrap();
    let response = client.send(request).await.expect("the server answers");
    let status = response.status();
    let warnings = response
        .headers()
        .get_all(http::header::WARNING)
        .iter()
        .map(|v| v.to_str().unwrap().to_string())
        .collect();
    let bytes = response.into_body().collect_bytes().await.unwrap();
    Answer {
        status,
        warnings,
        body: serde_json::from_slice(&bytes).expect("a JSON answer"),
    }
}

const DAEMONSETS: &str = "/apis/apps/v1/namespaces/default/daemonsets";

/// The test DaemonSet with `spec.bogus` and a misspelt container field.
fn daemonset_with_typos(name: &str) -> Value {
    let mut ds = serde_json::to_value(daemonset(name, "registry.k8s.io/pause:3.10")).unwrap();
    ds["spec"]["bogus"] = json!(true);
    ds["spec"]["template"]["spec"]["containers"][0]["imagePullPolicyx"] = json!("Always");
    ds
}

const TYPOS_AS_WARNINGS: [&str; 2] = [
    r#"299 - "unknown field \"spec.bogus\"""#,
    r#"299 - "unknown field \"spec.template.spec.containers[0].imagePullPolicyx\"""#,
];

async fn stored(client: &Client, name: &str) -> Option<Value> {
    Api::<DaemonSet>::namespaced(client.clone(), "default")
        .get_opt(name)
        .await
        .unwrap()
        .map(|ds| serde_json::to_value(ds).unwrap())
}

#[tokio::test]
async fn strict_create_answers_400_naming_every_unknown_field_and_stores_nothing() {
    let sim = sim().await;
    let client = sim.client();
    let uri = format!("{DAEMONSETS}?fieldValidation=Strict");
    let answer = send(
        &client,
        Method::POST,
        &uri,
        "application/json",
        &daemonset_with_typos("ds"),
    )
    .await;
    assert_eq!(answer.status, StatusCode::BAD_REQUEST);
    assert_eq!(answer.body["reason"], "BadRequest");
    assert_eq!(
        answer.body["message"],
        r#"DaemonSet in version "v1" cannot be handled as a DaemonSet: strict decoding error: unknown field "spec.bogus", unknown field "spec.template.spec.containers[0].imagePullPolicyx""#
    );
    assert!(stored(&client, "ds").await.is_none());
}

#[tokio::test]
async fn without_a_directive_unknown_fields_are_dropped_with_a_warning_each() {
    let sim = sim().await;
    let client = sim.client();
    for (query, warned) in [
        ("", true),
        ("?fieldValidation=Warn", true),
        ("?fieldValidation=Ignore", false),
    ] {
        let name = format!("ds{}", query.len());
        let uri = format!("{DAEMONSETS}{query}");
        let answer = send(
            &client,
            Method::POST,
            &uri,
            "application/json",
            &daemonset_with_typos(&name),
        )
        .await;
        assert_eq!(
            answer.status,
            StatusCode::CREATED,
            "{query}: {}",
            answer.body
        );
        let want: Vec<&str> = if warned {
            TYPOS_AS_WARNINGS.to_vec()
        } else {
            Vec::new()
        };
        assert_eq!(answer.warnings, want, "{query}");
        let ds = stored(&client, &name).await.expect("created");
        assert!(ds["spec"].get("bogus").is_none(), "{query}");
        let container = &ds["spec"]["template"]["spec"]["containers"][0];
        assert!(container.get("imagePullPolicyx").is_none(), "{query}");
        assert_eq!(
            answer.body["spec"], ds["spec"],
            "the answer shows what was stored"
        );
    }
}

#[tokio::test]
async fn repeated_fields_are_reported_in_body_order_and_the_last_one_counts() {
    let sim = sim().await;
    let client = sim.client();
    let body = br#"{"apiVersion": "v1", "kind": "ConfigMap",
                    "metadata": {"name": "first", "name": "cm"},
                    "data": {"k": "1"}, "dta": {"k": "2"}}"#;
    for (directive, code) in [
        ("Strict", StatusCode::BAD_REQUEST),
        ("Warn", StatusCode::CREATED),
    ] {
        let request = Request::builder()
            .method(Method::POST)
            .uri(format!(
                "/api/v1/namespaces/default/configmaps?fieldValidation={directive}"
            ))
            .header(http::header::CONTENT_TYPE, "application/json")
            .body(Body::from(body.to_vec()))
            .unwrap();
        let response = client.send(request).await.unwrap();
        assert_eq!(response.status(), code, "{directive}");
        let warnings: Vec<&str> = response
            .headers()
            .get_all(http::header::WARNING)
            .iter()
            .map(|v| v.to_str().unwrap())
            .collect();
        if directive == "Warn" {
            assert_eq!(
                warnings,
                [
                    r#"299 - "duplicate field \"metadata.name\"""#,
                    r#"299 - "unknown field \"dta\"""#
                ]
            );
        } else {
            let bytes = response.into_body().collect_bytes().await.unwrap();
            let status: Value = serde_json::from_slice(&bytes).unwrap();
            assert_eq!(
                status["message"],
                r#"ConfigMap in version "v1" cannot be handled as a ConfigMap: strict decoding error: duplicate field "metadata.name", unknown field "dta""#
            );
        }
    }
    let cm = Api::<ConfigMap>::namespaced(client, "default")
        .get("cm")
        .await
        .unwrap();
    assert_eq!(cm.data.unwrap()["k"], "1");
}

#[tokio::test]
async fn update_is_validated_like_create() {
    let sim = sim().await;
    let client = sim.client();
    let api: Api<DaemonSet> = Api::namespaced(client.clone(), "default");
    api.create(&PostParams::default(), &daemonset("ds", "i:1"))
        .await
        .unwrap();
    let mut body = daemonset_with_typos("ds");
    body["spec"]["template"]["spec"]["containers"][0]["image"] = json!("i:2");
    let uri = format!("{DAEMONSETS}/ds?fieldValidation=Strict");
    let answer = send(&client, Method::PUT, &uri, "application/json", &body).await;
    assert_eq!(answer.status, StatusCode::BAD_REQUEST, "{}", answer.body);
    let image = |ds: &Value| ds["spec"]["template"]["spec"]["containers"][0]["image"].clone();
    assert_eq!(image(&stored(&client, "ds").await.unwrap()), "i:1");

    let answer = send(
        &client,
        Method::PUT,
        &format!("{DAEMONSETS}/ds"),
        "application/json",
        &body,
    )
    .await;
    assert_eq!(answer.status, StatusCode::OK, "{}", answer.body);
    assert_eq!(answer.warnings, TYPOS_AS_WARNINGS);
    let ds = stored(&client, "ds").await.unwrap();
    assert_eq!(image(&ds), "i:2");
    assert!(ds["spec"].get("bogus").is_none());
}

#[tokio::test]
async fn each_patch_type_is_validated_on_the_patched_object() {
    let sim = sim().await;
    let client = sim.client();
    let api: Api<DaemonSet> = Api::namespaced(client.clone(), "default");
    api.create(&PostParams::default(), &daemonset("ds", "i:1"))
        .await
        .unwrap();
    let merge = json!({"spec": {"bogus": true, "minReadySeconds": 5}});
    let patches: [(&str, Patch<Value>); 3] = [
        ("merge", Patch::Merge(merge.clone())),
        ("strategic", Patch::Strategic(merge)),
        (
            "json",
            Patch::Json(
                serde_json::from_value(json!([
                    {"op": "add", "path": "/spec/bogus", "value": true},
                    {"op": "add", "path": "/spec/minReadySeconds", "value": 5}
                ]))
                .unwrap(),
            ),
        ),
    ];
    for (what, patch) in &patches {
        let err = status(
            api.patch("ds", &PatchParams::default().validation_strict(), patch)
                .await,
        );
        assert_eq!((err.code, err.reason.as_str()), (422, "Invalid"), "{what}");
        assert!(
            err.message
                .starts_with(r#" "" is invalid: patch: Invalid value: "#)
                && err
                    .message
                    .ends_with(r#": strict decoding error: unknown field "spec.bogus""#),
            "{what}: {}",
            err.message
        );
        assert_eq!(
            api.get("ds").await.unwrap().spec.unwrap().min_ready_seconds,
            None,
            "{what}"
        );
    }
    for (what, patch) in &patches {
        let out = api
            .patch("ds", &PatchParams::default().validation_ignore(), patch)
            .await;
        let spec = out.unwrap_or_else(|e| panic!("{what}: {e}")).spec.unwrap();
        assert_eq!(spec.min_ready_seconds, Some(5), "{what}");
        let raw = stored(&client, "ds").await.unwrap();
        assert!(
            raw["spec"].get("bogus").is_none(),
            "{what}: unknown fields are dropped"
        );
    }
}

#[tokio::test]
async fn a_warned_patch_says_which_fields_it_dropped() {
    let sim = sim().await;
    let client = sim.client();
    Api::<DaemonSet>::namespaced(client.clone(), "default")
        .create(&PostParams::default(), &daemonset("ds", "i:1"))
        .await
        .unwrap();
    let answer = send(
        &client,
        Method::PATCH,
        &format!("{DAEMONSETS}/ds"),
        "application/merge-patch+json",
        &json!({"spec": {"bogus": true}}),
    )
    .await;
    assert_eq!(answer.status, StatusCode::OK, "{}", answer.body);
    assert_eq!(answer.warnings, [r#"299 - "unknown field \"spec.bogus\"""#]);
}

#[tokio::test]
async fn every_served_kind_knows_its_fields() {
    let sim = sim().await;
    let client = sim.client();
    let kinds = [
        (
            "/api/v1/namespaces",
            json!({"apiVersion": "v1", "kind": "Namespace"}),
            "Namespace",
        ),
        (
            "/api/v1/nodes",
            json!({"apiVersion": "v1", "kind": "Node"}),
            "Node",
        ),
        (
            "/api/v1/namespaces/default/pods",
            serde_json::to_value(pod("p", json!({}), None)).unwrap(),
            "Pod",
        ),
        (
            "/api/v1/namespaces/default/configmaps",
            json!({"data": {"a": "b"}}),
            "ConfigMap",
        ),
        (
            "/api/v1/namespaces/default/secrets",
            json!({"stringData": {"a": "b"}}),
            "Secret",
        ),
        (
            "/api/v1/namespaces/default/serviceaccounts",
            json!({}),
            "ServiceAccount",
        ),
        (
            "/api/v1/namespaces/default/events",
            json!({"involvedObject": {"kind": "Pod", "name": "p"}, "reason": "R", "message": "m"}),
            "Event",
        ),
        (
            DAEMONSETS,
            serde_json::to_value(daemonset("d", "i:1")).unwrap(),
            "DaemonSet",
        ),
        (
            "/apis/apps/v1/namespaces/default/controllerrevisions",
            json!({"revision": 1, "data": {"spec": {}}}),
            "ControllerRevision",
        ),
        (
            "/apis/coordination.k8s.io/v1/namespaces/default/leases",
            json!({"spec": {}}),
            "Lease",
        ),
    ];
    for (collection, base, kind) in kinds {
        let mut body = base.clone();
        body["metadata"]["name"] = json!(format!("{}-x", kind.to_lowercase()));
        let mut bad = body.clone();
        bad["bogus"] = json!(1);
        let uri = format!("{collection}?fieldValidation=Strict");
        let answer = send(&client, Method::POST, &uri, "application/json", &bad).await;
        assert_eq!(
            answer.status,
            StatusCode::BAD_REQUEST,
            "{kind}: {}",
            answer.body
        );
        assert_eq!(
            answer.body["message"],
            format!(
                r#"{kind} in version "v1" cannot be handled as a {kind}: strict decoding error: unknown field "bogus""#
            ),
        );
        let answer = send(&client, Method::POST, &uri, "application/json", &body).await;
        assert_eq!(
            answer.status,
            StatusCode::CREATED,
            "{kind}: {}",
            answer.body
        );
        assert!(answer.warnings.is_empty(), "{kind}");
    }
}

#[tokio::test]
async fn an_unknown_directive_is_an_invalid_option() {
    let sim = sim().await;
    let client = sim.client();
    let uri = format!("{DAEMONSETS}?fieldValidation=Loud");
    let answer = send(&client, Method::POST, &uri, "application/json", &json!({})).await;
    assert_eq!(answer.status, StatusCode::UNPROCESSABLE_ENTITY);
    assert_eq!(
        answer.body["message"],
        r#"CreateOptions.meta.k8s.io "" is invalid: fieldValidation: Unsupported value: "Loud": supported values: "", "Ignore", "Strict", "Warn""#
    );
}

#[tokio::test]
async fn server_side_apply_refuses_unknown_fields_whatever_the_directive() {
    let sim = sim().await;
    let client = sim.client();
    let api: Api<DaemonSet> = Api::namespaced(client.clone(), "default");
    for params in [
        PatchParams::apply("me"),
        PatchParams::apply("me").validation_ignore(),
    ] {
        let err = status(
            api.patch("ds", &params, &Patch::Apply(daemonset_with_typos("ds")))
                .await,
        );
        assert_eq!((err.code, err.reason.as_str()), (500, ""));
        assert_eq!(
            err.message,
            "failed to create typed patch object (ds; apps/v1, Kind=DaemonSet): errors:\n  \
             .spec.bogus: field not declared in schema\n  \
             .spec.template.spec.containers[name=\"main\"].imagePullPolicyx: field not declared in schema"
        );
    }
    assert!(stored(&client, "ds").await.is_none());
    let mut clean = daemonset_with_typos("ds");
    clean["spec"].as_object_mut().unwrap().remove("bogus");
    clean["spec"]["template"]["spec"]["containers"][0]
        .as_object_mut()
        .unwrap()
        .remove("imagePullPolicyx");
    api.patch("ds", &PatchParams::apply("me"), &Patch::Apply(clean))
        .await
        .expect("a clean configuration applies");
}
