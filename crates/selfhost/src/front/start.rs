//! The checks before a front listens: every backend, each check interval, until one is healthy
//! or the start's patience is spent. A new front that takes over a listening socket must serve
//! its first connection at once, as the old one would have; a front that finds none healthy
//! listens anyway (after a power cut the API comes back behind it), and holds connections as
//! it does whenever none is.

use std::net::SocketAddr;
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

/// Checks `backends` into `pool` every `interval` until one is healthy or `patience` is spent.
/// Returns what was found, and the changes the pool said, to be told once the front runs.
pub async fn check_backends(
    checker: &Checker,
    backends: &[SocketAddr],
    pool: &mut Pool,
    interval: Duration,
    patience: Duration,
) -> (Found, Vec<Event>) {
    let started = Instant::now();
    let mut events = Vec::new();
    let last = loop {
        let checks = futures::future::join_all(backends.iter().map(|&b| checker.check(b))).await;
        for (index, check) in checks.iter().enumerate() {
            events.extend(pool.record(index, check));
        }
        let left = patience.saturating_sub(started.elapsed());
        if pool.any_healthy() || left.is_zero() {
            break checks;
        }
        tokio::time::sleep(interval.min(left)).await;
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
