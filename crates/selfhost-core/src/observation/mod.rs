//! What the upgrade engine sees of one component, as plain data.
//!
//! The engine reads the cluster once per decision and hands the result to
//! [`crate::pivot::next_step`]; nothing else is remembered between decisions, so every fact a
//! decision needs is a field here — including the current time, which is data like any other
//! so that decisions are reproducible in tests.
//!
//! The constructors in `convert.rs` turn API objects into these structs. They are pure, so the
//! engine's only job is to fetch the objects. Three facts cannot be read from a single snapshot
//! and are documented on their fields: [`IdentitySighting::holder_since`] (when a kube-apiserver
//! process took its identity Lease), [`Observation::stopped`] (processes the engine saw stop)
//! and [`DaemonSetObservation::current_revision_hash`].

#[cfg(test)]
pub(crate) mod builder;
mod cluster;
mod convert;
mod daemonsets;
mod identity;
mod leases;
mod pods;
#[cfg(test)]
mod tests;
pub(crate) mod time;

pub use cluster::{
    ApiHealth, AvailabilitySoFar, HostPlacement, KnownStart, NodeObservation, NodeReadiness,
    Observation, StoppedProcess, place_host,
};
pub use convert::{HOSTNAME_LABEL, IDENTITY_LABEL, IDENTITY_LABEL_VALUE};
pub use daemonsets::{BackupObservation, DaemonSetCounters, DaemonSetObservation};
pub(crate) use identity::sighting_node;
pub use identity::{IdentityPublishing, identity_publishing};
pub use leases::{IDENTITY_FRESHNESS, IdentitySighting, LeaderLease};
pub use pods::{ContainerObservation, ContainerState, PodObservation};
