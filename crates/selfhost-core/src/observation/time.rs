//! Small helpers over timestamps: ages never go negative and sums saturate, so a clock that
//! jumps or a far-future value from the API degrades to a conservative answer, not a panic.

use std::time::Duration;

use k8s_openapi::jiff::Timestamp;

/// How long ago `then` was at `now`; zero when `then` is in the future (clock skew).
pub(crate) fn age(now: Timestamp, then: Timestamp) -> Duration {
    Duration::try_from(now.duration_since(then)).unwrap_or(Duration::ZERO)
}

/// `at + duration`, saturating at the latest representable time.
pub(crate) fn after(at: Timestamp, duration: Duration) -> Timestamp {
    at.saturating_add(duration).unwrap_or(Timestamp::MAX)
}

/// RFC 3339 text of a timestamp in UTC, as our annotations store it. Sub-second digits are
/// kept so that two events in the same second still compare in order.
pub(crate) fn format(at: Timestamp) -> String {
    at.to_string()
}

/// Parses an RFC 3339 timestamp written by [`format()`] (or any RFC 3339 time).
pub(crate) fn parse(text: &str) -> Option<Timestamp> {
    text.trim().parse().ok()
}
