//! One module per command.

pub mod apply;
pub mod apply_summary;
pub mod cluster;
pub mod config_file;
pub mod demo;
pub mod manifests;
pub mod plan;
pub mod prepull;
pub mod sim;
pub mod status;
