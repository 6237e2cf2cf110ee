//! Self-hosted DaemonSet pod template → static pod manifest, and the files certificates from
//! Secrets need on a node.
//!
//! The reverse of [`super::self_hosted_daemonset`] up to a documented normalisation: what the
//! DaemonSet needed to run on every node and is harmless in a static pod stays (the
//! `$(HOST_IP)` advertise address from the downward API, the graceful-shutdown flags and
//! `--permit-port-sharing=true`); what only a DaemonSet uses goes (the `k8s-app` label, the
//! control-plane and gate node selectors, the control-plane tolerations, the host-network DNS
//! policy); volumes from Secrets become host paths again, at the paths they were mounted at.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{HostPathVolumeSource, Pod, PodSpec, PodTemplateSpec, Volume};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use super::error::ConversionError;
use super::gate::NODE_GATE_PREFIX;
use crate::command_line;
use crate::component::{APP_LABEL, Component, NAMESPACE};
use crate::control_plane::{K8S_CERTS_VOLUME, KUBECONFIG_VOLUME, KUBERNETES_DIR};
use crate::daemonset::{CONTROL_PLANE_NODE_LABEL, LEGACY_MASTER_LABEL};

/// Permissions of a private key or kubeconfig written from a Secret.
const PRIVATE_MODE: u32 = 0o600;
/// Permissions of a certificate or public key written from a Secret.
const PUBLIC_MODE: u32 = 0o644;
/// Flags that name a kubeconfig file.
const KUBECONFIG_FLAGS: [&str; 3] = [
    "kubeconfig",
    "authentication-kubeconfig",
    "authorization-kubeconfig",
];

/// One file a static pod reads from the host that its DaemonSet read from a Secret.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct SecretFile {
    /// The Secret in kube-system.
    pub secret: String,
    /// The key in the Secret.
    pub key: String,
    /// The absolute path on the host.
    pub path: String,
    /// The file's permissions: 0600 for private keys and kubeconfigs, 0644 otherwise.
    pub mode: u32,
}

fn mount_path(spec: &PodSpec, volume: &str) -> Option<String> {
    spec.containers
        .iter()
        .flat_map(|c| c.volume_mounts.iter().flatten())
        .find(|m| m.name == volume)
        .map(|m| m.mount_path.trim_end_matches('/').to_string())
}

fn mode_for(path: &str) -> u32 {
    if path.ends_with(".key") || path.ends_with(".conf") {
        PRIVATE_MODE
    } else {
        PUBLIC_MODE
    }
}

/// The files that the Secret volumes of a self-hosted pod spec project, at the host paths a
/// static pod reads them from: the certificates at the path the projected volume was mounted
/// at, the kubeconfigs under `/etc/kubernetes`. Empty when nothing comes from Secrets.
pub fn secret_files(spec: &PodSpec) -> Vec<SecretFile> {
    let mut files = Vec::new();
    for volume in spec.volumes.iter().flatten() {
        if let Some(projected) = &volume.projected
            && let Some(dir) = mount_path(spec, &volume.name)
        {
            for secret in projected
                .sources
                .iter()
                .flatten()
                .filter_map(|s| s.secret.as_ref())
            {
                for item in secret.items.iter().flatten() {
                    let path = format!("{dir}/{}", item.path);
                    files.push(SecretFile {
                        secret: secret.name.clone(),
                        key: item.key.clone(),
                        mode: mode_for(&path),
                        path,
                    });
                }
            }
        }
        if let Some(secret) = &volume.secret
            && volume.name == KUBECONFIG_VOLUME
            && let Some(name) = &secret.secret_name
        {
            files.push(SecretFile {
                secret: name.clone(),
                key: name.clone(),
                path: format!("{KUBERNETES_DIR}/{name}"),
                mode: PRIVATE_MODE,
            });
        }
    }
    files.sort();
    files.dedup();
    files
}

fn host_path(path: &str, type_: &str) -> Option<HostPathVolumeSource> {
    Some(HostPathVolumeSource {
        path: path.to_string(),
        type_: Some(type_.to_string()),
    })
}

