//! The decoder against upstream's messages: objects built with k8s-pb (prost code generated
//! from Kubernetes' own generated.proto), encoded by prost and wrapped as the API server
//! stores them, must read back as the API's JSON would.

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::DaemonSet;
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use k8s_pb::api::apps::v1 as pb_apps;
use k8s_pb::api::core::v1 as pb;
use k8s_pb::apimachinery::pkg::api::resource::Quantity;
use k8s_pb::apimachinery::pkg::apis::meta::v1 as pb_meta;
use k8s_pb::apimachinery::pkg::runtime::{TypeMeta, Unknown};
use k8s_pb::apimachinery::pkg::util::intstr::IntOrString;
use prost::Message;
use serde_json::json;

use super::*;

fn s(text: &str) -> Option<String> {
    Some(text.to_string())
}

/// `k8s\0` and a runtime.Unknown around `message`, as the API server writes to etcd.
fn stored(api_version: &str, kind: &str, message: &impl Message) -> Vec<u8> {
    let unknown = Unknown {
        type_meta: Some(TypeMeta {
            api_version: s(api_version),
            kind: s(kind),
        }),
        raw: Some(message.encode_to_vec()),
        content_encoding: s(""),
        content_type: s(""),
    };
    let mut value = PROTOBUF_MAGIC.to_vec();
    value.extend(unknown.encode_to_vec());
    value
}

fn container() -> pb::Container {
    pb::Container {
        name: s("kube-apiserver"),
        image: s("registry.k8s.io/kube-apiserver:v1.33.1"),
        command: vec![
            "kube-apiserver".into(),
            "--advertise-address=$(HOST_IP)".into(),
            String::new(),
        ],
        // Go writes non-pointer strings even when empty.
        working_dir: s(""),
        env: vec![pb::EnvVar {
            name: s("HOST_IP"),
            value: s(""),
            value_from: Some(pb::EnvVarSource {
                field_ref: Some(pb::ObjectFieldSelector {
                    api_version: s("v1"),
                    field_path: s("status.hostIP"),
                }),
                ..Default::default()
            }),
        }],
        resources: Some(pb::ResourceRequirements {
            requests: BTreeMap::from([("cpu".to_string(), Quantity { string: s("250m") })]),
            ..Default::default()
        }),
        liveness_probe: Some(pb::Probe {
            handler: Some(pb::ProbeHandler {
                http_get: Some(pb::HttpGetAction {
                    path: s("/livez"),
                    port: Some(IntOrString {
                        r#type: Some(0),
                        int_val: Some(6443),
                        str_val: s(""),
                    }),
                    host: s("127.0.0.1"),
                    scheme: s("HTTPS"),
                    ..Default::default()
                }),
                ..Default::default()
            }),
            failure_threshold: Some(8),
            ..Default::default()
        }),
        volume_mounts: vec![pb::VolumeMount {
            name: s("k8s-certs"),
            mount_path: s("/etc/kubernetes/pki"),
            read_only: Some(true),
            ..Default::default()
        }],
        security_context: Some(pb::SecurityContext {
            run_as_user: Some(0),
            ..Default::default()
        }),
        ..Default::default()
    }
}

