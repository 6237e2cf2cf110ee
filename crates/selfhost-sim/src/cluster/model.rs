//! The self-hosting model: what the kubelets run decides whether the API answers, which
//! version it reports, and which controller-manager and scheduler act.
//!
//! Kubelets publish their containers on the process table (a [`ControlPlaneSnapshot`]); on every
//! publication, synchronously, two policies decide: a [`ServingPolicy`] (which kube-apiserver processes serve; the API is up while
//! there is one) and a [`LeaderPolicy`] per [`Role`] (which process acts for the
//! controller-manager and the scheduler). Deciding at the moment of publication matters: a
//! kubelet whose apiserver process just exited must not get its next write through. Controllers
//! never look at pods: they wait on the [`Leadership`] the process table publishes. Replacing "a Ready pod" by "the process holding
//! the leader Lease", or "any Ready apiserver" by "the one this connection reached", is a new
//! policy (or a task feeding the same channels), not a rewiring.

use std::collections::BTreeMap;

use crate::controllers::kubelet::{ContainerView, ImageRef, NodeState, PodRef, ProcessId};

/// The containers of one node, as its kubelet last reported them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeContainers {
    /// The machine's state.
    pub state: NodeState,
    /// Every container of every pod it runs.
    pub containers: Vec<ContainerView>,
}

/// Every node's containers at one moment, by node name.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ControlPlaneSnapshot {
    /// By node name.
    pub nodes: BTreeMap<String, NodeContainers>,
}

impl ControlPlaneSnapshot {
    /// The Ready containers running `binary`, with their node, in node order.
    pub fn ready(&self, binary: &str) -> Vec<(&str, &ContainerView)> {
        self.nodes
            .iter()
            .flat_map(|(node, n)| n.containers.iter().map(move |c| (node.as_str(), c)))
            .filter(|(_, c)| c.ready && c.binary.as_deref() == Some(binary))
            .collect()
    }
}

/// The version an image's tag names (`registry.k8s.io/kube-apiserver:v1.33.2` → 1.33.2).
pub fn image_version(image: &str) -> Option<(u64, u64, u64)> {
    let tag = ImageRef::parse(image).ok()?.tag?;
    parse_version(&tag)
}

/// `v1.33.2` (or `1.33.2`, with any `-suffix`) as numbers.
pub fn parse_version(text: &str) -> Option<(u64, u64, u64)> {
    let core = text.strip_prefix('v').unwrap_or(text);
    let core = core.split(['-', '+']).next()?;
    let mut parts = core.split('.').map(|p| p.parse::<u64>().ok());
    let (major, minor, patch) = (parts.next()??, parts.next()??, parts.next()??);
    parts.next().is_none().then_some((major, minor, patch))
}

/// A kube-apiserver process that serves.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiBackend {
    /// Its node.
    pub node: String,
    /// Its pod (for a static pod, the uid is the config hash).
    pub pod: PodRef,
    /// Its process.
    pub process: Option<ProcessId>,
    /// Its image.
    pub image: Option<String>,
}

/// Which apiserver processes serve, and the `gitVersion` `/version` reports.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ApiServing {
    /// The processes that take connections; none means every connection is refused.
    pub backends: Vec<ApiBackend>,
    /// The version `/version` reports (`None`: keep the configured one).
    pub version: Option<String>,
}

impl ApiServing {
    /// Whether the API answers.
    pub fn is_up(&self) -> bool {
        !self.backends.is_empty()
    }
}

/// Decides which apiserver processes serve.
pub trait ServingPolicy: std::fmt::Debug + Send + Sync {
    /// The serving processes given what every node runs.
    fn serving(&self, snapshot: &ControlPlaneSnapshot) -> ApiServing;
}

/// Every Ready kube-apiserver container serves (one endpoint for all; connections never
/// reach one that is not Ready). `/version` reports the newest version among them, so that
/// a rollout shows the new version as soon as one new apiserver serves; an image whose tag
/// is not a version leaves the configured version in place.
#[derive(Debug, Clone, Copy, Default)]
pub struct AnyReadyApiserver;

