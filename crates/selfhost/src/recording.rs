//! Recording a run for the upgrade report: a watch of the control-plane pods in kube-system
//! (the real DaemonSets' and the backups') turned into the report's timeline as they change,
//! optionally the API's health as the engine's own probe sees it, and the engine's events as
//! markers. Only names, phases and readiness are kept: nothing from a pod's spec, and no
//! Secret is ever read.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::jiff::Timestamp;
use kube::Api;
use kube::runtime::{WatchStreamExt, watcher};
use selfhost_core::Component;
use selfhost_core::component::NAMESPACE;
use selfhost_core::report::{
    Availability, AvailabilitySource, Lane, Marker, PodChange, PodOwner, PodState, ProbeFailure,
    ProbeKind, TimelineBuilder,
};
use tokio::task::JoinHandle;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::events::{Event, Stamped};
use crate::health;

/// How often the health of the API is probed when the recording does it.
pub const HEALTH_INTERVAL: Duration = Duration::from_millis(250);

/// What the recording saw.
#[derive(Debug, Clone, PartialEq)]
pub struct Recorded {
    /// When the recording started (wall clock).
    pub started: Timestamp,
    /// Its length in seconds.
    pub duration: f64,
    /// One lane per node and component.
    pub lanes: Vec<Lane>,
    /// The API's health as the engine's probe saw it, when the recording probed it.
    pub health: Option<Availability>,
}

#[derive(Debug, Default)]
struct Health {
    attempts: u64,
    failures: Vec<ProbeFailure>,
    outages: Vec<(f64, f64)>,
    /// The start of the failures going on now.
    failing_since: Option<f64>,
}

#[derive(Debug, Default)]
struct Shared {
    timeline: TimelineBuilder,
    /// Per component, the revision hashes its real pods ran when the first listing came.
    original: BTreeMap<Component, BTreeSet<String>>,
    /// Whether the first listing is complete (after it, unseen hashes are new).
    listed: bool,
    /// Pods present now, with what the timeline knows of them.
    present: BTreeMap<String, (String, PodOwner, selfhost_core::report::TemplateKind)>,
    /// Pods seen in the listing going on (a watch restarted after the API came back).
    relisted: Option<BTreeSet<String>>,
    health: Option<Health>,
}

/// A recording in progress. Dropping it stops it.
#[derive(Debug)]
pub struct Recording {
    started: Instant,
    wall: Timestamp,
    shared: Arc<Mutex<Shared>>,
    stop: CancellationToken,
    tasks: Vec<JoinHandle<()>>,
}

fn lock(shared: &Mutex<Shared>) -> MutexGuard<'_, Shared> {
    shared.lock().unwrap_or_else(|e| e.into_inner())
}

impl Recording {
    /// Starts watching the control-plane pods through `api`, and, given a probe client,
    /// probing `/readyz` every [`HEALTH_INTERVAL`] as the engine does.
    pub fn start(api: &kube::Client, health_probe: Option<kube::Client>) -> Recording {
        let started = Instant::now();
        let shared = Arc::new(Mutex::new(Shared {
            health: health_probe.as_ref().map(|_| Health::default()),
            ..Shared::default()
        }));
        let stop = CancellationToken::new();
        let mut tasks = vec![tokio::spawn(watch_pods(
            Api::namespaced(api.clone(), NAMESPACE),
            shared.clone(),
            started,
            stop.clone(),
        ))];
        if let Some(probe) = health_probe {
            tasks.push(tokio::spawn(probe_health(
                probe,
                shared.clone(),
                started,
                stop.clone(),
            )));
        }
        Recording {
            started,
            wall: Timestamp::now(),
            shared,
            stop,
            tasks,
        }
    }

    /// Seconds since the recording started.
    pub fn elapsed(&self) -> f64 {
        self.started.elapsed().as_secs_f64()
    }

    /// When the recording started, to place other measurements on its time axis.
    pub fn started(&self) -> Instant {
        self.started
    }

    /// Stops watching and probing, and returns the timeline.
    pub async fn stop(mut self) -> Recorded {
        let duration = self.elapsed();
        self.stop.cancel();
        for task in self.tasks.drain(..) {
            let _ = task.await;
        }
        let mut shared = lock(&self.shared);
        let timeline = std::mem::take(&mut shared.timeline);
        let health = shared.health.take().map(|mut h| {
            if let Some(since) = h.failing_since.take() {
                h.outages.push((since, duration));
            }
            Availability {
                source: AvailabilitySource::EngineHealth {
                    every_ms: u64::try_from(HEALTH_INTERVAL.as_millis()).unwrap_or(u64::MAX),
                },
                attempts: h.attempts,
                failures: h.failures,
                outages: h.outages,
            }
        });
        Recorded {
            started: self.wall,
            duration,
            lanes: timeline.finish(duration),
            health,
        }
    }
}

