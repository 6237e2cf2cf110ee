//! Waiting for the bed's control plane to serve, with a deadline and a word on what was last
//! seen when it does not.

use std::time::Duration;

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::Api;
use kube::api::{ListParams, Patch, PatchParams};
use serde_json::json;
use tokio::time::Instant;

use super::TestBed;
use crate::BedError;

/// The control plane as the API shows it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ControlPlaneState {
    /// Nodes whose Ready condition is True.
    pub ready_nodes: usize,
    /// Control-plane pods (`tier=control-plane`) whose Ready condition is True.
    pub ready_pods: usize,
    /// Control-plane pods in all.
    pub pods: usize,
    /// Controllers (`kube-controller-manager`, `kube-scheduler`) whose Lease has a holder.
    pub leaders: usize,
}

impl ControlPlaneState {
    /// Whether `nodes` nodes run every component Ready and both controllers lead.
    pub fn serving(&self, nodes: usize) -> bool {
        self.ready_nodes == nodes && self.ready_pods >= 3 * nodes && self.leaders == 2
    }

    fn describe(&self) -> String {
        format!(
            "{} nodes Ready, {} of {} control-plane pods Ready, {} of 2 controllers leading",
            self.ready_nodes, self.ready_pods, self.pods, self.leaders
        )
    }
}

/// Whether the `Ready` condition among `(type, status)` pairs is `True`.
fn ready<'a>(mut conditions: impl Iterator<Item = (&'a String, &'a String)>) -> bool {
    conditions.any(|(kind, status)| kind == "Ready" && status == "True")
}

/// Reads the control plane's state (an error while the API is down).
///
/// # Errors
/// A request failed.
pub async fn control_plane_state(client: &kube::Client) -> Result<ControlPlaneState, kube::Error> {
    let nodes = Api::<Node>::all(client.clone())
        .list(&ListParams::default())
        .await?;
    let ready_nodes = nodes
        .items
        .iter()
        .flat_map(|n| &n.status)
        .filter(|s| ready(s.conditions.iter().flatten().map(|c| (&c.type_, &c.status))))
        .count();
    let pods = Api::<Pod>::namespaced(client.clone(), "kube-system")
        .list(&ListParams::default().labels("tier=control-plane"))
        .await?;
    let ready_pods = pods
        .items
        .iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .flat_map(|p| &p.status)
        .filter(|s| ready(s.conditions.iter().flatten().map(|c| (&c.type_, &c.status))))
        .count();
    let leases = Api::<Lease>::namespaced(client.clone(), "kube-system");
    let mut leaders = 0;
    for name in ["kube-controller-manager", "kube-scheduler"] {
        if let Some(lease) = leases.get_opt(name).await?
            && lease
                .spec
                .and_then(|s| s.holder_identity)
                .is_some_and(|h| !h.is_empty())
        {
            leaders += 1;
        }
    }
    Ok(ControlPlaneState {
        ready_nodes,
        ready_pods,
        pods: pods.items.len(),
        leaders,
    })
}

/// kubeadm's `mark-control-plane` phase, done with the admin's credentials (a kubelet may not
/// set role labels): the role labels and the control-plane taint.
async fn mark_control_plane(client: &kube::Client, node: &Node) -> Result<(), kube::Error> {
    let labels = node.metadata.labels.clone().unwrap_or_default();
    if labels.contains_key(MASTER_ROLE) {
        return Ok(());
    }
    let name = node.metadata.name.clone().unwrap_or_default();
    let patch = json!({
        "metadata": {"labels": {MASTER_ROLE: "", CONTROL_PLANE_ROLE: ""}},
        "spec": {"taints": [{"key": MASTER_ROLE, "effect": "NoSchedule"}]},
    });
    Api::<Node>::all(client.clone())
        .patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .map(|_| ())
}

/// The role label (and taint key) kubeadm v1.20 marks control-plane nodes with.
pub const MASTER_ROLE: &str = "node-role.kubernetes.io/master";
/// The role label kubeadm v1.20 adds beside it.
pub const CONTROL_PLANE_ROLE: &str = "node-role.kubernetes.io/control-plane";

impl TestBed {
    /// Waits until every node is Ready, runs every component Ready, and both controllers
    /// have a leader.
    ///
    /// # Errors
    /// A process of the bed exited, or the deadline passed (with what was last seen).
    pub async fn wait_until_serving(&mut self, timeout: Duration) -> Result<(), BedError> {
        let deadline = Instant::now() + timeout;
        let client = self.client().await?;
        let nodes = self.nodes.len();
        loop {
            self.check_processes()?;
            if let Ok(nodes) = Api::<Node>::all(client.clone())
                .list(&ListParams::default())
                .await
            {
                for node in &nodes.items {
                    if let Err(e) = mark_control_plane(&client, node).await {
                        eprintln!("selfhost-e2e: marking a control-plane node: {e}");
                    }
                }
            }
            let last = match control_plane_state(&client).await {
                Ok(state) if state.serving(nodes) => return Ok(()),
                Ok(state) => state.describe(),
                Err(e) => format!("the API: {e}"),
            };
            if Instant::now() >= deadline {
                return Err(BedError::Timeout {
                    what: format!(
                        "the control plane of {nodes} node(s) to serve (logs in {})",
                        self.dir().join("logs").display()
                    ),
                    seconds: timeout.as_secs(),
                    detail: last,
                });
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    }
}
