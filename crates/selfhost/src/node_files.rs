//! The node's files: the kubelet's manifests directory, the backup directory a conversion
//! moves manifests into (never deleted), and the files certificates-in-Secrets, checkpoints
//! and recoveries need.
//!
//! The tool runs on the node (or beside its root filesystem), so these are plain local files. Every write that the kubelet may
//! read is made whole first and renamed into place, so the kubelet never sees half a manifest.

use std::io::Write;
use std::path::{Path, PathBuf};

use k8s_openapi::api::core::v1::Pod;
use selfhost_core::Component;
use selfhost_core::conversion::{permits_port_sharing, with_port_sharing};
use selfhost_core::front::FRONT_MANIFEST;

fn permits(pod: &Pod) -> bool {
    pod.spec.as_ref().is_some_and(permits_port_sharing)
}

/// Name of the directory, beside the manifests directory, that backups go to.
pub const BACKUP_DIR_NAME: &str = "selfhost-backup";
/// Sub-directory of the backup directory holding the static manifests moved aside.
const STATIC_PODS: &str = "static-pods";

/// A file operation that failed, or a manifest that cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum FilesError {
    /// The manifests directory does not exist or is not a directory.
    #[error(
        "the manifests directory {} does not exist or is not a directory; pass --manifests-dir \
         with the kubelet's staticPodPath (kubeadm: /etc/kubernetes/manifests)",
        path.display()
    )]
    NoManifestsDir {
        /// The directory.
        path: PathBuf,
    },
    /// A file could not be read.
    #[error("cannot read {}: {source}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
    /// A file could not be written, moved or removed.
    #[error("cannot write {}: {source}", path.display())]
    Write {
        /// The file.
        path: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
    /// A manifest is not YAML, or not a v1 Pod.
    #[error("{} is not a static pod manifest: {reason}", path.display())]
    NotAPod {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        reason: String,
    },
}

/// The manifests and backup directories of one node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeFiles {
    /// The kubelet's static pod directory.
    pub manifests_dir: PathBuf,
    /// Where manifests moved aside are kept: `<manifests-dir>/../selfhost-backup/static-pods`.
    pub backup_dir: PathBuf,
}

fn write_err(path: &Path) -> impl FnOnce(std::io::Error) -> FilesError + '_ {
    move |source| FilesError::Write {
        path: path.to_path_buf(),
        source,
    }
}

/// Writes `content` to `path` whole: into a temporary file in `staging` first, then renamed.
pub(crate) fn write_whole(
    path: &Path,
    staging: &Path,
    content: &[u8],
    mode: u32,
) -> Result<(), FilesError> {
    std::fs::create_dir_all(staging).map_err(write_err(staging))?;
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let temporary = staging.join(format!(".{name}.selfhost-tmp"));
    {
        let mut file = open_with_mode(&temporary, mode).map_err(write_err(&temporary))?;
        file.write_all(content).map_err(write_err(&temporary))?;
        file.sync_all().map_err(write_err(&temporary))?;
    }
    if std::fs::rename(&temporary, path).is_err() {
        // Another filesystem: copy, then drop the temporary file.
        std::fs::copy(&temporary, path).map_err(write_err(path))?;
        let _ = std::fs::remove_file(&temporary);
    }
    Ok(())
}

#[cfg(unix)]
fn open_with_mode(path: &Path, mode: u32) -> std::io::Result<std::fs::File> {
    use std::os::unix::fs::OpenOptionsExt;
    std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(mode)
        .open(path)
}

#[cfg(not(unix))]
fn open_with_mode(path: &Path, _mode: u32) -> std::io::Result<std::fs::File> {
    std::fs::File::create(path)
}

/// Parses a static pod manifest; `path` names it in errors.
pub fn parse_manifest(text: &str, path: &Path) -> Result<Pod, FilesError> {
    selfhost_core::conversion::parse_manifest(text).map_err(|e| FilesError::NotAPod {
        path: path.to_path_buf(),
        reason: e.to_string(),
    })
}

