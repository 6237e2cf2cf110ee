//! One process's leader-election client: when it tries, what it writes against the Lease's
//! record, when a holder has lost, and a standby's jittered retries.

use std::time::Duration;

use k8s_openapi::jiff::Timestamp;
use tokio::time::Instant;

use super::{LeaderElectionTimings, LeaderRecord};
use crate::controllers::kubelet::stable_hex;

/// What a candidate does when its next moment comes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Due {
    /// Try to acquire or renew.
    Try,
    /// The renew deadline passed without a renewal: leadership is lost.
    Lost,
}

/// One process's leader-election client.
#[derive(Debug, Clone)]
pub(crate) struct Candidate {
    identity: String,
    observed: Option<LeaderRecord>,
    observed_at: Option<Instant>,
    /// Since when it believes it leads.
    leading_since: Option<Instant>,
    /// When the current renewal round gives up: set by the round's first failed attempt.
    round_deadline: Option<Instant>,
    /// When it acts next.
    pub next_at: Instant,
    attempts: u64,
}

impl Candidate {
    /// A process that starts electing at `at`.
    pub fn new(identity: &str, at: Instant) -> Self {
        Candidate {
            identity: identity.to_string(),
            observed: None,
            observed_at: None,
            leading_since: None,
            round_deadline: None,
            next_at: at,
            attempts: 0,
        }
    }

    /// Its holder identity.
    pub fn identity(&self) -> &str {
        &self.identity
    }

    /// Since when it believes it leads (`None`: a standby).
    pub fn leading_since(&self) -> Option<Instant> {
        self.leading_since
    }

    /// What it does at `next_at`.
    pub fn due(&self) -> Due {
        match self.round_deadline {
            Some(deadline) if self.leading_since.is_some() && self.next_at >= deadline => Due::Lost,
            _ => Due::Try,
        }
    }

    /// The record to write at `at` (wall clock `now`) given the Lease's current record
    /// (`None`: no Lease), or `None` when another holder's Lease is still valid.
    pub fn desired(
        &mut self,
        current: Option<&LeaderRecord>,
        at: Instant,
        now: Timestamp,
        timings: &LeaderElectionTimings,
    ) -> Option<LeaderRecord> {
        let mine = LeaderRecord {
            holder: self.identity.clone(),
            lease_duration_seconds: timings.lease_duration_seconds(),
            acquire_time: Some(now),
            renew_time: Some(now),
            transitions: 0,
        };
        let Some(current) = current else {
            return Some(mine);
        };
        if self.observed.as_ref() != Some(current) {
            self.observed = Some(current.clone());
            self.observed_at = Some(at);
        }
        let held_elsewhere = !current.holder.is_empty() && current.holder != self.identity;
        let valid = self
            .observed_at
            .is_some_and(|seen| seen + timings.lease_duration > at);
        if held_elsewhere && valid {
            return None;
        }
        Some(if current.holder == self.identity {
            LeaderRecord {
                acquire_time: current.acquire_time,
                transitions: current.transitions,
                ..mine
            }
        } else {
            LeaderRecord {
                transitions: current.transitions.saturating_add(1),
                ..mine
            }
        })
    }

    /// `written` is the Lease's record now: it leads, and renews a retry period later.
    pub fn succeeded(&mut self, written: LeaderRecord, at: Instant, t: &LeaderElectionTimings) {
        self.observed = Some(written);
        self.observed_at = Some(at);
        self.leading_since.get_or_insert(at);
        self.round_deadline = None;
        self.next_at = at + t.retry_period;
        self.attempts += 1;
    }

    /// The attempt at `at` failed (unreachable API, a conflict, or a valid foreign Lease).
    /// A holder's first failure opens a renewal round that ends at the renew deadline;
    /// client-go's round starts with that attempt, a retry period after the last renewal.
    pub fn failed(&mut self, at: Instant, t: &LeaderElectionTimings) {
        self.attempts += 1;
        self.next_at = if self.leading_since.is_some() {
            let deadline = *self.round_deadline.get_or_insert(at + t.renew_deadline);
            (at + t.retry_period).min(deadline)
        } else {
            at + t.retry_period + self.jitter(t)
        };
    }

    /// What it writes when it releases the Lease on stop (`None`: it does not lead).
    pub fn release(&self, now: Timestamp) -> Option<LeaderRecord> {
        self.leading_since?;
        self.observed.as_ref().map(|r| r.released(now))
    }

