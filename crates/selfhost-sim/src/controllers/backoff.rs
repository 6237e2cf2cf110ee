//! Per-key exponential back-off with the semantics of client-go's `flowcontrol.Backoff`, which
//! both the kubelet (crash loops, image pulls) and the DaemonSet controller (failed pods) use.
//!
//! A key's first step sets the delay to `initial`; each further step doubles it up to `max`. A
//! key whose last step is older than `reset_after` (twice `max` upstream) counts as stable
//! again: it is no longer in back-off and its next step starts from `initial`. No jitter: the
//! simulator is deterministic.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::jiff::Timestamp;

use super::clock;

/// The delays of one kind of back-off.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BackoffPolicy {
    /// Delay after the first failure.
    pub initial: Duration,
    /// Upper bound of the doubling.
    pub max: Duration,
    /// Quiet time after which a key starts over from `initial`.
    pub reset_after: Duration,
}

impl BackoffPolicy {
    /// A policy with upstream's reset rule (`reset_after = 2 * max`).
    pub fn new(initial: Duration, max: Duration) -> Self {
        BackoffPolicy {
            initial,
            max,
            reset_after: max.saturating_mul(2),
        }
    }

    /// The kubelet's container restart back-off: 10 s doubling to 300 s, reset after 10 min.
    pub fn kubelet_crash_loop() -> Self {
        Self::new(Duration::from_secs(10), Duration::from_secs(300))
    }

    /// The kubelet's image pull back-off: 10 s doubling to 300 s.
    pub fn kubelet_image_pull() -> Self {
        Self::new(Duration::from_secs(10), Duration::from_secs(300))
    }

    /// The kube-controller-manager's back-off for deleting failed DaemonSet pods: 1 s to 15 min.
    pub fn daemonset_failed_pods() -> Self {
        Self::new(Duration::from_secs(1), Duration::from_secs(15 * 60))
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Entry {
    delay: Duration,
    last_update: Timestamp,
}

/// Back-off state for many keys.
#[derive(Debug, Clone)]
pub struct Backoff<K> {
    policy: BackoffPolicy,
    entries: BTreeMap<K, Entry>,
}

impl<K: Ord + Clone> Backoff<K> {
    /// Empty state under a policy.
    pub fn new(policy: BackoffPolicy) -> Self {
        Backoff {
            policy,
            entries: BTreeMap::new(),
        }
    }

    /// The policy in force.
    pub fn policy(&self) -> BackoffPolicy {
        self.policy
    }

    /// The key's current delay (zero when the key has none).
    pub fn delay(&self, key: &K) -> Duration {
        self.entries.get(key).map_or(Duration::ZERO, |e| e.delay)
    }

    fn expired(&self, entry: &Entry, event_time: Timestamp) -> bool {
        clock::elapsed(entry.last_update, event_time) > self.policy.reset_after
    }

    /// Records a failure handled at `now`: the delay starts at `initial`, or doubles, or starts
    /// over when the key was stable since its last step before `event_time`.
    pub fn step(&mut self, key: &K, event_time: Timestamp, now: Timestamp) {
        let delay = match self.entries.get(key) {
            Some(entry) if !self.expired(entry, event_time) => {
                entry.delay.saturating_mul(2).min(self.policy.max)
            }
            _ => self.policy.initial.min(self.policy.max),
        };
        self.entries.insert(
            key.clone(),
            Entry {
                delay,
                last_update: now,
            },
        );
    }

    /// Whether a failure at `event_time` is still inside the key's window at `now` (the
    /// kubelet's question: may this container restart yet?).
    pub fn in_backoff_since(&self, key: &K, event_time: Timestamp, now: Timestamp) -> bool {
        match self.entries.get(key) {
            Some(entry) if !self.expired(entry, event_time) => {
                clock::elapsed(event_time, now) < entry.delay
            }
            _ => false,
        }
    }

    /// When the window opened by a failure at `event_time` closes, if the key is in back-off.
    pub fn window_end(&self, key: &K, event_time: Timestamp) -> Option<Timestamp> {
        let entry = self.entries.get(key)?;
        (!self.expired(entry, event_time)).then(|| clock::after(event_time, entry.delay))
    }

    /// Whether `now` is inside the window opened by the key's last step (the DaemonSet
    /// controller's question: may it delete this failed pod again?).
    pub fn in_backoff_since_update(&self, key: &K, now: Timestamp) -> bool {
        match self.entries.get(key) {
            Some(entry) if !self.expired(entry, now) => {
                clock::elapsed(entry.last_update, now) < entry.delay
            }
            _ => false,
        }
    }

    /// Forgets a key.
    pub fn reset(&mut self, key: &K) {
        self.entries.remove(key);
    }

    /// Drops keys that have been stable for `reset_after` (upstream's periodic GC).
    pub fn collect_garbage(&mut self, now: Timestamp) {
        let reset_after = self.policy.reset_after;
        self.entries
            .retain(|_, e| clock::elapsed(e.last_update, now) <= reset_after);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(s: i64) -> Timestamp {
        Timestamp::from_second(s).unwrap()
    }

    #[test]
    fn delays_double_to_the_cap_and_restart_after_a_quiet_period() {
        let mut b = Backoff::new(BackoffPolicy::kubelet_crash_loop());
        let key = "c".to_string();
        let mut delays = Vec::new();
        let mut now = 0;
        for _ in 0..8 {
            b.step(&key, t(now), t(now));
            delays.push(b.delay(&key).as_secs());
            now += 1;
        }
        assert_eq!(delays, [10, 20, 40, 80, 160, 300, 300, 300]);
        // Stable for more than 10 minutes since the last step: starts over.
        b.step(&key, t(now + 601), t(now + 601));
        assert_eq!(b.delay(&key).as_secs(), 10);
    }

    #[test]
    fn windows_are_measured_from_the_event_or_the_last_update() {
        let mut b = Backoff::new(BackoffPolicy::kubelet_crash_loop());
        let key = 1u8;
        assert!(
            !b.in_backoff_since(&key, t(0), t(0)),
            "no entry, no back-off"
        );
        b.step(&key, t(0), t(0));
        assert!(b.in_backoff_since(&key, t(5), t(14)));
        assert!(!b.in_backoff_since(&key, t(5), t(15)));
        assert_eq!(b.window_end(&key, t(5)), Some(t(15)));
        assert!(b.in_backoff_since_update(&key, t(9)));
        assert!(!b.in_backoff_since_update(&key, t(10)));
        // An event long after the last step is outside any window.
        assert!(!b.in_backoff_since(&key, t(700), t(700)));
        b.collect_garbage(t(601));
        assert_eq!(b.delay(&key), Duration::ZERO);
    }
}
