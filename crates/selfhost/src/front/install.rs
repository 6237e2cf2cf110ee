//! Installing the node's API front on a self-hosted node that has none (`selfhost front
//! install`), and removing it (`selfhost front remove`).
//!
//! The front listens on the node's address, beside a kube-apiserver that listens on the
//! wildcard address with port sharing: the kernel gives connections to the node's address to
//! the front (the more specific listener), and the front's backends on the loopback
//! addresses reach the kube-apiserver through its wildcard socket until it listens on its own
//! address. Once every control-plane node runs a front, the kube-apiserver DaemonSet is marked
//! to listen behind them, and the next `apply` moves its pods there with a pivot.

use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::time::Duration;

use k8s_openapi::api::apps::v1::DaemonSet;
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::Api;
use kube::api::{ListParams, Patch, PatchParams};
use selfhost_core::Component;
use selfhost_core::command_line;
use selfhost_core::component::NAMESPACE;
use selfhost_core::daemonset::CONTROL_PLANE_NODE_LABEL;
use selfhost_core::disruption::permits_port_sharing;
use selfhost_core::front::{
    CLUSTER_CA_FILE, DEFAULT_SECURE_PORT, FRONT_ANNOTATION, FRONT_LABEL, FRONT_MANIFEST,
    FRONT_NAME, FrontLayout, FrontPod, LayoutError,
};
use serde::Serialize;
use tokio::time::Instant;

use crate::api_call::{ApiCallError, FailureKind};
use crate::api_write::FIELD_MANAGER;
use crate::mirror_pod::{running, wait_running};
use crate::node_files::{FilesError, remove_if_present, write_whole};
use crate::retry::{RetryPolicy, with_retries};

/// How long the kubelet may take to start the front before the install says it does not run.
pub const DEFAULT_START_PATIENCE: Duration = Duration::from_secs(120);

/// Where the node's front goes, and what it runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FrontInstall {
    /// The node.
    pub node: String,
    /// The kubelet's manifests directory as this run reaches it.
    pub manifests_dir: PathBuf,
    /// The image with the `selfhost` binary.
    pub image: String,
    /// Where the kube-apiservers listen behind it, unless the DaemonSet already says.
    pub layout: FrontLayout,
    /// How long the kubelet may take to start it.
    pub patience: Duration,
}

