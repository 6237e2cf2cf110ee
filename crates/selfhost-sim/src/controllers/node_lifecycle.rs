//! The node lifecycle controller of the kube-controller-manager, as pure decisions: a node
//! whose kubelet stopped renewing its Lease and posting status is marked `Unknown` after the
//! grace period, its pods are marked not Ready, and the taints that keep new pods away
//! (`NoSchedule`) and evict running ones (`NoExecute`) follow the node's conditions.
//!
//! Only while a controller-manager runs does any of this happen; a cluster without one keeps
//! a dead node `Ready` forever, as a real one does.

use std::time::Duration;

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Node, NodeCondition, Pod, PodStatus, Taint};
use k8s_openapi::jiff::Timestamp;

use super::clock;
use super::objects::{self, condition};
use super::taints::{self, effect, key};

/// Timings of the node lifecycle controller.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NodeLifecycleConfig {
    /// `--node-monitor-grace-period`: silence after which a node is `Unknown` (50 s since 1.32).
    pub monitor_grace_period: Duration,
    /// `--node-startup-grace-period`: how long a new node may stay silent (60 s).
    pub startup_grace_period: Duration,
}

impl Default for NodeLifecycleConfig {
    fn default() -> Self {
        NodeLifecycleConfig {
            monitor_grace_period: Duration::from_secs(50),
            startup_grace_period: Duration::from_secs(60),
        }
    }
}

/// The conditions the controller turns `Unknown` when the kubelet goes silent.
const MONITORED: [&str; 4] = ["Ready", "MemoryPressure", "DiskPressure", "PIDPressure"];

/// What the controller wants changed on one node.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct NodeDecision {
    /// New `status.conditions`, when the kubelet has been silent too long.
    pub conditions: Option<Vec<NodeCondition>>,
    /// New `spec.taints`, when the condition taints must change.
    pub taints: Option<Vec<Taint>>,
    /// The node just turned unreachable: mark its pods not Ready ([`mark_pod_not_ready`]).
    pub mark_pods_not_ready: bool,
    /// When to look again even if nothing changes (the grace period may run out).
    pub recheck_at: Option<Timestamp>,
}

fn ready_status(conditions: &[NodeCondition]) -> Option<&str> {
    conditions
        .iter()
        .find(|c| c.type_ == "Ready")
        .map(|c| c.status.as_str())
}

/// The last sign of life: the Lease's renew time or the Ready condition's heartbeat.
fn last_heartbeat(node: &Node, lease: Option<&Lease>) -> Option<Timestamp> {
    let renewed = lease
        .and_then(|l| l.spec.as_ref())
        .and_then(|s| s.renew_time.as_ref())
        .map(|t| t.0);
    let posted = node
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_deref())
        .unwrap_or_default()
        .iter()
        .find(|c| c.type_ == "Ready")
        .and_then(|c| c.last_heartbeat_time.as_ref())
        .map(|t| t.0);
    // `None` orders before any time, so this is the later of the signs that exist.
    renewed.max(posted)
}

/// Decides the controller's writes for one node at `now`.
pub fn monitor(
    node: &Node,
    lease: Option<&Lease>,
    now: Timestamp,
    config: &NodeLifecycleConfig,
) -> NodeDecision {
    let mut decision = NodeDecision::default();
    let current: Vec<NodeCondition> = node
        .status
        .as_ref()
        .and_then(|s| s.conditions.clone())
        .unwrap_or_default();
    let was_unknown = ready_status(&current) == Some("Unknown");
    let (since, grace, reason, message) = match last_heartbeat(node, lease) {
        Some(at) => (
            at,
            config.monitor_grace_period,
            "NodeStatusUnknown",
            "Kubelet stopped posting node status.",
        ),
        None => (
            objects::created_at(&node.metadata).unwrap_or(now),
            config.startup_grace_period,
            "NodeStatusNeverUpdated",
            "Kubelet never posted node status.",
        ),
    };
    let deadline = clock::after(since, grace);
    let mut conditions = current.clone();
    if now > deadline {
        for type_ in MONITORED {
            match conditions.iter_mut().find(|c| c.type_ == type_) {
                Some(c) if c.status == "Unknown" => {}
                Some(c) => {
                    c.status = "Unknown".into();
                    c.reason = Some(reason.into());
                    c.message = Some(message.into());
                    c.last_transition_time = Some(clock::time(now));
                }
                None => conditions.push(NodeCondition {
                    type_: type_.into(),
                    status: "Unknown".into(),
                    reason: Some(reason.into()),
                    message: Some(message.into()),
                    last_transition_time: Some(clock::time(now)),
                    last_heartbeat_time: Some(clock::time(since)),
                }),
            }
        }
        if conditions != current {
            decision.conditions = Some(conditions.clone());
        }
        decision.mark_pods_not_ready = !was_unknown;
    } else {
        decision.recheck_at = Some(clock::after(deadline, Duration::from_millis(1)));
    }
    let spec = node.spec.clone().unwrap_or_default();
    let old_taints = spec.taints.unwrap_or_default();
    let new_taints = condition_taints(
        &old_taints,
        &conditions,
        spec.unschedulable == Some(true),
        now,
    );
    if new_taints != old_taints {
        decision.taints = Some(new_taints);
    }
    decision
}

