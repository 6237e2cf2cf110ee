//! Where a connection to an address of a node lands, as the node's kernel decides it: the
//! sockets bound to that very address if there are any (a specific address beats the
//! wildcard), else those bound to every address; among them, the kernel picks. A socket may
//! be a kube-apiserver's or a node-local API front's. The HTTP server's new connections go to
//! the node's API address (through the load balancer when there is one); a front's checks and
//! connections go to its backends' addresses.

use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Weak};

use tokio::time::Instant;

use super::front::{Backends, Front, FrontConnection};
use super::frontend::{ApiFrontEnd, State};
use crate::controllers::kubelet::ProcessId;
use crate::server::{ConnectionRouter, Route, ServingProcess};

/// The port a node's API address listens on: where clients, the load balancer and the
/// kubeconfig reach a control-plane node.
pub(super) const API_PORT: u16 = 6443;

/// What takes a connection.
#[derive(Debug, Clone)]
pub(super) enum Answerer {
    /// A kube-apiserver process.
    Process(Arc<ServingProcess>),
    /// A node-local API front, which passes it on.
    Front(Arc<Front>),
}

/// One listening socket of a node.
struct Socket {
    rank: (usize, ProcessId),
    address: Option<IpAddr>,
    answerer: Answerer,
}

impl ApiFrontEnd {
    /// A control-plane node's API address (`None`: not a control-plane node).
    pub(super) fn api_address(&self, node: &str) -> Option<SocketAddr> {
        self.node_address(node)
            .map(|ip| SocketAddr::new(ip, API_PORT))
    }

    /// The sockets a connection to `to` on `node` may reach at `now`, in bind order.
    fn group(&self, state: &State, node: &str, to: SocketAddr, now: Instant) -> Vec<Answerer> {
        let mut sockets = Vec::new();
        for e in state.nodes.get(node).into_iter().flat_map(|t| t.values()) {
            if e.view.port == to.port() && e.view.holds_port && !e.serving.has_closed_listener() {
                sockets.push(Socket {
                    rank: (e.view.bind_rank, e.view.id),
                    address: e.view.address,
                    answerer: Answerer::Process(e.serving.clone()),
                });
            }
        }
        for e in state.fronts.get(node).into_iter().flat_map(|t| t.values()) {
            if e.front.listen.port() == to.port() && e.view.holds_port && e.front.is_accepting() {
                sockets.push(Socket {
                    rank: (e.view.bind_rank, e.view.id),
                    address: e.view.address,
                    answerer: Answerer::Front(e.front.clone()),
                });
            }
        }
        let specific = sockets.iter().any(|s| s.address == Some(to.ip()));
        let wanted = if specific { Some(to.ip()) } else { None };
        sockets.retain(|s| s.address == wanted);
        // The idealised kernel (joining off) hands connections only to processes that serve;
        // a front accepts from the moment it listens.
        sockets.retain(|s| match &s.answerer {
            Answerer::Process(p) => self.handovers().joining || p.serves(now),
            Answerer::Front(_) => true,
        });
        sockets.sort_by_key(|s| s.rank);
        sockets.into_iter().map(|s| s.answerer).collect()
    }

    /// What takes a new connection to `to` on `node`, as its kernel picks (`None`: refused).
    pub(super) fn reach(
        &self,
        state: &State,
        node: &str,
        to: SocketAddr,
        now: Instant,
    ) -> Option<Answerer> {
        let mut group = self.group(state, node, to, now);
        let index = self.kernel(node)?.pick(group.len())?;
        (index < group.len()).then(|| group.swap_remove(index))
    }

    /// Whether `node`'s API address passes a `/readyz` check now: the process it reaches is
    /// ready, or the front it reaches has a healthy backend (it passes the check on).
    pub(super) fn node_passes(&self, state: &State, node: &str, now: Instant) -> bool {
        let Some(to) = self.api_address(node) else {
            return false;
        };
        match self.reach(state, node, to, now) {
            Some(Answerer::Process(p)) => p.is_ready(now),
            Some(Answerer::Front(f)) => f.any_healthy(),
            None => false,
        }
    }

    /// Whether a front listens on `node`'s API address and has a healthy backend: the node's
    /// API answers through its front.
    pub(crate) fn front_serves(&self, node: &str) -> bool {
        let Some(to) = self.api_address(node) else {
            return false;
        };
        let state = self.lock();
        let group = self.group(&state, node, to, Instant::now());
        !group.is_empty()
            && group
                .iter()
                .all(|a| matches!(a, Answerer::Front(f) if f.any_healthy()))
    }

    /// When the next front's checks are due.
    pub(super) fn next_front_check(&self) -> Option<Instant> {
        let state = self.lock();
        state
            .fronts
            .values()
            .flat_map(|t| t.values())
            .filter(|e| !e.front.has_exited())
            .map(|e| e.front.next_check())
            .min()
    }

    /// Runs every front's checks that are due: each backend's `/readyz`, through the node's
    /// kernel like any connection to the backend's address.
    pub(super) fn check_fronts(&self) {
        let now = Instant::now();
        let state = self.lock();
        for (node, fronts) in &state.fronts {
            for e in fronts.values() {
                if e.front.has_exited() || e.front.next_check() > now {
                    continue;
                }
                e.front.check(now, |to| {
                    matches!(self.reach(&state, node, to, now), Some(Answerer::Process(p)) if p.is_ready(now))
                });
            }
        }
    }

    /// The route of a connection `answerer` takes.
    pub(super) fn route_to(&self, answerer: Option<Answerer>) -> Route {
        match answerer {
            None => Route::Refuse,
            Some(Answerer::Process(p)) => Route::Process(p),
            Some(Answerer::Front(front)) => {
                let backends: Weak<dyn Backends> = self.me();
                Route::Relay(Arc::new(FrontConnection { front, backends }))
            }
        }
    }
}

impl Backends for ApiFrontEnd {
    /// A front's connection to one of its backends: only a kube-apiserver takes it (a front
    /// listening on a backend's address would pass connections to itself; it counts as
    /// refused).
    fn connect(&self, node: &str, to: SocketAddr) -> Option<Arc<ServingProcess>> {
        let now = Instant::now();
        let state = self.lock();
        match self.reach(&state, node, to, now)? {
            Answerer::Process(p) => Some(p),
            Answerer::Front(_) => None,
        }
    }
}

impl ConnectionRouter for ApiFrontEnd {
    fn route(&self) -> Route {
        if !self.is_coupled() {
            return Route::Process(self.unmodelled());
        }
        let now = Instant::now();
        let answerer = {
            let mut state = self.lock();
            if self.balanced() {
                self.balance(&mut state, now)
            } else {
                let first = self.control_planes().first();
                first.and_then(|node| self.reach(&state, node, self.api_address(node)?, now))
            }
        };
        self.route_to(answerer)
    }
}