/// Turns the Secret volumes of `spec` back into host paths (see the module documentation).
fn mount_from_host(mut spec: PodSpec) -> PodSpec {
    let certs_dir = mount_path(&spec, K8S_CERTS_VOLUME);
    let kubeconfig_dir = mount_path(&spec, KUBECONFIG_VOLUME);
    let mut kubeconfig_file = None;
    for volume in spec.volumes.iter_mut().flatten() {
        if volume.name == K8S_CERTS_VOLUME
            && volume.projected.is_some()
            && let Some(dir) = &certs_dir
        {
            *volume = Volume {
                name: volume.name.clone(),
                host_path: host_path(dir, "DirectoryOrCreate"),
                ..Volume::default()
            };
        }
        if volume.name == KUBECONFIG_VOLUME
            && let Some(name) = volume.secret.as_ref().and_then(|s| s.secret_name.clone())
        {
            let file = format!("{KUBERNETES_DIR}/{name}");
            *volume = Volume {
                name: volume.name.clone(),
                host_path: host_path(&file, "FileOrCreate"),
                ..Volume::default()
            };
            kubeconfig_file = Some((name, file));
        }
    }
    let (Some((name, file)), Some(dir)) = (kubeconfig_file, kubeconfig_dir) else {
        return spec;
    };
    let mounted_at = format!("{dir}/{name}");
    for container in &mut spec.containers {
        for mount in container.volume_mounts.iter_mut().flatten() {
            if mount.name == KUBECONFIG_VOLUME {
                mount.mount_path = file.clone();
            }
        }
        let mut command = container.command.take().unwrap_or_default();
        for flag in KUBECONFIG_FLAGS {
            if command_line::flag_value(&command, flag) == Some(mounted_at.as_str()) {
                command = command_line::set_flag(&command, flag, &file);
            }
        }
        container.command = Some(command);
    }
    spec
}

/// Removes what only a DaemonSet pod needs: node selectors, tolerations and DNS policy.
fn unschedule(mut spec: PodSpec) -> PodSpec {
    if let Some(selector) = spec.node_selector.as_mut() {
        selector.retain(|key, _| {
            key != CONTROL_PLANE_NODE_LABEL
                && key != LEGACY_MASTER_LABEL
                && !key.starts_with(NODE_GATE_PREFIX)
        });
    }
    spec.node_selector = spec.node_selector.filter(|s| !s.is_empty());
    if let Some(tolerations) = spec.tolerations.as_mut() {
        tolerations.retain(|t| {
            let ours = matches!(
                t.key.as_deref(),
                Some(CONTROL_PLANE_NODE_LABEL | LEGACY_MASTER_LABEL)
            ) && t.operator.as_deref() == Some("Exists")
                && t.effect.as_deref() == Some("NoSchedule");
            !ours
        });
    }
    spec.tolerations = spec.tolerations.filter(|t| !t.is_empty());
    if spec.dns_policy.as_deref() == Some("ClusterFirstWithHostNet") {
        spec.dns_policy = None;
    }
    spec.node_name = None;
    spec
}

/// The static pod manifest of `component` from its self-hosted DaemonSet's pod template.
pub fn static_pod_from_template(
    component: Component,
    template: &PodTemplateSpec,
) -> Result<Pod, ConversionError> {
    let spec = template
        .spec
        .clone()
        .ok_or(ConversionError::NoTemplate { component })?;
    if spec.containers.is_empty() {
        return Err(ConversionError::NoContainer { component });
    }
    let spec = unschedule(mount_from_host(spec));
    let meta = template.metadata.clone().unwrap_or_default();
    let labels: BTreeMap<String, String> = meta
        .labels
        .unwrap_or_default()
        .into_iter()
        .filter(|(key, _)| key != APP_LABEL)
        .collect();
    Ok(Pod {
        metadata: ObjectMeta {
            name: Some(component.name().to_string()),
            namespace: Some(NAMESPACE.to_string()),
            labels: (!labels.is_empty()).then_some(labels),
            annotations: meta.annotations.filter(|a| !a.is_empty()),
            ..ObjectMeta::default()
        },
        spec: Some(spec),
        status: None,
    })
}