/// The taints managed by the controller, from the node's conditions and `spec.unschedulable`,
/// merged into the node's other taints (existing ones keep their `timeAdded`).
pub fn condition_taints(
    existing: &[Taint],
    conditions: &[NodeCondition],
    unschedulable: bool,
    now: Timestamp,
) -> Vec<Taint> {
    let status = |type_: &str| {
        conditions
            .iter()
            .find(|c| c.type_ == type_)
            .map_or("", |c| c.status.as_str())
    };
    let mut wanted: Vec<(&str, &str)> = Vec::new();
    match status("Ready") {
        "False" => wanted.extend([
            (key::NOT_READY, effect::NO_SCHEDULE),
            (key::NOT_READY, effect::NO_EXECUTE),
        ]),
        "Unknown" => wanted.extend([
            (key::UNREACHABLE, effect::NO_SCHEDULE),
            (key::UNREACHABLE, effect::NO_EXECUTE),
        ]),
        _ => {}
    }
    for (type_, taint_key) in [
        ("MemoryPressure", key::MEMORY_PRESSURE),
        ("DiskPressure", key::DISK_PRESSURE),
        ("PIDPressure", key::PID_PRESSURE),
        ("NetworkUnavailable", key::NETWORK_UNAVAILABLE),
    ] {
        if status(type_) == "True" {
            wanted.push((taint_key, effect::NO_SCHEDULE));
        }
    }
    if unschedulable {
        wanted.push((key::UNSCHEDULABLE, effect::NO_SCHEDULE));
    }
    let managed = [
        key::NOT_READY,
        key::UNREACHABLE,
        key::MEMORY_PRESSURE,
        key::DISK_PRESSURE,
        key::PID_PRESSURE,
        key::NETWORK_UNAVAILABLE,
        key::UNSCHEDULABLE,
    ];
    let mut taints: Vec<Taint> = existing
        .iter()
        .filter(|t| {
            !managed.contains(&t.key.as_str())
                || wanted.contains(&(t.key.as_str(), t.effect.as_str()))
        })
        .cloned()
        .collect();
    for (k, e) in wanted {
        if !taints.iter().any(|t| t.key == k && t.effect == e) {
            let mut taint = taints::taint(k, e);
            if e == effect::NO_EXECUTE {
                taint.time_added = Some(clock::time(now));
            }
            taints.push(taint);
        }
    }
    taints
}

/// The pod's status with `Ready=False`, if it was Ready (upstream `MarkPodsNotReady`).
pub fn mark_pod_not_ready(pod: &Pod, now: Timestamp) -> Option<PodStatus> {
    if !objects::is_pod_ready(pod) {
        return None;
    }
    let mut status = pod.status.clone()?;
    let conditions = status.conditions.get_or_insert_default();
    let ready = conditions
        .iter_mut()
        .find(|c| c.type_ == condition::READY)?;
    ready.status = "False".into();
    ready.last_transition_time = Some(clock::time(now));
    Some(status)
}

