//! The loop of an in-process component that acts only while one of its processes leads (the
//! controller-manager and the scheduler): state kept per leading process, dropped when
//! leadership moves, and a pass over that state after every change of the store, of the
//! leadership or of the API's availability; and [`sleep_until`], the wait for an optional
//! wake-up time that the cluster's tasks share.

use tokio::sync::watch;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::api::{CallError, ClusterApi, RETRY_WHEN_DOWN};
use super::model::Leadership;

/// The state a component keeps for the process it acts for.
pub(crate) trait LeaderState {
    /// The leadership the state belongs to: a new leader starts from fresh state.
    fn leadership(&self) -> &Leadership;
}

/// Sleeps until `at`, or forever.
pub(crate) async fn sleep_until(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

/// Runs `pass` over the leading process's state until shutdown. `start` makes the state of a
/// new leader; `pass` says when to come back even if nothing changes.
pub(crate) async fn run_while_leading<P: LeaderState>(
    api: &ClusterApi,
    mut leadership: watch::Receiver<Leadership>,
    mut api_up: watch::Receiver<bool>,
    shutdown: CancellationToken,
    mut start: impl FnMut(Leadership) -> P,
    mut pass: impl FnMut(&mut P) -> Result<Option<Instant>, CallError>,
) {
    let mut revisions = api.store().subscribe_revisions();
    let mut process: Option<P> = None;
    loop {
        let leader = leadership.borrow_and_update().clone();
        let wake_at = if !leader.is_active() {
            process = None;
            None
        } else if api.is_up() {
            let p = match process.take() {
                Some(p) if *p.leadership() == leader => process.insert(p),
                _ => process.insert(start(leader)),
            };
            revisions.borrow_and_update();
            pass(p).unwrap_or_else(|_| Some(Instant::now() + RETRY_WHEN_DOWN))
        } else {
            Some(Instant::now() + RETRY_WHEN_DOWN)
        };
        tokio::select! {
            _ = shutdown.cancelled() => return,
            _ = revisions.changed(), if process.is_some() => {}
            _ = leadership.changed() => {}
            _ = api_up.changed() => {}
            _ = sleep_until(wake_at) => {}
        }
    }
}
