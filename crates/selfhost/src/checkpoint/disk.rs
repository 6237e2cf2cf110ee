//! What the checkpointer keeps on the node's disk, and the copies it puts in the kubelet's
//! manifests directory.
//!
//! ```text
//! <checkpoint-dir>/<component>/pod.yaml        the static form of a pod that served
//! <checkpoint-dir>/<component>/checkpoint.json its revision, image and when it was written
//! <manifests-dir>/selfhost-checkpoint-<component>.yaml   an active copy
//! ```
//!
//! Every file is written whole (a temporary file renamed), mode 0600: a pod spec names the
//! paths of keys and may carry tokens in its environment.

use std::path::{Path, PathBuf};

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::jiff::Timestamp;
use selfhost_core::Component;
use selfhost_core::checkpoint::{ActiveCopy, CHECKPOINT_DIR, Checkpoint};
use serde::{Deserialize, Serialize};

use crate::node_files::{FilesError, remove_if_present, write_whole};

/// Where kubeadm's kubelets read static pods.
const KUBEADM_MANIFESTS_DIR: &str = "/etc/kubernetes/manifests";

/// The annotation an active copy carries: the revision it was kept from.
pub const REVISION_ANNOTATION: &str = "selfhost.dev/checkpoint-revision";
/// The annotation an active copy carries: when it was activated.
pub const ACTIVATED_ANNOTATION: &str = "selfhost.dev/checkpoint-activated-at";

/// Where one node's checkpoints and active copies live.
#[derive(Debug, Clone)]
pub struct NodeDisk {
    /// Where checkpoints are kept.
    pub checkpoint_dir: PathBuf,
    /// The kubelet's static pod directory.
    pub manifests_dir: PathBuf,
}

/// What `checkpoint.json` holds.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct Record {
    revision: String,
    image: String,
    written_at: Timestamp,
    /// The node's IP as the pod saw it (`status.hostIP`): what `$(HOST_IP)` in its flags
    /// stands for when the API that tells it is gone.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    host_ip: Option<String>,
}

impl NodeDisk {
    /// The checkpointer's files on a node laid out as kubeadm lays it out (static pods in
    /// `/etc/kubernetes/manifests`), whose host root is `root`.
    pub fn of_kubeadm_node(root: &Path) -> NodeDisk {
        let on_host = |path: &str| root.join(path.trim_start_matches('/'));
        NodeDisk {
            checkpoint_dir: on_host(CHECKPOINT_DIR),
            manifests_dir: on_host(KUBEADM_MANIFESTS_DIR),
        }
    }

    fn component_dir(&self, component: Component) -> PathBuf {
        self.checkpoint_dir.join(component.name())
    }

    fn pod_path(&self, component: Component) -> PathBuf {
        self.component_dir(component).join("pod.yaml")
    }

    fn record_path(&self, component: Component) -> PathBuf {
        self.component_dir(component).join("checkpoint.json")
    }

    /// The active copy's path in the manifests directory.
    pub fn active_path(&self, component: Component) -> PathBuf {
        self.manifests_dir.join(format!(
            "selfhost-checkpoint-{}",
            component.manifest_file_name()
        ))
    }

    /// The checkpoint stored for `component`, if a whole one is.
    pub fn checkpoint(&self, component: Component) -> Option<Checkpoint> {
        let text = std::fs::read_to_string(self.record_path(component)).ok()?;
        let record: Record = serde_json::from_str(&text).ok()?;
        self.pod_path(component).is_file().then_some(Checkpoint {
            revision: record.revision,
            image: record.image,
            written_at: record.written_at,
        })
    }

    /// The pod stored in `component`'s checkpoint, if one is.
    pub fn checkpoint_pod(&self, component: Component) -> Option<Pod> {
        read_pod(&self.pod_path(component))
    }

    /// The node's IP `component`'s checkpoint was kept with, if it was recorded.
    pub fn checkpoint_host_ip(&self, component: Component) -> Option<String> {
        let text = std::fs::read_to_string(self.record_path(component)).ok()?;
        serde_json::from_str::<Record>(&text).ok()?.host_ip
    }

    /// The active copy of `component`, if one is in the manifests directory.
    pub fn active(&self, component: Component) -> Option<ActiveCopy> {
        let pod = read_pod(&self.active_path(component))?;
        let annotations = pod.metadata.annotations.unwrap_or_default();
        Some(ActiveCopy {
            revision: annotations.get(REVISION_ANNOTATION)?.clone(),
            since: annotations.get(ACTIVATED_ANNOTATION)?.parse().ok()?,
            serving: false,
            mirror_pod: false,
        })
    }

