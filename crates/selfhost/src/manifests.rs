//! `manifests`: the control-plane manifests of a version, as static pods or as the DaemonSets
//! selfhost runs, rendered as YAML or a JSON `List`.

use selfhost_core::KubeVersion;
use selfhost_core::config::ClusterConfig;
use selfhost_core::control_plane::{NodeContext, static_pods};
use selfhost_core::daemonset::{CertsError, DaemonSetOptions, build_daemonset};
use selfhost_core::render::{self, RenderError};

/// Which objects to render.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ManifestForm {
    /// The kubelet's static pods, as kubeadm writes them.
    StaticPods,
    /// The self-hosted DaemonSets.
    DaemonSets {
        /// Mount certificates and kubeconfigs from Secrets instead of the node's disk.
        certs_in_secrets: bool,
    },
}

/// How to write them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ManifestEncoding {
    /// A YAML stream, one document per object.
    Yaml,
    /// A JSON `v1/List`.
    JsonList,
}

/// Manifests that cannot be rendered.
#[derive(Debug, thiserror::Error)]
pub enum ManifestsError {
    /// The certificates cannot be moved into Secrets.
    #[error(transparent)]
    Certs(#[from] CertsError),
    /// Serialising failed.
    #[error(transparent)]
    Render(#[from] RenderError),
    /// Serialising to JSON failed.
    #[error("cannot render JSON")]
    Json(#[from] serde_json::Error),
}

/// The manifests of `version` for `config` (kubeadm's defaults when `None`).
///
/// # Errors
/// The objects cannot be built or serialised.
pub fn render_manifests(
    config: Option<&ClusterConfig>,
    version: &KubeVersion,
    form: ManifestForm,
    encoding: ManifestEncoding,
) -> Result<String, ManifestsError> {
    let defaults;
    let config = match config {
        Some(config) => config,
        None => {
            defaults = ClusterConfig::default_for(version);
            &defaults
        }
    };
    let pods = static_pods(config, &NodeContext::default(), version);
    let documents: Vec<serde_json::Value> = match form {
        ManifestForm::StaticPods => pods
            .iter()
            .map(|(_, pod)| serde_json::to_value(pod))
            .collect::<Result<_, _>>()?,
        ManifestForm::DaemonSets { certs_in_secrets } => {
            let options = DaemonSetOptions { certs_in_secrets };
            let mut out = Vec::with_capacity(pods.len());
            for (component, pod) in &pods {
                out.push(serde_json::to_value(build_daemonset(
                    *component, pod, &options,
                )?)?);
            }
            out
        }
    };
    Ok(match encoding {
        ManifestEncoding::Yaml => render::to_yaml_stream(&documents)?,
        ManifestEncoding::JsonList => {
            let mut text = serde_json::to_string_pretty(&render::to_json_list(&documents)?)?;
            text.push('\n');
            text
        }
    })
}
