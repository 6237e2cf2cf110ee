//! What `recover` writes for a template: the static form, the Secret files, the volumes a
//! static pod cannot mount, and the refusals.

use std::collections::BTreeMap;

use k8s_openapi::ByteString;
use k8s_openapi::api::apps::v1::DaemonSet;
use k8s_openapi::api::core::v1::{
    ConfigMap, ConfigMapVolumeSource, EnvVar, EnvVarSource, KeyToPath, Secret, SecretKeySelector,
    Volume, VolumeMount,
};

use super::*;
use crate::config::ClusterConfig;
use crate::control_plane::{NodeContext, static_pod};
use crate::daemonset::{
    DaemonSetOptions, build_daemonset, certificate_secrets, kubeconfig_secrets,
};

fn daemonset(component: Component, certs_in_secrets: bool) -> DaemonSet {
    let version = crate::KubeVersion::parse("v1.33.1").expect("version");
    let config = ClusterConfig::default_for(&version);
    let pod = static_pod(component, &config, &NodeContext::default(), &version);
    let mut ds =
        build_daemonset(component, &pod, &DaemonSetOptions { certs_in_secrets }).expect("builds");
    ds.metadata.generation = Some(4);
    ds
}

/// Every Secret `--certs-in-secrets` makes, each key holding `<secret>/<key>`.
fn secrets() -> Referenced {
    let mut read = Referenced::default();
    for secret in certificate_secrets()
        .into_iter()
        .chain(kubeconfig_secrets())
    {
        let data = secret
            .files
            .iter()
            .map(|(key, _)| {
                let content = format!("{}/{key}", secret.name).into_bytes();
                (key.clone(), ByteString(content))
            })
            .collect();
        read.secrets.insert(
            secret.name.clone(),
            Secret {
                data: Some(data),
                ..Secret::default()
            },
        );
    }
    read
}

fn spec_of(ds: &DaemonSet) -> PodSpec {
    ds.spec
        .as_ref()
        .and_then(|s| s.template.spec.clone())
        .expect("spec")
}

#[test]
fn certificates_in_secrets_become_files_and_host_paths_again() {
    for component in Component::ALL {
        let ds = daemonset(component, true);
        let wanted = objects_to_read(&spec_of(&ds));
        assert!(
            wanted.iter().all(|o| o.kind == StoredKind::Secret),
            "{wanted:?}"
        );
        let recovered = recover_component(component, &ds, &secrets()).expect("recovers");
        assert_eq!(recovered.revision, "generation-4");
        assert!(recovered.image.ends_with(":v1.33.1"), "{}", recovered.image);
        assert!(
            !recovered.files.is_empty(),
            "{component}: files from Secrets"
        );
        for file in &recovered.files {
            assert_eq!(file.mode, 0o600, "{}", file.path);
            assert!(file.path.starts_with("/etc/kubernetes/"), "{}", file.path);
            let expected = file
                .from
                .split(' ')
                .nth(1)
                .map(|o| o.trim_start_matches("kube-system/"));
            let key = file.from.rsplit(' ').next().unwrap_or_default();
            assert_eq!(
                String::from_utf8_lossy(&file.content.0),
                format!("{}/{key}", expected.unwrap_or_default()),
                "{} holds its Secret's key",
                file.path
            );
        }
        let spec = recovered.pod.spec.expect("spec");
        for volume in spec.volumes.iter().flatten() {
            assert!(
                volume.host_path.is_some(),
                "{component}: {} is a host path",
                volume.name
            );
        }
    }
}

#[test]
fn a_template_on_host_paths_needs_nothing_from_etcd() {
    let ds = daemonset(Component::ApiServer, false);
    assert!(objects_to_read(&spec_of(&ds)).is_empty());
    let recovered =
        recover_component(Component::ApiServer, &ds, &Referenced::default()).expect("recovers");
    assert!(recovered.files.is_empty());
    let args = recovered.pod.spec.expect("spec").containers[0]
        .command
        .clone()
        .unwrap_or_default();
    assert!(
        args.contains(&"--permit-port-sharing=true".to_string()),
        "{args:?}"
    );
}

