//! The load balancer in front of several control-plane nodes (kubeadm's HA pattern): it
//! checks each node's `/readyz` every interval, through whatever answers the node's API
//! address (its front, or its kernel's pick of the kube-apiservers) like any connection, and
//! sends each new connection to the next node, in turn, whose last check passed; a node where
//! nothing listens any more is skipped for the next (HAProxy's `option redispatch`). With no
//! healthy node the connection is reset.

use tokio::time::Instant;

use super::frontend::{ApiFrontEnd, State};
use super::reach::Answerer;

impl ApiFrontEnd {
    /// One round of health checks.
    pub(super) fn check_nodes(&self) {
        let now = Instant::now();
        let mut state = self.lock();
        for node in self.control_planes() {
            let passed = self.node_passes(&state, node, now);
            state.healthy.insert(node.clone(), passed);
        }
    }

    /// What a new connection reaches through the load balancer.
    pub(super) fn balance(&self, state: &mut State, now: Instant) -> Option<Answerer> {
        let nodes = self.control_planes();
        for step in 0..nodes.len() {
            let index = (state.cursor + step) % nodes.len();
            let node = &nodes[index];
            if !state.healthy.get(node).copied().unwrap_or(false) {
                continue;
            }
            let Some(to) = self.api_address(node) else {
                continue;
            };
            if let Some(answerer) = self.reach(state, node, to, now) {
                state.cursor = (index + 1) % nodes.len();
                return Some(answerer);
            }
        }
        None
    }
}
