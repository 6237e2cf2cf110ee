//! The node-local API front's decisions: which of a node's kube-apiservers is healthy, from its
//! `/readyz` checks, and which one takes a new connection.
//!
//! The front (`selfhost front`) listens on the node's API port and passes each connection,
//! TLS untouched, to a kube-apiserver of the node listening on a loopback port. A backend
//! becomes healthy after a number of passing checks in a row and unhealthy at its first
//! failure: a kube-apiserver told to stop fails `/readyz` for its shutdown delay while it
//! still serves its open connections, and from that moment it must get no new ones. Every
//! change of state is returned as an [`Event`], so the engine says each once.

//!
//! Where the front and the node's kube-apiservers listen is [`FrontLayout`]; the front's
//! static pod is [`FrontPod`]. A new front takes the listening socket of the one serving, so
//! that the front's own upgrade loses no connection; what they say to each other is
//! [`handover`].

pub mod handover;
mod health;
mod layout;
mod pod;
mod pool;

pub use health::{BackendHealth, Check, HealthPolicy, Transition};
pub use layout::{
    FRONT_ANNOTATION, FrontLayout, LayoutError, bound_address, listening_on, out_of_front,
    readiness_probed_at,
};
pub use pod::{
    CHECK_SERVER_NAME, CLUSTER_CA_FILE, DEFAULT_SECURE_PORT, FRONT_LABEL, FRONT_MANIFEST,
    FRONT_NAME, FrontPod, FrontTuning, HANDOVER_SOCKET, api_address, is_front,
};
pub use pool::{Event, Pool};

#[cfg(test)]
mod handover_tests;
#[cfg(test)]
mod layout_tests;
#[cfg(test)]
mod tests;
