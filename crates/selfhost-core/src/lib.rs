//! Pure domain of selfhost: no I/O and no Kubernetes client.
//!
//! Everything here is a function over owned data, so that the engine's decisions, the
//! manifests it writes and the policies it enforces can be tested table-driven.

pub mod backup;
pub mod certificates;
pub mod chain;
pub mod checkpoint;
pub mod command_line;
pub mod component;
pub mod config;
pub mod control_plane;
pub mod conversion;
pub mod daemonset;
pub mod disruption;
pub mod etcd;
pub mod etcd_versions;
pub mod front;
pub mod live_target;
pub mod node_fronts;
pub mod observation;
pub mod pivot;
pub mod preflight;
pub mod prepull;
pub mod recover;
pub mod removals;
pub mod render;
pub mod report;
pub mod rollout;
pub mod skew;
#[cfg(test)]
mod test_support;
pub mod version;

pub use component::Component;
pub use version::KubeVersion;
