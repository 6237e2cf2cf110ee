//! Time arithmetic for controllers that are handed `now` instead of reading a clock.
//!
//! Every decision in this module tree takes the current time as an argument, so tests can run
//! hours of simulated time in microseconds and the wiring can drive it from a real or a virtual
//! clock alike.

use std::time::Duration;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;

/// `at + duration`, saturating at the end of representable time (durations come from
/// configuration and object fields, which may be absurdly large but must never panic).
pub fn after(at: Timestamp, duration: Duration) -> Timestamp {
    at.saturating_add(duration).unwrap_or(Timestamp::MAX)
}

/// How long from `from` to `to`; zero when `to` is not later (clock steps are never negative
/// for the controllers, whatever the objects claim).
pub fn elapsed(from: Timestamp, to: Timestamp) -> Duration {
    Duration::try_from(to.duration_since(from)).unwrap_or(Duration::ZERO)
}

/// A whole number of seconds from an object field; negative values count as zero.
pub fn seconds(value: i64) -> Duration {
    Duration::from_secs(u64::try_from(value).unwrap_or(0))
}

/// The API representation of a timestamp.
pub fn time(at: Timestamp) -> Time {
    Time(at)
}

/// The earlier of two optional wake-up times.
pub fn earliest(a: Option<Timestamp>, b: Option<Timestamp>) -> Option<Timestamp> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, None) => a,
        (None, b) => b,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arithmetic_saturates_and_never_goes_negative() {
        let t0 = Timestamp::from_second(1_000).unwrap();
        assert_eq!(after(t0, Duration::from_secs(5)).as_second(), 1_005);
        assert_eq!(after(t0, Duration::MAX), Timestamp::MAX);
        assert_eq!(
            elapsed(t0, after(t0, Duration::from_millis(1500))),
            Duration::from_millis(1500)
        );
        assert_eq!(
            elapsed(after(t0, Duration::from_secs(1)), t0),
            Duration::ZERO
        );
        assert_eq!(seconds(-3), Duration::ZERO);
        assert_eq!(earliest(Some(t0), None), Some(t0));
        assert_eq!(earliest(None, None), None);
    }
}
