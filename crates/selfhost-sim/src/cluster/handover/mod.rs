//! The hand-over model: control-plane processes hand the API over the way real ones do, not
//! the way a diagram does. Measured on a real self-hosted control plane (kube-apiserver,
//! kube-controller-manager and kube-scheduler v1.20 as DaemonSet pods, see
//! `docs/simulator.md`), and reproduced here per connection:
//!
//! - **Which process serves a connection.** Per node, the kube-apiserver processes bound to
//!   the shared port; the kernel hands each *new* connection to one of them (at random, or in
//!   turn). One that has created its socket but does not accept yet makes the connection hang;
//!   between accepting and Ready it answers 500 (and, right after accepting, 403 to API
//!   requests: its authorization cache is not loaded). Open connections keep their process.
//! - **Leaving.** On SIGTERM a kube-apiserver leaves the port at once (after
//!   `--shutdown-delay-duration`, with `/readyz` failing meanwhile), closes its idle
//!   keep-alive connections and lingers, serving its watches, until SIGKILL at the end of the
//!   grace period; its pod stays Terminating that long.
//! - **Probes lie.** A readiness probe to the shared port is answered by whichever process
//!   the kernel picks.
//! - **Loopback cross-talk.** A starting apiserver's loopback client may reach the other
//!   process and fail TLS verification, now and then fatally.
//! - **Several nodes.** Clients reach the API through a health-checked load balancer that
//!   sends new connections only to nodes whose `/readyz` passed at its last check.
//! - **Addresses.** A socket binds one address or every address; a connection to an address
//!   reaches the sockets bound to it, else the wildcard's. Processes on distinct addresses
//!   never share connections or probes.
//! - **A node-local API front.** A `selfhost front` process on the node's API address passes
//!   each new connection to a kube-apiserver of the node whose `/readyz` passed its last
//!   check, holds connections while none did, and drains when stopped (`front.rs`).
//!
//! Without port sharing the second process to bind exits `bind: address already in use` and
//! crash-loops under the kubelet's back-off; the model routes to whichever process holds the
//! port. Each behaviour has a switch in [`Handovers`]; the durations are in
//! [`HandoverTimings`], part of the cluster's [`SimTimings`](super::SimTimings).

mod balancer;
mod front;
mod front_table;
mod frontend;
mod kernel;
mod pool;
mod reach;
mod readiness;
mod sockets;
mod timings;

#[cfg(test)]
mod front_tests;

use std::time::Duration;

pub use front::{ApiFrontState, FrontBackendState};
pub use frontend::{ApiFrontEnd, ApiProcessState};
pub use kernel::PortBalancing;
pub use timings::HandoverTimings;

use crate::controllers::kubelet::ImageBehaviour;

/// Loopback cross-talk between two kube-apiservers sharing a port.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CrossTalk {
    /// The chance that a kube-apiserver binding a port another one holds reaches the other
    /// with its loopback client (measured: 2 of 26 starts).
    pub probability: f64,
    /// The chance that such a failure is fatal: the process exits and restarts (measured: 1
    /// of 2).
    pub fatal: f64,
}

impl CrossTalk {
    /// Never.
    pub const NEVER: CrossTalk = CrossTalk {
        probability: 0.0,
        fatal: 0.0,
    };

    /// The measured rates.
    pub fn measured() -> Self {
        CrossTalk {
            probability: 2.0 / 26.0,
            fatal: 0.5,
        }
    }
}

/// A starting kube-apiserver whose loopback client reached another process.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CrossTalkEvent {
    /// Its node.
    pub node: String,
    /// Its pod's uid.
    pub pod_uid: String,
    /// Its process identity.
    pub identity: String,
    /// Whether it exited over it.
    pub fatal: bool,
}

/// The hand-over model's switches. [`Handovers::measured`] (the default) turns every
/// behaviour on with the measured rates; each field turns one off.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Handovers {
    /// How a node's kernel spreads new connections over the sockets of a shared port.
    pub balancing: PortBalancing,
    /// A kube-apiserver takes its share of new connections from the moment its socket exists
    /// (they hang, then get 500 until it is Ready). Off: the kernel hands connections only to
    /// processes that already serve.
    pub joining: bool,
    /// Right after accepting, a kube-apiserver answers API requests with 403 until its
    /// authorization cache is loaded.
    pub early_forbidden: bool,
    /// On SIGTERM a kube-apiserver leaves the port at once (after its shutdown delay), closes
    /// idle connections and lingers until SIGKILL. Off: it holds its socket until it exits,
    /// after the kubelet's stop latency.
    pub leaving: bool,
    /// Readiness probes of a shared port are answered by whichever process the kernel picks.
    /// Off: each container's probe is answered by its own process.
    pub lying_probes: bool,
    /// Loopback cross-talk between apiservers sharing a port.
    pub cross_talk: CrossTalk,
    /// With several control-plane nodes, clients reach the API through a health-checked load
    /// balancer. Off: the kubeconfig points at the first control-plane node.
    pub load_balancer: bool,
}

impl Handovers {
    /// Every behaviour on, with the measured rates.
    pub fn measured() -> Self {
        Handovers {
            balancing: PortBalancing::Random { seed: 0x5e1f_4057 },
            joining: true,
            early_forbidden: true,
            leaving: true,
            lying_probes: true,
            cross_talk: CrossTalk::measured(),
            load_balancer: true,
        }
    }

    /// How a kube-apiserver image's processes behave under this model: when their socket
    /// appears and when they accept, and how they leave. The cluster gives every
    /// kube-apiserver image of its registry this behaviour; a test that adds one of its own
    /// builds on it (`ImageBehaviour { crash_after: …, ..model.apiserver_behaviour(&t) }`).
    pub fn apiserver_behaviour(&self, timings: &HandoverTimings) -> ImageBehaviour {
        ImageBehaviour {
            listen_delay: if self.joining {
                timings.socket_after
            } else {
                Duration::ZERO
            },
            accept_delay: self.joining.then_some(timings.accept_after),
            ignores_sigterm: self.leaving,
            closes_listener_on_sigterm: self.leaving,
            ..ImageBehaviour::default()
        }
    }
}

impl Default for Handovers {
    fn default() -> Self {
        Self::measured()
    }
}