#[test]
fn other_secret_and_configmap_volumes_become_host_directories() {
    let mut ds = daemonset(Component::ApiServer, false);
    let spec = ds
        .spec
        .as_mut()
        .and_then(|s| s.template.spec.as_mut())
        .expect("spec");
    spec.volumes.get_or_insert_with(Vec::new).push(Volume {
        name: "audit".into(),
        config_map: Some(ConfigMapVolumeSource {
            name: "audit-policy".into(),
            items: Some(vec![KeyToPath {
                key: "policy".into(),
                path: "policy.yaml".into(),
                mode: None,
            }]),
            ..ConfigMapVolumeSource::default()
        }),
        ..Volume::default()
    });
    spec.containers[0]
        .volume_mounts
        .get_or_insert_with(Vec::new)
        .push(VolumeMount {
            name: "audit".into(),
            mount_path: "/etc/audit".into(),
            ..VolumeMount::default()
        });
    let wanted = objects_to_read(spec);
    assert_eq!(
        wanted.into_iter().collect::<Vec<_>>(),
        vec![ObjectRef {
            kind: StoredKind::ConfigMap,
            name: "audit-policy".into()
        }]
    );
    let mut read = Referenced::default();
    let missing = recover_component(Component::ApiServer, &ds, &read).expect_err("missing");
    assert!(matches!(missing, RecoverError::Missing { .. }), "{missing}");
    read.config_maps.insert(
        "audit-policy".into(),
        ConfigMap {
            data: Some(BTreeMap::from([("policy".into(), "rules: []".into())])),
            ..ConfigMap::default()
        },
    );
    let recovered = recover_component(Component::ApiServer, &ds, &read).expect("recovers");
    assert_eq!(recovered.files.len(), 1);
    let file = &recovered.files[0];
    assert_eq!(
        file.path,
        "/etc/kubernetes/selfhost-recovered/kube-apiserver/audit/policy.yaml"
    );
    assert_eq!(
        (file.mode, file.content.0.as_slice()),
        (0o644, &b"rules: []"[..])
    );
    let volume = recovered
        .pod
        .spec
        .and_then(|s| s.volumes)
        .and_then(|v| v.into_iter().find(|v| v.name == "audit"))
        .expect("the volume");
    assert_eq!(
        volume.host_path.map(|h| h.path),
        Some("/etc/kubernetes/selfhost-recovered/kube-apiserver/audit".to_string())
    );
    assert!(volume.config_map.is_none());
}

#[test]
fn a_missing_key_and_a_variable_from_a_secret_are_refused() {
    let ds = daemonset(Component::Scheduler, true);
    let mut read = secrets();
    read.secrets
        .insert("scheduler.conf".into(), Secret::default());
    let err = recover_component(Component::Scheduler, &ds, &read).expect_err("no key");
    assert!(err.to_string().contains("has no key"), "{err}");

    let mut ds = daemonset(Component::Scheduler, false);
    let spec = ds
        .spec
        .as_mut()
        .and_then(|s| s.template.spec.as_mut())
        .expect("spec");
    spec.containers[0].env = Some(vec![EnvVar {
        name: "TOKEN".into(),
        value_from: Some(EnvVarSource {
            secret_key_ref: Some(SecretKeySelector {
                name: "token".into(),
                key: "t".into(),
                optional: None,
            }),
            ..EnvVarSource::default()
        }),
        ..EnvVar::default()
    }]);
    let err =
        recover_component(Component::Scheduler, &ds, &Referenced::default()).expect_err("refused");
    assert!(err.to_string().contains("TOKEN"), "{err}");
}

#[test]
fn file_contents_never_show_in_debug_output() {
    let file = HostFile {
        path: "/etc/kubernetes/pki/ca.key".into(),
        mode: 0o600,
        from: "Secret kube-system/ca key tls.key".into(),
        content: FileContent(b"-----BEGIN PRIVATE KEY-----".to_vec()),
    };
    let shown = format!("{file:?}");
    assert!(!shown.contains("PRIVATE"), "{shown}");
    assert!(shown.contains("27 bytes"), "{shown}");
}
