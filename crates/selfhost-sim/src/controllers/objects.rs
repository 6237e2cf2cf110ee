//! Small facts about API objects that several controllers need: readiness and availability of
//! pods, controller references, conditions, and the well-known label and annotation keys.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Pod, PodCondition};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use k8s_openapi::jiff::Timestamp;

use super::clock;

/// Label a DaemonSet puts on its pods and ControllerRevisions: the hash of the pod template.
pub const CONTROLLER_REVISION_HASH_LABEL: &str = "controller-revision-hash";
/// Label carrying the DaemonSet's template generation (kept by upstream for compatibility).
pub const POD_TEMPLATE_GENERATION_LABEL: &str = "pod-template-generation";
/// DaemonSet annotation the apiserver maintains: `1` on create, `+1` on every template change.
pub const TEMPLATE_GENERATION_ANNOTATION: &str = "deprecated.daemonset.template.generation";

/// Pod condition types, as the kubelet and scheduler write them.
pub mod condition {
    /// The pod is bound to a node (or why it cannot be).
    pub const POD_SCHEDULED: &str = "PodScheduled";
    /// The sandbox and network exist; containers can start.
    pub const POD_READY_TO_START_CONTAINERS: &str = "PodReadyToStartContainers";
    /// All init containers have completed.
    pub const INITIALIZED: &str = "Initialized";
    /// Every container is ready.
    pub const CONTAINERS_READY: &str = "ContainersReady";
    /// The pod is ready to serve (containers ready and readiness gates passed).
    pub const READY: &str = "Ready";
}

/// Pod phases.
pub mod phase {
    /// Accepted, but not every container has started yet.
    pub const PENDING: &str = "Pending";
    /// Bound and at least one container is running or restarting.
    pub const RUNNING: &str = "Running";
    /// Every container terminated successfully and will not restart.
    pub const SUCCEEDED: &str = "Succeeded";
    /// Every container terminated and at least one failed.
    pub const FAILED: &str = "Failed";
}

static NO_LABELS: BTreeMap<String, String> = BTreeMap::new();

/// The object's labels (empty when unset).
pub fn labels(meta: &ObjectMeta) -> &BTreeMap<String, String> {
    meta.labels.as_ref().unwrap_or(&NO_LABELS)
}

/// The object's annotations (empty when unset).
pub fn annotations(meta: &ObjectMeta) -> &BTreeMap<String, String> {
    meta.annotations.as_ref().unwrap_or(&NO_LABELS)
}

/// The owner reference marked `controller: true`, if any.
pub fn controller_of(meta: &ObjectMeta) -> Option<&OwnerReference> {
    meta.owner_references
        .as_deref()
        .unwrap_or_default()
        .iter()
        .find(|r| r.controller == Some(true))
}

/// A controller reference as controllers set it on what they create: `controller` and
/// `blockOwnerDeletion` both true, so foreground deletion of the owner waits for the dependent.
pub fn controller_reference(api_version: &str, kind: &str, owner: &ObjectMeta) -> OwnerReference {
    OwnerReference {
        api_version: api_version.to_string(),
        kind: kind.to_string(),
        name: owner.name.clone().unwrap_or_default(),
        uid: owner.uid.clone().unwrap_or_default(),
        controller: Some(true),
        block_owner_deletion: Some(true),
    }
}

/// The object's creation time, if the apiserver stamped one.
pub fn created_at(meta: &ObjectMeta) -> Option<Timestamp> {
    meta.creation_timestamp.as_ref().map(|t| t.0)
}

/// Whether the object has a deletion timestamp (a Terminating pod).
pub fn is_terminating(meta: &ObjectMeta) -> bool {
    meta.deletion_timestamp.is_some()
}

/// The pod's phase (`""` when the status is empty).
pub fn pod_phase(pod: &Pod) -> &str {
    pod.status
        .as_ref()
        .and_then(|s| s.phase.as_deref())
        .unwrap_or_default()
}

/// Whether the pod reached `Succeeded` or `Failed`.
pub fn is_pod_terminal(pod: &Pod) -> bool {
    matches!(pod_phase(pod), phase::SUCCEEDED | phase::FAILED)
}

