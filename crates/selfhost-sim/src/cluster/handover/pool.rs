//! One front's backends as the front decides on them: healthy after one passing check,
//! unhealthy at the first failure (or a refused connection); each new connection goes to a
//! healthy backend with the fewest open connections, ties taken in turn.

use std::net::SocketAddr;

/// One backend.
#[derive(Debug, Clone)]
pub(super) struct Backend {
    pub address: SocketAddr,
    pub healthy: bool,
    /// Connections passed to it and still open.
    pub open: u64,
}

/// The backends of a front, none healthy until checked.
#[derive(Debug, Clone)]
pub(super) struct Pool {
    pub backends: Vec<Backend>,
    /// Where the next tie-break starts.
    next: usize,
}

impl Pool {
    pub fn new(addresses: &[SocketAddr]) -> Pool {
        Pool {
            backends: addresses
                .iter()
                .map(|&address| Backend {
                    address,
                    healthy: false,
                    open: 0,
                })
                .collect(),
            next: 0,
        }
    }

    /// Records a check of backend `index`; whether it became healthy.
    pub fn record(&mut self, index: usize, passed: bool) -> bool {
        let Some(backend) = self.backends.get_mut(index) else {
            return false;
        };
        let rose = passed && !backend.healthy;
        backend.healthy = passed;
        rose
    }

    /// Whether any backend takes new connections.
    pub fn any_healthy(&self) -> bool {
        self.backends.iter().any(|b| b.healthy)
    }

    /// The backend of a new connection, counted open there: a healthy one with the fewest
    /// open connections, ties taken in turn. `None` when none is healthy.
    pub fn pick(&mut self) -> Option<usize> {
        let count = self.backends.len();
        let chosen = (0..count)
            .map(|offset| (self.next + offset) % count)
            .filter(|&i| self.backends[i].healthy)
            .min_by_key(|&i| self.backends[i].open)?;
        self.backends[chosen].open += 1;
        self.next = (chosen + 1) % count;
        Some(chosen)
    }

    /// A connection of backend `index` ended.
    pub fn release(&mut self, index: usize) {
        if let Some(backend) = self.backends.get_mut(index) {
            backend.open = backend.open.saturating_sub(1);
        }
    }

    /// A connection to backend `index` was refused: it ends, and the backend counts as having
    /// failed a check.
    pub fn connect_failed(&mut self, index: usize) {
        self.release(index);
        self.record(index, false);
    }

    /// Connections open through the front.
    pub fn open(&self) -> u64 {
        self.backends.iter().map(|b| b.open).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pool() -> Pool {
        Pool::new(&[
            "127.0.0.1:6443".parse().unwrap(),
            "127.0.0.2:6443".parse().unwrap(),
        ])
    }

    #[test]
    fn new_connections_go_to_the_healthy_backend_with_the_fewest_open_ones() {
        let mut pool = pool();
        assert_eq!(pool.pick(), None, "none checked yet");
        assert!(pool.record(0, true), "one pass makes it healthy");
        assert!(!pool.record(0, true), "and only once");
        assert_eq!([pool.pick(), pool.pick()], [Some(0), Some(0)]);
        pool.record(1, true);
        assert_eq!(pool.pick(), Some(1), "the one with fewer open connections");
        assert_eq!(pool.pick(), Some(1));
        // Two each: ties in turn.
        assert_eq!([pool.pick(), pool.pick()], [Some(0), Some(1)]);
        pool.record(1, false);
        assert_eq!(pool.pick(), Some(0), "one failure takes it out");
        assert_eq!(pool.open(), 7, "its open connections stay counted");
        pool.connect_failed(0);
        assert_eq!((pool.pick(), pool.open()), (None, 6));
        pool.release(1);
        assert_eq!(pool.backends[1].open, 2);
    }
}