/// Why the front could not be installed or removed.
#[derive(Debug, thiserror::Error)]
pub enum FrontInstallError {
    /// The cluster is not self-hosted.
    #[error(
        "the cluster has no DaemonSet kube-system/{} to put a front before; a static control \
         plane gets its fronts from `selfhost convert to-self-hosted`; nothing was changed",
        Component::ApiServer.daemonset_name()
    )]
    NotSelfHosted,
    /// The kube-apiserver listens on one address of the node's own, where the front would.
    #[error(
        "the kube-apiserver DaemonSet listens on --bind-address={bind}: the front cannot take \
         the node's address from it without a gap; convert the node to static pods and back \
         (`selfhost convert to-static`, then `to-self-hosted`), which puts the front in \
         between; nothing was changed"
    )]
    BoundToNode {
        /// The bind address.
        bind: String,
    },
    /// The kube-apiserver holds the wildcard address alone: a second socket on its port, even
    /// on one address, is refused by the kernel until it permits port sharing.
    #[error(
        "the kube-apiserver DaemonSet listens on every address without \
         --permit-port-sharing=true: the kernel would refuse the front a socket on the node's \
         address beside it; run `selfhost apply` to the version the cluster runs first (the \
         templates selfhost renders carry the flag, and its pivot rolls it in), then install \
         the front; nothing was changed"
    )]
    NoPortSharing,
    /// The DaemonSet's front annotation, or the one asked for, cannot be used.
    #[error("{0}; nothing was changed")]
    Layout(#[from] LayoutError),
    /// The node has no IP to listen on.
    #[error("node {node} reports no InternalIP for the front to listen on; nothing was changed")]
    NoNodeIp {
        /// The node.
        node: String,
    },
    /// The kube-apiserver DaemonSet listens behind fronts: removing this node's would leave
    /// its API address with no listener.
    #[error(
        "the kube-apiserver listens behind the nodes' fronts: without {node}'s, nothing would \
         listen on its API address; `selfhost convert to-static` on the node takes it out; \
         nothing was changed"
    )]
    Needed {
        /// The node.
        node: String,
    },
    /// Its file on the node could not be written or removed.
    #[error(transparent)]
    Files(#[from] FilesError),
    /// An API call failed for good.
    #[error(transparent)]
    Api(#[from] ApiCallError),
}

/// What installing or removing the front did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "result", rename_all = "kebab-case")]
pub enum FrontOutcome {
    /// Its static pod was written (or was already there, the same) and the kubelet runs it.
    Running {
        /// The manifest.
        manifest: PathBuf,
        /// Whether this run wrote it.
        written: bool,
        /// Where it listens.
        listen: SocketAddr,
        /// Whether the kube-apiserver DaemonSet is marked to listen behind the fronts (this
        /// run marked it when this was the last control-plane node without one).
        behind: bool,
        /// The control-plane nodes that run no front yet.
        nodes_without: Vec<String>,
    },
    /// Its static pod did not run, and the manifest this run had written was taken away
    /// again: the node is as it was.
    Withdrawn {
        /// The manifest.
        manifest: PathBuf,
        /// What the mirror pod showed.
        why: String,
    },
    /// A dry run: what would be written.
    WouldWrite {
        /// The manifest.
        manifest: PathBuf,
        /// Where it would listen.
        listen: SocketAddr,
    },
    /// Its static pod was removed (or was not there).
    Removed {
        /// The manifest that was removed, if one was there.
        manifest: Option<PathBuf>,
    },
    /// A dry run: what would be removed.
    WouldRemove {
        /// The manifest, if one is there.
        manifest: Option<PathBuf>,
    },
}

impl FrontOutcome {
    /// Whether the node ends as asked.
    pub fn succeeded(&self) -> bool {
        !matches!(self, FrontOutcome::Withdrawn { .. })
    }
}

impl std::fmt::Display for FrontOutcome {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            FrontOutcome::Running {
                manifest,
                written,
                listen,
                behind,
                nodes_without,
            } => {
                write!(
                    f,
                    "the API front runs on {listen} ({} {})",
                    if *written { "wrote" } else { "unchanged:" },
                    manifest.display()
                )?;
                match (behind, nodes_without.is_empty()) {
                    (_, false) => write!(
                        f,
                        "; install it on {} too, then the kube-apiservers move behind the fronts",
                        nodes_without.join(", ")
                    ),
                    (true, true) => write!(
                        f,
                        "; every control-plane node runs one, and the kube-apiserver DaemonSet \
                         is marked to listen behind them: the next `selfhost apply` (to the \
                         version the cluster runs, or the next) moves its pods there"
                    ),
                    (false, true) => Ok(()),
                }
            }
            FrontOutcome::Withdrawn { manifest, why } => write!(
                f,
                "the API front does not run: {why} ({} was written and taken away again)",
                manifest.display()
            ),
            FrontOutcome::WouldWrite { manifest, listen } => write!(
                f,
                "would write the API front {} listening on {listen}",
                manifest.display()
            ),
            FrontOutcome::Removed { manifest: Some(m) } => {
                write!(f, "removed the API front {}", m.display())
            }
            FrontOutcome::Removed { manifest: None } => write!(f, "no API front on this node"),
            FrontOutcome::WouldRemove { manifest: Some(m) } => {
                write!(f, "would remove the API front {}", m.display())
            }
            FrontOutcome::WouldRemove { manifest: None } => {
                write!(f, "no API front to remove on this node")
            }
        }
    }
}