/// The pod's condition of the given type.
pub fn pod_condition<'a>(pod: &'a Pod, type_: &str) -> Option<&'a PodCondition> {
    pod.status
        .as_ref()?
        .conditions
        .as_deref()?
        .iter()
        .find(|c| c.type_ == type_)
}

/// Whether the pod's `Ready` condition is `True`.
pub fn is_pod_ready(pod: &Pod) -> bool {
    pod_condition(pod, condition::READY).is_some_and(|c| c.status == "True")
}

/// Whether the pod has been Ready for longer than `min_ready_seconds` at `now` (strictly, as
/// upstream compares), or is Ready at all when `min_ready_seconds` is zero.
pub fn is_pod_available(pod: &Pod, min_ready_seconds: i32, now: Timestamp) -> bool {
    let Some(ready) = pod_condition(pod, condition::READY).filter(|c| c.status == "True") else {
        return false;
    };
    if min_ready_seconds <= 0 {
        return true;
    }
    let min_ready = Duration::from_secs(u64::from(min_ready_seconds.unsigned_abs()));
    ready
        .last_transition_time
        .as_ref()
        .is_some_and(|since| clock::after(since.0, min_ready) < now)
}

/// Sets a condition, keeping `lastTransitionTime` when the status does not change (as the
/// kubelet and scheduler do). Returns whether anything changed.
pub fn set_condition(
    conditions: &mut Vec<PodCondition>,
    type_: &str,
    status: bool,
    reason: Option<&str>,
    message: Option<&str>,
    now: Timestamp,
) -> bool {
    let status = if status { "True" } else { "False" };
    let reason = reason.map(str::to_string);
    let message = message.map(str::to_string);
    if let Some(existing) = conditions.iter_mut().find(|c| c.type_ == type_) {
        if existing.status == status && existing.reason == reason && existing.message == message {
            return false;
        }
        if existing.status != status {
            existing.last_transition_time = Some(clock::time(now));
        }
        existing.status = status.to_string();
        existing.reason = reason;
        existing.message = message;
        return true;
    }
    conditions.push(PodCondition {
        type_: type_.to_string(),
        status: status.to_string(),
        reason,
        message,
        last_transition_time: Some(clock::time(now)),
        ..PodCondition::default()
    });
    true
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::PodStatus;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

    fn ready_pod(since: i64) -> Pod {
        Pod {
            status: Some(PodStatus {
                conditions: Some(vec![PodCondition {
                    type_: "Ready".into(),
                    status: "True".into(),
                    last_transition_time: Some(Time(Timestamp::from_second(since).unwrap())),
                    ..PodCondition::default()
                }]),
                ..PodStatus::default()
            }),
            ..Pod::default()
        }
    }

    #[test]
    fn availability_needs_strictly_more_than_min_ready_seconds() {
        let pod = ready_pod(100);
        let at = |s| Timestamp::from_second(s).unwrap();
        let cases = [
            (0, 100, true),
            (10, 105, false),
            (10, 110, false),
            (10, 111, true),
        ];
        for (min_ready, now, available) in cases {
            assert_eq!(
                is_pod_available(&pod, min_ready, at(now)),
                available,
                "minReadySeconds={min_ready} now={now}"
            );
        }
        assert!(!is_pod_available(&Pod::default(), 0, at(100)));
    }

    #[test]
    fn set_condition_keeps_transition_time_when_status_is_unchanged() {
        let t = |s| Timestamp::from_second(s).unwrap();
        let mut conditions = Vec::new();
        assert!(set_condition(
            &mut conditions,
            "Ready",
            false,
            Some("A"),
            None,
            t(1)
        ));
        assert!(set_condition(
            &mut conditions,
            "Ready",
            false,
            Some("B"),
            None,
            t(2)
        ));
        assert_eq!(conditions[0].last_transition_time, Some(Time(t(1))));
        assert!(set_condition(
            &mut conditions,
            "Ready",
            true,
            None,
            None,
            t(3)
        ));
        assert_eq!(conditions[0].last_transition_time, Some(Time(t(3))));
        assert!(!set_condition(
            &mut conditions,
            "Ready",
            true,
            None,
            None,
            t(4)
        ));
    }
}
