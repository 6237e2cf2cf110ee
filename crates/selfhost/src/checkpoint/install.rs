//! Installing the checkpointer on a node, and removing it: its static pod in the kubelet's
//! manifests directory, then its mirror pod in the API to tell whether the kubelet runs it;
//! and, before the static pod is written, its node's read access to the Leases of kube-system
//! ([`super::grant`]), taken away again where the checkpointer is removed.
//!
//! `convert to-self-hosted` installs it before it converts anything (each static manifest
//! then moves aside only once it keeps the DaemonSet pod that replaces it);
//! `checkpoint install` does the same for a node converted without it; `convert to-static`
//! removes it, with every checkpoint and active copy, once the node runs kubeadm's static pods
//! again.

use std::path::{Path, PathBuf};
use std::time::Duration;

use selfhost_core::checkpoint::{CHECKPOINT_DIR, CHECKPOINTER_MANIFEST, CheckpointerPod};
use serde::Serialize;
use tokio::time::Instant;

use super::disk::NodeDisk;
use super::grant::{self, GrantError, LeaseAccess};
use crate::mirror_pod::wait_running;
use crate::node_files::{FilesError, remove_if_present, write_whole};

/// How long the kubelet may take to start the checkpointer before the install says it does
/// not run: an image pull on a slow registry.
pub const DEFAULT_START_PATIENCE: Duration = Duration::from_secs(120);

/// Where the checkpointer's static pod goes, and what it runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CheckpointerInstall {
    /// The pod, as the host sees its paths.
    pub pod: CheckpointerPod,
    /// The kubelet's manifests directory as this run reaches it (the pod's own, under the
    /// host root the run was given).
    pub manifests_dir: PathBuf,
    /// How long the kubelet may take to start it.
    pub patience: Duration,
}

/// Why the checkpointer could not be installed or removed.
#[derive(Debug, thiserror::Error)]
pub enum InstallError {
    /// Its files on the node could not be written or removed.
    #[error(transparent)]
    Files(#[from] FilesError),
    /// Its node's access to the Leases of kube-system could not be granted or revoked.
    #[error(transparent)]
    Grant(#[from] GrantError),
    /// A checkpoint's copy is active on the node: the component may be running on it, and
    /// removing the checkpointer would take it away.
    #[error(
        "a checkpoint's copy is active in {} (selfhost-checkpoint-<component>.yaml): this \
         node's control plane may be running on it, and removing the checkpointer would stop \
         it; wait until the checkpointer retires it (once the DaemonSet pods serve again) and \
         run again; nothing was changed",
        manifests_dir.display()
    )]
    ActiveCopies {
        /// The manifests directory.
        manifests_dir: PathBuf,
    },
}

/// What installing or removing the checkpointer did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "result", rename_all = "kebab-case")]
pub enum CheckpointerOutcome {
    /// Its static pod was written (or was already there, the same) and the kubelet runs it.
    Running {
        /// The manifest.
        manifest: PathBuf,
        /// Whether this run wrote it.
        written: bool,
        /// Its node's access to the Leases of kube-system.
        access: LeaseAccess,
    },
    /// Its static pod is written but the kubelet does not run it: `why` says what it shows.
    NotRunning {
        /// The manifest.
        manifest: PathBuf,
        /// Whether this run wrote it.
        written: bool,
        /// What the mirror pod shows (an image pull error, a crash, nothing at all).
        why: String,
        /// Its node's access to the Leases of kube-system.
        access: LeaseAccess,
    },
    /// Its static pod did not run, and the manifest this run had written was taken away
    /// again: the node is as it was.
    Withdrawn {
        /// The manifest.
        manifest: PathBuf,
        /// What the mirror pod showed.
        why: String,
        /// Its node's access: revoked again when this run granted it.
        access: LeaseAccess,
    },
    /// A dry run: what would be written.
    WouldWrite {
        /// The manifest.
        manifest: PathBuf,
        /// Its image.
        image: String,
        /// The access its node would be granted.
        access: LeaseAccess,
    },
    /// Its static pod, checkpoints and active copies were removed (or were not there).
    Removed {
        /// The manifest that was removed, if one was there.
        manifest: Option<PathBuf>,
        /// Its node's access, revoked.
        access: LeaseAccess,
    },
    /// A dry run: what would be removed.
    WouldRemove {
        /// The manifest, if one is there.
        manifest: Option<PathBuf>,
        /// The access its node would lose.
        access: LeaseAccess,
    },
}

impl CheckpointerOutcome {
    /// Whether the node ends as asked.
    pub fn succeeded(&self) -> bool {
        !matches!(
            self,
            CheckpointerOutcome::NotRunning { .. } | CheckpointerOutcome::Withdrawn { .. }
        )
    }
}

