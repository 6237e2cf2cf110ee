use serde_json::json;

use super::wire::encode::Message;
use super::*;
use crate::resources::{CONFIGMAPS, DAEMONSETS, NAMESPACES, SECRETS, SERVICEACCOUNTS};

/// A body as client-go's protobuf serializer frames it: the magic, then `runtime.Unknown`.
fn framed(api_version: &str, kind: &str, raw: &Message) -> Vec<u8> {
    let type_meta = Message::new().string(1, api_version).string(2, kind);
    let unknown = Message::new()
        .message(1, &type_meta)
        .message(2, raw)
        .string(3, "")
        .string(4, "");
    [MAGIC, unknown.0.as_slice()].concat()
}

/// ObjectMeta as Go writes it: every non-pointer field present, zero or not.
fn object_meta(name: &str, namespace: &str) -> Message {
    Message::new()
        .string(1, name)
        .string(2, "")
        .string(3, namespace)
        .string(4, "")
        .string(5, "")
        .string(6, "")
        .varint(7, 0)
        .message(8, &Message::new())
}

#[test]
fn a_namespace_as_kubectl_create_namespace_sends_it() {
    let raw = Message::new()
        .message(1, &object_meta("team-a", "").entry(11, "env", b"prod"))
        .message(2, &Message::new())
        .message(3, &Message::new().string(1, ""));
    let obj = decode(&NAMESPACES, &framed("v1", "Namespace", &raw)).unwrap();
    assert_eq!(
        obj,
        json!({"apiVersion": "v1", "kind": "Namespace",
               "metadata": {"name": "team-a", "labels": {"env": "prod"}}})
    );
}

#[test]
fn a_configmap_keeps_empty_values_and_encodes_binary_data() {
    let raw = Message::new()
        .message(
            1,
            &object_meta("app", "kube-system").entry(12, "note", b"x"),
        )
        .entry(2, "mode", b"fast")
        .entry(2, "empty", b"")
        .entry(3, "blob", &[0, 1, 0xff])
        .varint(4, 1);
    let obj = decode(&CONFIGMAPS, &framed("v1", "ConfigMap", &raw)).unwrap();
    assert_eq!(
        obj,
        json!({"apiVersion": "v1", "kind": "ConfigMap",
               "metadata": {"name": "app", "namespace": "kube-system", "annotations": {"note": "x"}},
               "data": {"mode": "fast", "empty": ""}, "binaryData": {"blob": "AAH/"},
               "immutable": true})
    );
}

#[test]
fn a_secret_carries_bytes_as_base64_and_its_type() {
    let raw = Message::new()
        .message(1, &object_meta("db", ""))
        .entry(2, "password", b"s3cr=t")
        .string(3, "Opaque")
        .entry(4, "plain", b"text");
    let obj = decode(&SECRETS, &framed("v1", "Secret", &raw)).unwrap();
    assert_eq!(
        obj,
        json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "db"},
               "data": {"password": "czNjcj10"}, "type": "Opaque",
               "stringData": {"plain": "text"}})
    );
}

#[test]
fn a_service_account_with_references_and_generate_name() {
    let meta = Message::new()
        .string(2, "robot-")
        .string(14, "example.com/keep")
        .message(
            13,
            &Message::new()
                .string(5, "v1")
                .string(1, "ConfigMap")
                .string(3, "owner")
                .string(4, "u-1")
                .varint(6, 1),
        );
    let raw = Message::new()
        .message(1, &meta)
        .message(2, &Message::new().string(3, "token").string(1, "Secret"))
        .message(3, &Message::new().string(1, "registry"))
        .varint(4, 0);
    let obj = decode(&SERVICEACCOUNTS, &framed("", "", &raw)).unwrap();
    assert_eq!(
        obj,
        json!({"apiVersion": "v1", "kind": "ServiceAccount",
               "metadata": {"generateName": "robot-", "finalizers": ["example.com/keep"],
                            "ownerReferences": [{"apiVersion": "v1", "kind": "ConfigMap",
                                                 "name": "owner", "uid": "u-1", "controller": true}]},
               "secrets": [{"kind": "Secret", "name": "token"}],
               "imagePullSecrets": [{"name": "registry"}],
               "automountServiceAccountToken": false})
    );
}

#[test]
fn timestamps_become_rfc3339_and_the_zero_time_is_omitted() {
    let created = Message::new().varint(1, 1_700_000_000).varint(2, 0);
    let raw = Message::new().message(1, &Message::new().string(1, "n").message(8, &created));
    let obj = decode(&NAMESPACES, &framed("v1", "Namespace", &raw)).unwrap();
    assert_eq!(obj["metadata"]["creationTimestamp"], "2023-11-14T22:13:20Z");
}

#[test]
fn what_is_not_decoded_is_refused_not_dropped() {
    let cases: [(&ResourceType, Vec<u8>, ProtobufError); 7] = [
        (
            &NAMESPACES,
            b"{\"kind\":\"Namespace\"}".to_vec(),
            ProtobufError::Magic,
        ),
        (
            &DAEMONSETS,
            framed("apps/v1", "DaemonSet", &Message::new()),
            ProtobufError::Kind("DaemonSet"),
        ),
        (
            &CONFIGMAPS,
            framed("v1", "Secret", &Message::new()),
            ProtobufError::WrongKind {
                api_version: "v1".into(),
                kind: "Secret".into(),
                expected: "v1/ConfigMap".into(),
            },
        ),
        (
            &CONFIGMAPS,
            framed(
                "v1",
                "ConfigMap",
                &Message::new().message(1, &Message::new().bytes(17, b"")),
            ),
            ProtobufError::Unsupported {
                message: "ObjectMeta",
                field: 17,
            },
        ),
        (
            &SECRETS,
            framed("v1", "Secret", &Message::new().varint(9, 1)),
            ProtobufError::Unsupported {
                message: "Secret",
                field: 9,
            },
        ),
        (
            &NAMESPACES,
            framed(
                "v1",
                "Namespace",
                &Message::new().message(3, &Message::new().string(1, "Terminating")),
            ),
            ProtobufError::Unsupported {
                message: "NamespaceStatus",
                field: 1,
            },
        ),
        (
            &CONFIGMAPS,
            [MAGIC, &Message::new().string(3, "gzip").0].concat(),
            ProtobufError::Encoding("gzip".into()),
        ),
    ];
    for (rt, body, want) in cases {
        assert_eq!(decode(rt, &body).unwrap_err(), want, "{}", rt.kind);
    }
    let truncated = framed("v1", "ConfigMap", &Message::new().entry(2, "k", b"v"));
    // Cut inside the raw message, before the two empty envelope fields at the end.
    let cut = &truncated[..truncated.len() - 6];
    assert_eq!(
        decode(&CONFIGMAPS, cut).unwrap_err(),
        ProtobufError::Truncated
    );
}

#[test]
fn refusals_are_415_naming_what_is_decoded() {
    let err = ProtobufError::Kind("DaemonSet").to_api_error();
    assert_eq!(
        (err.code, err.reason.as_str()),
        (415, "UnsupportedMediaType")
    );
    assert_eq!(
        err.message,
        "the body of the request was in an unknown format - accepted media types include: \
         application/json, application/yaml; application/vnd.kubernetes.protobuf only for \
         Namespace, ConfigMap, Secret, ServiceAccount (this body: DaemonSet bodies are not \
         decoded from protobuf)"
    );
}
