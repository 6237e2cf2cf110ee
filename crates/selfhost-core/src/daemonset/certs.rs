//! Certificates and kubeconfigs mounted from Secrets instead of host paths.
//!
//! kubeadm's `StoreCertsInSecrets` projected a fixed list of files and forgot the etcd client
//! certificates (kubernetes/kubernetes#61322), which broke the apiserver. Here the files to
//! project are read from the component's own flags: every flag that names a file under the
//! certificates mount is served from the Secret that stores that file, and a file we do not
//! know how to store is an error rather than a silently broken pod.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{
    KeyToPath, PodSpec, ProjectedVolumeSource, SecretProjection, SecretVolumeSource,
    VolumeProjection,
};

use crate::command_line;
use crate::component::Component;
use crate::control_plane::{K8S_CERTS_VOLUME as CERTS_VOLUME, KUBECONFIG_VOLUME};

/// Directory the kubeconfig Secret is mounted at (a Secret volume can only mount a whole
/// directory, and mounting it at /etc/kubernetes would hide the certificates below it).
const KUBECONFIG_DIR: &str = "/etc/kubernetes/kubeconfig";
/// Permissions of private keys projected from Secrets.
const KEY_MODE: i32 = 0o600;

/// Where each file of kubeadm's certificates directory is stored: (path relative to the
/// directory, Secret name, key in the Secret). Secret names are kubeadm's; `etcd-ca` replaces
/// the `etcd/ca` name that is not a valid object name.
const CERT_FILES: &[(&str, &str, &str)] = &[
    ("ca.crt", "ca", "tls.crt"),
    ("ca.key", "ca", "tls.key"),
    ("apiserver.crt", "apiserver", "tls.crt"),
    ("apiserver.key", "apiserver", "tls.key"),
    (
        "apiserver-kubelet-client.crt",
        "apiserver-kubelet-client",
        "tls.crt",
    ),
    (
        "apiserver-kubelet-client.key",
        "apiserver-kubelet-client",
        "tls.key",
    ),
    (
        "apiserver-etcd-client.crt",
        "apiserver-etcd-client",
        "tls.crt",
    ),
    (
        "apiserver-etcd-client.key",
        "apiserver-etcd-client",
        "tls.key",
    ),
    ("etcd/ca.crt", "etcd-ca", "tls.crt"),
    ("etcd/ca.key", "etcd-ca", "tls.key"),
    ("front-proxy-ca.crt", "front-proxy-ca", "tls.crt"),
    ("front-proxy-ca.key", "front-proxy-ca", "tls.key"),
    ("front-proxy-client.crt", "front-proxy-client", "tls.crt"),
    ("front-proxy-client.key", "front-proxy-client", "tls.key"),
    ("sa.pub", "sa", "tls.crt"),
    ("sa.key", "sa", "tls.key"),
];

/// Kubeconfig files of the components that use one, relative to `/etc/kubernetes`; each is
/// stored in an Opaque Secret named after the file, under a key of the same name.
const KUBECONFIG_FILES: &[&str] = &["controller-manager.conf", "scheduler.conf"];

/// A Secret to create from files on a control-plane node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CertSecret {
    /// Secret name in kube-system.
    pub name: String,
    /// Secret type: `kubernetes.io/tls` or `Opaque`.
    pub type_: String,
    /// Data keys and the file each comes from, relative to the certificates directory (TLS
    /// Secrets) or to `/etc/kubernetes` (kubeconfig Secrets).
    pub files: Vec<(String, String)>,
}

/// The TLS Secrets that hold kubeadm's certificates directory, including the etcd client
/// certificates kubeadm forgot.
pub fn certificate_secrets() -> Vec<CertSecret> {
    let mut by_name: BTreeMap<&str, Vec<(String, String)>> = BTreeMap::new();
    for (path, secret, key) in CERT_FILES {
        by_name
            .entry(secret)
            .or_default()
            .push((key.to_string(), path.to_string()));
    }
    by_name
        .into_iter()
        .map(|(name, files)| CertSecret {
            name: name.to_string(),
            type_: "kubernetes.io/tls".to_string(),
            files,
        })
        .collect()
}

/// The Opaque Secrets that hold the controller-manager's and scheduler's kubeconfigs.
pub fn kubeconfig_secrets() -> Vec<CertSecret> {
    KUBECONFIG_FILES
        .iter()
        .map(|file| CertSecret {
            name: file.to_string(),
            type_: "Opaque".to_string(),
            files: vec![(file.to_string(), file.to_string())],
        })
        .collect()
}

/// Why a pod spec could not be switched to Secrets.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CertsError {
    /// A flag names a file in the certificates directory that has no Secret.
    #[error(
        "{component}: flag --{flag} names {path}, which selfhost does not know how to store in a Secret; \
         known files are: {known}. Move the file out of the certificates directory (and mount it with \
         an extra volume) or run without --certs-in-secrets"
    )]
    UnknownCertificate {
        /// The component whose flag it is.
        component: Component,
        /// The flag, without dashes.
        flag: String,
        /// The file it names.
        path: String,
        /// The files that can be stored, comma-separated.
        known: String,
    },
    /// A kubeconfig volume points at a file that has no Secret.
    #[error(
        "{component}: the kubeconfig volume mounts {path}; with --certs-in-secrets only \
         /etc/kubernetes/controller-manager.conf and /etc/kubernetes/scheduler.conf are supported"
    )]
    UnknownKubeconfig {
        /// The component.
        component: Component,
        /// The host path of the kubeconfig volume.
        path: String,
    },
}

