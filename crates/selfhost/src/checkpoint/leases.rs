//! The kube-system Leases as the agent's decisions read them, and the hand-over of a leader
//! Lease whose holder stopped on this node.
//!
//! The agent reads with the node's credentials; `checkpoint install` grants the node read
//! access to the Leases in kube-system and the deletion of the two leader Leases. Without the
//! grant the list is refused, the agent says so once, and decides as without Leases.

use std::sync::Arc;

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Node;
use k8s_openapi::jiff::Timestamp;
use kube::Api;
use kube::api::ListParams;
use selfhost_core::Component;
use selfhost_core::checkpoint::NodeLeases;
use selfhost_core::component::NAMESPACE;
use selfhost_core::daemonset::CONTROL_PLANE_NODE_LABEL;
use selfhost_core::observation::{LeaderLease, NodeObservation};
use selfhost_core::pivot::Step;

use crate::api_call::ApiCallError;
use crate::api_write::{Applied, perform};
use crate::client::Clients;
use crate::identity::LeaseWatch;
use crate::retry::RetryPolicy;

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
                    tracing::warn!(
                        error = %why,
                        "reading the kube-system Leases failed: a Ready kube-apiserver counts as \
                         serving and no leader Lease is handed over (`selfhost checkpoint \
                         install` grants this node the access)"
                    );
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

/// Deletes the leader Lease `lease` on condition that it is still as read, as the upgrade
/// engine hands one over; a Lease changed or gone since needs nothing more.
pub(super) async fn hand_over(
    clients: &Clients,
    lease: &str,
    holder: &str,
    uid: Option<&String>,
    resource_version: &str,
) -> Result<(), ApiCallError> {
    let step = Step::HandOverLease {
        lease: lease.to_string(),
        uid: uid.cloned(),
        resource_version: resource_version.to_string(),
        holder: holder.to_string(),
        why: "its holder ran on this node and has stopped".to_string(),
    };
    match perform(
        &clients.api,
        &step,
        |_| None,
        &RetryPolicy::default(),
        false,
    )
    .await
    {
        Some(Ok(Applied::Superseded { why })) => {
            tracing::info!(%lease, %why, "the Lease changed before the hand-over: nothing to do");
            Ok(())
        }
        Some(Err(e)) => Err(e),
        Some(Ok(_)) | None => Ok(()),
    }
}
