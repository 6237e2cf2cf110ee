//! Conformance, part 7: request bodies in the media types the server decodes. JSON and YAML
//! for every kind; Kubernetes protobuf for the kinds kubectl's generators create (answered in
//! JSON, which such clients also accept); 415 naming what is decoded for anything else.

use http::{Method, Request, StatusCode};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::Api;
use kube::client::Body;
use serde_json::Value;

use crate::common::*;

const PROTOBUF: &str = "application/vnd.kubernetes.protobuf";

/// A protobuf length-delimited field: key, length, bytes.
fn field(number: u8, value: &[u8]) -> Vec<u8> {
    let len = u8::try_from(value.len()).expect("short test values");
    assert!(len < 0x80 && number < 16, "single-byte varints only");
    [&[number << 3 | 2, len][..], value].concat()
}

/// `k8s\0` + `runtime.Unknown{typeMeta{apiVersion, kind}, raw}`.
fn framed(api_version: &str, kind: &str, raw: &[u8]) -> Vec<u8> {
    let type_meta = [field(1, api_version.as_bytes()), field(2, kind.as_bytes())].concat();
    [b"k8s\0".to_vec(), field(1, &type_meta), field(2, raw)].concat()
}

async fn post(uri: &str, content_type: &str, body: Vec<u8>) -> (StatusCode, Value) {
    let sim = sim().await;
    let request = Request::builder()
        .method(Method::POST)
        .uri(uri)
        .header(http::header::CONTENT_TYPE, content_type)
        .header(http::header::ACCEPT, format!("{PROTOBUF},application/json"))
        .body(Body::from(body))
        .unwrap();
    let response = sim.client().send(request).await.unwrap();
    let status = response.status();
    assert_eq!(
        response.headers()[http::header::CONTENT_TYPE],
        "application/json",
        "answers are JSON"
    );
    let bytes = response.into_body().collect_bytes().await.unwrap();
    (status, serde_json::from_slice(&bytes).unwrap())
}

#[tokio::test]
async fn a_protobuf_configmap_is_created_and_answered_in_json() {
    let sim = sim().await;
    let metadata = field(1, b"from-proto");
    let entry = [field(1, b"key"), field(2, b"value")].concat();
    let raw = [field(1, &metadata), field(2, &entry)].concat();
    let request = Request::builder()
        .method(Method::POST)
        .uri("/api/v1/namespaces/default/configmaps")
        .header(http::header::CONTENT_TYPE, PROTOBUF)
        .body(Body::from(framed("v1", "ConfigMap", &raw)))
        .unwrap();
    let response = sim.client().send(request).await.unwrap();
    assert_eq!(response.status(), StatusCode::CREATED);
    let cm = Api::<ConfigMap>::namespaced(sim.client(), "default")
        .get("from-proto")
        .await
        .expect("stored");
    assert_eq!(cm.data.unwrap()["key"], "value");
}

#[tokio::test]
async fn protobuf_for_other_kinds_is_415_naming_what_is_decoded() {
    let (status, body) = post(
        "/apis/apps/v1/namespaces/default/daemonsets",
        PROTOBUF,
        framed("apps/v1", "DaemonSet", &field(1, &field(1, b"ds"))),
    )
    .await;
    assert_eq!(status, StatusCode::UNSUPPORTED_MEDIA_TYPE);
    assert_eq!(body["reason"], "UnsupportedMediaType");
    let message = body["message"].as_str().unwrap();
    assert!(
        message.contains("application/vnd.kubernetes.protobuf only for Namespace, ConfigMap, Secret, ServiceAccount"),
        "{message}"
    );
}

#[tokio::test]
async fn an_undecodable_protobuf_body_is_415_too() {
    let (status, body) = post(
        "/api/v1/namespaces",
        PROTOBUF,
        b"{\"kind\": \"Namespace\"}".to_vec(),
    )
    .await;
    assert_eq!(status, StatusCode::UNSUPPORTED_MEDIA_TYPE);
    assert!(
        body["message"]
            .as_str()
            .unwrap()
            .ends_with("(this body: the body does not start with the Kubernetes protobuf prefix)"),
        "{body}"
    );
}

#[tokio::test]
async fn yaml_bodies_are_decoded_for_every_kind() {
    let yaml = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: from-yaml\ndata:\n  a: b\n";
    let (status, body) = post(
        "/api/v1/namespaces/default/configmaps",
        "application/yaml",
        yaml.as_bytes().to_vec(),
    )
    .await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    assert_eq!(body["data"]["a"], "b");
}
