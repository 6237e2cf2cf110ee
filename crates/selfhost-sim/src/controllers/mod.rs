//! Controllers and kubelets of the simulated cluster, as pure decision logic.
//!
//! Everything here is a function (or a state machine with explicit state) over plain API
//! objects and an injected `now`: no I/O, no tasks, no clock. The wiring reads objects from the
//! store, calls these functions, and writes back what they decide, so the same logic runs in
//! table tests, in the simulated cluster at full speed, and at human pace in `selfhost sim`.
//! That wiring is [`crate::cluster`].
//!
//! - [`daemonset`]: the DaemonSet controller's reconcile (pods, ControllerRevisions,
//!   RollingUpdate with maxUnavailable/maxSurge, OnDelete, status).
//! - [`scheduler`]: which node a pending pod binds to, or why none fits.
//! - [`node_lifecycle`]: node health from heartbeats, condition taints, taint-based eviction.
//! - [`kubelet`]: per-node pod lifecycle, images, host ports, static and mirror pods.
//! - [`affinity`], [`taints`], [`objects`], [`backoff`], [`clock`]: shared rules.

pub mod affinity;
pub mod backoff;
pub mod clock;
pub mod objects;
pub mod scheduler;
pub mod taints;

pub mod daemonset;
#[cfg(test)]
mod fixtures;
pub mod kubelet;
pub mod node_lifecycle;

#[cfg(test)]
mod composition_tests;
