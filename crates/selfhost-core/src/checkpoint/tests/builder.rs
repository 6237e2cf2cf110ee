//! A small builder of one node's observation: one call per fact.

use k8s_openapi::jiff::{SignedDuration, Timestamp};

use crate::checkpoint::{
    ActiveCopy, Api, Checkpoint, ComponentOnNode, NodeCheckpoints, NodeLeases, OtherProcess,
    RunningPod,
};
use crate::component::Component;
use crate::observation::{
    ContainerState, IdentitySighting, LeaderLease, NodeObservation, NodeReadiness,
};

/// The time `millis` milliseconds after the tests' epoch.
pub(super) fn ms(millis: i64) -> Timestamp {
    Timestamp::UNIX_EPOCH
        + SignedDuration::from_secs(1_700_000_000)
        + SignedDuration::from_millis(millis)
}

/// The time `secs` seconds after the tests' epoch.
pub(super) fn t(secs: i64) -> Timestamp {
    ms(secs * 1000)
}

/// One node, built fact by fact; the API answers until told otherwise.
pub(super) struct Node(NodeCheckpoints);

/// A node observed at `now`, in milliseconds after the tests' epoch, with nothing on it.
pub(super) fn node_at_ms(now: i64) -> Node {
    Node(NodeCheckpoints {
        now: ms(now),
        api: Api::Answers,
        components: Default::default(),
        leases: None,
    })
}

/// A node observed at `now`, in seconds after the tests' epoch, with nothing on it.
pub(super) fn node_at(now: i64) -> Node {
    node_at_ms(now * 1000)
}

impl Node {
    fn on(&mut self, c: Component) -> &mut ComponentOnNode {
        self.0.components.entry(c).or_default()
    }

    /// The API has been unreachable since `since` seconds.
    pub(super) fn api_down_since(mut self, since: i64) -> Node {
        self.0.api = Api::Unreachable { since: t(since) };
        self
    }

    /// This node's DaemonSet pod of `c` at `revision`, serving since `since` seconds.
    pub(super) fn serving(self, c: Component, revision: &str, since: i64) -> Node {
        self.pod(c, revision, Some(t(since)))
    }

    /// This node's DaemonSet pod of `c` at `revision`, not serving.
    pub(super) fn not_serving(self, c: Component, revision: &str) -> Node {
        self.pod(c, revision, None)
    }

    /// This node's DaemonSet pod of `c` at `revision`, Ready since `ready_since`, its process
    /// running since then (or since the tests' epoch when it is not Ready).
    pub(super) fn pod(
        mut self,
        c: Component,
        revision: &str,
        ready_since: Option<Timestamp>,
    ) -> Node {
        self.on(c).daemonset_pod = Some(RunningPod {
            uid: format!("uid-{revision}"),
            revision: revision.to_string(),
            image: image(revision),
            ready_since,
            process: ContainerState::Running {
                started_at: Some(ready_since.unwrap_or(t(0))),
            },
        });
        self
    }

    /// The DaemonSet pod's process of `c` started at `secs` seconds.
    pub(super) fn started(mut self, c: Component, secs: i64) -> Node {
        if let Some(pod) = self.on(c).daemonset_pod.as_mut() {
            pod.process = ContainerState::Running {
                started_at: Some(t(secs)),
            };
        }
        self
    }

    /// The DaemonSet pod's process of `c` is in `state`.
    pub(super) fn process(mut self, c: Component, state: ContainerState) -> Node {
        if let Some(pod) = self.on(c).daemonset_pod.as_mut() {
            pod.process = state;
        }
        self
    }

    /// Another pod of `c` on the node (a backup's, a copy's mirror pod), its process in
    /// `state`.
    pub(super) fn other(mut self, c: Component, pod: &str, state: ContainerState) -> Node {
        self.on(c).other_processes.push(OtherProcess {
            pod: pod.to_string(),
            state,
        });
        self
    }

