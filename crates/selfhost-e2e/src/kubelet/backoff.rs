//! The kubelet's per-container back-off, with the semantics of client-go's
//! `flowcontrol.Backoff` that it uses for crash loops and image pulls.
//!
//! The first step sets the delay to the initial value; each further step doubles it up to the
//! maximum. A key whose last step is older than twice the maximum (ten minutes for the
//! kubelet's 300 s) counts as stable again and starts over.

use std::time::Duration;

use k8s_openapi::jiff::Timestamp;

use super::clock::{after, elapsed};
use super::config::timing;

/// The delays of one kind of back-off.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct BackoffPolicy {
    initial: Duration,
    max: Duration,
}

impl BackoffPolicy {
    /// Container restarts (`CrashLoopBackOff`).
    pub(crate) const CRASH_LOOP: BackoffPolicy = BackoffPolicy {
        initial: timing::CRASH_LOOP_INITIAL,
        max: timing::CRASH_LOOP_MAX,
    };
    /// Image pulls (`ImagePullBackOff`).
    pub(crate) const IMAGE_PULL: BackoffPolicy = BackoffPolicy {
        initial: timing::IMAGE_PULL_INITIAL,
        max: timing::IMAGE_PULL_MAX,
    };

    fn reset_after(self) -> Duration {
        self.max.saturating_mul(2)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Entry {
    delay: Duration,
    last_update: Timestamp,
}

/// The back-off state of one key (one container, or one container's image).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Backoff {
    policy: BackoffPolicy,
    entry: Option<Entry>,
}

impl Backoff {
    pub(crate) fn new(policy: BackoffPolicy) -> Self {
        Backoff {
            policy,
            entry: None,
        }
    }

    fn live_entry(&self, event_time: Timestamp) -> Option<Entry> {
        self.entry
            .filter(|e| elapsed(e.last_update, event_time) <= self.policy.reset_after())
    }

    /// The current delay (zero before the first step).
    pub(crate) fn delay(&self) -> Duration {
        self.entry.map_or(Duration::ZERO, |e| e.delay)
    }

    /// Records a failure at `event_time`, handled at `now` (client-go's `Next`).
    pub(crate) fn step(&mut self, event_time: Timestamp, now: Timestamp) {
        let delay = match self.live_entry(event_time) {
            Some(entry) => entry.delay.saturating_mul(2).min(self.policy.max),
            None => self.policy.initial.min(self.policy.max),
        };
        self.entry = Some(Entry {
            delay,
            last_update: now,
        });
    }

    /// Whether a failure at `event_time` is still inside the window at `now`
    /// (`IsInBackOffSince`: may this container restart yet?).
    pub(crate) fn in_backoff_since(&self, event_time: Timestamp, now: Timestamp) -> bool {
        self.live_entry(event_time)
            .is_some_and(|e| elapsed(event_time, now) < e.delay)
    }

    /// When the window opened by a failure at `event_time` closes.
    pub(crate) fn window_end(&self, event_time: Timestamp) -> Timestamp {
        after(event_time, self.delay())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kubelet::clock::t;

    #[test]
    fn crash_loops_double_to_five_minutes_and_reset_after_ten_quiet_minutes() {
        let mut b = Backoff::new(BackoffPolicy::CRASH_LOOP);
        // (exit at, expected in back-off at that instant, delay after stepping)
        let cases = [
            (0, false, 10),
            (1, true, 20),
            (25, true, 40),
            (70, true, 80),
            (200, true, 160),
            (400, true, 300),
            (750, true, 300),
            // Ran for more than ten minutes since the last restart: starts over.
            (1_400, false, 10),
        ];
        for (at, in_backoff, delay) in cases {
            assert_eq!(b.in_backoff_since(t(at), t(at)), in_backoff, "at {at}");
            b.step(t(at), t(at));
            assert_eq!(b.delay(), Duration::from_secs(delay), "at {at}");
        }
        assert_eq!(b.window_end(t(1_400)), t(1_410));
        assert!(b.in_backoff_since(t(1_400), t(1_409)));
        assert!(!b.in_backoff_since(t(1_400), t(1_410)));
    }
}
