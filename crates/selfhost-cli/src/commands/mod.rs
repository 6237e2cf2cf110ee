//! One module per command.

pub mod demo;
pub mod manifests;