impl NodeFiles {
    /// The files of the node whose kubelet reads `manifests_dir`; fails when it is no
    /// directory.
    pub fn open(manifests_dir: &Path) -> Result<NodeFiles, FilesError> {
        if !manifests_dir.is_dir() {
            return Err(FilesError::NoManifestsDir {
                path: manifests_dir.to_path_buf(),
            });
        }
        let parent = manifests_dir
            .parent()
            .map_or_else(|| PathBuf::from("/"), Path::to_path_buf);
        Ok(NodeFiles {
            manifests_dir: manifests_dir.to_path_buf(),
            backup_dir: parent.join(BACKUP_DIR_NAME).join(STATIC_PODS),
        })
    }

    /// Where the manifest of `component` is for the kubelet.
    pub fn manifest_path(&self, component: Component) -> PathBuf {
        self.manifests_dir.join(component.manifest_file_name())
    }

    /// Where the manifest of `component` is kept once moved aside.
    pub fn backup_path(&self, component: Component) -> PathBuf {
        self.backup_dir.join(component.manifest_file_name())
    }

    fn read_pod(path: &Path) -> Result<Option<Pod>, FilesError> {
        match std::fs::read_to_string(path) {
            Ok(text) => parse_manifest(&text, path).map(Some),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(source) => Err(FilesError::Read {
                path: path.to_path_buf(),
                source,
            }),
        }
    }

    /// The manifest of `component` in the manifests directory, if there is one.
    pub fn manifest(&self, component: Component) -> Result<Option<Pod>, FilesError> {
        Self::read_pod(&self.manifest_path(component))
    }

    /// etcd's static pod manifest (kubeadm's `etcd.yaml`), if this node runs etcd: read for
    /// its certificates.
    pub fn etcd(&self) -> Result<Option<Pod>, FilesError> {
        Self::read_pod(&self.manifests_dir.join("etcd.yaml"))
    }

    /// The manifest of `component` in the backup directory, if there is one.
    pub fn backup(&self, component: Component) -> Result<Option<Pod>, FilesError> {
        Self::read_pod(&self.backup_path(component))
    }

    /// Keeps `content` as the backup of `component`; a different earlier backup is kept beside
    /// it, renamed with the time.
    fn back_up(&self, component: Component, content: &[u8]) -> Result<PathBuf, FilesError> {
        let to = self.backup_path(component);
        std::fs::create_dir_all(&self.backup_dir).map_err(write_err(&self.backup_dir))?;
        if let Ok(previous) = std::fs::read(&to)
            && previous != content
        {
            let stamp = k8s_openapi::jiff::Timestamp::now().as_second();
            let kept = self
                .backup_dir
                .join(format!("{}.{stamp}", component.manifest_file_name()));
            std::fs::rename(&to, &kept).map_err(write_err(&kept))?;
        }
        write_whole(&to, &self.backup_dir, content, 0o600)?;
        Ok(to)
    }

    fn read_bytes(path: &Path) -> Result<Vec<u8>, FilesError> {
        std::fs::read(path).map_err(|source| FilesError::Read {
            path: path.to_path_buf(),
            source,
        })
    }

    /// Moves the manifest of `component` into the backup directory; the kubelet then stops the
    /// static pod. A different earlier backup is kept beside it, renamed with the time — but a
    /// manifest that is the backup with port sharing added ([`Self::add_port_sharing`]) is only
    /// removed: the backup is its original, and stays what a failure puts back.
    pub fn move_aside(&self, component: Component) -> Result<PathBuf, FilesError> {
        let from = self.manifest_path(component);
        let to = self.backup_path(component);
        if !self.port_sharing_added(component)? {
            let content = Self::read_bytes(&from)?;
            // The copy is whole and synced before the original goes.
            self.back_up(component, &content)?;
        }
        std::fs::remove_file(&from).map_err(write_err(&from))?;
        Ok(to)
    }

    /// Makes the static pod of `component` share its port: the manifest, or the backup when
    /// the manifest was moved aside, is written to the manifests directory with
    /// `--permit-port-sharing=true` added, the original kept as the backup (the kubelet then
    /// restarts the static pod). Returns the backup's path.
    pub fn add_port_sharing(&self, component: Component) -> Result<PathBuf, FilesError> {
        let path = self.manifest_path(component);
        let backup = self.backup_path(component);
        let original = match self.manifest(component)? {
            Some(pod) if !permits(&pod) => {
                self.back_up(component, &Self::read_bytes(&path)?)?;
                pod
            }
            // A manifest that shares its port already is the rewrite: it comes from the backup.
            _ => Self::read_pod(&backup)?.ok_or_else(|| FilesError::Read {
                path: backup.clone(),
                source: std::io::ErrorKind::NotFound.into(),
            })?,
        };
        self.write_manifest(component, &with_port_sharing(&original))?;
        Ok(backup)
    }

