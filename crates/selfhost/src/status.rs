//! What `status` reports: each component's DaemonSet, what runs on which node, and whether an
//! upgrade is in progress (a backup DaemonSet exists) and to which version.

use selfhost_core::Component;
use selfhost_core::backup::BackupOrigin;
use selfhost_core::observation::{ApiHealth, Observation};
use serde::Serialize;

/// The control plane as `status` shows it.
#[derive(Debug, Clone, Serialize)]
pub struct ControlPlaneStatus {
    /// The API server address the kubeconfig names.
    pub server: String,
    /// The API's health and version.
    pub api: ApiHealth,
    /// One entry per component, in upgrade order.
    pub components: Vec<ComponentStatus>,
}

/// One component's status.
#[derive(Debug, Clone, Serialize)]
pub struct ComponentStatus {
    /// The component.
    pub component: Component,
    /// Its DaemonSet's name, if it has one.
    pub daemonset: Option<String>,
    /// Pods the DaemonSet wants.
    pub desired: i32,
    /// Pods ready.
    pub ready: i32,
    /// Pods on the current template.
    pub updated: i32,
    /// Image tag → the nodes running it, sorted.
    pub versions: Vec<(String, Vec<String>)>,
    /// The backup DaemonSet's name while an upgrade is in progress.
    pub backup: Option<String>,
    /// The version an upgrade in progress goes to.
    pub upgrading_to: Option<String>,
    /// Whether the backup is a record only, with no pods (on several nodes the other nodes
    /// serve while one is replaced).
    #[serde(skip)]
    pub backup_is_record_only: bool,
}

fn tag(image: &str) -> String {
    image
        .rsplit_once(':')
        .map_or_else(|| image.to_string(), |(_, t)| t.to_string())
}

/// A component's status from its observation.
pub fn component_status(obs: &Observation) -> ComponentStatus {
    let mut versions: Vec<(String, Vec<String>)> = Vec::new();
    for pod in obs.all_pods() {
        let version = pod
            .containers
            .first()
            .map(|c| tag(&c.image))
            .unwrap_or_default();
        let node = pod.node.clone().unwrap_or_else(|| "(unscheduled)".into());
        match versions.iter_mut().find(|(v, _)| *v == version) {
            Some((_, nodes)) if !nodes.contains(&node) => nodes.push(node),
            Some(_) => {}
            None => versions.push((version, vec![node])),
        }
    }
    versions.iter_mut().for_each(|(_, nodes)| nodes.sort());
    versions.sort();
    let upgrading_to = obs
        .backup
        .as_ref()
        .and_then(|b| b.record.as_ref().ok())
        .map(|r| match &r.origin {
            BackupOrigin::Selfhost { target } => target.to_string(),
            BackupOrigin::Kubeadm => "unknown (a backup left by kubeadm)".to_string(),
        });
    ComponentStatus {
        component: obs.component,
        daemonset: obs.real.as_ref().map(|d| d.name.clone()),
        desired: obs.real.as_ref().map_or(0, |d| d.status.desired),
        ready: obs.real.as_ref().map_or(0, |d| d.status.ready),
        updated: obs.real.as_ref().map_or(0, |d| d.status.updated),
        versions,
        backup: obs.backup.as_ref().map(|b| b.daemonset.name.clone()),
        upgrading_to,
        backup_is_record_only: obs
            .backup
            .as_ref()
            .is_some_and(selfhost_core::pivot::runs_as_record_only),
    }
}
