//! How soon a watch tries again after its connection failed.
//!
//! kube-runtime's default backoff waits 0.8–1.6 s before the first retry (client-go's
//! reflector figures, made for thousands of informers hammering one apiserver). For the
//! engine a failed watch is almost always an apiserver handing over — on one node the
//! successor joins the port a moment before it serves — and every decision waits on these
//! watches, so a second of backoff is a second added to each hand-over. A handful of watches
//! retrying sooner costs the API nothing: the first retry comes after 50–100 ms, and a
//! failure that persists backs off exponentially to 5 s, as before. Any event resets it.

use std::time::Duration;

use backon::BackoffBuilder;
use kube::runtime::utils::Backoff;

/// The first delay after a watch fails.
pub const FIRST_RETRY: Duration = Duration::from_millis(50);
/// The longest delay between two attempts while the API stays unreachable.
pub const LONGEST_RETRY: Duration = Duration::from_secs(5);

/// The engine's watch backoff: exponential from [`FIRST_RETRY`] to [`LONGEST_RETRY`], doubled
/// each time, with jitter (each delay grows by a random share of itself, so that the
/// engine's watches do not all retry in the same instant).
pub struct WatchBackoff {
    builder: backon::ExponentialBuilder,
    current: backon::ExponentialBackoff,
}

impl WatchBackoff {
    /// A fresh backoff.
    pub fn new() -> WatchBackoff {
        let builder = backon::ExponentialBuilder::default()
            .with_min_delay(FIRST_RETRY)
            .with_max_delay(LONGEST_RETRY)
            .with_factor(2.0)
            .with_jitter()
            .without_max_times();
        WatchBackoff {
            current: builder.build(),
            builder,
        }
    }
}

impl Default for WatchBackoff {
    fn default() -> Self {
        WatchBackoff::new()
    }
}

impl Iterator for WatchBackoff {
    type Item = Duration;

    fn next(&mut self) -> Option<Duration> {
        // Without a limit on attempts the builder never ends; were it to, wait the longest.
        Some(self.current.next().unwrap_or(LONGEST_RETRY))
    }
}

impl Backoff for WatchBackoff {
    fn reset(&mut self) {
        self.current = self.builder.build();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retries_soon_then_backs_off_to_a_bound_and_starts_over_after_a_reset() {
        let mut backoff = WatchBackoff::new();
        let first = backoff.next().expect("a delay");
        assert!(
            first >= FIRST_RETRY && first <= FIRST_RETRY * 2,
            "first retry after {first:?}"
        );
        let later: Vec<Duration> = (0..12).filter_map(|_| backoff.next()).collect();
        assert!(later.iter().all(|d| *d <= LONGEST_RETRY * 2));
        assert!(
            later.last().is_some_and(|d| *d >= LONGEST_RETRY),
            "a persistent failure backs off to the longest delay: {later:?}"
        );
        backoff.reset();
        let again = backoff.next().expect("a delay");
        assert!(again <= FIRST_RETRY * 2, "after a reset: {again:?}");
    }
}
