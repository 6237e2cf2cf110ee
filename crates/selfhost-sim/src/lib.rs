//! A simulated self-hosted Kubernetes cluster, served over real HTTP so that kube-rs and
//! kubectl talk to it exactly as to a real cluster.
//!
//! This crate never depends on the selfhost engine or core: it is the independent oracle the
//! engine is tested against, and it must behave like Kubernetes, not like what the engine
//! expects.

mod api;
pub mod auth;
pub mod bootstrap;
pub mod bulk;
pub mod cluster;
pub mod controllers;
pub mod defaults;
pub mod discovery;
pub mod error;
pub mod etcd;
pub mod faults;
pub mod gc;
pub mod kubeconfig;
pub mod metrics;
pub mod names;
pub mod node_pki;
pub mod resources;
pub mod selector;
pub mod server;
pub mod store;
pub mod strategic;
pub mod table;
pub mod tls;
pub mod validation;
mod verb;

pub use api::ApiConfig;
pub use cluster::{ClusterError, SimCluster, SimClusterBuilder, SimTimings};
pub use error::ApiError;
pub use faults::{FaultAction, FaultId, Faults, RequestMatcher};
pub use gc::GarbageCollector;
pub use metrics::Metrics;
pub use resources::ResourceType;
pub use server::{SimError, SimServer, SimServerOptions};
pub use store::Store;
pub use verb::Verb;
