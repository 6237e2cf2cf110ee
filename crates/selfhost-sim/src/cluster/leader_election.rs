//! Leader election as client-go's `leaderelection` package performs it, for one process: the
//! decisions of one candidate against the Lease record, with its clock and back-off, and
//! nothing about how the record is read or written (see `leader_task`).
//!
//! A candidate tries to acquire at once when it starts, then every retry period plus a jitter
//! of up to 1.2 periods. It takes the Lease when there is none, when the holder is empty (a
//! released Lease), or when the record has not changed for a whole lease duration *as this
//! candidate observed it* (client-go measures expiry from the moment it last saw the record
//! change, not from `renewTime`). The holder renews every retry period; when no renewal
//! succeeds within the renew deadline of a round, it has lost the Lease
//! (`leaderelection lost`): kube-controller-manager and kube-scheduler exit then.
//!
//! Each process runs on its own clock, read from its command line as the real components
//! read it (`--leader-elect-lease-duration`, `--leader-elect-renew-deadline`,
//! `--leader-elect-retry-period`; the cluster's [`LeaderElectionTimings`] for any flag it does
//! not pass), and refuses to elect with a combination client-go's `NewLeaderElector` rejects.
//! A standby judges expiry by its own lease duration (client-go before v1.27; later releases
//! read the holder's `leaseDurationSeconds` — the same thing while every process passes the
//! same lease duration, as the templates selfhost writes do).

use std::time::Duration;

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use k8s_openapi::jiff::Timestamp;
use tokio::time::Instant;

use super::model::{Role, image_version};
use crate::controllers::kubelet::{parse_go_duration, stable_hex};

/// The namespace of the leader-election Leases.
pub const LEADER_LEASE_NAMESPACE: &str = "kube-system";

/// The Lease a role elects its leader through (`kube-system/<binary>`).
pub fn leader_lease_name(role: Role) -> &'static str {
    role.binary()
}

/// The leader-election clock of kube-controller-manager and kube-scheduler
/// (`--leader-elect-lease-duration`, `--leader-elect-renew-deadline`,
/// `--leader-elect-retry-period`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LeaderElectionTimings {
    /// How long a standby waits, after it last saw the record change, before it takes the
    /// Lease over (upstream default 15 s).
    pub lease_duration: Duration,
    /// How long the holder keeps trying to renew before it gives up leading (10 s).
    pub renew_deadline: Duration,
    /// How often the holder renews and a standby tries to acquire (2 s).
    pub retry_period: Duration,
    /// A standby's extra wait after each attempt: up to this percentage of the retry period,
    /// pseudo-randomly per attempt (client-go's jitter factor 1.2 is 120).
    pub acquire_jitter_percent: u32,
    /// Durations a process's flags give (`--leader-elect-retry-period=2s`) are divided by
    /// this, so that they run on the cluster's clock: 1 for real time, the factor of
    /// [`LeaderElectionTimings::scaled`] otherwise.
    pub flag_divisor: u32,
}

/// The flags of kube-controller-manager and kube-scheduler that set their election clock.
pub const LEASE_DURATION_FLAG: &str = "leader-elect-lease-duration";
/// See [`LEASE_DURATION_FLAG`].
pub const RENEW_DEADLINE_FLAG: &str = "leader-elect-renew-deadline";
/// See [`LEASE_DURATION_FLAG`].
pub const RETRY_PERIOD_FLAG: &str = "leader-elect-retry-period";

impl LeaderElectionTimings {
    /// The upstream defaults.
    pub fn realistic() -> Self {
        LeaderElectionTimings {
            lease_duration: Duration::from_secs(15),
            renew_deadline: Duration::from_secs(10),
            retry_period: Duration::from_secs(2),
            acquire_jitter_percent: 120,
            flag_divisor: 1,
        }
    }

    /// Every duration divided by `factor` (at least 1).
    pub fn scaled(self, factor: u32) -> Self {
        let factor = factor.max(1);
        LeaderElectionTimings {
            lease_duration: self.lease_duration / factor,
            renew_deadline: self.renew_deadline / factor,
            retry_period: self.retry_period / factor,
            flag_divisor: self.flag_divisor.saturating_mul(factor),
            ..self
        }
    }

