//! One module per command.

pub mod apply;
pub mod apply_summary;
pub mod cluster;
pub mod config_file;
pub mod convert;
pub mod demo;
pub mod manifests;
pub mod plan;
pub mod prepull;
pub mod signals;
pub mod sim;
pub mod status;
pub mod trace;
