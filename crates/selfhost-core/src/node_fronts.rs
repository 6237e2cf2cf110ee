//! Each control-plane node's API front and the kube-apiservers behind it, as their pods show
//! them: what `status` lists and the `api-fronts` preflight check reads.

use std::net::IpAddr;

use serde::Serialize;

use crate::front::FrontLayout;
use crate::observation::{Observation, PodObservation};

/// A control-plane node's API front and its backends.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct NodeApiFront {
    /// The node.
    pub node: String,
    /// Whether the front runs.
    #[serde(flatten)]
    pub state: FrontState,
    /// The kube-apiservers behind it, by the address each listens on.
    pub backends: Vec<FrontBackend>,
}

/// Whether a node's front runs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "front", rename_all = "kebab-case")]
pub enum FrontState {
    /// Its container is ready.
    Running,
    /// Its mirror pod is there, its container not ready.
    NotRunning {
        /// What the pod shows.
        why: String,
    },
    /// The node has none.
    None,
}

impl std::fmt::Display for FrontState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            FrontState::Running => write!(f, "running"),
            FrontState::NotRunning { why } => write!(f, "NOT running: {why}"),
            FrontState::None => write!(f, "none"),
        }
    }
}

/// One address a kube-apiserver of the node listens on behind the front.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct FrontBackend {
    /// The address.
    pub address: IpAddr,
    /// The pod listening there: the DaemonSet's, or a pivot's backup's.
    pub pod: Option<String>,
    /// Whether that pod is Ready: behind a front each kube-apiserver answers its own probes,
    /// so this is its own `/readyz`, as the front's checks see it.
    pub ready: bool,
}

impl std::fmt::Display for FrontBackend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match (&self.pod, self.ready) {
            (None, _) => write!(f, "{} -", self.address),
            (Some(_), true) => write!(f, "{} ready", self.address),
            (Some(_), false) => write!(f, "{} NOT ready", self.address),
        }
    }
}

/// Each node's front, from the control-plane nodes' names, the fronts' states on the nodes
/// that have one, and the kube-apiserver's observation. Empty where no node has a front and
/// the kube-apiserver DaemonSet listens behind none.
pub fn api_fronts(
    nodes: &[String],
    fronts: &[(String, FrontState)],
    apiserver: &Observation,
) -> Vec<NodeApiFront> {
    let layout = apiserver
        .real
        .as_ref()
        .and_then(|ds| FrontLayout::of_annotations(&ds.annotations).ok().flatten());
    if layout.is_none() && fronts.is_empty() {
        return Vec::new();
    }
    let layout = layout.unwrap_or_default();
    let on = |pods: Option<&Vec<PodObservation>>, node: &str| -> Option<(String, bool)> {
        pods?
            .iter()
            .find(|p| p.node.as_deref() == Some(node) && !p.is_terminating())
            .map(|p| (p.name.clone(), p.ready))
    };
    nodes
        .iter()
        .map(|node| {
            let state = fronts
                .iter()
                .find(|(n, _)| n == node)
                .map_or(FrontState::None, |(_, s)| s.clone());
            let real = on(apiserver.real.as_ref().map(|d| &d.pods), node);
            let backup = on(apiserver.backup.as_ref().map(|b| &b.daemonset.pods), node);
            let backends = [(layout.backend, real), (layout.backup, backup)]
                .into_iter()
                .map(|(address, pod)| FrontBackend {
                    address,
                    ready: pod.as_ref().is_some_and(|(_, ready)| *ready),
                    pod: pod.map(|(name, _)| name),
                })
                .collect();
            NodeApiFront {
                node: node.clone(),
                state,
                backends,
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::component::Component;
    use crate::front::FRONT_ANNOTATION;
    use crate::observation::builder::World;

    #[test]
    fn status_shows_each_nodes_front_and_its_backends_as_their_pods_do() {
        let mut world = World::steady(Component::ApiServer, 2);
        world
            .real_mut()
            .annotations
            .insert(FRONT_ANNOTATION.into(), "127.0.0.1,127.0.0.2".into());
        let obs = world.build();
        let nodes = ["cp-1", "cp-2", "cp-3"].map(String::from);
        let states = [
            ("cp-1".to_string(), FrontState::Running),
            (
                "cp-2".to_string(),
                FrontState::NotRunning {
                    why: "its container waits: ImagePullBackOff".into(),
                },
            ),
        ];
        let shown: Vec<String> = api_fronts(&nodes, &states, &obs)
            .iter()
            .map(|f| {
                let backends: Vec<String> = f.backends.iter().map(ToString::to_string).collect();
                format!("{} {} [{}]", f.node, f.state, backends.join(", "))
            })
            .collect();
        assert_eq!(
            shown,
            [
                "cp-1 running [127.0.0.1 ready, 127.0.0.2 -]",
                "cp-2 NOT running: its container waits: ImagePullBackOff [127.0.0.1 ready, 127.0.0.2 -]",
                "cp-3 none [127.0.0.1 -, 127.0.0.2 -]",
            ]
        );

        // Nothing behind a front and no front anywhere: nothing to show.
        let plain = World::steady(Component::ApiServer, 2).build();
        assert!(api_fronts(&nodes, &[], &plain).is_empty());
    }
}