/// The kube-apiserver DaemonSet.
async fn apiserver_daemonset(api: &kube::Client) -> Result<DaemonSet, FrontInstallError> {
    let daemonsets: Api<DaemonSet> = Api::namespaced(api.clone(), NAMESPACE);
    let name = Component::ApiServer.daemonset_name();
    match with_retries(
        &format!("get DaemonSet kube-system/{name}"),
        &RetryPolicy::default(),
        || daemonsets.get(&name),
    )
    .await
    {
        Ok(ds) => Ok(ds),
        Err(e) if e.kind == FailureKind::NotFound => Err(FrontInstallError::NotSelfHosted),
        Err(e) => Err(e.into()),
    }
}

/// A flag of the DaemonSet's kube-apiserver container.
fn flag(ds: &DaemonSet, name: &str) -> Option<String> {
    let template = &ds.spec.as_ref()?.template;
    command_line::template_flag(template, Component::ApiServer.name(), name)
}

/// Whether the DaemonSet's kube-apiserver lets other sockets share its port.
fn shares_port(ds: &DaemonSet) -> bool {
    ds.spec
        .as_ref()
        .is_some_and(|spec| permits_port_sharing(&spec.template, Component::ApiServer))
}

/// The node's first `InternalIP`.
async fn node_ip(api: &kube::Client, node: &str) -> Result<IpAddr, FrontInstallError> {
    let nodes: Api<Node> = Api::all(api.clone());
    let found = with_retries(&format!("get node {node}"), &RetryPolicy::default(), || {
        nodes.get(node)
    })
    .await?;
    found
        .status
        .and_then(|s| s.addresses)
        .into_iter()
        .flatten()
        .find(|a| a.type_ == "InternalIP")
        .and_then(|a| a.address.parse().ok())
        .ok_or_else(|| FrontInstallError::NoNodeIp {
            node: node.to_string(),
        })
}

/// Writes the front's static pod on a self-hosted node and waits until the kubelet runs it;
/// one that does not run is taken away again. When every control-plane node then runs a
/// front, the kube-apiserver DaemonSet is marked to listen behind them.
///
/// # Errors
/// The cluster is not self-hosted, its kube-apiserver listens on a node address of its own,
/// the node has no IP, the manifest cannot be written, or an API call fails.
pub async fn install(
    api: &kube::Client,
    request: &FrontInstall,
    dry_run: bool,
) -> Result<FrontOutcome, FrontInstallError> {
    let ds = apiserver_daemonset(api).await?;
    let live_layout = FrontLayout::of_daemonset(&ds)?;
    let layout = live_layout.unwrap_or(request.layout);
    let bind = flag(&ds, "bind-address");
    let on_the_wildcard = bind
        .as_deref()
        .is_none_or(|b| b.parse::<IpAddr>().is_ok_and(|ip| ip.is_unspecified()));
    match bind {
        Some(bind) if !on_the_wildcard && bind != layout.backend.to_string() => {
            return Err(FrontInstallError::BoundToNode { bind });
        }
        _ if on_the_wildcard && !shares_port(&ds) => {
            return Err(FrontInstallError::NoPortSharing);
        }
        _ => {}
    }
    let port = flag(&ds, "secure-port")
        .and_then(|p| p.parse().ok())
        .unwrap_or(DEFAULT_SECURE_PORT);
    let listen = SocketAddr::new(node_ip(api, &request.node).await?, port);
    let manifest = request.manifests_dir.join(FRONT_MANIFEST);
    if dry_run {
        return Ok(FrontOutcome::WouldWrite { manifest, listen });
    }
    let pod = FrontPod {
        image: request.image.clone(),
        listen,
        layout,
        ca_file: flag(&ds, "client-ca-file").unwrap_or_else(|| CLUSTER_CA_FILE.to_string()),
        tuning: None,
    };
    let content = selfhost_core::render::to_yaml(&pod.render())
        .map_err(|e| FilesError::Write {
            path: manifest.clone(),
            source: std::io::Error::other(e.to_string()),
        })?
        .into_bytes();
    let written = std::fs::read(&manifest).ok().as_deref() != Some(&content[..]);
    if written {
        // The staging file is hidden: the kubelet skips dot files in its manifests directory.
        write_whole(&manifest, &request.manifests_dir, &content, 0o600)?;
    }
    let until = Instant::now() + request.patience;
    if let Err(why) = wait_running(api, &mirror_name(&request.node), until).await {
        if written {
            remove_if_present(&manifest)?;
        }
        return Ok(FrontOutcome::Withdrawn { manifest, why });
    }
    let nodes_without = nodes_without_front(api).await?;
    let mut behind = live_layout.is_some();
    if !behind && nodes_without.is_empty() {
        mark_behind(api, layout).await?;
        behind = true;
    }
    Ok(FrontOutcome::Running {
        manifest,
        written,
        listen,
        behind,
        nodes_without,
    })
}