impl Drop for Recording {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

/// The engine's events as the report's markers: each step the state machine moved to and
/// each component's end. `offset` is the recording's time when the engine's clock started.
pub fn markers(events: &[Stamped], offset: f64) -> Vec<Marker> {
    events
        .iter()
        .filter_map(|stamped| {
            let at = stamped.at + offset;
            match &stamped.event {
                // The state machine's "done" is told by the component's end.
                Event::Step { step, .. } if step == "done" => None,
                Event::Step {
                    component,
                    step,
                    description,
                } => Some(Marker {
                    at,
                    component: *component,
                    step: step.clone(),
                    detail: description.clone(),
                    finish: false,
                }),
                Event::ComponentFinished {
                    component,
                    outcome,
                    message,
                    ..
                } => Some(Marker {
                    at,
                    component: *component,
                    step: outcome.clone(),
                    detail: message.clone(),
                    finish: true,
                }),
                _ => None,
            }
        })
        .collect()
}

/// The node a pod runs on, or is meant for: a DaemonSet pod names its node in its node
/// affinity until the scheduler binds it.
fn node_of(pod: &Pod) -> String {
    let spec = pod.spec.as_ref();
    if let Some(node) = spec.and_then(|s| s.node_name.clone()) {
        return node;
    }
    spec.and_then(|s| s.affinity.as_ref())
        .and_then(|a| a.node_affinity.as_ref())
        .and_then(|a| {
            a.required_during_scheduling_ignored_during_execution
                .as_ref()
        })
        .and_then(|r| {
            r.node_selector_terms.iter().find_map(|term| {
                term.match_fields
                    .iter()
                    .flatten()
                    .find(|f| f.key == "metadata.name")
                    .and_then(|f| f.values.as_ref()?.first().cloned())
            })
        })
        .unwrap_or_default()
}

fn state_of(pod: &Pod) -> PodState {
    let status = pod.status.as_ref();
    PodState {
        phase: status
            .and_then(|s| s.phase.clone())
            .unwrap_or_else(|| "Pending".into()),
        ready: status
            .and_then(|s| s.conditions.as_ref())
            .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True")),
        terminating: pod.metadata.deletion_timestamp.is_some(),
    }
}

impl Shared {
    fn seen(&mut self, pod: &Pod, at: f64) {
        let Some(name) = pod.metadata.name.clone() else {
            return;
        };
        let empty = BTreeMap::new();
        let labels = pod.metadata.labels.as_ref().unwrap_or(&empty);
        let Some(owner) = PodOwner::of(labels) else {
            return;
        };
        if !self.listed
            && let (PodOwner::Real(component), Some(hash)) = (
                owner,
                labels.get(selfhost_core::report::REVISION_HASH_LABEL),
            )
        {
            self.original
                .entry(component)
                .or_default()
                .insert(hash.clone());
        }
        if let Some(relisted) = &mut self.relisted {
            relisted.insert(name.clone());
        }
        // A pod keeps the template it was first seen with.
        let kind = match self.present.get(&name) {
            Some((_, _, kind)) => *kind,
            None => owner.template(
                labels,
                self.original
                    .get(&owner.component())
                    .unwrap_or(&BTreeSet::new()),
            ),
        };
        let node = node_of(pod);
        self.present
            .insert(name.clone(), (node.clone(), owner, kind));
        self.timeline.observe(PodChange {
            at,
            node,
            component: owner.component(),
            pod: name,
            kind,
            state: Some(state_of(pod)),
        });
    }