impl std::fmt::Display for CheckpointerOutcome {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CheckpointerOutcome::Running {
                manifest,
                written,
                access,
            } => write!(
                f,
                "the checkpointer runs ({} {}); {access}",
                if *written { "wrote" } else { "unchanged:" },
                manifest.display()
            ),
            CheckpointerOutcome::NotRunning {
                manifest,
                why,
                access,
                ..
            } => write!(
                f,
                "the checkpointer does not run: {why} ({} is written); {access}",
                manifest.display()
            ),
            CheckpointerOutcome::Withdrawn {
                manifest,
                why,
                access,
            } => write!(
                f,
                "the checkpointer does not run: {why} ({} was written and taken away again); \
                 {access}",
                manifest.display()
            ),
            CheckpointerOutcome::WouldWrite {
                manifest,
                image,
                access,
            } => write!(
                f,
                "would write the checkpointer {} (image {image}); {access}",
                manifest.display()
            ),
            CheckpointerOutcome::Removed {
                manifest: Some(m),
                access,
            } => write!(
                f,
                "removed the checkpointer {} and its checkpoints; {access}",
                m.display()
            ),
            CheckpointerOutcome::Removed {
                manifest: None,
                access,
            } => write!(f, "no checkpointer on this node; {access}"),
            CheckpointerOutcome::WouldRemove {
                manifest: Some(m),
                access,
            } => write!(
                f,
                "would remove the checkpointer {} and its checkpoints; {access}",
                m.display()
            ),
            CheckpointerOutcome::WouldRemove {
                manifest: None,
                access,
            } => write!(f, "no checkpointer to remove on this node; {access}"),
        }
    }
}

/// The checkpointer's manifest on the node.
fn manifest_path(manifests_dir: &Path) -> PathBuf {
    manifests_dir.join(CHECKPOINTER_MANIFEST)
}

/// Where the checkpointer keeps its checkpoints, under the host root `root`.
pub fn checkpoint_dir(root: &Path) -> PathBuf {
    root.join(CHECKPOINT_DIR.trim_start_matches('/'))
}

/// Grants the checkpointer's node read access to the Leases of kube-system, then writes its
/// static pod (unless the same is there) and waits until the kubelet runs it, as its mirror
/// pod shows. The grant comes first, so that the agent never runs without it.
///
/// # Errors
/// The grant fails, or the manifest cannot be written.
pub async fn install(
    api: &kube::Client,
    request: &CheckpointerInstall,
    dry_run: bool,
) -> Result<CheckpointerOutcome, InstallError> {
    let manifest = manifest_path(&request.manifests_dir);
    let node = &request.pod.node;
    if dry_run {
        return Ok(CheckpointerOutcome::WouldWrite {
            manifest,
            image: request.pod.image.clone(),
            access: grant::grant(api, node, true).await?,
        });
    }
    let content = selfhost_core::render::to_yaml(&request.pod.render())
        .map_err(|e| FilesError::Write {
            path: manifest.clone(),
            source: std::io::Error::other(e.to_string()),
        })?
        .into_bytes();
    let access = grant::grant(api, node, false).await?;
    let written = std::fs::read(&manifest).ok().as_deref() != Some(&content[..]);
    if written {
        // The staging file is hidden: the kubelet skips dot files in its manifests directory.
        write_whole(&manifest, &request.manifests_dir, &content, 0o600)?;
    }
    let until = Instant::now() + request.patience;
    Ok(match wait_running(api, &mirror_name(node), until).await {
        Ok(()) => CheckpointerOutcome::Running {
            manifest,
            written,
            access,
        },
        Err(why) => CheckpointerOutcome::NotRunning {
            manifest,
            written,
            why,
            access,
        },
    })
}

/// [`install`], but a static pod that this run wrote and the kubelet does not run is taken
/// away again, with the access this run granted (a node's subject that was there before stays):
/// the node is left as it was found.
///
/// # Errors
/// The grant or its revocation fails, or the manifest cannot be written or removed.
pub async fn install_or_withdraw(
    api: &kube::Client,
    request: &CheckpointerInstall,
    dry_run: bool,
) -> Result<CheckpointerOutcome, InstallError> {
    match install(api, request, dry_run).await? {
        CheckpointerOutcome::NotRunning {
            manifest,
            written: true,
            why,
            access,
        } => {
            remove_if_present(&manifest)?;
            let access = match access {
                LeaseAccess::Granted { node, added: true } => {
                    grant::revoke(api, &node, false).await?
                }
                kept => kept,
            };
            Ok(CheckpointerOutcome::Withdrawn {
                manifest,
                why,
                access,
            })
        }
        outcome => Ok(outcome),
    }
}

/// Removes the checkpointer's static pod, then every active copy and checkpoint (kept under the
/// host root `host_root`): the node runs kubeadm's static pods again, and an old checkpoint
/// must never start beside them. Then takes `node`'s access to the Leases of kube-system away,
/// once nothing on the node uses it.
///
/// # Errors
/// A file cannot be removed, or the revocation fails.
pub async fn remove(
    api: &kube::Client,
    node: &str,
    manifests_dir: &Path,
    host_root: &Path,
    dry_run: bool,
) -> Result<CheckpointerOutcome, InstallError> {
    let manifest = manifest_path(manifests_dir);
    let present = manifest.exists().then(|| manifest.clone());
    if dry_run {
        return Ok(CheckpointerOutcome::WouldRemove {
            manifest: present,
            access: grant::revoke(api, node, true).await?,
        });
    }
    remove_if_present(&manifest)?;
    let disk = NodeDisk {
        checkpoint_dir: checkpoint_dir(host_root),
        manifests_dir: manifests_dir.to_path_buf(),
    };
    disk.forget_everything()?;
    let access = grant::revoke(api, node, false).await?;
    Ok(CheckpointerOutcome::Removed {
        manifest: present,
        access,
    })
}

/// The checkpointer's mirror pod on `node`.
pub fn mirror_name(node: &str) -> String {
    format!("{}-{node}", selfhost_core::checkpoint::CHECKPOINTER_NAME)
}