/// The control-plane nodes whose front does not run.
async fn nodes_without_front(api: &kube::Client) -> Result<Vec<String>, FrontInstallError> {
    let nodes: Api<Node> = Api::all(api.clone());
    let pods: Api<Pod> = Api::namespaced(api.clone(), NAMESPACE);
    let control_planes = ListParams::default().labels(CONTROL_PLANE_NODE_LABEL);
    let fronts = ListParams::default().labels(&format!("{}={}", FRONT_LABEL.0, FRONT_LABEL.1));
    let retry = RetryPolicy::default();
    let nodes = with_retries("list control-plane nodes", &retry, || {
        nodes.list(&control_planes)
    })
    .await?;
    let pods = with_retries("list the API fronts' pods", &retry, || pods.list(&fronts)).await?;
    Ok(nodes
        .items
        .into_iter()
        .filter_map(|n| n.metadata.name)
        .filter(|node| {
            !pods.items.iter().any(|p| {
                p.spec.as_ref().and_then(|s| s.node_name.as_deref()) == Some(node.as_str())
                    && running(p).is_ok()
            })
        })
        .collect())
}

/// Marks the kube-apiserver DaemonSet to listen behind the fronts: its metadata only, so that
/// nothing rolls until a pivot renders its template behind them.
async fn mark_behind(api: &kube::Client, layout: FrontLayout) -> Result<(), FrontInstallError> {
    let daemonsets: Api<DaemonSet> = Api::namespaced(api.clone(), NAMESPACE);
    let name = Component::ApiServer.daemonset_name();
    let patch = serde_json::json!({
        "metadata": { "annotations": { FRONT_ANNOTATION: layout.to_annotation() } }
    });
    let patch = Patch::Merge(&patch);
    let params = PatchParams {
        field_manager: Some(FIELD_MANAGER.into()),
        ..PatchParams::default()
    };
    with_retries(
        &format!("annotate DaemonSet kube-system/{name}"),
        &RetryPolicy::default(),
        || daemonsets.patch(&name, &params, &patch),
    )
    .await?;
    Ok(())
}

/// Removes the front's static pod from a node whose kube-apiserver does not listen behind it.
///
/// # Errors
/// The kube-apiserver listens behind the fronts, the file cannot be removed, or an API call
/// fails.
pub async fn remove(
    api: &kube::Client,
    node: &str,
    manifests_dir: &std::path::Path,
    dry_run: bool,
) -> Result<FrontOutcome, FrontInstallError> {
    let manifest = manifests_dir.join(FRONT_MANIFEST);
    let present = manifest.exists().then(|| manifest.clone());
    match apiserver_daemonset(api).await {
        Ok(ds) if FrontLayout::of_daemonset(&ds)?.is_some() => {
            return Err(FrontInstallError::Needed {
                node: node.to_string(),
            });
        }
        Ok(_) | Err(FrontInstallError::NotSelfHosted) => {}
        Err(e) => return Err(e),
    }
    if dry_run {
        return Ok(FrontOutcome::WouldRemove { manifest: present });
    }
    remove_if_present(&manifest)?;
    Ok(FrontOutcome::Removed { manifest: present })
}

/// The front's mirror pod on `node`.
pub fn mirror_name(node: &str) -> String {
    format!("{FRONT_NAME}-{node}")
}
