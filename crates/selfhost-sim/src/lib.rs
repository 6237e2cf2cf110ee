//! A simulated self-hosted Kubernetes cluster, served over real HTTP so that kube-rs and
//! kubectl talk to it exactly as to a real cluster.
//!
//! This crate never depends on the selfhost engine or core: it is the independent oracle the
//! engine is tested against, and it must behave like Kubernetes, not like what the engine
//! expects.

pub mod controllers;
pub mod defaults;
pub mod discovery;
pub mod error;
pub mod resources;
pub mod selector;
pub mod strategic;
pub mod table;
pub mod tls;
pub mod validation;

pub use error::ApiError;
pub use resources::ResourceType;
