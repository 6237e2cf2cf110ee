//! Reading `--config FILE` for the CLI: every problem is bad input, notices go to stderr.

use std::path::Path;

use selfhost::{ClusterConfig, KubeVersion, read_config_file};

use crate::exit::CliError;

/// Reads and parses a kubeadm configuration file; every problem is bad input (exit 2).
/// Notices (ignored documents, a `kubernetesVersion` other than `version`) go to stderr.
pub fn read_config(path: &Path, version: Option<&KubeVersion>) -> Result<ClusterConfig, CliError> {
    let file = read_config_file(path, version)?;
    for notice in &file.notices {
        crate::ui::warn(notice);
    }
    Ok(file.config)
}
