//! The availability recorder: a timeline, kept in memory, of the API going up and down as the
//! self-hosting model decides it, and of every pod's phase and readiness on every node as its
//! kubelet sees it (which goes on while the API is down). Tests ask it questions over time
//! windows: was the API ever down, for how long at most, in total, and did it come back? Who
//! led the controller-manager and the scheduler is kept alongside (see `leader_timeline`).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use k8s_openapi::jiff::Timestamp;
use tokio::sync::watch;
use tokio::time::Instant;

use super::leader_timeline::{LeaderSample, LeaderTimeline};
use super::model::{Leadership, Role};
use crate::controllers::kubelet::PodRef;

/// The API's state from some moment on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiSample {
    /// When (monotonic, comparable with `Instant::now()` in tests).
    pub at: Instant,
    /// When (wall clock).
    pub time: Timestamp,
    /// Whether it answers.
    pub up: bool,
    /// The serving apiserver pods, as `<node>/<pod>`.
    pub serving: Vec<String>,
    /// The version `/version` reports.
    pub version: Option<String>,
}

/// A pod's phase and readiness on a node from some moment on, as its kubelet sees them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodSample {
    /// When (monotonic).
    pub at: Instant,
    /// When (wall clock).
    pub time: Timestamp,
    /// The node.
    pub node: String,
    /// The pod's namespace.
    pub namespace: String,
    /// The pod's name.
    pub name: String,
    /// The pod's uid (a static pod's config hash).
    pub uid: String,
    /// `Pending`, `Running`, `Succeeded`, `Failed`, or `Removed` once the kubelet is done
    /// with it.
    pub phase: String,
    /// The Ready condition.
    pub ready: bool,
}

#[derive(Debug, Default)]
struct Timeline {
    api: Vec<ApiSample>,
    pods: Vec<PodSample>,
    last_pod: HashMap<(String, String), (String, bool)>,
}

/// The recorder (cheap to clone; clones share the timeline).
#[derive(Debug, Clone)]
pub struct AvailabilityRecorder {
    timeline: Arc<Mutex<Timeline>>,
    api_up: Arc<watch::Sender<bool>>,
    /// Who acted for the controller-manager and the scheduler (see `leader_timeline`).
    leaders: LeaderTimeline,
}

impl Default for AvailabilityRecorder {
    fn default() -> Self {
        AvailabilityRecorder {
            timeline: Arc::default(),
            api_up: Arc::new(watch::channel(false).0),
            leaders: Default::default(),
        }
    }
}

impl AvailabilityRecorder {
    fn lock(&self) -> MutexGuard<'_, Timeline> {
        self.timeline.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Records the API's state if it changed (up/down, serving set or version).
    pub(crate) fn record_api(&self, up: bool, serving: Vec<String>, version: Option<String>) {
        let mut t = self.lock();
        if t.api
            .last()
            .is_some_and(|l| l.up == up && l.serving == serving && l.version == version)
        {
            return;
        }
        t.api.push(ApiSample {
            at: Instant::now(),
            time: Timestamp::now(),
            up,
            serving,
            version,
        });
        drop(t);
        self.api_up
            .send_if_modified(|u| std::mem::replace(u, up) != up);
    }

    /// Records a pod's phase and readiness on a node if they changed.
    pub(crate) fn record_pod(&self, node: &str, pod: &PodRef, phase: &str, ready: bool) {
        let mut t = self.lock();
        let key = (node.to_string(), pod.uid.clone());
        let state = (phase.to_string(), ready);
        if t.last_pod.get(&key) == Some(&state) {
            return;
        }
        t.last_pod.insert(key, state);
        t.pods.push(PodSample {
            at: Instant::now(),
            time: Timestamp::now(),
            node: node.to_string(),
            namespace: pod.namespace.clone(),
            name: pod.name.clone(),
            uid: pod.uid.clone(),
            phase: phase.to_string(),
            ready,
        });
    }

    /// Every API sample so far, oldest first.
    pub fn api_samples(&self) -> Vec<ApiSample> {
        self.lock().api.clone()
    }

    /// Every pod sample so far, oldest first.
    pub fn pod_samples(&self) -> Vec<PodSample> {
        self.lock().pods.clone()
    }

    /// The samples of pods whose name starts with `prefix`, oldest first.
    pub fn pod_samples_named(&self, prefix: &str) -> Vec<PodSample> {
        self.lock()
            .pods
            .iter()
            .filter(|p| p.name.starts_with(prefix))
            .cloned()
            .collect()
    }

    /// Whether the API answers now (as the model decided last).
    pub fn is_api_up(&self) -> bool {
        *self.api_up.borrow()
    }

    /// Waits until the API is `up` (or not), at most `timeout`; whether it happened.
    pub async fn wait_for_api(&self, up: bool, timeout: Duration) -> bool {
        let mut rx = self.api_up.subscribe();
        tokio::time::timeout(timeout, rx.wait_for(|u| *u == up))
            .await
            .is_ok_and(|r| r.is_ok())
    }

