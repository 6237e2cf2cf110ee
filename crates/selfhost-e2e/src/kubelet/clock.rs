//! Time as the kubelet reports it: RFC 3339 in whole seconds, durations in Go's notation.

use std::time::Duration;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;

/// `at` plus `duration` (saturating at the end of time).
pub(crate) fn after(at: Timestamp, duration: Duration) -> Timestamp {
    at.saturating_add(duration).unwrap_or(Timestamp::MAX)
}

/// How long from `from` to `to` (zero if `to` is earlier).
pub(crate) fn elapsed(from: Timestamp, to: Timestamp) -> Duration {
    Duration::try_from(to.duration_since(from)).unwrap_or(Duration::ZERO)
}

/// `at` truncated to whole seconds, as the API keeps times.
pub(crate) fn whole_seconds(at: Timestamp) -> Timestamp {
    Timestamp::from_second(at.as_second()).unwrap_or(at)
}

/// `at` as an API time, in whole seconds.
pub(crate) fn time(at: Timestamp) -> Time {
    Time(whole_seconds(at))
}

/// The earlier of two optional instants.
pub(crate) fn earliest(a: Option<Timestamp>, b: Option<Timestamp>) -> Option<Timestamp> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

/// A duration as Go prints it (`10s`, `1m20s`, `5m0s`, `1.5s`), which kubelet messages carry.
pub(crate) fn go_duration(duration: Duration) -> String {
    let millis = duration.as_millis();
    let hours = millis / 3_600_000;
    let minutes = millis / 60_000 % 60;
    let seconds = millis / 1_000 % 60;
    let fraction = millis % 1_000;
    let seconds = if fraction == 0 {
        format!("{seconds}s")
    } else {
        let digits = format!("{fraction:03}");
        format!("{seconds}.{}s", digits.trim_end_matches('0'))
    };
    match (hours, minutes) {
        (0, 0) if millis == 0 => "0s".into(),
        (0, 0) => seconds,
        (0, m) => format!("{m}m{seconds}"),
        (h, m) => format!("{h}h{m}m{seconds}"),
    }
}

/// A process start time recorded as Unix milliseconds, back as a timestamp.
pub(crate) fn from_millis(millis: i64) -> Timestamp {
    Timestamp::from_millisecond(millis).unwrap_or(Timestamp::UNIX_EPOCH)
}

#[cfg(test)]
pub(crate) fn t(seconds: i64) -> Timestamp {
    Timestamp::from_second(1_700_000_000 + seconds).unwrap()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_read_like_go() {
        let cases = [
            (0, "0s"),
            (10_000, "10s"),
            (80_000, "1m20s"),
            (160_000, "2m40s"),
            (300_000, "5m0s"),
            (1_500, "1.5s"),
            (3_723_000, "1h2m3s"),
        ];
        for (millis, expected) in cases {
            assert_eq!(go_duration(Duration::from_millis(millis)), expected);
        }
    }

    #[test]
    fn api_times_drop_fractions() {
        let at = t(5).checked_add(Duration::from_millis(999)).unwrap();
        assert_eq!(time(at), Time(t(5)));
        assert_eq!(elapsed(t(5), t(3)), Duration::ZERO);
        assert_eq!(after(t(1), Duration::from_secs(2)), t(3));
        assert_eq!(earliest(Some(t(2)), None), Some(t(2)));
        assert_eq!(earliest(Some(t(2)), Some(t(1))), Some(t(1)));
    }
}
