//! Keeping mirror pods in step with static pods, as decisions over data: which mirror pods
//! to delete (no static pod of that name runs, it mirrors another hash, or someone is deleting
//! it) and which to create; and pacing those requests so that none is repeated while the
//! watch has not caught up, nor hammered while the API is down.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::jiff::Timestamp;

use super::clock::after;
use super::config::timing;

/// A pod's namespace and name.
pub(crate) type Key = (String, String);

/// A mirror pod in the API.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct MirrorView {
    /// Its `kubernetes.io/config.mirror`.
    pub hash: Option<String>,
    /// It has a deletion timestamp.
    pub terminating: bool,
}

/// The static pod that runs under a name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct StaticView {
    pub uid: String,
    pub stopping: bool,
}

/// Whether `mirror` is the mirror of `running`.
pub(crate) fn mirrors(mirror: &MirrorView, running: &StaticView) -> bool {
    !mirror.terminating && mirror.hash.as_deref() == Some(running.uid.as_str())
}

/// The mirror pods to delete and the ones to create. A static pod being stopped keeps its
/// mirror (its status still goes there) but gets no new one.
pub(crate) fn plan(
    mirror_pods: &BTreeMap<Key, MirrorView>,
    running: &BTreeMap<Key, StaticView>,
) -> (Vec<Key>, Vec<Key>) {
    let delete = mirror_pods
        .iter()
        .filter(|(key, mirror)| running.get(*key).is_none_or(|s| !mirrors(mirror, s)))
        .map(|(key, _)| key.clone())
        .collect();
    let create = running
        .iter()
        .filter(|(key, s)| !s.stopping && !mirror_pods.contains_key(*key))
        .map(|(key, _)| key.clone())
        .collect();
    (delete, create)
}

/// A request about a mirror pod.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum MirrorOp {
    Create,
    Delete,
}

/// Paces mirror pod requests.
#[derive(Debug, Default)]
pub(crate) struct MirrorOps {
    not_before: BTreeMap<(Key, MirrorOp), Timestamp>,
    failing: BTreeSet<(Key, MirrorOp)>,
}

impl MirrorOps {
    /// Whether the request may be sent at `now`.
    pub(crate) fn may_send(&self, key: &Key, op: MirrorOp, now: Timestamp) -> bool {
        self.not_before
            .get(&(key.clone(), op))
            .is_none_or(|at| *at <= now)
    }

    /// The request was sent at `now`: the watch gets some time to show its effect.
    pub(crate) fn sent(&mut self, key: &Key, op: MirrorOp, now: Timestamp) {
        self.not_before.insert(
            (key.clone(), op),
            after(now, timing::MIRROR_OPERATION_SETTLE),
        );
    }

    /// The request failed at `now`: it is tried again after the API retry delay. Returns
    /// whether this is the first failure in a row (worth a warning).
    pub(crate) fn failed(&mut self, key: &Key, op: MirrorOp, now: Timestamp) -> bool {
        self.not_before
            .insert((key.clone(), op), after(now, timing::API_RETRY));
        self.failing.insert((key.clone(), op))
    }

    /// The request succeeded.
    pub(crate) fn succeeded(&mut self, key: &Key, op: MirrorOp) {
        self.failing.remove(&(key.clone(), op));
    }

    /// Forgets pacing that has run out.
    pub(crate) fn expire(&mut self, now: Timestamp) {
        self.not_before.retain(|_, at| *at > now);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kubelet::clock::t;

    fn key(name: &str) -> Key {
        ("kube-system".into(), name.into())
    }

    #[test]
    fn mirrors_follow_the_static_pods() {
        let mirror = |hash: &str, terminating: bool| MirrorView {
            hash: Some(hash.into()),
            terminating,
        };
        let running = |uid: &str, stopping: bool| StaticView {
            uid: uid.into(),
            stopping,
        };
        let mirror_pods: BTreeMap<Key, MirrorView> = [
            (key("current"), mirror("a", false)),
            (key("outdated"), mirror("old", false)),
            (key("orphan"), mirror("x", false)),
            (key("deleted"), mirror("d", true)),
            (key("stopping"), mirror("s", false)),
        ]
        .into();
        let statics: BTreeMap<Key, StaticView> = [
            (key("current"), running("a", false)),
            (key("outdated"), running("new", false)),
            (key("deleted"), running("d", false)),
            (key("stopping"), running("s", true)),
            (key("missing"), running("m", false)),
            (key("missing-stopping"), running("ms", true)),
        ]
        .into();
        let (delete, create) = plan(&mirror_pods, &statics);
        assert_eq!(delete, [key("deleted"), key("orphan"), key("outdated")]);
        assert_eq!(create, [key("missing")]);
    }

    #[test]
    fn requests_wait_for_the_watch_and_retry_after_failures() {
        let mut ops = MirrorOps::default();
        let k = key("p");
        assert!(ops.may_send(&k, MirrorOp::Create, t(0)));
        ops.sent(&k, MirrorOp::Create, t(0));
        assert!(!ops.may_send(&k, MirrorOp::Create, t(4)));
        assert!(ops.may_send(&k, MirrorOp::Delete, t(4)));
        assert!(ops.may_send(&k, MirrorOp::Create, t(5)));
        assert!(ops.failed(&k, MirrorOp::Create, t(5)));
        assert!(!ops.failed(&k, MirrorOp::Create, t(5)));
        assert!(!ops.may_send(&k, MirrorOp::Create, t(5)));
        assert!(ops.may_send(&k, MirrorOp::Create, t(6)));
        ops.succeeded(&k, MirrorOp::Create);
        assert!(ops.failed(&k, MirrorOp::Create, t(7)));
        ops.expire(t(100));
        assert!(ops.not_before.is_empty());
    }
}
