//! The backends of one front: their health, their open connections, and the choice of a
//! backend for each new connection.

use super::health::{BackendHealth, Check, HealthPolicy, Transition};

/// A change the front says once, when it happens. The pool says the changes of health; the
/// engine says those of a hand-over.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    /// A backend takes new connections.
    Healthy {
        /// The backend's name (its address).
        backend: String,
    },
    /// A backend takes no new connections; those it has keep going.
    Unhealthy {
        /// The backend's name (its address).
        backend: String,
        /// What its failing check said.
        reason: String,
    },
    /// The first backend became healthy, at start or after a time with none.
    Available {
        /// Connections closed unserved while none was healthy.
        closed: u64,
    },
    /// The last healthy backend became unhealthy: new connections are held for a while, then
    /// closed.
    Unavailable,
    /// The first connection of a time with no healthy backend was closed unserved (the
    /// following ones are counted in the next [`Event::Available`]).
    Closing,
    /// A new front took the listening socket (see [`super::handover`]): this one accepts no
    /// more, and its open connections finish.
    HandedOver,
    /// After a hand-over, the open connections finished, or the drain's time was up: the
    /// front is idle until told to stop.
    Drained {
        /// Connections still open when the drain's time was up, and cut.
        cut: usize,
    },
}

#[derive(Debug, Clone)]
struct Backend {
    name: String,
    health: BackendHealth,
    active: u64,
}

/// The backends of a front. New connections go to healthy backends only: the one with the
/// fewest open connections, ties taken in turn (round-robin).
#[derive(Debug, Clone)]
pub struct Pool {
    backends: Vec<Backend>,
    policy: HealthPolicy,
    /// Where the next tie-break starts.
    next: usize,
    /// Whether a backend was healthy when last looked at.
    available: bool,
    /// Connections closed unserved since the last healthy backend went.
    closed: u64,
}

impl Pool {
    /// A pool of the named backends, none healthy until checked.
    pub fn new(names: impl IntoIterator<Item = String>, policy: HealthPolicy) -> Pool {
        Pool {
            backends: names
                .into_iter()
                .map(|name| Backend {
                    name,
                    health: BackendHealth::new(),
                    active: 0,
                })
                .collect(),
            policy,
            next: 0,
            available: false,
            closed: 0,
        }
    }

    /// How many backends there are.
    pub fn len(&self) -> usize {
        self.backends.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.backends.is_empty()
    }

    /// The name of backend `index`.
    pub fn name(&self, index: usize) -> Option<&str> {
        self.backends.get(index).map(|b| b.name.as_str())
    }

    /// Whether backend `index` takes new connections.
    pub fn is_healthy(&self, index: usize) -> bool {
        self.backends
            .get(index)
            .is_some_and(|b| b.health.is_healthy())
    }

    /// Whether any backend takes new connections.
    pub fn any_healthy(&self) -> bool {
        self.backends.iter().any(|b| b.health.is_healthy())
    }

    /// Open connections of backend `index`.
    pub fn active(&self, index: usize) -> u64 {
        self.backends.get(index).map_or(0, |b| b.active)
    }

    /// Records a check of backend `index` (out of range: ignored) and returns what changed.
    pub fn record(&mut self, index: usize, check: &Check) -> Vec<Event> {
        let policy = self.policy;
        let Some(backend) = self.backends.get_mut(index) else {
            return Vec::new();
        };
        let mut events = Vec::new();
        match backend.health.record(check, policy) {
            Some(Transition::Healthy) => events.push(Event::Healthy {
                backend: backend.name.clone(),
            }),
            Some(Transition::Unhealthy { reason }) => events.push(Event::Unhealthy {
                backend: backend.name.clone(),
                reason,
            }),
            None => {}
        }
        let available = self.any_healthy();
        if available != self.available {
            self.available = available;
            if available {
                events.push(Event::Available {
                    closed: std::mem::take(&mut self.closed),
                });
            } else {
                events.push(Event::Unavailable);
            }
        }
        events
    }

    /// Chooses the backend of a new connection and counts it open there: a healthy backend
    /// with the fewest open connections, ties taken in turn. `None` when none is healthy.
    pub fn pick(&mut self) -> Option<usize> {
        let count = self.backends.len();
        let chosen = (0..count)
            .map(|offset| (self.next + offset) % count)
            .filter(|&i| self.backends[i].health.is_healthy())
            .min_by_key(|&i| self.backends[i].active)?;
        self.backends[chosen].active += 1;
        self.next = (chosen + 1) % count;
        Some(chosen)
    }

    /// A connection of backend `index` has ended.
    pub fn release(&mut self, index: usize) {
        if let Some(backend) = self.backends.get_mut(index) {
            backend.active = backend.active.saturating_sub(1);
        }
    }

    /// A connection to backend `index` could not be made: it ends (as [`Pool::release`]) and
    /// the backend counts as having failed a check, so the next pick avoids it.
    pub fn connect_failed(&mut self, index: usize, reason: String) -> Vec<Event> {
        self.release(index);
        self.record(index, &Check::Fail(reason))
    }

    /// A connection is closed unserved, no backend having become healthy in time. Returns
    /// [`Event::Closing`] for the first one since the last healthy backend went.
    pub fn closed_unserved(&mut self) -> Option<Event> {
        self.closed += 1;
        (self.closed == 1).then_some(Event::Closing)
    }
}