fn daemonset() -> pb_apps::DaemonSet {
    pb_apps::DaemonSet {
        metadata: Some(pb_meta::ObjectMeta {
            name: s("self-hosted-kube-apiserver"),
            namespace: s("kube-system"),
            generation: Some(3),
            creation_timestamp: Some(pb_meta::Time {
                seconds: Some(1_700_000_000),
                nanos: Some(0),
            }),
            ..Default::default()
        }),
        spec: Some(pb_apps::DaemonSetSpec {
            selector: Some(pb_meta::LabelSelector {
                match_labels: BTreeMap::from([(
                    "k8s-app".into(),
                    "self-hosted-kube-apiserver".into(),
                )]),
                ..Default::default()
            }),
            template: Some(pb::PodTemplateSpec {
                metadata: Some(pb_meta::ObjectMeta {
                    labels: BTreeMap::from([("component".into(), "kube-apiserver".into())]),
                    // Go's zero time: an empty message.
                    creation_timestamp: Some(pb_meta::Time::default()),
                    ..Default::default()
                }),
                spec: Some(pb::PodSpec {
                    containers: vec![container()],
                    host_network: Some(true),
                    automount_service_account_token: Some(false),
                    node_selector: BTreeMap::from([(
                        "node-role.kubernetes.io/control-plane".into(),
                        String::new(),
                    )]),
                    tolerations: vec![pb::Toleration {
                        key: s("node-role.kubernetes.io/control-plane"),
                        operator: s("Exists"),
                        effect: s("NoSchedule"),
                        ..Default::default()
                    }],
                    volumes: vec![
                        pb::Volume {
                            name: s("k8s-certs"),
                            volume_source: Some(pb::VolumeSource {
                                projected: Some(pb::ProjectedVolumeSource {
                                    sources: vec![pb::VolumeProjection {
                                        secret: Some(pb::SecretProjection {
                                            local_object_reference: Some(
                                                pb::LocalObjectReference { name: s("ca") },
                                            ),
                                            items: vec![pb::KeyToPath {
                                                key: s("tls.crt"),
                                                path: s("ca.crt"),
                                                mode: None,
                                            }],
                                            optional: None,
                                        }),
                                        ..Default::default()
                                    }],
                                    default_mode: Some(0o644),
                                }),
                                ..Default::default()
                            }),
                        },
                        pb::Volume {
                            name: s("scratch"),
                            volume_source: Some(pb::VolumeSource {
                                empty_dir: Some(pb::EmptyDirVolumeSource::default()),
                                ..Default::default()
                            }),
                        },
                    ],
                    ..Default::default()
                }),
            }),
            update_strategy: Some(pb_apps::DaemonSetUpdateStrategy {
                r#type: s("RollingUpdate"),
                rolling_update: Some(pb_apps::RollingUpdateDaemonSet {
                    max_unavailable: Some(IntOrString {
                        r#type: Some(1),
                        int_val: Some(0),
                        str_val: s("10%"),
                    }),
                    ..Default::default()
                }),
            }),
            ..Default::default()
        }),
        status: None,
    }
}

#[test]
fn a_stored_daemonset_reads_as_the_api_would_answer() {
    let value = stored("apps/v1", "DaemonSet", &daemonset());
    let (decoded, skipped) = value_to_json(&value, "apps/v1", "DaemonSet").expect("decodes");
    assert!(skipped.0.is_empty(), "{skipped:?}");
    let template = &decoded["spec"]["template"];
    assert_eq!(
        decoded["metadata"]["creationTimestamp"],
        "2023-11-14T22:13:20Z"
    );
    assert_eq!(decoded["metadata"]["generation"], 3);
    assert!(template["metadata"].get("creationTimestamp").is_none());
    let c = &template["spec"]["containers"][0];
    assert_eq!(c["command"][2], "", "an empty argument is an argument");
    assert!(c.get("workingDir").is_none(), "an empty string is no value");
    assert_eq!(
        c["env"][0]["valueFrom"]["fieldRef"]["fieldPath"],
        "status.hostIP"
    );
    assert_eq!(c["resources"]["requests"]["cpu"], "250m");
    assert_eq!(
        c["livenessProbe"]["httpGet"]["port"], 6443,
        "Probe's handler is inline"
    );
    assert_eq!(c["livenessProbe"]["failureThreshold"], 8);
    assert_eq!(
        c["securityContext"]["runAsUser"], 0,
        "a zero that was set is kept"
    );
    assert_eq!(template["spec"]["automountServiceAccountToken"], false);
    assert_eq!(
        template["spec"]["nodeSelector"]["node-role.kubernetes.io/control-plane"],
        ""
    );
    let volumes = &template["spec"]["volumes"];
    assert_eq!(
        volumes[0]["projected"]["sources"][0]["secret"],
        json!({"name": "ca", "items": [{"key": "tls.crt", "path": "ca.crt"}]}),
        "Volume's source and the reference's name are inline"
    );
    assert_eq!(volumes[1], json!({"name": "scratch", "emptyDir": {}}));
    assert_eq!(
        decoded["spec"]["updateStrategy"]["rollingUpdate"]["maxUnavailable"],
        "10%"
    );

    let typed: Decoded<DaemonSet> = decode_object(&value).expect("a DaemonSet");
    let spec = typed.object.spec.expect("spec");
    let pod = spec.template.spec.expect("pod spec");
    assert_eq!(pod.host_network, Some(true));
    assert_eq!(pod.containers[0].name, "kube-apiserver");
}