/// Rewrites the certificates and kubeconfig volumes of `spec` to come from Secrets.
pub(super) fn mount_from_secrets(
    component: Component,
    spec: PodSpec,
) -> Result<PodSpec, CertsError> {
    let spec = project_certificates(component, spec)?;
    mount_kubeconfig_secret(component, spec)
}

fn host_path_of(spec: &PodSpec, volume: &str) -> Option<String> {
    spec.volumes
        .iter()
        .flatten()
        .find(|v| v.name == volume)
        .and_then(|v| v.host_path.as_ref())
        .map(|h| h.path.trim_end_matches('/').to_string())
}

fn project_certificates(component: Component, mut spec: PodSpec) -> Result<PodSpec, CertsError> {
    let Some(certs_dir) = host_path_of(&spec, CERTS_VOLUME) else {
        return Ok(spec);
    };
    let Some(container) = spec.containers.first() else {
        return Ok(spec);
    };
    let mount_dir = container
        .volume_mounts
        .iter()
        .flatten()
        .find(|m| m.name == CERTS_VOLUME)
        .map_or(certs_dir.clone(), |m| {
            m.mount_path.trim_end_matches('/').to_string()
        });

    let mut items: BTreeMap<&str, Vec<KeyToPath>> = BTreeMap::new();
    for arg in container
        .command
        .iter()
        .flatten()
        .chain(container.args.iter().flatten())
    {
        let Some((flag, value)) = arg.strip_prefix("--").and_then(|a| a.split_once('=')) else {
            continue;
        };
        // Flags such as --tls-cipher-suites hold lists; only whole paths are files.
        for path in value.split(',') {
            let Some(relative) = path
                .strip_prefix(&mount_dir)
                .and_then(|p| p.strip_prefix('/'))
            else {
                continue;
            };
            let Some((_, secret, key)) = CERT_FILES.iter().find(|(p, _, _)| *p == relative) else {
                return Err(CertsError::UnknownCertificate {
                    component,
                    flag: flag.to_string(),
                    path: path.to_string(),
                    known: CERT_FILES
                        .iter()
                        .map(|(p, _, _)| *p)
                        .collect::<Vec<_>>()
                        .join(", "),
                });
            };
            let entry = items.entry(secret).or_default();
            let item = KeyToPath {
                key: key.to_string(),
                path: relative.to_string(),
                mode: relative.ends_with(".key").then_some(KEY_MODE),
            };
            if !entry.contains(&item) {
                entry.push(item);
            }
        }
    }

    let sources = items
        .into_iter()
        .map(|(name, mut items)| {
            items.sort_by(|a, b| a.path.cmp(&b.path));
            VolumeProjection {
                secret: Some(SecretProjection {
                    name: name.to_string(),
                    items: Some(items),
                    optional: Some(false),
                }),
                ..VolumeProjection::default()
            }
        })
        .collect();
    if let Some(volume) = spec
        .volumes
        .iter_mut()
        .flatten()
        .find(|v| v.name == CERTS_VOLUME)
    {
        volume.host_path = None;
        volume.projected = Some(ProjectedVolumeSource {
            sources: Some(sources),
            default_mode: None,
        });
    }
    Ok(spec)
}

fn mount_kubeconfig_secret(component: Component, mut spec: PodSpec) -> Result<PodSpec, CertsError> {
    let Some(host_file) = host_path_of(&spec, KUBECONFIG_VOLUME) else {
        return Ok(spec);
    };
    let Some(file) = KUBECONFIG_FILES
        .iter()
        .find(|f| host_file == format!("/etc/kubernetes/{f}"))
        .copied()
    else {
        return Err(CertsError::UnknownKubeconfig {
            component,
            path: host_file,
        });
    };
    for volume in spec
        .volumes
        .iter_mut()
        .flatten()
        .filter(|v| v.name == KUBECONFIG_VOLUME)
    {
        volume.host_path = None;
        volume.secret = Some(SecretVolumeSource {
            secret_name: Some(file.to_string()),
            default_mode: Some(KEY_MODE),
            ..SecretVolumeSource::default()
        });
    }
    let new_path = format!("{KUBECONFIG_DIR}/{file}");
    for container in &mut spec.containers {
        let mut old_mount = None;
        for mount in container.volume_mounts.iter_mut().flatten() {
            if mount.name == KUBECONFIG_VOLUME {
                old_mount = Some(std::mem::replace(
                    &mut mount.mount_path,
                    KUBECONFIG_DIR.to_string(),
                ));
            }
        }
        let Some(old_mount) = old_mount else { continue };
        let mut command = container.command.take().unwrap_or_default();
        for flag in [
            "kubeconfig",
            "authentication-kubeconfig",
            "authorization-kubeconfig",
        ] {
            if command_line::flag_value(&command, flag) == Some(old_mount.as_str()) {
                command = command_line::set_flag(&command, flag, &new_path);
            }
        }
        container.command = Some(command);
    }
    Ok(spec)
}
