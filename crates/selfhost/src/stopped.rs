//! Remembering the controller-manager and scheduler processes the engine saw stop.
//!
//! Whether a leader Lease's holder is gone can depend on a process whose pod has already left
//! the API: the kubelet reports a stopped container and removes a deleted pod moments later
//! (in the same instant, in the simulator), and a snapshot then shows nothing of it. This
//! memory keeps, for the length of one run, every process the engine saw running and then saw
//! stopped or without its pod ([`StoppedProcess`]); `pivot/leader.rs` says what it is used
//! for. Like the identity tracker, a missing entry only makes the engine more cautious: a
//! process it never saw stop is not in the list, and only running processes decide whether a
//! Lease may be deleted.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::jiff::Timestamp;
use selfhost_core::Component;
use selfhost_core::observation::{ContainerState, PodObservation, StoppedProcess};

/// One process the engine saw: a pod's container as started at one moment.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct ProcessKey {
    pod_uid: String,
    started_at: Timestamp,
}

#[derive(Debug, Clone)]
struct Seen {
    component: Component,
    pod: String,
    node: String,
    stopped_by: Option<Timestamp>,
}

/// The processes of the components' pods seen during the run, and when each was first seen
/// stopped.
#[derive(Debug, Default)]
pub struct StopTracker {
    processes: BTreeMap<ProcessKey, Seen>,
}

impl StopTracker {
    /// Records what one observation of `component` shows at `now` (engine clock): `pods`, its
    /// real and backup DaemonSets' pods, and `present`, the uids of every pod in the watched
    /// caches (a pod absent from them has left the API). Returns the component's processes
    /// seen stopped so far.
    pub fn record<'a>(
        &mut self,
        component: Component,
        pods: impl IntoIterator<Item = &'a PodObservation>,
        present: &BTreeSet<&str>,
        now: Timestamp,
    ) -> Vec<StoppedProcess> {
        for pod in pods {
            let (Some(uid), Some(node)) = (pod.uid.as_deref(), pod.node.as_deref()) else {
                continue;
            };
            let state = pod.main_container(component.name()).map(|c| &c.state);
            let running = match state {
                Some(ContainerState::Running {
                    started_at: Some(started_at),
                }) => Some(*started_at),
                Some(ContainerState::Waiting { .. } | ContainerState::Terminated { .. }) => None,
                // Nothing known: neither started nor stopped.
                _ => continue,
            };
            // Any other process of the pod (before a container restart) has stopped.
            for (key, seen) in self.processes.iter_mut() {
                if key.pod_uid == uid && Some(key.started_at) != running {
                    seen.stopped_by.get_or_insert(now);
                }
            }
            if let Some(started_at) = running {
                let key = ProcessKey {
                    pod_uid: uid.to_string(),
                    started_at,
                };
                self.processes.entry(key).or_insert_with(|| Seen {
                    component,
                    pod: pod.name.clone(),
                    node: node.to_string(),
                    stopped_by: None,
                });
            }
        }
        for (key, seen) in self.processes.iter_mut() {
            if seen.component == component && !present.contains(key.pod_uid.as_str()) {
                seen.stopped_by.get_or_insert(now);
            }
        }
        self.processes
            .iter()
            .filter(|(_, seen)| seen.component == component)
            .filter_map(|(key, seen)| {
                Some(StoppedProcess {
                    pod: seen.pod.clone(),
                    pod_uid: key.pod_uid.clone(),
                    node: seen.node.clone(),
                    started_at: key.started_at,
                    stopped_by: seen.stopped_by?,
                })
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use k8s_openapi::api::core::v1::Pod;
    use serde_json::json;

    use super::*;

    fn at(seconds: i64) -> Timestamp {
        Timestamp::from_second(1_800_000_000 + seconds).unwrap()
    }

    /// A scheduler pod on cp-1 whose container is in `state` (as the kubelet writes it).
    fn pod(uid: &str, state: serde_json::Value) -> PodObservation {
        let pod: Pod = serde_json::from_value(json!({
            "metadata": {"name": format!("pod-{uid}"), "uid": uid},
            "spec": {"nodeName": "cp-1", "containers": [{"name": "kube-scheduler"}]},
            "status": {"containerStatuses": [{
                "name": "kube-scheduler", "image": "i", "imageID": "", "ready": false,
                "restartCount": 0, "state": state
            }]}
        }))
        .unwrap();
        PodObservation::from_pod(&pod)
    }

    fn running(started: i64) -> serde_json::Value {
        json!({"running": {"startedAt": at(started).to_string()}})
    }

    fn stopped() -> serde_json::Value {
        json!({"terminated": {"exitCode": 0}})
    }

    /// (what each observation shows: pods present) → the processes known stopped after it.
    #[test]
    fn a_process_counts_as_stopped_from_the_first_observation_that_shows_it_stopped_or_gone() {
        let s = Component::Scheduler;
        let mut tracker = StopTracker::default();
        let both = BTreeSet::from(["a", "b"]);
        // Both run: nothing stopped.
        let seen = tracker.record(
            s,
            &[pod("a", running(1)), pod("b", running(2))],
            &both,
            at(10),
        );
        assert!(seen.is_empty(), "{seen:?}");
        // a's container stopped: a stopped by 11.
        let seen = tracker.record(
            s,
            &[pod("a", stopped()), pod("b", running(2))],
            &both,
            at(11),
        );
        assert_eq!(seen.len(), 1);
        assert_eq!(
            (seen[0].pod_uid.as_str(), seen[0].stopped_by),
            ("a", at(11))
        );
        assert_eq!(seen[0].started_at, at(1));
        // a gone, b restarted its container: b's first process stopped by 12; a still by 11.
        let only_b = BTreeSet::from(["b"]);
        let seen = tracker.record(s, &[pod("b", running(12))], &only_b, at(12));
        let stops: Vec<(&str, Timestamp, Timestamp)> = seen
            .iter()
            .map(|p| (p.pod_uid.as_str(), p.started_at, p.stopped_by))
            .collect();
        assert_eq!(stops, vec![("a", at(1), at(11)), ("b", at(2), at(12))]);
        // Another component's observation neither sees nor stops them.
        let other = tracker.record(Component::ControllerManager, &[], &BTreeSet::new(), at(13));
        assert!(other.is_empty());
        assert_eq!(tracker.record(s, &[], &only_b, at(14)).len(), 2);
    }

    #[test]
    fn a_pod_never_seen_running_or_of_unknown_state_is_not_a_stopped_process() {
        let s = Component::Scheduler;
        let mut tracker = StopTracker::default();
        let present = BTreeSet::from(["a", "b"]);
        tracker.record(
            s,
            &[pod("a", stopped()), pod("b", json!({}))],
            &present,
            at(10),
        );
        assert!(tracker.record(s, &[], &BTreeSet::new(), at(11)).is_empty());
    }
}
