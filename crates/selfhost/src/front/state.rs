//! What the front's tasks share: the pool of backends behind a lock, a signal each time a
//! backend becomes healthy, and the caller's report of each change.

use std::net::SocketAddr;
use std::sync::Mutex;

use selfhost_core::front::{Check, Event, Pool};
use tokio::sync::watch;

/// Told of each change of the front's state, once.
pub type Report = Box<dyn Fn(&Event) + Send + Sync>;

/// The pool and its observers.
pub struct Shared {
    pool: Mutex<Pool>,
    backends: Vec<SocketAddr>,
    /// Counts the times a backend became healthy: connections held for one wait on it.
    healthy: watch::Sender<u64>,
    report: Report,
}

impl Shared {
    /// The shared state of a front over `backends`.
    pub fn new(pool: Pool, backends: Vec<SocketAddr>, report: Report) -> Shared {
        Shared {
            pool: Mutex::new(pool),
            backends,
            healthy: watch::Sender::new(0),
            report,
        }
    }

    /// The backends' addresses, in the pool's order.
    pub fn backends(&self) -> &[SocketAddr] {
        &self.backends
    }

    fn with_pool<T>(&self, f: impl FnOnce(&mut Pool) -> T) -> T {
        // A panic while holding the lock leaves the pool's counts as they were: still usable.
        let mut pool = self.pool.lock().unwrap_or_else(|e| e.into_inner());
        f(&mut pool)
    }

    fn say(&self, events: Vec<Event>) {
        for event in events {
            if matches!(event, Event::Healthy { .. }) {
                self.healthy.send_modify(|n| *n = n.wrapping_add(1));
            }
            (self.report)(&event);
        }
    }

    /// Says `event`, a change the pool did not make (or made before the front ran).
    pub fn tell(&self, event: Event) {
        self.say(vec![event]);
    }

    /// Records a check of backend `index`.
    pub fn record(&self, index: usize, check: &Check) {
        let events = self.with_pool(|p| p.record(index, check));
        self.say(events);
    }

    /// The backend of a new connection, counted open there.
    pub fn pick(&self) -> Option<usize> {
        self.with_pool(Pool::pick)
    }

    /// A connection of backend `index` ended.
    pub fn release(&self, index: usize) {
        self.with_pool(|p| p.release(index));
    }

    /// A connection to backend `index` could not be made.
    pub fn connect_failed(&self, index: usize, reason: String) {
        let events = self.with_pool(|p| p.connect_failed(index, reason));
        self.say(events);
    }

    /// A connection was closed unserved.
    pub fn closed_unserved(&self) {
        let events = self.with_pool(Pool::closed_unserved);
        self.say(events.into_iter().collect());
    }

    /// Sees each time a backend becomes healthy from now on.
    pub fn watch_healthy(&self) -> watch::Receiver<u64> {
        self.healthy.subscribe()
    }
}
