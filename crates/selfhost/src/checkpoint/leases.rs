//! The kube-system Leases as the agent's decisions read them, and the release of a leader
//! Lease whose holder stopped on this node.
//!
//! The agent reads with the node's credentials; `checkpoint install` grants the node read
//! access to the Leases in kube-system. Without the grant the list is refused, the agent says
//! so once, and decides as without Leases. A release is written with the component's own
//! credentials (see `selfhost_core::checkpoint::released`).

use std::sync::Arc;

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Node;
use k8s_openapi::jiff::Timestamp;
use std::path::Path;

use kube::Api;
use kube::api::{ListParams, PostParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use selfhost_core::Component;
use selfhost_core::checkpoint::{NodeLeases, kubeconfig_on_host, released};
use selfhost_core::component::NAMESPACE;
use selfhost_core::daemonset::CONTROL_PLANE_NODE_LABEL;
use selfhost_core::observation::{LeaderLease, NodeObservation};

use super::{CheckpointError, NodeDisk};
use crate::api_write::FIELD_MANAGER;
use crate::client::Clients;
use crate::identity::LeaseWatch;

/// Reads the Leases every round, and keeps a watch of them for the identity holders a list
/// alone would miss (two processes of a host taking one Lease over from each other).
#[derive(Default)]
pub(super) struct LeaseReader {
    watch: Option<LeaseWatch>,
    refused: Option<String>,
}

impl LeaseReader {
    /// The Leases and control-plane nodes as they are now; `None` when the agent may not read
    /// them, which it says once each time it begins.
    pub(super) async fn read(&mut self, clients: &Clients, node: &str) -> Option<NodeLeases> {
        let leases: Api<Lease> = Api::namespaced(clients.probe.clone(), NAMESPACE);
        let nodes: Api<Node> = Api::all(clients.probe.clone());
        let control_plane = ListParams::default().labels(CONTROL_PLANE_NODE_LABEL);
        let read = async {
            let leases = leases.list(&ListParams::default()).await?;
            let nodes = nodes.list(&control_plane).await?;
            Ok::<_, kube::Error>((leases.items, nodes.items))
        };
        let (leases, nodes) = match read.await {
            Ok(read) => read,
            Err(e) => {
                let why = e.to_string();
                if self.refused.as_deref() != Some(why.as_str()) {
                    let forbidden = matches!(&e, kube::Error::Api(s) if s.code == 403);
                    if forbidden {
                        tracing::warn!(
                            error = %why,
                            "this node may not read the kube-system Leases: a Ready \
                             kube-apiserver counts as serving and no leader Lease is released \
                             (`selfhost checkpoint install` grants the access; a kube-apiserver \
                             that just started refuses until its authorizer has synced)"
                        );
                    } else {
                        tracing::info!(
                            error = %why,
                            "reading the kube-system Leases failed: this round decides without them"
                        );
                    }
                    self.refused = Some(why);
                }
                return None;
            }
        };
        self.refused = None;
        let leases: Vec<Arc<Lease>> = leases.into_iter().map(Arc::new).collect();
        let watch = self
            .watch
            .get_or_insert_with(|| LeaseWatch::start(&clients.api));
        let identities = watch.observe(&leases, Timestamp::now());
        let leaders = leases
            .iter()
            .filter_map(|lease| {
                let name = lease.metadata.name.as_deref()?;
                let component = Component::ALL
                    .into_iter()
                    .find(|c| c.leader_lease_name() == Some(name))?;
                Some((component, LeaderLease::from_lease(lease)))
            })
            .collect();
        Some(NodeLeases {
            node: node.to_string(),
            control_plane: nodes.iter().map(NodeObservation::from_node).collect(),
            identities,
            leaders,
        })
    }
}

/// Releases the leader Lease `lease` of `component`, still held by `holder` at
/// `resource_version`, with the component's own kubeconfig as its checkpoint names it: written
/// back with an empty holder, on condition that it is still as read. A Lease changed or gone
/// since needs nothing more.
pub(super) async fn release(
    disk: &NodeDisk,
    host_root: &Path,
    component: Component,
    lease: &str,
    resource_version: &str,
) -> Result<(), CheckpointError> {
    let fail = |why: String| CheckpointError::Pod(format!("releasing Lease {lease}: {why}"));
    let kept = disk
        .checkpoint_pod(component)
        .ok_or_else(|| fail("no checkpoint names the component's kubeconfig".into()))?;
    let path = kept
        .spec
        .as_ref()
        .and_then(kubeconfig_on_host)
        .ok_or_else(|| fail("the checkpoint names no kubeconfig on a host path".into()))?;
    let file = host_root.join(path.trim_start_matches('/'));
    let kubeconfig = Kubeconfig::read_from(&file)
        .map_err(|e| fail(format!("reading {}: {e}", file.display())))?;
    let config = kube::Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
        .await
        .map_err(|e| fail(format!("{}: {e}", file.display())))?;
    let client =
        kube::Client::try_from(config).map_err(|e| fail(format!("{}: {e}", file.display())))?;
    let leases: Api<Lease> = Api::namespaced(client, NAMESPACE);
    let current = match leases.get_opt(lease).await {
        Ok(Some(current)) => current,
        Ok(None) => return Ok(()),
        Err(e) => return Err(fail(e.to_string())),
    };
    if current.metadata.resource_version.as_deref() != Some(resource_version) {
        tracing::info!(%lease, "the Lease changed before its release: nothing to do");
        return Ok(());
    }
    let params = PostParams {
        dry_run: false,
        field_manager: Some(FIELD_MANAGER.into()),
    };
    match leases
        .replace(lease, &params, &released(&current, Timestamp::now()))
        .await
    {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(status)) if status.code == 409 || status.code == 404 => {
            tracing::info!(%lease, "the Lease changed before its release: nothing to do");
            Ok(())
        }
        Err(e) => Err(fail(e.to_string())),
    }
}
