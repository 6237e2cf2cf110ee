//! `selfhost recover`, the pure part: from a self-hosted component's DaemonSet and the Secrets
//! and ConfigMaps its pod template mounts, as read from etcd, the static pod to start on a node
//! and the files it needs there — for a control plane that is gone with no checkpoint to
//! start from.
//!
//! The static pod is the template's static form as `convert to-static` and the checkpointer
//! write it ([`static_pod_from_template`]): volumes of certificates and kubeconfigs kept in
//! Secrets become host paths again, their files written from the Secrets. A static pod cannot
//! read any other Secret or ConfigMap volume either, since the kubelet has no API to fetch it
//! from: each such volume becomes a host directory under [`RECOVERED_DIR`] holding its
//! files. A variable taken from a Secret or a ConfigMap has no such form and is refused.
//!
//! Every Secret file is mode 0600, certificates included: only the kubelet's static pods read
//! them, as root.

mod volumes;

#[cfg(test)]
mod tests;

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use k8s_openapi::api::apps::v1::DaemonSet;
use k8s_openapi::api::core::v1::{ConfigMap, Pod, PodSpec, Secret};

use crate::component::{Component, NAMESPACE};
use crate::conversion::{ConversionError, secret_files, static_pod_from_template};
use crate::etcd::StoredKind;

/// Where volumes that a static pod cannot mount from the API are kept on the node:
/// `<dir>/<component>/<volume>/`.
pub const RECOVERED_DIR: &str = "/etc/kubernetes/selfhost-recovered";
/// The mode of every file written from a Secret.
pub const SECRET_FILE_MODE: u32 = 0o600;
/// The mode of a file written from a ConfigMap, unless its volume says otherwise.
pub const CONFIG_FILE_MODE: u32 = 0o644;

/// An object a component's pod template needs, in kube-system.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ObjectRef {
    /// Secret or ConfigMap.
    pub kind: StoredKind,
    /// Its name.
    pub name: String,
}

impl fmt::Display for ObjectRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {NAMESPACE}/{}", self.kind.kind(), self.name)
    }
}

/// The bytes of a file; never shown, since they may be a private key.
#[derive(Clone, PartialEq, Eq)]
pub struct FileContent(pub Vec<u8>);

impl fmt::Debug for FileContent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "<{} bytes>", self.0.len())
    }
}

/// One file to write on the node for a static pod.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostFile {
    /// The absolute path on the host.
    pub path: String,
    /// Its permissions.
    pub mode: u32,
    /// Where its content comes from: the object and key.
    pub from: String,
    /// Its content.
    pub content: FileContent,
}

/// What to write on the node for one component.
#[derive(Debug, Clone, PartialEq)]
pub struct ComponentRecovery {
    /// The component.
    pub component: Component,
    /// The static pod (the checkpointer's active copy, not yet marked as one).
    pub pod: Pod,
    /// The image it runs.
    pub image: String,
    /// What the DaemonSet's template is known by: `generation-<n>` of the DaemonSet.
    pub revision: String,
    /// The files it needs, sorted by path.
    pub files: Vec<HostFile>,
}

/// Why a component cannot be recovered from what was read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RecoverError {
    /// The template cannot become a static pod.
    #[error(transparent)]
    Conversion(#[from] ConversionError),
    /// An object the template needs was not in etcd.
    #[error("{component}: the pod template needs {object}, which is not in etcd")]
    Missing {
        /// The component.
        component: Component,
        /// The object.
        object: ObjectRef,
    },
    /// An object lacks a key the template names.
    #[error("{component}: {object} has no key {key:?}, which the pod template mounts")]
    MissingKey {
        /// The component.
        component: Component,
        /// The object.
        object: ObjectRef,
        /// The key.
        key: String,
    },
    /// The template uses something a static pod cannot have.
    #[error("{component}: {what}; a static pod cannot have it, so it cannot be recovered")]
    Unsupported {
        /// The component.
        component: Component,
        /// What it is.
        what: String,
    },
}

/// What was read from etcd for the components' templates.
#[derive(Debug, Clone, Default)]
pub struct Referenced {
    /// Secrets by name.
    pub secrets: BTreeMap<String, Secret>,
    /// ConfigMaps by name.
    pub config_maps: BTreeMap<String, ConfigMap>,
}

/// The Secrets and ConfigMaps a pod template needs to run as a static pod.
pub fn objects_to_read(spec: &PodSpec) -> BTreeSet<ObjectRef> {
    let mut objects: BTreeSet<ObjectRef> = secret_files(spec)
        .into_iter()
        .map(|f| ObjectRef {
            kind: StoredKind::Secret,
            name: f.secret,
        })
        .collect();
    objects.extend(volumes::referenced(spec));
    objects
}

/// The static pod and files of `component` from its DaemonSet and the objects read for it.
///
/// # Errors
/// The template has no static form, or needs an object or key that was not read.
pub fn recover_component(
    component: Component,
    daemonset: &DaemonSet,
    read: &Referenced,
) -> Result<ComponentRecovery, RecoverError> {
    let template = daemonset
        .spec
        .as_ref()
        .map(|s| s.template.clone())
        .unwrap_or_default();
    let spec = template
        .spec
        .clone()
        .ok_or(ConversionError::NoTemplate { component })?;
    volumes::refuse_env_from_objects(component, &spec)?;
    let mut pod = static_pod_from_template(component, &template)?;
    // The files of volumes that became host paths again; any other volume is turned into a
    // host directory of its own below.
    let host_paths: Vec<String> = pod
        .spec
        .iter()
        .flat_map(|s| s.volumes.iter().flatten())
        .filter_map(|v| v.host_path.as_ref().map(|h| h.path.clone()))
        .collect();
    let mut files = Vec::new();
    for file in secret_files(&spec) {
        let on_host = host_paths
            .iter()
            .any(|p| file.path == *p || file.path.starts_with(&format!("{p}/")));
        if !on_host {
            continue;
        }
        let object = ObjectRef {
            kind: StoredKind::Secret,
            name: file.secret.clone(),
        };
        let content =
            volumes::secret_key(component, read, &object, &file.key)?.ok_or_else(|| {
                RecoverError::MissingKey {
                    component,
                    object: object.clone(),
                    key: file.key.clone(),
                }
            })?;
        files.push(HostFile {
            path: file.path,
            mode: SECRET_FILE_MODE,
            from: format!("{object} key {}", file.key),
            content: FileContent(content),
        });
    }
    if let Some(spec) = pod.spec.as_mut() {
        files.extend(volumes::to_host_directories(component, spec, read)?);
    }
    files.sort_by(|a, b| a.path.cmp(&b.path));
    files.dedup_by(|a, b| a.path == b.path);
    let image = pod
        .spec
        .as_ref()
        .and_then(|s| s.containers.first())
        .and_then(|c| c.image.clone())
        .unwrap_or_default();
    let generation = daemonset.metadata.generation.unwrap_or_default();
    Ok(ComponentRecovery {
        component,
        pod,
        image,
        revision: format!("generation-{generation}"),
        files,
    })
}
