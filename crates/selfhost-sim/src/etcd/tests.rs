//! The simulated etcd against upstream's messages (k8s-pb, prost code generated from
//! Kubernetes' generated.proto) and against a client with and without its certificate.

use k8s_pb::api::apps::v1 as pb_apps;
use k8s_pb::apimachinery::pkg::runtime::Unknown;
use prost::Message;
use serde_json::json;

use super::encode::stored_protobuf;
use super::*;
use crate::store::{StoreOptions, WriteOptions};

fn daemonset() -> serde_json::Value {
    json!({
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": {"name": "self-hosted-kube-apiserver", "namespace": "kube-system",
                     "creationTimestamp": "2023-11-14T22:13:20Z", "generation": 2,
                     "labels": {"k8s-app": "self-hosted-kube-apiserver"}},
        "spec": {
            "selector": {"matchLabels": {"k8s-app": "self-hosted-kube-apiserver"}},
            "template": {
                "metadata": {"creationTimestamp": null, "labels": {"component": "kube-apiserver"}},
                "spec": {
                    "hostNetwork": true,
                    "containers": [{
                        "name": "kube-apiserver",
                        "image": "registry.k8s.io/kube-apiserver:v1.33.1",
                        "command": ["kube-apiserver", "--secure-port=6443"],
                        "resources": {"requests": {"cpu": "250m"}},
                        "livenessProbe": {"httpGet": {"path": "/livez", "port": 6443,
                                                      "scheme": "HTTPS"},
                                          "failureThreshold": 8},
                        "securityContext": {"runAsUser": 0}
                    }],
                    "volumes": [{"name": "k8s-certs", "projected": {"sources": [
                        {"secret": {"name": "ca", "items": [{"key": "tls.crt", "path": "ca.crt"}]}}
                    ]}}]
                }
            },
            "updateStrategy": {"type": "RollingUpdate",
                               "rollingUpdate": {"maxUnavailable": "10%"}}
        }
    })
}