    /// The intervals within `[from, to]` during which the API was down (before the first
    /// sample it counts as down: nothing served yet).
    pub fn down_intervals(&self, from: Instant, to: Instant) -> Vec<(Instant, Instant)> {
        let t = self.lock();
        let mut out = Vec::new();
        let mut down_since = match t.api.iter().rev().find(|s| s.at <= from) {
            Some(s) if s.up => None,
            _ => Some(from),
        };
        for s in t.api.iter().filter(|s| s.at > from && s.at < to) {
            match (down_since, s.up) {
                (Some(since), true) => {
                    out.push((since, s.at));
                    down_since = None;
                }
                (None, false) => down_since = Some(s.at),
                _ => {}
            }
        }
        if let Some(since) = down_since
            && since < to
        {
            out.push((since, to));
        }
        out
    }

    /// Whether the API was down at any moment in `[from, to]`.
    pub fn was_down(&self, from: Instant, to: Instant) -> bool {
        !self.down_intervals(from, to).is_empty()
    }

    /// The total time the API was down in `[from, to]`.
    pub fn total_down(&self, from: Instant, to: Instant) -> Duration {
        self.down_intervals(from, to)
            .iter()
            .map(|(a, b)| b.duration_since(*a))
            .sum()
    }

    /// The longest the API stayed down in `[from, to]`.
    pub fn longest_down(&self, from: Instant, to: Instant) -> Duration {
        self.down_intervals(from, to)
            .iter()
            .map(|(a, b)| b.duration_since(*a))
            .max()
            .unwrap_or_default()
    }

    /// When the API went down after `since` and never answered again up to now; `None` when
    /// it is up, or was not down after `since`.
    pub fn down_for_good_since(&self, since: Instant) -> Option<Instant> {
        let t = self.lock();
        let last = t.api.last()?;
        if last.up || last.at < since {
            return None;
        }
        Some(last.at)
    }

    /// Records who acts for `role` if it changed.
    pub(crate) fn record_leader(&self, role: Role, leadership: &Leadership) {
        self.leaders.record(role, leadership);
    }

    /// Every leadership sample of `role` so far, oldest first.
    pub fn leader_samples(&self, role: Role) -> Vec<LeaderSample> {
        self.leaders.samples(role)
    }

    /// The intervals within `[from, to]` during which nobody acted for `role` (before the
    /// first sample the model was not deciding yet, which counts as acting: the controllers
    /// run ungated while a cluster bootstraps).
    pub fn leaderless_intervals(
        &self,
        role: Role,
        from: Instant,
        to: Instant,
    ) -> Vec<(Instant, Instant)> {
        self.leaders.leaderless_intervals(role, from, to)
    }

    /// The longest stretch without a leader for `role` in `[from, to]`.
    pub fn longest_leaderless(&self, role: Role, from: Instant, to: Instant) -> Duration {
        self.leaders.longest_leaderless(role, from, to)
    }

    /// The total time without a leader for `role` in `[from, to]`.
    pub fn total_leaderless(&self, role: Role, from: Instant, to: Instant) -> Duration {
        self.leaders.total_leaderless(role, from, to)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn down_intervals_cover_the_window_and_add_up() {
        let r = AvailabilityRecorder::default();
        let t0 = Instant::now();
        r.record_api(true, vec!["cp-1/a".into()], None);
        tokio::time::advance(Duration::from_secs(1)).await;
        r.record_api(false, vec![], None);
        tokio::time::advance(Duration::from_secs(2)).await;
        r.record_api(true, vec!["cp-1/b".into()], None);
        tokio::time::advance(Duration::from_secs(1)).await;
        r.record_api(false, vec![], None);
        tokio::time::advance(Duration::from_secs(3)).await;
        let end = Instant::now();
        let secs = |d: Duration| d.as_secs_f64().round() as u64;
        assert_eq!(r.down_intervals(t0, end).len(), 2);
        assert_eq!(secs(r.total_down(t0, end)), 5);
        assert_eq!(secs(r.longest_down(t0, end)), 3);
        let middle = t0 + Duration::from_millis(3_500);
        assert!(!r.was_down(middle, t0 + Duration::from_millis(3_900)));
        assert!(r.was_down(t0, middle));
        assert_eq!(
            r.down_for_good_since(t0 + Duration::from_secs(3)),
            Some(t0 + Duration::from_secs(4))
        );
        assert!(!r.is_api_up());
        r.record_api(true, vec!["cp-1/c".into()], None);
        assert!(r.wait_for_api(true, Duration::from_millis(1)).await);
        assert_eq!(r.down_for_good_since(t0), None);
    }

    #[test]
    fn pod_samples_record_changes_only() {
        let r = AvailabilityRecorder::default();
        let pod = PodRef {
            namespace: "kube-system".into(),
            name: "self-hosted-kube-apiserver-abcde".into(),
            uid: "u1".into(),
        };
        r.record_pod("cp-1", &pod, "Pending", false);
        r.record_pod("cp-1", &pod, "Pending", false);
        r.record_pod("cp-1", &pod, "Running", false);
        r.record_pod("cp-1", &pod, "Running", true);
        let samples = r.pod_samples_named("self-hosted-kube-apiserver");
        let states: Vec<_> = samples
            .iter()
            .map(|s| (s.phase.as_str(), s.ready))
            .collect();
        assert_eq!(
            states,
            [("Pending", false), ("Running", false), ("Running", true)]
        );
        assert!(r.pod_samples_named("other").is_empty());
    }
}
