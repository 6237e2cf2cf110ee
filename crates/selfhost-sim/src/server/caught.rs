//! Which process caught each connection: what a packet capture on the nodes would tell an
//! operator after the fact. The accept loop notes, per client address, where the router sent
//! the connection; a client in the same process (the availability prober) looks its own
//! connection's local address up to say which process answered — or failed — a request.
//! Only an observer: nothing here changes how a connection is served.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use super::routing::ServingProcess;

/// How many connections are remembered before the oldest are forgotten.
const MAX_REMEMBERED: usize = 16_384;

/// Where one connection went.
#[derive(Debug, Clone)]
pub enum Catcher {
    /// The simulator served it with no process model (the model is off).
    Direct,
    /// Nothing listened where the router sent it (no node passed the load balancer's check,
    /// or no socket was bound on the node): reset at once.
    Refused,
    /// That process's socket got it (directly, or through a node's API front).
    Process(Arc<ServingProcess>),
    /// A node's API front (named) accepted it and has passed it to no process: it holds it,
    /// or closed it unserved.
    Front(String),
}

/// The connections accepted so far, by client address (the latest connection from each).
#[derive(Debug, Default)]
pub struct ConnectionLog {
    by_client: Mutex<HashMap<SocketAddr, Catcher>>,
}

impl ConnectionLog {
    /// Notes where the connection from `client` went.
    pub(crate) fn note(&self, client: SocketAddr, catcher: Catcher) {
        let mut map = self.by_client.lock().unwrap_or_else(|e| e.into_inner());
        // Bounded for a long-running simulator: a lookup is made right after the request,
        // so only recent connections matter.
        if map.len() >= MAX_REMEMBERED {
            map.clear();
        }
        map.insert(client, catcher);
    }

    /// The processes that caught a connection still remembered, each once (for figures of
    /// how many connections a broken process caught: [`ServingProcess::connections`]).
    pub fn processes(&self) -> Vec<Arc<ServingProcess>> {
        let map = self.by_client.lock().unwrap_or_else(|e| e.into_inner());
        let mut out: Vec<Arc<ServingProcess>> = Vec::new();
        for catcher in map.values() {
            if let Catcher::Process(p) = catcher
                && !out.iter().any(|known| Arc::ptr_eq(known, p))
            {
                out.push(p.clone());
            }
        }
        out
    }

    /// Where the latest connection from `client` went, if the server accepted one.
    pub fn catcher(&self, client: SocketAddr) -> Option<Catcher> {
        let map = self.by_client.lock().unwrap_or_else(|e| e.into_inner());
        map.get(&client).cloned()
    }
}