impl ServingPolicy for AnyReadyApiserver {
    fn serving(&self, snapshot: &ControlPlaneSnapshot) -> ApiServing {
        let backends: Vec<ApiBackend> = snapshot
            .ready("kube-apiserver")
            .into_iter()
            .map(|(node, c)| ApiBackend {
                node: node.to_string(),
                pod: c.pod.clone(),
                process: c.process,
                image: c.image.clone(),
            })
            .collect();
        let version = backends
            .iter()
            .filter_map(|b| {
                let image = b.image.as_deref()?;
                let v = image_version(image)?;
                Some((v, ImageRef::parse(image).ok()?.tag?))
            })
            .max()
            .map(|(_, tag)| tag);
        ApiServing { backends, version }
    }
}

/// A component that runs as one acting process among standbys.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Role {
    /// kube-controller-manager: the DaemonSet controller, garbage collector, node lifecycle
    /// and pod garbage collector.
    ControllerManager,
    /// kube-scheduler: binding.
    Scheduler,
}

impl Role {
    /// The binary that plays the role.
    pub fn binary(self) -> &'static str {
        match self {
            Role::ControllerManager => "kube-controller-manager",
            Role::Scheduler => "kube-scheduler",
        }
    }
}

/// One process on one node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProcessRef {
    /// Its node.
    pub node: String,
    /// Its pod.
    pub pod: PodRef,
    /// Its container.
    pub container: String,
    /// Its process id on the node.
    pub process: Option<ProcessId>,
    /// Its identity (`<hostname>_<uuid>`): what it writes as a Lease holder.
    pub identity: Option<String>,
}

/// Who acts for a role.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum Leadership {
    /// Nobody: the role's controllers do nothing.
    #[default]
    Vacant,
    /// The model is off (or bootstrapping): the controllers act without a process.
    Ungated,
    /// This process acts. A different process is a new start: fresh caches and memory.
    Held(ProcessRef),
}

impl Leadership {
    /// Whether the role's controllers act.
    pub fn is_active(&self) -> bool {
        !matches!(self, Leadership::Vacant)
    }
}

/// Decides who acts for a role.
pub trait LeaderPolicy: std::fmt::Debug + Send + Sync {
    /// The leadership given what every node runs and who leads now.
    fn leader(
        &self,
        role: Role,
        snapshot: &ControlPlaneSnapshot,
        current: &Leadership,
    ) -> Leadership;
}

/// The current leader keeps the role while its container stays Ready; otherwise the first
/// Ready process (by node name) takes it at once. (Real leader election waits for a Lease to
/// expire; that model replaces this policy.)
#[derive(Debug, Clone, Copy, Default)]
pub struct FirstReadyProcess;