    /// Whether kubeadm's static pod manifest of `component` is in the manifests directory.
    pub fn has_kubeadm_manifest(&self, component: Component) -> bool {
        self.manifests_dir
            .join(component.manifest_file_name())
            .is_file()
    }

    /// Removes every active copy and every checkpoint: the node no longer runs a self-hosted
    /// control plane, and an old checkpoint must never start beside its static pods.
    pub fn forget_everything(&self) -> Result<(), FilesError> {
        for component in Component::ALL {
            self.retire(component)?;
        }
        match std::fs::remove_dir_all(&self.checkpoint_dir) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(source) => Err(FilesError::Write {
                path: self.checkpoint_dir.clone(),
                source,
            }),
        }
    }

    /// Whether a checkpoint of every component is stored.
    pub fn keeps_every_component(&self) -> bool {
        Component::ALL
            .into_iter()
            .all(|c| self.checkpoint(c).is_some())
    }

    /// Whether a copy of any component is active in the manifests directory.
    pub fn has_active_copies(&self) -> bool {
        Component::ALL
            .into_iter()
            .any(|c| self.active_path(c).exists())
    }

    /// Stores `pod` (its static form) as the checkpoint of `component`, with the node's IP
    /// the pod ran with. The pod is written before the record, so a record always names a
    /// whole pod.
    pub fn keep(
        &self,
        component: Component,
        pod: &Pod,
        revision: &str,
        image: &str,
        host_ip: Option<&str>,
        now: Timestamp,
    ) -> Result<(), FilesError> {
        let dir = self.component_dir(component);
        write_whole(&self.pod_path(component), &dir, &yaml(pod)?, 0o600)?;
        let record = Record {
            revision: revision.to_string(),
            image: image.to_string(),
            written_at: now,
            host_ip: host_ip.map(str::to_string),
        };
        let json = serde_json::to_vec_pretty(&record).map_err(|e| FilesError::Write {
            path: self.record_path(component),
            source: std::io::Error::other(e),
        })?;
        write_whole(&self.record_path(component), &dir, &json, 0o600)
    }

    /// Copies the checkpoint of `component` into the manifests directory, marked with its
    /// revision and `now`.
    pub fn activate(&self, component: Component, now: Timestamp) -> Result<(), FilesError> {
        let path = self.pod_path(component);
        let mut pod = read_pod(&path).ok_or_else(|| FilesError::NotAPod {
            path: path.clone(),
            reason: "the checkpoint is missing or unreadable".into(),
        })?;
        let revision = self
            .checkpoint(component)
            .map(|c| c.revision)
            .unwrap_or_default();
        let annotations = pod
            .metadata
            .annotations
            .get_or_insert_with(Default::default);
        annotations.insert(REVISION_ANNOTATION.into(), revision);
        annotations.insert(ACTIVATED_ANNOTATION.into(), now.to_string());
        // The staging file is hidden: the kubelet skips dot files in its manifests directory.
        write_whole(
            &self.active_path(component),
            &self.manifests_dir,
            &yaml(&pod)?,
            0o600,
        )
    }

    /// Writes `pod`, the static form of `component`'s template, as its active copy: named and
    /// marked as [`Self::activate`] marks a checkpoint's, so that the checkpointer, once it
    /// runs, retires it when the DaemonSet pod serves. For `selfhost recover`, which has no
    /// checkpoint to activate. Returns the copy's path.
    pub fn write_active(
        &self,
        component: Component,
        pod: &Pod,
        revision: &str,
        now: Timestamp,
    ) -> Result<PathBuf, FilesError> {
        let mut pod = pod.clone();
        pod.metadata.name = Some(selfhost_core::checkpoint::copy_name(component));
        let annotations = pod
            .metadata
            .annotations
            .get_or_insert_with(Default::default);
        annotations.insert(REVISION_ANNOTATION.into(), revision.to_string());
        annotations.insert(ACTIVATED_ANNOTATION.into(), now.to_string());
        let path = self.active_path(component);
        write_whole(&path, &self.manifests_dir, &yaml(&pod)?, 0o600)?;
        Ok(path)
    }

    /// Removes the active copy of `component`; the kubelet stops it.
    pub fn retire(&self, component: Component) -> Result<(), FilesError> {
        remove_if_present(&self.active_path(component))
    }
}

fn read_pod(path: &Path) -> Option<Pod> {
    let text = std::fs::read_to_string(path).ok()?;
    selfhost_core::conversion::parse_manifest(&text).ok()
}

fn yaml(pod: &Pod) -> Result<Vec<u8>, FilesError> {
    selfhost_core::render::to_yaml(pod)
        .map(String::into_bytes)
        .map_err(|e| FilesError::Write {
            path: PathBuf::from("(a pod manifest)"),
            source: std::io::Error::other(e.to_string()),
        })
}