    /// Whether the manifest of `component` is its backup with port sharing added by
    /// [`Self::add_port_sharing`] (the backup is the original then).
    pub fn port_sharing_added(&self, component: Component) -> Result<bool, FilesError> {
        let (Some(manifest), Some(backup)) = (self.manifest(component)?, self.backup(component)?)
        else {
            return Ok(false);
        };
        Ok(!permits(&backup) && manifest == with_port_sharing(&backup))
    }

    /// Copies the backed-up manifest of `component` back to the kubelet (the backup stays).
    pub fn restore(&self, component: Component) -> Result<(), FilesError> {
        let from = self.backup_path(component);
        let content = std::fs::read(&from).map_err(|source| FilesError::Read {
            path: from.clone(),
            source,
        })?;
        write_whole(
            &self.manifest_path(component),
            &self.backup_dir,
            &content,
            0o600,
        )
    }

    /// Writes `pod` as the manifest of `component`.
    pub fn write_manifest(&self, component: Component, pod: &Pod) -> Result<PathBuf, FilesError> {
        self.write_pod(self.manifest_path(component), pod)
    }

    /// Writes `pod` as YAML to `path` in the manifests directory, whole.
    fn write_pod(&self, path: PathBuf, pod: &Pod) -> Result<PathBuf, FilesError> {
        let yaml = selfhost_core::render::to_yaml(pod).map_err(|e| FilesError::Write {
            path: path.clone(),
            source: std::io::Error::other(e.to_string()),
        })?;
        write_whole(&path, &self.backup_dir, yaml.as_bytes(), 0o600)?;
        Ok(path)
    }

    /// Removes a manifest this tool wrote (the kubelet then stops its static pod).
    pub fn remove_manifest(&self, component: Component) -> Result<(), FilesError> {
        remove_if_present(&self.manifest_path(component))
    }

    /// Where the node's API front's manifest is for the kubelet.
    pub fn front_path(&self) -> PathBuf {
        self.manifests_dir.join(FRONT_MANIFEST)
    }

    /// The node's API front's manifest, if there is one.
    pub fn front(&self) -> Result<Option<Pod>, FilesError> {
        Self::read_pod(&self.front_path())
    }

    /// Writes the node's API front's manifest.
    pub fn write_front(&self, pod: &Pod) -> Result<PathBuf, FilesError> {
        self.write_pod(self.front_path(), pod)
    }

    /// Removes the node's API front's manifest (the kubelet then stops the front, which
    /// drains).
    pub fn remove_front(&self) -> Result<(), FilesError> {
        remove_if_present(&self.front_path())
    }
}

/// Removes the file at `path`; one that is not there is already as asked.
pub(crate) fn remove_if_present(path: &Path) -> Result<(), FilesError> {
    match std::fs::remove_file(path) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(source) => Err(FilesError::Write {
            path: path.to_path_buf(),
            source,
        }),
    }
}

/// Writes a file taken from a Secret unless it exists, creating its directory; returns
/// whether it wrote it. `root` prefixes the absolute `path` (`/` on a real node).
pub fn write_secret_file(
    root: &Path,
    path: &str,
    content: &[u8],
    mode: u32,
) -> Result<bool, FilesError> {
    let target = root.join(path.trim_start_matches('/'));
    if target.exists() {
        return Ok(false);
    }
    let dir = target
        .parent()
        .map_or_else(|| root.to_path_buf(), Path::to_path_buf);
    std::fs::create_dir_all(&dir).map_err(write_err(&dir))?;
    write_whole(&target, &dir, content, mode)?;
    Ok(true)
}

/// Reads a file to put in a Secret; `root` prefixes the absolute `path`.
pub fn read_host_file(root: &Path, path: &str) -> Result<Vec<u8>, FilesError> {
    let target = root.join(path.trim_start_matches('/'));
    std::fs::read(&target).map_err(|source| FilesError::Read {
        path: target,
        source,
    })
}
