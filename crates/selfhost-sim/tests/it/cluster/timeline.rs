//! A test-side record of pods as a kube-rs watch delivers them: the state after every event,
//! so a test can ask what was true at every moment of a rollout.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use futures::StreamExt;
use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use kube::runtime::watcher::{self, Event};
use tokio::task::JoinHandle;
use tokio::time::Instant;

use super::DEADLINE;

type States = Arc<Mutex<Vec<(Instant, Vec<Pod>)>>>;

/// Every state of the selected pods, one per watch event.
pub struct PodTimeline {
    states: States,
    task: JoinHandle<()>,
}

impl PodTimeline {
    /// Starts watching; returns once the initial list is in.
    pub async fn start(api: Api<Pod>, selector: &str) -> PodTimeline {
        let states: States = Arc::default();
        let (ready_tx, ready_rx) = tokio::sync::oneshot::channel();
        let config = watcher::Config::default().labels(selector);
        let task = {
            let states = states.clone();
            tokio::spawn(async move {
                let mut ready = Some(ready_tx);
                // States are recorded from the end of the initial list on (a half-listed
                // state is no state of the cluster).
                let mut listed = false;
                let mut pods: BTreeMap<String, Pod> = BTreeMap::new();
                let mut stream = watcher::watcher(api, config).boxed();
                while let Some(event) = stream.next().await {
                    match event {
                        Ok(Event::Apply(p) | Event::InitApply(p)) => {
                            pods.insert(p.metadata.uid.clone().unwrap_or_default(), p);
                        }
                        Ok(Event::Delete(p)) => {
                            pods.remove(&p.metadata.uid.clone().unwrap_or_default());
                        }
                        Ok(Event::Init) => {
                            listed = false;
                            pods.clear();
                        }
                        Ok(Event::InitDone) => {
                            listed = true;
                            if let Some(tx) = ready.take() {
                                let _ = tx.send(());
                            }
                        }
                        Err(_) => continue,
                    }
                    if !listed {
                        continue;
                    }
                    let state = pods.values().cloned().collect();
                    states.lock().unwrap().push((Instant::now(), state));
                }
            })
        };
        tokio::time::timeout(DEADLINE, ready_rx)
            .await
            .expect("the pod watch starts")
            .expect("the pod watch starts");
        PodTimeline { states, task }
    }

    /// Every recorded state.
    pub fn states(&self) -> Vec<(Instant, Vec<Pod>)> {
        self.states.lock().unwrap().clone()
    }

    /// The largest value `f` took over all states.
    pub fn max_of(&self, f: impl Fn(&[Pod]) -> usize) -> usize {
        self.states
            .lock()
            .unwrap()
            .iter()
            .map(|(_, s)| f(s))
            .max()
            .unwrap_or(0)
    }
}

impl Drop for PodTimeline {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Whether a pod is Ready and not being deleted.
pub fn serving(pod: &Pod) -> bool {
    pod.metadata.deletion_timestamp.is_none()
        && pod
            .status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

/// The node a pod is bound to (empty when pending).
pub fn node_of(pod: &Pod) -> String {
    pod.spec
        .as_ref()
        .and_then(|s| s.node_name.clone())
        .unwrap_or_default()
}

/// How many of `nodes` have no serving pod in `pods`.
pub fn nodes_without_serving_pod(nodes: &[&str], pods: &[Pod]) -> usize {
    nodes
        .iter()
        .filter(|n| !pods.iter().any(|p| node_of(p) == **n && serving(p)))
        .count()
}

/// The image of a pod's first container.
pub fn image_of(pod: &Pod) -> String {
    pod.spec
        .as_ref()
        .and_then(|s| s.containers.first())
        .and_then(|c| c.image.clone())
        .unwrap_or_default()
}