    /// The node's Leases can be read; this node is `cp-1` (hostname `cp-1`) among
    /// control-plane nodes `cp-1` and `cp-2`, both Ready.
    pub(super) fn leases(mut self) -> Node {
        let node = |name: &str| NodeObservation {
            name: name.to_string(),
            hostname: Some(name.to_string()),
            ready: NodeReadiness::Ready,
            ready_since: None,
            unschedulable: false,
            labels: Default::default(),
            taints: Vec::new(),
        };
        self.0.leases = Some(NodeLeases {
            node: "cp-1".to_string(),
            control_plane: vec![node("cp-1"), node("cp-2")],
            identities: Vec::new(),
            leaders: Default::default(),
        });
        self
    }

    /// Every control-plane node shares the hostname `shared`, which so tells none apart.
    pub(super) fn shared_hostname(mut self) -> Node {
        for node in &mut self.leases_mut().control_plane {
            node.hostname = Some("shared".to_string());
        }
        self
    }

    /// This node reports NotReady.
    pub(super) fn node_not_ready(mut self) -> Node {
        for node in &mut self.leases_mut().control_plane {
            if node.name == "cp-1" {
                node.ready = NodeReadiness::Unknown;
            }
        }
        self
    }

    /// A kube-apiserver identity held by `holder` on `host`, last renewed at `renewed` seconds.
    pub(super) fn identity(mut self, host: &str, holder: &str, renewed: i64) -> Node {
        self.leases_mut().identities.push(IdentitySighting {
            lease: format!("apiserver-{host}"),
            hostname: Some(host.to_string()),
            holder: holder.to_string(),
            holder_since: None,
            last_renewed: Some(t(renewed)),
            first_seen: None,
        });
        self
    }

    /// `c`'s leader Lease, held from `host` since `acquired` seconds and renewed now.
    pub(super) fn leader(mut self, c: Component, host: &str, acquired: i64) -> Node {
        let now = self.0.now;
        self.leases_mut().leaders.insert(
            c,
            LeaderLease {
                name: c.name().to_string(),
                uid: Some(format!("uid-{}", c.name())),
                resource_version: Some("42".to_string()),
                holder: Some(format!("{host}_0f6e")),
                acquire_time: Some(t(acquired)),
                renew_time: Some(now),
                lease_duration_seconds: Some(15),
                transitions: Some(3),
            },
        );
        self
    }

    /// The copy of `c` is active with no mirror pod shown yet.
    pub(super) fn without_mirror_pod(mut self, c: Component) -> Node {
        if let Some(copy) = self.on(c).active.as_mut() {
            copy.mirror_pod = false;
        }
        self
    }

    fn leases_mut(&mut self) -> &mut NodeLeases {
        self.0.leases.get_or_insert_with(NodeLeases::default)
    }

    /// A checkpoint of `c` at `revision` on disk.
    pub(super) fn kept(mut self, c: Component, revision: &str) -> Node {
        self.on(c).checkpoint = Some(Checkpoint {
            revision: revision.to_string(),
            image: image(revision),
            written_at: t(0),
        });
        self
    }

    /// A copy of `c` at `revision` active since the observation's time less a second, its
    /// process serving or not.
    pub(super) fn active(mut self, c: Component, revision: &str, serving: bool) -> Node {
        let since = self.0.now - SignedDuration::from_secs(1);
        self.on(c).active = Some(ActiveCopy {
            revision: revision.to_string(),
            since,
            serving,
            mirror_pod: true,
        });
        self
    }

    /// A process of `c` answers on the node.
    pub(super) fn local(mut self, c: Component) -> Node {
        self.on(c).local_process_serving = true;
        self
    }

    /// kubeadm's static pod of `c` is in the manifests directory.
    pub(super) fn kubeadm_static(mut self, c: Component) -> Node {
        self.on(c).static_manifest = true;
        self
    }

    /// The observation.
    pub(super) fn build(self) -> NodeCheckpoints {
        self.0
    }
}

/// The image of a revision, for the tests.
pub(super) fn image(revision: &str) -> String {
    format!("image-of-{revision}")
}
