//! Reading `--config FILE`: a kubeadm configuration, with every problem reported as bad input.

use std::path::Path;

use anyhow::{Context, anyhow};
use selfhost_core::KubeVersion;
use selfhost_core::config::ClusterConfig;

use crate::exit::CliError;

/// A kubeadm configuration is a few kilobytes; anything this large is not one.
const MAX_CONFIG_BYTES: u64 = 1024 * 1024;

/// Reads and parses a kubeadm configuration file; every problem is bad input (exit 2).
/// Notices (ignored documents, a different `kubernetesVersion`) go to stderr.
pub fn read_config(path: &Path, version: &KubeVersion) -> Result<ClusterConfig, CliError> {
    let shown = path.display();
    let metadata = std::fs::metadata(path)
        .with_context(|| format!("cannot read the configuration file {shown}"))
        .map_err(CliError::bad_input)?;
    if !metadata.is_file() {
        return Err(CliError::bad_input(anyhow!(
            "the configuration file {shown} is not a regular file; pass a kubeadm ClusterConfiguration YAML file"
        )));
    }
    if metadata.len() > MAX_CONFIG_BYTES {
        return Err(CliError::bad_input(anyhow!(
            "the configuration file {shown} is {} bytes; a kubeadm configuration is at most a few kilobytes \
             (limit {MAX_CONFIG_BYTES} bytes) — is this the right file?",
            metadata.len()
        )));
    }
    let bytes = std::fs::read(path)
        .with_context(|| format!("cannot read the configuration file {shown}"))
        .map_err(CliError::bad_input)?;
    let text = String::from_utf8(bytes).map_err(|_| {
        CliError::bad_input(anyhow!(
            "the configuration file {shown} is not UTF-8 text; pass a kubeadm ClusterConfiguration YAML file"
        ))
    })?;
    let parsed = ClusterConfig::from_yaml(&text)
        .map_err(|e| CliError::bad_input(anyhow!(e).context(format!("in {shown}"))))?;
    for notice in &parsed.notices {
        crate::ui::warn(format!("{shown}: {notice}"));
    }
    if let Some(named) = &parsed.config.kubernetes_version
        && named.to_string() != version.to_string()
    {
        crate::ui::warn(format!(
            "{shown} names kubernetesVersion {named}; rendering {version} as asked on the command line"
        ));
    }
    Ok(parsed.config)
}
