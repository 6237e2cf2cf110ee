//! What `status` reports: each component's DaemonSet, what runs on which node, and whether an
//! upgrade is in progress (a backup DaemonSet exists) and to which version.

use k8s_openapi::api::core::v1::Pod;
use selfhost_core::Component;
use selfhost_core::backup::BackupOrigin;
use selfhost_core::checkpoint::{CheckpointerState, NodeCheckpointer, is_checkpointer};
use selfhost_core::front::is_front;
use selfhost_core::node_fronts::{FrontState, NodeApiFront};
use selfhost_core::observation::{ApiHealth, Observation};
use serde::Serialize;

use crate::mirror_pod::running;

/// The control plane as `status` shows it.
#[derive(Debug, Clone, Serialize)]
pub struct ControlPlaneStatus {
    /// The API server address the kubeconfig names.
    pub server: String,
    /// The API's health and version.
    pub api: ApiHealth,
    /// One entry per component, in upgrade order.
    pub components: Vec<ComponentStatus>,
    /// Each control-plane node's checkpointer; empty when the nodes could not be listed.
    pub checkpointers: Vec<NodeCheckpointer>,
    /// Each control-plane node's API front and the kube-apiservers behind it; empty where no
    /// node has a front and the kube-apiserver listens behind none.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub fronts: Vec<NodeApiFront>,
}

/// Each control-plane node's API front, from the control-plane nodes' names, the fronts'
/// mirror pods and the kube-apiserver's observation.
pub fn api_fronts(
    nodes: &[String],
    mirror_pods: &[Pod],
    apiserver: &Observation,
) -> Vec<NodeApiFront> {
    let states: Vec<(String, FrontState)> = mirror_pods
        .iter()
        .filter(|p| is_front(p))
        .filter_map(|p| {
            let node = p.spec.as_ref()?.node_name.clone()?;
            let state = match running(p) {
                Ok(()) => FrontState::Running,
                Err(why) => FrontState::NotRunning { why },
            };
            Some((node, state))
        })
        .collect();
    selfhost_core::node_fronts::api_fronts(nodes, &states, apiserver)
}

/// Each control-plane node's checkpointer, from the control-plane nodes' names and the
/// checkpointers' mirror pods.
pub fn checkpointers(nodes: &[String], mirror_pods: &[Pod]) -> Vec<NodeCheckpointer> {
    nodes
        .iter()
        .map(|node| {
            let pod = mirror_pods.iter().find(|p| {
                is_checkpointer(p)
                    && p.spec.as_ref().and_then(|s| s.node_name.as_deref()) == Some(node.as_str())
            });
            let state = match pod.map(running) {
                Some(Ok(())) => CheckpointerState::Running,
                Some(Err(why)) => CheckpointerState::NotRunning { why },
                None => CheckpointerState::None,
            };
            NodeCheckpointer {
                node: node.clone(),
                state,
            }
        })
        .collect()
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

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use k8s_openapi::api::core::v1::{ContainerState, ContainerStateWaiting, ContainerStatus};
    use selfhost_core::checkpoint::CheckpointerPod;

    use super::*;

    fn mirror(node: &str, ready: bool, waiting: Option<&str>) -> Pod {
        let mut pod = CheckpointerPod {
            image: "selfhost".into(),
            node: node.into(),
            manifests_dir: "/etc/kubernetes/manifests".into(),
            kubeconfig: "/etc/kubernetes/kubelet.conf".into(),
            tuning: None,
        }
        .render();
        pod.metadata.name = Some(format!("selfhost-checkpointer-{node}"));
        pod.spec.as_mut().unwrap().node_name = Some(node.into());
        pod.status = Some(k8s_openapi::api::core::v1::PodStatus {
            container_statuses: Some(vec![ContainerStatus {
                name: "checkpointer".into(),
                ready,
                state: waiting.map(|reason| ContainerState {
                    waiting: Some(ContainerStateWaiting {
                        reason: Some(reason.into()),
                        message: None,
                    }),
                    ..ContainerState::default()
                }),
                ..ContainerStatus::default()
            }]),
            ..Default::default()
        });
        pod
    }

    #[test]
    fn each_control_plane_node_shows_whether_its_checkpointer_runs() {
        let nodes = ["cp-1", "cp-2", "cp-3"].map(String::from);
        let pods = [
            mirror("cp-1", true, None),
            mirror("cp-2", false, Some("ImagePullBackOff")),
            mirror("worker-1", true, None),
        ];
        let shown: Vec<String> = checkpointers(&nodes, &pods)
            .iter()
            .map(|c| format!("{}: {}", c.node, c.state))
            .collect();
        assert_eq!(shown[0], "cp-1: running");
        assert_eq!(
            shown[1],
            "cp-2: NOT running: its container waits: ImagePullBackOff"
        );
        assert!(
            shown[2].starts_with("cp-3: none: a power cut"),
            "{}",
            shown[2]
        );
        assert!(
            shown[2].contains("selfhost checkpoint install"),
            "{}",
            shown[2]
        );
    }
}