#[test]
fn secrets_and_configmaps_keep_their_bytes() {
    let secret = pb::Secret {
        metadata: Some(pb_meta::ObjectMeta {
            name: s("ca"),
            namespace: s("kube-system"),
            ..Default::default()
        }),
        data: BTreeMap::from([
            ("tls.key".to_string(), vec![0, 159, 146, 150]),
            ("empty".to_string(), Vec::new()),
        ]),
        r#type: s("kubernetes.io/tls"),
        ..Default::default()
    };
    let typed: Decoded<Secret> = decode_object(&stored("v1", "Secret", &secret)).expect("a Secret");
    let data = typed.object.data.expect("data");
    assert_eq!(data["tls.key"].0, vec![0, 159, 146, 150]);
    assert!(data["empty"].0.is_empty());
    assert_eq!(typed.object.type_.as_deref(), Some("kubernetes.io/tls"));

    let config = pb::ConfigMap {
        metadata: Some(pb_meta::ObjectMeta {
            name: s("audit"),
            ..Default::default()
        }),
        data: BTreeMap::from([("policy.yaml".to_string(), "rules: []\n".to_string())]),
        binary_data: BTreeMap::from([("blob".to_string(), vec![1, 2])]),
        immutable: None,
    };
    let typed: Decoded<ConfigMap> =
        decode_object(&stored("v1", "ConfigMap", &config)).expect("a ConfigMap");
    assert_eq!(
        typed.object.data.expect("data")["policy.yaml"],
        "rules: []\n"
    );
    assert_eq!(
        typed.object.binary_data.expect("binary")["blob"].0,
        vec![1, 2]
    );
}

#[test]
fn json_storage_reads_too() {
    let value =
        br#"{"kind":"Secret","apiVersion":"v1","metadata":{"name":"ca"},"data":{"a":"Yg=="}}"#;
    let typed: Decoded<Secret> = decode_object(value).expect("a Secret");
    assert_eq!(typed.object.data.expect("data")["a"].0, b"b");
}

#[test]
fn encrypted_values_other_kinds_and_garbage_are_refused() {
    assert_eq!(
        decode_object::<Secret>(b"k8s:enc:aescbc:v1:key1:\x01\x02").map(|_| ()),
        Err(DecodeError::Encrypted {
            provider: "aescbc".into()
        })
    );
    let config = stored("v1", "ConfigMap", &pb::ConfigMap::default());
    assert!(matches!(
        decode_object::<Secret>(&config),
        Err(DecodeError::OtherKind { .. })
    ));
    assert!(decode_object::<Secret>(b"\x00\x01").is_err());
    let mut truncated = stored("apps/v1", "DaemonSet", &daemonset());
    truncated.truncate(truncated.len() / 2);
    assert!(decode_object::<DaemonSet>(&truncated).is_err());
}

#[test]
fn fields_newer_than_the_schema_are_skipped_and_named() {
    let mut raw = pb::ConfigMap {
        metadata: Some(pb_meta::ObjectMeta {
            name: s("x"),
            ..Default::default()
        }),
        ..Default::default()
    }
    .encode_to_vec();
    // Field 99, a varint: nothing upstream has numbered yet.
    raw.extend([0x98, 0x06, 0x01]);
    let unknown = Unknown {
        type_meta: Some(TypeMeta {
            api_version: s("v1"),
            kind: s("ConfigMap"),
        }),
        raw: Some(raw),
        ..Default::default()
    };
    let mut value = PROTOBUF_MAGIC.to_vec();
    value.extend(unknown.encode_to_vec());
    let typed: Decoded<ConfigMap> = decode_object(&value).expect("decodes");
    assert_eq!(
        typed.skipped.0,
        vec!["api.core.v1.ConfigMap.99".to_string()]
    );
}
