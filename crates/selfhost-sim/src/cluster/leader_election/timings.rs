//! The leader-election clock of one process: the cluster's timings, overridden by the
//! process's own `--leader-elect-*` flags, and refused where client-go refuses it.

use std::time::Duration;

use crate::controllers::kubelet::parse_go_duration;

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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::leader_election::{secs, timings};

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
