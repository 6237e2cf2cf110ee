//! Reading `--config FILE`: a kubeadm configuration from disk, every problem named with the
//! file and what to pass instead.

use std::path::{Path, PathBuf};

use selfhost_core::KubeVersion;
use selfhost_core::config::{ClusterConfig, ConfigError};

/// A kubeadm configuration is a few kilobytes; anything this large is not one.
const MAX_CONFIG_BYTES: u64 = 1024 * 1024;

/// A configuration file that cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum ConfigFileError {
    /// The file cannot be read.
    #[error("cannot read the configuration file {}", path.display())]
    Unreadable {
        /// The file.
        path: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
    /// A directory or a device.
    #[error(
        "the configuration file {} is not a regular file; pass a kubeadm ClusterConfiguration \
         YAML file",
        path.display()
    )]
    NotAFile {
        /// The path.
        path: PathBuf,
    },
    /// Far too large to be a kubeadm configuration.
    #[error(
        "the configuration file {} is {bytes} bytes; a kubeadm configuration is at most a few \
         kilobytes (limit {MAX_CONFIG_BYTES} bytes) — is this the right file?",
        path.display()
    )]
    TooLarge {
        /// The file.
        path: PathBuf,
        /// Its size.
        bytes: u64,
    },
    /// Not text.
    #[error(
        "the configuration file {} is not UTF-8 text; pass a kubeadm ClusterConfiguration YAML \
         file",
        path.display()
    )]
    NotText {
        /// The file.
        path: PathBuf,
    },
    /// Text, but not a kubeadm configuration selfhost can use.
    #[error("the configuration file {} is not a valid kubeadm configuration", path.display())]
    Invalid {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        source: ConfigError,
    },
}

/// A configuration read from a file, with what the user should know about it.
#[derive(Debug, Clone)]
pub struct ConfigFile {
    /// The file.
    pub path: PathBuf,
    /// The normalised, defaulted configuration.
    pub config: ClusterConfig,
    /// Documents and settings accepted without effect, and a `kubernetesVersion` other than
    /// the version asked for, in words.
    pub notices: Vec<String>,
}

/// Reads and parses a kubeadm configuration file. `version`, when given, is the version the
/// command renders: a file naming another one gets a notice.
///
/// # Errors
/// The file cannot be read or is not a kubeadm configuration.
pub fn read(path: &Path, version: Option<&KubeVersion>) -> Result<ConfigFile, ConfigFileError> {
    let owned = || path.to_path_buf();
    let unreadable = |source| ConfigFileError::Unreadable {
        path: owned(),
        source,
    };
    let metadata = std::fs::metadata(path).map_err(unreadable)?;
    if !metadata.is_file() {
        return Err(ConfigFileError::NotAFile { path: owned() });
    }
    if metadata.len() > MAX_CONFIG_BYTES {
        return Err(ConfigFileError::TooLarge {
            path: owned(),
            bytes: metadata.len(),
        });
    }
    let bytes = std::fs::read(path).map_err(unreadable)?;
    let text = String::from_utf8(bytes).map_err(|_| ConfigFileError::NotText { path: owned() })?;
    let parsed = ClusterConfig::from_yaml(&text).map_err(|source| ConfigFileError::Invalid {
        path: owned(),
        source,
    })?;
    let shown = path.display();
    let mut notices: Vec<String> = parsed
        .notices
        .iter()
        .map(|notice| format!("{shown}: {notice}"))
        .collect();
    if let (Some(named), Some(version)) = (&parsed.config.kubernetes_version, version)
        && named.to_string() != version.to_string()
    {
        notices.push(format!(
            "{shown} names kubernetesVersion {named}; rendering {version} as asked on the \
             command line"
        ));
    }
    Ok(ConfigFile {
        path: owned(),
        config: parsed.config,
        notices,
    })
}