#[test]
fn a_daemonset_is_stored_as_upstreams_protobuf() {
    let value = stored_protobuf("api.apps.v1.DaemonSet", &daemonset()).expect("encodes");
    let unknown = Unknown::decode(value.strip_prefix(b"k8s\0").expect("magic")).expect("Unknown");
    let meta = unknown.type_meta.expect("type");
    assert_eq!(
        (meta.api_version.as_deref(), meta.kind.as_deref()),
        (Some("apps/v1"), Some("DaemonSet"))
    );
    let ds = pb_apps::DaemonSet::decode(unknown.raw.expect("raw").as_slice()).expect("DaemonSet");
    let metadata = ds.metadata.expect("metadata");
    assert_eq!(
        metadata.creation_timestamp.and_then(|t| t.seconds),
        Some(1_700_000_000)
    );
    let spec = ds.spec.expect("spec");
    let pod = spec.template.and_then(|t| t.spec).expect("pod spec");
    let container = &pod.containers[0];
    assert_eq!(
        container.command,
        vec!["kube-apiserver", "--secure-port=6443"]
    );
    assert_eq!(
        container
            .resources
            .as_ref()
            .map(|r| r.requests["cpu"].string.clone()),
        Some(Some("250m".to_string()))
    );
    let probe = container.liveness_probe.as_ref().expect("probe");
    let port = probe
        .handler
        .as_ref()
        .and_then(|h| h.http_get.as_ref())
        .and_then(|g| g.port.as_ref())
        .expect("port");
    assert_eq!((port.r#type, port.int_val), (Some(0), Some(6443)));
    assert_eq!(
        container
            .security_context
            .as_ref()
            .and_then(|s| s.run_as_user),
        Some(0)
    );
    let secret = pod.volumes[0]
        .volume_source
        .as_ref()
        .and_then(|v| v.projected.as_ref())
        .and_then(|p| p.sources[0].secret.as_ref())
        .expect("a projected secret");
    assert_eq!(
        secret
            .local_object_reference
            .as_ref()
            .and_then(|r| r.name.as_deref()),
        Some("ca")
    );
    let max = spec
        .update_strategy
        .and_then(|s| s.rolling_update)
        .and_then(|r| r.max_unavailable)
        .expect("maxUnavailable");
    assert_eq!((max.r#type, max.str_val.as_deref()), (Some(1), Some("10%")));
}

#[test]
fn a_field_the_schema_lacks_is_an_error_not_a_loss() {
    let mut ds = daemonset();
    ds["spec"]["template"]["spec"]["noSuchField"] = json!(1);
    let err = stored_protobuf("api.apps.v1.DaemonSet", &ds).expect_err("refused");
    assert!(err.contains("noSuchField"), "{err}");
}

async fn client(etcd: &SimEtcd, with_certificate: bool) -> kube::Client {
    let files = etcd.client_files();
    let user = if with_certificate {
        format!(
            "{{client-certificate: {}, client-key: {}}}",
            files.cert.display(),
            files.key.display()
        )
    } else {
        "{}".to_string()
    };
    let yaml = format!(
        "apiVersion: v1\nkind: Config\nclusters: [{{name: etcd, cluster: {{server: '{}', \
         certificate-authority: {}}}}}]\nusers: [{{name: etcd, user: {user}}}]\n\
         contexts: [{{name: etcd, context: {{cluster: etcd, user: etcd}}}}]\n\
         current-context: etcd\n",
        etcd.endpoint(),
        files.ca.display()
    );
    let kubeconfig = kube::config::Kubeconfig::from_yaml(&yaml).expect("kubeconfig");
    let mut config = kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default())
        .await
        .expect("config");
    config.default_retry = false;
    kube::Client::try_from(config).expect("client")
}

fn range(key: &str) -> http::Request<Vec<u8>> {
    use base64::Engine;
    let body = json!({"key": base64::engine::general_purpose::STANDARD.encode(key)});
    http::Request::post("/v3/kv/range")
        .header("content-type", "application/json")
        .body(body.to_string().into_bytes())
        .expect("request")
}

/// A store holding one Secret, kube-system/ca.
fn store_with_a_secret() -> Store {
    let store = Store::new(StoreOptions::default());
    store
        .create(
            &crate::resources::SECRETS,
            "kube-system",
            json!({"apiVersion": "v1", "kind": "Secret",
                   "metadata": {"name": "ca", "namespace": "kube-system"},
                   "data": {"tls.crt": "Y2VydA=="}}),
            &WriteOptions::default(),
        )
        .expect("created");
    store
}

#[tokio::test]
async fn the_gateway_answers_clients_with_a_certificate_only() {
    let store = store_with_a_secret();
    let etcd = SimEtcd::start(store).await.expect("etcd starts");

    let answer: serde_json::Value = serde_json::from_str(
        &client(&etcd, true)
            .await
            .request_text(range("/registry/secrets/kube-system/ca"))
            .await
            .expect("answered"),
    )
    .expect("JSON");
    use base64::Engine;
    let value = base64::engine::general_purpose::STANDARD
        .decode(answer["kvs"][0]["value"].as_str().expect("a value"))
        .expect("base64");
    assert!(
        value.starts_with(b"k8s\0"),
        "protobuf, as the API server stores it"
    );

    let missing: serde_json::Value = serde_json::from_str(
        &client(&etcd, true)
            .await
            .request_text(range("/registry/secrets/kube-system/nope"))
            .await
            .expect("answered"),
    )
    .expect("JSON");
    assert!(missing.get("kvs").is_none(), "{missing}");

    etcd.encrypt_at_rest("secrets");
    let encrypted = client(&etcd, true)
        .await
        .request_text(range("/registry/secrets/kube-system/ca"))
        .await
        .expect("answered");
    assert!(encrypted.contains(
        &base64::engine::general_purpose::STANDARD.encode("k8s:enc:aescbc:v1:key1:")[..20]
    ));

    let refused = client(&etcd, false)
        .await
        .request_text(range("/registry/secrets/kube-system/ca"))
        .await;
    assert!(refused.is_err(), "no client certificate, no answer");
}

#[tokio::test]
async fn health_version_and_a_snapshot_ending_with_its_hash_are_served() {
    use base64::Engine;
    let store = store_with_a_secret();
    let etcd = SimEtcd::start(store).await.expect("etcd starts");
    let client = client(&etcd, true).await;
    let get = |path: &str| http::Request::get(path).body(Vec::new()).expect("request");

    let version = client
        .request_text(get("/version"))
        .await
        .expect("answered");
    assert!(version.contains(r#""etcdserver":"3.5.24""#), "{version}");
    etcd.set_version("3.6.9");
    let version = client
        .request_text(get("/version"))
        .await
        .expect("answered");
    assert!(version.contains(r#""etcdserver":"3.6.9""#), "{version}");

    let health = client.request_text(get("/health")).await.expect("healthy");
    assert!(health.contains(r#""health":"true""#), "{health}");
    etcd.set_healthy(false);
    let sick = client
        .send(
            http::Request::get("/health")
                .body(kube::client::Body::empty())
                .expect("request"),
        )
        .await
        .expect("answered");
    assert_eq!(sick.status(), 503, "as etcd answers without a leader");

    let stream = client
        .request_text(
            http::Request::post("/v3/maintenance/snapshot")
                .body(b"{}".to_vec())
                .expect("request"),
        )
        .await
        .expect("streamed");
    let mut bytes = Vec::new();
    let mut remaining = Vec::new();
    for line in stream.lines() {
        let chunk: serde_json::Value = serde_json::from_str(line).expect("one JSON object a line");
        let blob = chunk["result"]["blob"].as_str().expect("a blob");
        bytes.extend(
            base64::engine::general_purpose::STANDARD
                .decode(blob)
                .expect("base64"),
        );
        remaining.push(chunk["result"]["remaining_bytes"].clone());
    }
    assert_eq!(remaining.last(), Some(&json!("0")), "{remaining:?}");
    let (data, hash) = bytes.split_at(bytes.len() - 32);
    assert_eq!(
        ring::digest::digest(&ring::digest::SHA256, data).as_ref(),
        hash
    );
    assert!(
        data.windows(b"/registry/secrets/kube-system/ca".len())
            .any(|w| w == b"/registry/secrets/kube-system/ca"),
        "the store's keys are in it"
    );
}