    /// The clock of a process started with `command_line`: each election flag it passes, on
    /// the cluster's clock (see [`LeaderElectionTimings::flag_divisor`]); these timings for
    /// those it does not.
    ///
    /// # Errors
    /// What the component says when it refuses to start: a flag value that is no duration
    /// (pflag's `invalid argument`), or a combination client-go's `NewLeaderElector` rejects
    /// (lease duration not above the renew deadline, renew deadline not above 1.2 retry
    /// periods, a zero duration).
    pub fn for_command_line(&self, command_line: &[String]) -> Result<Self, String> {
        let divisor = self.flag_divisor.max(1);
        let read = |flag: &str, default: Duration| -> Result<Duration, String> {
            match last_flag_value(command_line, flag) {
                None => Ok(default),
                Some(text) => parse_go_duration(text).map(|d| d / divisor).ok_or_else(|| {
                    format!("invalid argument {text:?} for \"--{flag}\" flag: not a duration")
                }),
            }
        };
        let own = LeaderElectionTimings {
            lease_duration: read(LEASE_DURATION_FLAG, self.lease_duration)?,
            renew_deadline: read(RENEW_DEADLINE_FLAG, self.renew_deadline)?,
            retry_period: read(RETRY_PERIOD_FLAG, self.retry_period)?,
            ..*self
        };
        // The cluster's timings stand for the components' defaults, which client-go accepts;
        // only a process that sets its own clock can get it wrong.
        if own != *self {
            own.validate()?;
        }
        Ok(own)
    }

    /// client-go's checks of a leader-election configuration, with its messages.
    fn validate(&self) -> Result<(), String> {
        if self.lease_duration <= self.renew_deadline {
            return Err("leaseDuration must be greater than renewDeadline".into());
        }
        if self.renew_deadline * 100 <= self.retry_period * self.acquire_jitter_percent {
            return Err("renewDeadline must be greater than retryPeriod*JitterFactor".into());
        }
        if self.lease_duration.is_zero() {
            return Err("leaseDuration must be greater than zero".into());
        }
        if self.renew_deadline.is_zero() {
            return Err("renewDeadline must be greater than zero".into());
        }
        if self.retry_period.is_zero() {
            return Err("retryPeriod must be greater than zero".into());
        }
        Ok(())
    }

    /// `leaseDurationSeconds` as written: whole seconds, at least one (a scaled duration
    /// rounds up, so a reader of the Lease never thinks it expired earlier than it does).
    pub fn lease_duration_seconds(&self) -> i32 {
        whole_seconds(self.lease_duration)
    }
}

impl Default for LeaderElectionTimings {
    fn default() -> Self {
        Self::realistic()
    }
}

/// The value of the last `--name=value` or `--name value` on a command line (pflag: the last
/// occurrence wins).
fn last_flag_value<'a>(command_line: &'a [String], name: &str) -> Option<&'a str> {
    let long = format!("--{name}");
    let mut value = None;
    for (i, word) in command_line.iter().enumerate() {
        if let Some(v) = word.strip_prefix(&long).and_then(|r| r.strip_prefix('=')) {
            value = Some(v);
        } else if *word == long {
            value = command_line.get(i + 1).map(String::as_str);
        }
    }
    value
}

/// A duration in whole seconds, rounded up, at least one.
pub(crate) fn whole_seconds(d: Duration) -> i32 {
    let secs = d.as_secs() + u64::from(d.subsec_nanos() > 0);
    i32::try_from(secs.max(1)).unwrap_or(i32::MAX)
}

/// Whether a stopping leader clears its Lease so that a standby acquires at once.
///
/// In v1.20 neither component does: the measured hand-overs waited for the Lease to expire.
/// kube-scheduler releases it on SIGTERM from v1.21 (it sets client-go's `ReleaseOnCancel`);
/// kube-controller-manager still does not (kubernetes/kubernetes#132599), and neither has a
/// flag for it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum LeaseRelease {
    /// No process releases its Lease: a standby waits for expiry (v1.20, as measured).
    #[default]
    Never,
    /// As upstream releases do: a kube-scheduler from v1.21 releases, a
    /// kube-controller-manager never does.
    ByVersion,
    /// Every stopping leader releases its Lease.
    Always,
}

impl LeaseRelease {
    /// Whether a stopping leader of `role` running `image` releases its Lease.
    pub fn releases(self, role: Role, image: Option<&str>) -> bool {
        match self {
            LeaseRelease::Never => false,
            LeaseRelease::Always => true,
            LeaseRelease::ByVersion => {
                role == Role::Scheduler
                    && image
                        .and_then(image_version)
                        .is_some_and(|(major, minor, _)| (major, minor) >= (1, 21))
            }
        }
    }
}

/// What a leader-election Lease says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct LeaderRecord {
    pub holder: String,
    pub lease_duration_seconds: i32,
    pub acquire_time: Option<Timestamp>,
    pub renew_time: Option<Timestamp>,
    pub transitions: i32,
}

impl LeaderRecord {
    /// The record a Lease holds (an empty one for a Lease without a spec).
    pub fn of(lease: &Lease) -> Self {
        let spec = lease.spec.clone().unwrap_or_default();
        LeaderRecord {
            holder: spec.holder_identity.unwrap_or_default(),
            lease_duration_seconds: spec.lease_duration_seconds.unwrap_or_default(),
            acquire_time: spec.acquire_time.map(|t| t.0),
            renew_time: spec.renew_time.map(|t| t.0),
            transitions: spec.lease_transitions.unwrap_or_default(),
        }
    }

