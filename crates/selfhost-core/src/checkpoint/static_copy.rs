//! The static form of a running DaemonSet pod, as the checkpointer keeps it.
//!
//! The checkpointer keeps the pod as the API shows it, not its DaemonSet's template (the
//! template may have moved on to a revision that has not served yet, and a node's credentials
//! may read its own pods but not the cluster's ControllerRevisions). What the API server added
//! when it admitted the pod is taken off again, because a static pod may not carry it: the
//! ServiceAccount admission's token volume (a Secret `<account>-token-…` before v1.21, a
//! projected `kube-api-access-…` since) with its mounts, and the service account itself. A
//! static pod that names a Secret or a service account never starts: its kubelet cannot read
//! the Secret without the API, and the API refuses its mirror pod.

use k8s_openapi::api::core::v1::{Container, Pod, PodSpec, PodTemplateSpec, Volume};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use crate::component::Component;
use crate::conversion::{ConversionError, static_pod_from_template};

/// The name a checkpoint's static pod goes by, apart from any static pod of kubeadm's.
pub fn copy_name(component: Component) -> String {
    format!("selfhost-checkpoint-{}", component.name())
}

/// The static pod the checkpointer keeps for `component` from its running DaemonSet `pod`.
///
/// # Errors
/// The pod has no spec or no container.
pub fn static_copy(component: Component, pod: &Pod) -> Result<Pod, ConversionError> {
    let template = PodTemplateSpec {
        metadata: Some(ObjectMeta {
            labels: pod.metadata.labels.clone(),
            annotations: None,
            ..ObjectMeta::default()
        }),
        spec: pod.spec.clone().map(without_admission),
    };
    let mut copy = static_pod_from_template(component, &template)?;
    copy.metadata.name = Some(copy_name(component));
    if let Some(labels) = copy.metadata.labels.as_mut() {
        // The DaemonSet controller's: they name a revision of a DaemonSet, not this pod.
        labels.remove("controller-revision-hash");
        labels.remove("pod-template-generation");
    }
    Ok(copy)
}

/// Whether `volume` is a service account token the ServiceAccount admission added.
fn is_token_volume(volume: &Volume) -> bool {
    let legacy = volume
        .secret
        .as_ref()
        .and_then(|s| s.secret_name.as_deref())
        .is_some_and(|name| name.contains("-token-"));
    let projected = volume.projected.as_ref().is_some_and(|p| {
        p.sources
            .iter()
            .flatten()
            .any(|s| s.service_account_token.is_some())
    });
    legacy || projected
}

/// `spec` without what the API server's admission adds for a service account.
fn without_admission(mut spec: PodSpec) -> PodSpec {
    let tokens: Vec<String> = spec
        .volumes
        .iter()
        .flatten()
        .filter(|v| is_token_volume(v))
        .map(|v| v.name.clone())
        .collect();
    if let Some(volumes) = spec.volumes.as_mut() {
        volumes.retain(|v| !tokens.contains(&v.name));
    }
    spec.volumes = spec.volumes.filter(|v| !v.is_empty());
    let unmount = |container: &mut Container| {
        if let Some(mounts) = container.volume_mounts.as_mut() {
            mounts.retain(|m| !tokens.contains(&m.name));
        }
        container.volume_mounts = container.volume_mounts.take().filter(|m| !m.is_empty());
    };
    spec.containers.iter_mut().for_each(unmount);
    spec.init_containers.iter_mut().flatten().for_each(unmount);
    spec.service_account_name = None;
    spec.service_account = None;
    spec.automount_service_account_token = None;
    spec
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use k8s_openapi::api::core::v1::{
        HostPathVolumeSource, ProjectedVolumeSource, SecretVolumeSource,
        ServiceAccountTokenProjection, VolumeMount, VolumeProjection,
    };

    use super::*;

    fn mount(name: &str, path: &str) -> VolumeMount {
        VolumeMount {
            name: name.into(),
            mount_path: path.into(),
            ..VolumeMount::default()
        }
    }

    /// A kube-apiserver pod as the API shows it after admission: the ServiceAccount's token
    /// volume (`legacy`: a Secret, as v1.20 adds it; else projected) beside its own.
    fn admitted(legacy: bool) -> Pod {
        let token = if legacy {
            Volume {
                name: "default-token-mlqlw".into(),
                secret: Some(SecretVolumeSource {
                    secret_name: Some("default-token-mlqlw".into()),
                    ..SecretVolumeSource::default()
                }),
                ..Volume::default()
            }
        } else {
            Volume {
                name: "kube-api-access-x7z2q".into(),
                projected: Some(ProjectedVolumeSource {
                    sources: Some(vec![VolumeProjection {
                        service_account_token: Some(ServiceAccountTokenProjection {
                            path: "token".into(),
                            ..ServiceAccountTokenProjection::default()
                        }),
                        ..VolumeProjection::default()
                    }]),
                    ..ProjectedVolumeSource::default()
                }),
                ..Volume::default()
            }
        };
        let certs = Volume {
            name: "k8s-certs".into(),
            host_path: Some(HostPathVolumeSource {
                path: "/etc/kubernetes/pki".into(),
                type_: Some("DirectoryOrCreate".into()),
            }),
            ..Volume::default()
        };
        let token_path = "/var/run/secrets/kubernetes.io/serviceaccount";
        Pod {
            metadata: ObjectMeta {
                name: Some("self-hosted-kube-apiserver-w6w5b".into()),
                labels: Some(
                    [
                        ("component".to_string(), "kube-apiserver".to_string()),
                        (
                            "controller-revision-hash".to_string(),
                            "5f6685c84".to_string(),
                        ),
                    ]
                    .into(),
                ),
                ..ObjectMeta::default()
            },
            spec: Some(PodSpec {
                containers: vec![Container {
                    name: "kube-apiserver".into(),
                    image: Some("registry.k8s.io/kube-apiserver:v1.20.2".into()),
                    volume_mounts: Some(vec![
                        mount("k8s-certs", "/etc/kubernetes/pki"),
                        mount(&token.name, token_path),
                    ]),
                    ..Container::default()
                }],
                volumes: Some(vec![certs, token]),
                service_account_name: Some("default".into()),
                service_account: Some("default".into()),
                node_name: Some("cp-1".into()),
                ..PodSpec::default()
            }),
            status: None,
        }
    }

    #[test]
    fn what_admission_added_for_the_service_account_is_taken_off() {
        for legacy in [true, false] {
            let copy = static_copy(Component::ApiServer, &admitted(legacy)).unwrap();
            let spec = copy.spec.as_ref().unwrap();
            let volumes: Vec<&str> = spec
                .volumes
                .iter()
                .flatten()
                .map(|v| v.name.as_str())
                .collect();
            assert_eq!(volumes, ["k8s-certs"], "legacy token: {legacy}");
            let mounts: Vec<&str> = spec.containers[0]
                .volume_mounts
                .iter()
                .flatten()
                .map(|m| m.name.as_str())
                .collect();
            assert_eq!(mounts, ["k8s-certs"]);
            assert_eq!(spec.service_account_name, None);
            assert_eq!(spec.service_account, None);
            assert_eq!(spec.node_name, None, "the kubelet sets its own node");
            assert_eq!(
                copy.metadata.name.as_deref(),
                Some("selfhost-checkpoint-kube-apiserver")
            );
            let labels = copy.metadata.labels.unwrap();
            assert!(!labels.contains_key("controller-revision-hash"));
            assert_eq!(labels["component"], "kube-apiserver");
        }
    }
}