impl LeaderPolicy for FirstReadyProcess {
    fn leader(
        &self,
        role: Role,
        snapshot: &ControlPlaneSnapshot,
        current: &Leadership,
    ) -> Leadership {
        let ready = snapshot.ready(role.binary());
        let as_ref = |(node, c): &(&str, &ContainerView)| ProcessRef {
            node: node.to_string(),
            pod: c.pod.clone(),
            container: c.container.clone(),
            process: c.process,
            identity: c.identity.clone(),
        };
        if let Leadership::Held(held) = current
            && ready.iter().map(as_ref).any(|p| p == *held)
        {
            return current.clone();
        }
        ready
            .first()
            .map_or(Leadership::Vacant, |c| Leadership::Held(as_ref(c)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn container(binary: &str, image: &str, uid: &str, ready: bool) -> ContainerView {
        ContainerView {
            pod: PodRef {
                namespace: "kube-system".into(),
                name: format!("{binary}-{uid}"),
                uid: uid.into(),
            },
            container: binary.into(),
            binary: Some(binary.into()),
            image: Some(image.into()),
            command_line: Vec::new(),
            process: Some(ProcessId(1)),
            identity: Some(format!("cp-1_{uid}")),
            started_at: None,
            listening_since: None,
            stopping: false,
            terminating: false,
            ready,
            host_mounts: Vec::new(),
        }
    }

    fn snapshot(nodes: &[(&str, Vec<ContainerView>)]) -> ControlPlaneSnapshot {
        ControlPlaneSnapshot {
            nodes: nodes
                .iter()
                .map(|(n, c)| {
                    (
                        n.to_string(),
                        NodeContainers {
                            state: NodeState::Up,
                            containers: c.clone(),
                        },
                    )
                })
                .collect(),
        }
    }

    #[test]
    fn the_api_is_up_while_an_apiserver_is_ready_and_reports_the_newest_version() {
        let api = |tag: &str, uid: &str, ready| {
            container(
                "kube-apiserver",
                &format!("registry.k8s.io/kube-apiserver:{tag}"),
                uid,
                ready,
            )
        };
        let cases = [
            (vec![], false, None),
            (vec![api("v1.33.2", "a", false)], false, None),
            (vec![api("v1.33.2", "a", true)], true, Some("v1.33.2")),
            (
                vec![api("v1.33.2", "a", true), api("v1.34.0", "b", true)],
                true,
                Some("v1.34.0"),
            ),
            (
                vec![api("v1.33.10", "a", true), api("v1.33.9", "b", true)],
                true,
                Some("v1.33.10"),
            ),
            (
                vec![api("v1.33.2", "a", true), api("v1.34.0", "b", false)],
                true,
                Some("v1.33.2"),
            ),
            (vec![api("latest", "a", true)], true, None),
        ];
        for (containers, up, version) in cases {
            let serving = AnyReadyApiserver.serving(&snapshot(&[("cp-1", containers.clone())]));
            assert_eq!(serving.is_up(), up, "{containers:?}");
            assert_eq!(serving.version.as_deref(), version, "{containers:?}");
        }
    }

    #[test]
    fn a_leader_keeps_the_role_while_ready_and_a_ready_standby_takes_over() {
        let cm = |uid: &str, ready| {
            container(
                "kube-controller-manager",
                "registry.k8s.io/kube-controller-manager:v1.33.2",
                uid,
                ready,
            )
        };
        let role = Role::ControllerManager;
        let both = snapshot(&[("cp-1", vec![cm("a", true)]), ("cp-2", vec![cm("b", true)])]);
        let first = FirstReadyProcess.leader(role, &both, &Leadership::Vacant);
        let Leadership::Held(held) = &first else {
            panic!("someone leads: {first:?}")
        };
        assert_eq!(held.node, "cp-1");
        let b_leads = FirstReadyProcess.leader(
            role,
            &snapshot(&[
                ("cp-1", vec![cm("a", false)]),
                ("cp-2", vec![cm("b", true)]),
            ]),
            &first,
        );
        assert!(matches!(&b_leads, Leadership::Held(p) if p.node == "cp-2"));
        assert_eq!(
            FirstReadyProcess.leader(role, &both, &b_leads),
            b_leads,
            "sticky"
        );
        let none = snapshot(&[("cp-1", vec![cm("a", false)])]);
        assert_eq!(
            FirstReadyProcess.leader(role, &none, &b_leads),
            Leadership::Vacant
        );
    }

    #[test]
    fn versions_parse_from_tags() {
        assert_eq!(parse_version("v1.33.2"), Some((1, 33, 2)));
        assert_eq!(parse_version("1.34.0-rc.1"), Some((1, 34, 0)));
        assert_eq!(parse_version("latest"), None);
        assert_eq!(parse_version("v1.33"), None);
        assert_eq!(
            image_version("registry.k8s.io/kube-scheduler:v1.30.1"),
            Some((1, 30, 1))
        );
    }
}
