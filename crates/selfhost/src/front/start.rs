//! The checks before a front listens: every backend, each check interval, until one is healthy
//! or the start's patience is spent. A new front that takes over a listening socket must serve
//! its first connection at once, as the old one would have; a front that finds none healthy
//! listens anyway (after a power cut the API comes back behind it), and holds connections as
//! it does whenever none is. But while a front serves at the hand-over socket, a new one that
//! finds no backend healthy checks on and takes over only once one is: a front that cannot
//! reach its backends (a wrong CA, say) must not replace one that may.

use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

use selfhost_core::front::{Check, Event, Pool};
use tokio::time::Instant;

use super::check::Checker;

/// What the checks before listening found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Found {
    /// The backends healthy when the checks ended (none: the patience was spent).
    pub ready: Vec<SocketAddr>,
    /// The others, with what their last check said.
    pub not_ready: Vec<(SocketAddr, String)>,
    /// How long the checks took.
    pub waited: Duration,
}

/// Checks `backends` into `pool` every `interval` until one is healthy or `patience` is spent,
/// and past it for as long as a front serves at `handover`. Returns what was found, and the
/// changes the pool said, to be told once the front runs.
pub async fn check_backends(
    checker: &Checker,
    backends: &[SocketAddr],
    pool: &mut Pool,
    interval: Duration,
    patience: Duration,
    handover: Option<&Path>,
) -> (Found, Vec<Event>) {
    let started = Instant::now();
    let mut events = Vec::new();
    let mut said = false;
    let last = loop {
        let checks = futures::future::join_all(backends.iter().map(|&b| checker.check(b))).await;
        for (index, check) in checks.iter().enumerate() {
            events.extend(pool.record(index, check));
        }
        let left = patience.saturating_sub(started.elapsed());
        if pool.any_healthy() {
            break checks;
        }
        if left.is_zero() {
            let Some(path) = handover else {
                break checks;
            };
            if !super::handover::serving(path).await {
                break checks;
            }
            if !said {
                said = true;
                tracing::warn!(
                    "no backend ready within {} s, and a front serves at {}: it serves on \
                     until one of this front's backends is ready, then this front takes over",
                    patience.as_secs(),
                    path.display()
                );
            }
        }
        tokio::time::sleep(if left.is_zero() {
            interval
        } else {
            interval.min(left)
        })
        .await;
    };
    let mut found = Found {
        ready: Vec::new(),
        not_ready: Vec::new(),
        waited: started.elapsed(),
    };
    for (index, (&backend, check)) in backends.iter().zip(&last).enumerate() {
        if pool.is_healthy(index) {
            found.ready.push(backend);
        } else {
            let said = match check {
                Check::Fail(reason) => reason.clone(),
                Check::Pass => "not yet passed enough checks in a row".to_string(),
            };
            found.not_ready.push((backend, said));
        }
    }
    (found, events)
}