    /// The Lease spec that holds this record.
    pub fn spec(&self) -> LeaseSpec {
        LeaseSpec {
            holder_identity: Some(self.holder.clone()),
            lease_duration_seconds: Some(self.lease_duration_seconds),
            acquire_time: self.acquire_time.map(MicroTime),
            renew_time: self.renew_time.map(MicroTime),
            lease_transitions: Some(self.transitions),
            ..LeaseSpec::default()
        }
    }

    /// What a releasing holder writes: no holder, a one-second duration, the transitions kept.
    pub fn released(&self, now: Timestamp) -> Self {
        LeaderRecord {
            holder: String::new(),
            lease_duration_seconds: 1,
            acquire_time: Some(now),
            renew_time: Some(now),
            transitions: self.transitions,
        }
    }
}

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

    fn timings() -> LeaderElectionTimings {
        LeaderElectionTimings::realistic()
    }

    fn secs(s: u64) -> Duration {
        Duration::from_secs(s)
    }

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
    fn release_policies_follow_the_upstream_versions() {
        let sched = |tag: &str| format!("registry.k8s.io/kube-scheduler:{tag}");
        let cm = |tag: &str| format!("registry.k8s.io/kube-controller-manager:{tag}");
        let cases = [
            (
                LeaseRelease::Never,
                Role::Scheduler,
                sched("v1.33.2"),
                false,
            ),
            (
                LeaseRelease::ByVersion,
                Role::Scheduler,
                sched("v1.20.15"),
                false,
            ),
            (
                LeaseRelease::ByVersion,
                Role::Scheduler,
                sched("v1.21.0"),
                true,
            ),
            (
                LeaseRelease::ByVersion,
                Role::ControllerManager,
                cm("v1.33.2"),
                false,
            ),
            (
                LeaseRelease::Always,
                Role::ControllerManager,
                cm("v1.20.15"),
                true,
            ),
        ];
        for (policy, role, image, releases) in cases {
            assert_eq!(
                policy.releases(role, Some(&image)),
                releases,
                "{policy:?} {image}"
            );
        }
    }

    #[test]
    fn a_process_runs_on_the_clock_its_flags_set_and_refuses_what_client_go_refuses() {
        let words = |flags: &[&str]| -> Vec<String> {
            std::iter::once("kube-scheduler")
                .chain(flags.iter().copied())
                .map(String::from)
                .collect()
        };
        let ms = Duration::from_millis;
        let real = timings();
        let tenfold = timings().scaled(10);
        type Expected = Result<[Duration; 3], &'static str>;
        let cases: [(&LeaderElectionTimings, &[&str], Expected); 8] = [
            (&real, &[], Ok([secs(15), secs(10), secs(2)])),
            (
                &real,
                &["--leader-elect-retry-period=500ms"],
                Ok([secs(15), secs(10), ms(500)]),
            ),
            (
                &real,
                &[
                    "--leader-elect-lease-duration",
                    "30s",
                    "--leader-elect-renew-deadline=20s",
                    "--leader-elect-retry-period=1s",
                    "--leader-elect-retry-period=4s",
                ],
                Ok([secs(30), secs(20), secs(4)]),
            ),
            // Flags run on the cluster's clock, like its defaults.
            (
                &tenfold,
                &["--leader-elect-retry-period=500ms"],
                Ok([ms(1_500), secs(1), ms(50)]),
            ),
            (
                &real,
                &["--leader-elect-lease-duration=10s"],
                Err("leaseDuration must be greater than renewDeadline"),
            ),
            (
                &real,
                &["--leader-elect-retry-period=9s"],
                Err("renewDeadline must be greater than retryPeriod*JitterFactor"),
            ),
            (
                &real,
                &["--leader-elect-retry-period=0s"],
                Err("retryPeriod must be greater than zero"),
            ),
            (
                &real,
                &["--leader-elect-retry-period=soon"],
                Err(
                    "invalid argument \"soon\" for \"--leader-elect-retry-period\" flag: not a duration",
                ),
            ),
        ];
        for (cluster, flags, expected) in cases {
            let got = cluster.for_command_line(&words(flags)).map(|t| {
                assert_eq!(t.acquire_jitter_percent, 120);
                [t.lease_duration, t.renew_deadline, t.retry_period]
            });
            assert_eq!(got, expected.map_err(String::from), "{flags:?}");
        }
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

    #[test]
    fn scaled_durations_are_written_as_whole_seconds_rounded_up() {
        assert_eq!(timings().lease_duration_seconds(), 15);
        assert_eq!(timings().scaled(100).lease_duration_seconds(), 1);
        assert_eq!(whole_seconds(Duration::from_millis(1_500)), 2);
        assert_eq!(
            timings().scaled(100).retry_period,
            Duration::from_millis(20)
        );
    }
}
