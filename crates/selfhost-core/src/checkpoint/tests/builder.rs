//! A small builder of one node's observation: one call per fact.

use k8s_openapi::jiff::{SignedDuration, Timestamp};

use crate::checkpoint::{
    ActiveCopy, Api, Checkpoint, ComponentOnNode, NodeCheckpoints, RunningPod,
};
use crate::component::Component;

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

    /// This node's DaemonSet pod of `c` at `revision`, serving since `serving_since`.
    pub(super) fn pod(
        mut self,
        c: Component,
        revision: &str,
        serving_since: Option<Timestamp>,
    ) -> Node {
        self.on(c).daemonset_pod = Some(RunningPod {
            uid: format!("uid-{revision}"),
            revision: revision.to_string(),
            image: image(revision),
            serving_since,
        });
        self
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
