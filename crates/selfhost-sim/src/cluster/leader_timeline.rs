//! The availability recorder's leadership timeline: who acted for the controller-manager and
//! the scheduler from which moment on, as the self-hosting model decided it. Tests ask it how
//! long a role went without a leader — the gap a hand-over costs (about one lease duration
//! when the old leader's Lease has to expire).

use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use k8s_openapi::jiff::Timestamp;
use tokio::time::Instant;

use super::model::{Leadership, Role};

/// Who acted for a role from some moment on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaderSample {
    /// When (monotonic, comparable with `Instant::now()` in tests).
    pub at: Instant,
    /// When (wall clock).
    pub time: Timestamp,
    /// The role.
    pub role: Role,
    /// Who acted: [`Leadership::Vacant`] is a leaderless stretch.
    pub leadership: Leadership,
}

/// The samples, shared by the recorder's clones.
#[derive(Debug, Clone, Default)]
pub(crate) struct LeaderTimeline {
    samples: Arc<Mutex<Vec<LeaderSample>>>,
}

impl LeaderTimeline {
    fn lock(&self) -> MutexGuard<'_, Vec<LeaderSample>> {
        self.samples.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Records who acts for `role` if it changed.
    pub(crate) fn record(&self, role: Role, leadership: &Leadership) {
        let mut samples = self.lock();
        let last = samples.iter().rev().find(|s| s.role == role);
        if last.is_some_and(|s| s.leadership == *leadership) {
            return;
        }
        samples.push(LeaderSample {
            at: Instant::now(),
            time: Timestamp::now(),
            role,
            leadership: leadership.clone(),
        });
    }

    /// Every sample of `role` so far, oldest first.
    pub(crate) fn samples(&self, role: Role) -> Vec<LeaderSample> {
        let samples = self.lock();
        samples.iter().filter(|s| s.role == role).cloned().collect()
    }

    /// The intervals within `[from, to]` during which nobody acted for `role` (before the
    /// first sample the model was not deciding yet, which counts as acting: the controllers
    /// run ungated while a cluster bootstraps).
    pub(crate) fn leaderless_intervals(
        &self,
        role: Role,
        from: Instant,
        to: Instant,
    ) -> Vec<(Instant, Instant)> {
        let samples = self.samples(role);
        let mut out = Vec::new();
        let mut vacant_since = match samples.iter().rev().find(|s| s.at <= from) {
            Some(s) if s.leadership == Leadership::Vacant => Some(from),
            _ => None,
        };
        for s in samples.iter().filter(|s| s.at > from && s.at < to) {
            let vacant = s.leadership == Leadership::Vacant;
            match (vacant_since, vacant) {
                (Some(since), false) => {
                    out.push((since, s.at));
                    vacant_since = None;
                }
                (None, true) => vacant_since = Some(s.at),
                _ => {}
            }
        }
        if let Some(since) = vacant_since
            && since < to
        {
            out.push((since, to));
        }
        out
    }

    /// The longest stretch without a leader for `role` in `[from, to]`.
    pub(crate) fn longest_leaderless(&self, role: Role, from: Instant, to: Instant) -> Duration {
        self.leaderless_intervals(role, from, to)
            .iter()
            .map(|(a, b)| b.duration_since(*a))
            .max()
            .unwrap_or_default()
    }

    /// The total time without a leader for `role` in `[from, to]`.
    pub(crate) fn total_leaderless(&self, role: Role, from: Instant, to: Instant) -> Duration {
        self.leaderless_intervals(role, from, to)
            .iter()
            .map(|(a, b)| b.duration_since(*a))
            .sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::model::ProcessRef;
    use crate::controllers::kubelet::PodRef;

    fn held(identity: &str) -> Leadership {
        Leadership::Held(ProcessRef {
            node: "cp-1".into(),
            pod: PodRef {
                namespace: "kube-system".into(),
                name: "kube-controller-manager-cp-1".into(),
                uid: identity.into(),
            },
            container: "kube-controller-manager".into(),
            process: None,
            identity: Some(identity.into()),
        })
    }

    #[tokio::test(start_paused = true)]
    async fn leaderless_intervals_are_per_role_and_cover_the_window() {
        let r = LeaderTimeline::default();
        let cm = Role::ControllerManager;
        let t0 = Instant::now();
        r.record(cm, &Leadership::Ungated);
        r.record(Role::Scheduler, &Leadership::Ungated);
        tokio::time::advance(Duration::from_secs(1)).await;
        r.record(cm, &held("a"));
        r.record(cm, &held("a"));
        tokio::time::advance(Duration::from_secs(1)).await;
        r.record(cm, &Leadership::Vacant);
        r.record(Role::Scheduler, &Leadership::Vacant);
        tokio::time::advance(Duration::from_secs(15)).await;
        r.record(cm, &held("b"));
        tokio::time::advance(Duration::from_secs(2)).await;
        r.record(cm, &Leadership::Vacant);
        tokio::time::advance(Duration::from_secs(3)).await;
        let end = Instant::now();
        let secs = |d: Duration| d.as_secs_f64().round() as u64;

        assert_eq!(r.samples(cm).len(), 5, "repeats are not samples");
        assert_eq!(r.leaderless_intervals(cm, t0, end).len(), 2);
        assert_eq!(secs(r.longest_leaderless(cm, t0, end)), 15);
        assert_eq!(secs(r.total_leaderless(cm, t0, end)), 18);
        let during_b = t0 + Duration::from_millis(18_000);
        assert_eq!(
            r.leaderless_intervals(cm, during_b, during_b + Duration::from_millis(500)),
            []
        );
        let in_gap = t0 + Duration::from_secs(5);
        assert_eq!(
            r.leaderless_intervals(cm, in_gap, in_gap + Duration::from_secs(1)),
            [(in_gap, in_gap + Duration::from_secs(1))],
            "a window inside a gap is all gap"
        );
        assert_eq!(secs(r.longest_leaderless(Role::Scheduler, t0, end)), 20);
    }
}