    /// A stable pseudo-random share of the jitter, different for every attempt.
    fn jitter(&self, t: &LeaderElectionTimings) -> Duration {
        let hex = stable_hex(&format!("{}/{}", self.identity, self.attempts), 8);
        let draw = u64::from_str_radix(&hex, 16).unwrap_or(0);
        let max = t.retry_period * t.acquire_jitter_percent / 100;
        let nanos = u128::from(draw) * max.as_nanos() / (1u128 << 32);
        Duration::from_nanos(u64::try_from(nanos).unwrap_or(u64::MAX))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::leader_election::{secs, timings};

    fn held_by(holder: &str) -> LeaderRecord {
        LeaderRecord {
            holder: holder.into(),
            lease_duration_seconds: 15,
            acquire_time: Some(Timestamp::UNIX_EPOCH),
            renew_time: Some(Timestamp::UNIX_EPOCH),
            transitions: 3,
        }
    }

    #[test]
    fn a_candidate_takes_a_missing_released_or_expired_lease_and_nothing_else() {
        let t = timings();
        let t0 = Instant::now();
        let now = Timestamp::UNIX_EPOCH;
        let mut a = Candidate::new("cp-1_a", t0);
        let created = a.desired(None, t0, now, &t).unwrap();
        assert_eq!(
            (created.holder.as_str(), created.transitions),
            ("cp-1_a", 0)
        );

        let other = held_by("cp-2_b");
        assert_eq!(a.desired(Some(&other), t0, now, &t), None, "valid");
        assert_eq!(
            a.desired(Some(&other), t0 + secs(14), now, &t),
            None,
            "unchanged for 14 s: still valid"
        );
        let taken = a.desired(Some(&other), t0 + secs(15), now, &t).unwrap();
        assert_eq!((taken.holder.as_str(), taken.transitions), ("cp-1_a", 4));

        let mut b = Candidate::new("cp-1_c", t0);
        let mut renewed = other.clone();
        renewed.renew_time = Some(now + secs(14));
        assert_eq!(b.desired(Some(&other), t0, now, &t), None);
        assert_eq!(
            b.desired(Some(&renewed), t0 + secs(14), now, &t),
            None,
            "a change restarts the clock"
        );
        assert_eq!(b.desired(Some(&renewed), t0 + secs(28), now, &t), None);
        assert!(b.desired(Some(&renewed), t0 + secs(29), now, &t).is_some());

        let released = other.released(now);
        let mut c = Candidate::new("cp-3_d", t0);
        let took = c.desired(Some(&released), t0, now, &t).unwrap();
        assert_eq!(took.transitions, 4, "a released Lease is taken at once");
    }

    #[test]
    fn the_holder_renews_keeping_its_acquire_time_and_loses_after_the_renew_deadline() {
        let t = timings();
        let t0 = Instant::now();
        let mut a = Candidate::new("cp-1_a", t0);
        let first = a.desired(None, t0, Timestamp::UNIX_EPOCH, &t).unwrap();
        a.succeeded(first.clone(), t0, &t);
        assert_eq!(a.leading_since(), Some(t0));
        assert_eq!((a.next_at, a.due()), (t0 + secs(2), Due::Try));
        let later = Timestamp::UNIX_EPOCH + secs(2);
        let renewal = a.desired(Some(&first), a.next_at, later, &t).unwrap();
        assert_eq!(renewal.acquire_time, first.acquire_time);
        assert_eq!(renewal.renew_time, Some(later));
        assert_eq!(renewal.transitions, first.transitions);
        a.succeeded(renewal, t0 + secs(2), &t);

        // The API goes away: tries every retry period until the round's deadline, 12 s
        // after the last renewal.
        let mut tries = Vec::new();
        while a.due() == Due::Try {
            tries.push(a.next_at.duration_since(t0).as_secs());
            a.failed(a.next_at, &t);
        }
        assert_eq!(tries, [4, 6, 8, 10, 12]);
        assert_eq!(a.next_at, t0 + secs(14));
        assert_eq!(a.due(), Due::Lost);
    }

    #[test]
    fn standbys_retry_with_a_bounded_jitter_that_differs_per_attempt() {
        let t = timings();
        let t0 = Instant::now();
        let mut b = Candidate::new("cp-2_b", t0);
        let mut waits = Vec::new();
        let mut at = t0;
        for _ in 0..50 {
            b.failed(at, &t);
            waits.push(b.next_at.duration_since(at));
            at = b.next_at;
        }
        assert!(
            waits
                .iter()
                .all(|w| *w >= secs(2) && *w < Duration::from_millis(4_400))
        );
        let distinct: std::collections::BTreeSet<_> = waits.iter().collect();
        assert!(distinct.len() > 40, "{waits:?}");
        assert_eq!(
            b.release(Timestamp::UNIX_EPOCH),
            None,
            "a standby has nothing to release"
        );
    }

    #[test]
    fn a_standby_with_a_shorter_retry_period_tries_again_sooner() {
        let slow = timings();
        let fast = timings()
            .for_command_line(&["--leader-elect-retry-period=500ms".to_string()])
            .unwrap();
        let t0 = Instant::now();
        let waits = |t: &LeaderElectionTimings| {
            let mut b = Candidate::new("cp-1_b", t0);
            (0..50)
                .map(|_| {
                    let at = b.next_at;
                    b.failed(at, t);
                    b.next_at.duration_since(at)
                })
                .collect::<Vec<_>>()
        };
        let (fast, slow) = (waits(&fast), waits(&slow));
        assert!(
            fast.iter()
                .all(|w| *w >= Duration::from_millis(500) && *w < Duration::from_millis(1_100)),
            "{fast:?}"
        );
        assert!(slow.iter().all(|w| *w >= secs(2)), "{slow:?}");
    }
}