/// Pods on a node that taint-based eviction deletes now, and when to look again for the
/// ones that tolerate the taints only for a while.
pub fn pods_to_evict<'a>(
    node: &Node,
    pods: &[&'a Pod],
    now: Timestamp,
) -> (Vec<&'a Pod>, Option<Timestamp>) {
    let node_taints = node
        .spec
        .as_ref()
        .and_then(|s| s.taints.as_deref())
        .unwrap_or_default();
    let mut evict = Vec::new();
    let mut next = None;
    for &pod in pods
        .iter()
        .filter(|p| !objects::is_terminating(&p.metadata))
    {
        let tolerations = pod
            .spec
            .as_ref()
            .and_then(|s| s.tolerations.as_deref())
            .unwrap_or_default();
        match taints::eviction_time(node_taints, tolerations, now) {
            Some(at) if at <= now => evict.push(pod),
            Some(at) => next = clock::earliest(next, Some(at)),
            None => {}
        }
    }
    (evict, next)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::controllers::fixtures::{node, pod, t};
    use k8s_openapi::api::coordination::v1::LeaseSpec;
    use k8s_openapi::api::core::v1::{NodeStatus, Toleration};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, Time};

    fn reporting(at: Timestamp, ready: &str) -> Node {
        let mut n = node("w-1").build();
        n.status = Some(NodeStatus {
            conditions: Some(vec![NodeCondition {
                type_: "Ready".into(),
                status: ready.into(),
                reason: Some("KubeletReady".into()),
                last_heartbeat_time: Some(Time(at)),
                last_transition_time: Some(Time(at)),
                message: None,
            }]),
            ..NodeStatus::default()
        });
        n
    }

    fn lease(renewed: Timestamp) -> Lease {
        Lease {
            spec: Some(LeaseSpec {
                renew_time: Some(MicroTime(renewed)),
                ..LeaseSpec::default()
            }),
            ..Lease::default()
        }
    }

    #[test]
    fn a_silent_node_turns_unknown_after_the_grace_period_and_gets_unreachable_taints() {
        let config = NodeLifecycleConfig::default();
        let n = reporting(t(0), "True");
        // The lease keeps the node alive even when status is posted rarely.
        let d = monitor(&n, Some(&lease(t(40))), t(80), &config);
        assert_eq!(
            d,
            NodeDecision {
                recheck_at: Some(clock::after(t(90), Duration::from_millis(1))),
                ..NodeDecision::default()
            }
        );

        let d = monitor(&n, Some(&lease(t(40))), t(91), &config);
        let conditions = d.conditions.unwrap();
        let ready = conditions.iter().find(|c| c.type_ == "Ready").unwrap();
        assert_eq!(
            (ready.status.as_str(), ready.reason.as_deref()),
            ("Unknown", Some("NodeStatusUnknown"))
        );
        assert_eq!(conditions.len(), 4, "pressure conditions turn Unknown too");
        assert!(d.mark_pods_not_ready);
        let taints: Vec<(String, String)> = d
            .taints
            .unwrap()
            .into_iter()
            .map(|t| (t.key, t.effect))
            .collect();
        assert_eq!(
            taints,
            [
                (key::UNREACHABLE.into(), "NoSchedule".into()),
                (key::UNREACHABLE.into(), "NoExecute".into())
            ]
        );
    }

    #[test]
    fn taints_follow_conditions_reported_by_the_kubelet() {
        let cases = [
            ("True", false, vec![]),
            (
                "False",
                false,
                vec![
                    (key::NOT_READY, "NoSchedule"),
                    (key::NOT_READY, "NoExecute"),
                ],
            ),
            ("True", true, vec![(key::UNSCHEDULABLE, "NoSchedule")]),
        ];
        for (ready, cordoned, expected) in cases {
            let mut n = reporting(t(100), ready);
            n.spec.as_mut().unwrap().unschedulable = Some(cordoned);
            let d = monitor(&n, None, t(101), &NodeLifecycleConfig::default());
            let taints: Vec<(String, String)> = d
                .taints
                .unwrap_or_default()
                .into_iter()
                .map(|t| (t.key, t.effect))
                .collect();
            let expected: Vec<(String, String)> = expected
                .into_iter()
                .map(|(k, e)| (k.to_string(), e.to_string()))
                .collect();
            assert_eq!(taints, expected, "Ready={ready} cordoned={cordoned}");
        }
        // Recovery removes the managed taints and keeps the others.
        let mut n = reporting(t(100), "True");
        n.spec.as_mut().unwrap().taints = Some(vec![
            taints::taint(key::UNREACHABLE, "NoExecute"),
            taints::taint(key::CONTROL_PLANE, "NoSchedule"),
        ]);
        let d = monitor(&n, None, t(101), &NodeLifecycleConfig::default());
        let keys: Vec<String> = d.taints.unwrap().into_iter().map(|t| t.key).collect();
        assert_eq!(keys, [key::CONTROL_PLANE]);
    }

    #[test]
    fn a_node_that_never_reported_gets_the_startup_grace_period() {
        let mut n = node("w-1").build();
        n.metadata.creation_timestamp = Some(Time(t(0)));
        let config = NodeLifecycleConfig::default();
        assert!(monitor(&n, None, t(60), &config).conditions.is_none());
        let conditions = monitor(&n, None, t(61), &config).conditions.unwrap();
        assert_eq!(
            conditions[0].reason.as_deref(),
            Some("NodeStatusNeverUpdated")
        );
    }

    #[test]
    fn pods_are_marked_not_ready_and_evicted_unless_they_tolerate() {
        let p = pod("p").on("w-1").ready_since(t(0)).build();
        let status = mark_pod_not_ready(&p, t(5)).unwrap();
        let ready = &status.conditions.unwrap()[0];
        assert_eq!(
            (ready.status.as_str(), ready.last_transition_time.clone()),
            ("False", Some(Time(t(5))))
        );
        assert!(mark_pod_not_ready(&pod("q").build(), t(5)).is_none());

        let mut n = node("w-1").build();
        n.spec.as_mut().unwrap().taints = Some(vec![Taint {
            time_added: Some(Time(t(100))),
            ..taints::taint(key::UNREACHABLE, "NoExecute")
        }]);
        let plain = pod("plain").on("w-1").build();
        let five_minutes = pod("default-tolerations")
            .on("w-1")
            .tolerate(Toleration {
                toleration_seconds: Some(300),
                ..taints::exists_toleration(key::UNREACHABLE, "NoExecute")
            })
            .build();
        let daemon = pod("daemon")
            .on("w-1")
            .tolerate(taints::exists_toleration(key::UNREACHABLE, "NoExecute"))
            .build();
        let pods = [&plain, &five_minutes, &daemon];
        let (evict, next) = pods_to_evict(&n, &pods, t(101));
        let names: Vec<&str> = evict
            .iter()
            .map(|p| p.metadata.name.as_deref().unwrap())
            .collect();
        assert_eq!(names, ["plain"]);
        assert_eq!(next, Some(t(400)));
        let (evict, _) = pods_to_evict(&n, &pods, t(400));
        assert_eq!(evict.len(), 2);
    }
}