    fn gone(&mut self, name: &str, at: f64) {
        if let Some((node, owner, kind)) = self.present.remove(name) {
            self.timeline.observe(PodChange {
                at,
                node,
                component: owner.component(),
                pod: name.to_string(),
                kind,
                state: None,
            });
        }
    }
}

async fn watch_pods(
    api: Api<Pod>,
    shared: Arc<Mutex<Shared>>,
    started: Instant,
    stop: CancellationToken,
) {
    // The watch survives the API server handing over: it backs off, lists again and goes on.
    let mut stream = watcher(api, watcher::Config::default())
        .default_backoff()
        .boxed();
    loop {
        let event = tokio::select! {
            _ = stop.cancelled() => return,
            event = stream.next() => event,
        };
        let Some(event) = event else { return };
        let at = started.elapsed().as_secs_f64();
        let mut shared = lock(&shared);
        match event {
            Ok(watcher::Event::Init) => shared.relisted = Some(BTreeSet::new()),
            Ok(watcher::Event::InitApply(pod) | watcher::Event::Apply(pod)) => {
                shared.seen(&pod, at);
            }
            Ok(watcher::Event::InitDone) => {
                shared.listed = true;
                // Pods that went away while the watch was cut are gone now.
                let relisted = shared.relisted.take().unwrap_or_default();
                let vanished: Vec<String> = shared
                    .present
                    .keys()
                    .filter(|name| !relisted.contains(*name))
                    .cloned()
                    .collect();
                for name in vanished {
                    shared.gone(&name, at);
                }
            }
            Ok(watcher::Event::Delete(pod)) => {
                if let Some(name) = &pod.metadata.name {
                    shared.gone(name, at);
                }
            }
            Err(e) => tracing::debug!(error = %e, "report: the pod watch restarts"),
        }
    }
}

async fn probe_health(
    probe: kube::Client,
    shared: Arc<Mutex<Shared>>,
    started: Instant,
    stop: CancellationToken,
) {
    let mut ticks = tokio::time::interval(HEALTH_INTERVAL);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = stop.cancelled() => return,
            _ = ticks.tick() => {}
        }
        let at = started.elapsed().as_secs_f64();
        let result = tokio::select! {
            _ = stop.cancelled() => return,
            result = health::readyz(&probe) => result,
        };
        let mut shared = lock(&shared);
        let Some(health) = shared.health.as_mut() else {
            return;
        };
        health.attempts += 1;
        if result.healthy {
            if let Some(since) = health.failing_since.take() {
                health.outages.push((since, at));
            }
        } else {
            health.failing_since.get_or_insert(at);
            health.failures.push(ProbeFailure {
                at,
                kind: ProbeKind::Health,
                error: result.problem.unwrap_or_else(|| "not ready".into()),
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stamped(at: f64, event: Event) -> Stamped {
        Stamped { at, event }
    }

    #[test]
    fn steps_and_ends_become_markers_on_the_recordings_clock() {
        let c = Component::ApiServer;
        let events = vec![
            stamped(0.0, Event::ComponentStarted { component: c }),
            stamped(
                0.1,
                Event::Step {
                    component: c,
                    step: "create-backup".into(),
                    description: "copy".into(),
                },
            ),
            stamped(
                0.2,
                Event::Waiting {
                    component: c,
                    step: "wait".into(),
                    condition: "ready".into(),
                    pending: vec![],
                },
            ),
            stamped(
                0.9,
                Event::Step {
                    component: c,
                    step: "done".into(),
                    description: "done".into(),
                },
            ),
            stamped(
                1.0,
                Event::ComponentFinished {
                    component: c,
                    outcome: "done".into(),
                    message: "on v1.34.0".into(),
                    elapsed_seconds: 1.0,
                },
            ),
        ];
        let got: Vec<_> = markers(&events, 2.0)
            .into_iter()
            .map(|m| (m.at, m.step, m.finish))
            .collect();
        assert_eq!(
            got,
            vec![
                (2.1, "create-backup".to_string(), false),
                (3.0, "done".to_string(), true)
            ]
        );
    }

    #[test]
    fn a_daemonset_pod_is_placed_on_its_node_before_it_is_bound() {
        let pod: Pod = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "p"},
            "spec": {
                "containers": [],
                "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [{"matchFields": [
                        {"key": "metadata.name", "operator": "In", "values": ["cp-2"]}
                    ]}]
                }}}
            }
        }))
        .expect("a pod");
        assert_eq!(node_of(&pod), "cp-2");
        let mut bound = pod.clone();
        if let Some(spec) = bound.spec.as_mut() {
            spec.node_name = Some("cp-3".into());
        }
        assert_eq!(node_of(&bound), "cp-3");
        assert_eq!(
            state_of(&pod),
            PodState {
                phase: "Pending".into(),
                ready: false,
                terminating: false
            }
        );
    }
}
