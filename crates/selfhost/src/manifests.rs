//! `manifests`: the control-plane manifests of a version, as static pods or as the DaemonSets
//! selfhost runs, rendered as YAML or a JSON `List`. A component the version would not start
//! (a flag or feature gate its release refuses) is refused by name rather than rendered.

use k8s_openapi::api::core::v1::PodTemplateSpec;
use selfhost_core::KubeVersion;
use selfhost_core::component::Component;
use selfhost_core::config::ClusterConfig;
use selfhost_core::control_plane::{NodeContext, static_pods};
use selfhost_core::daemonset::{CertsError, DaemonSetOptions, build_daemonset};
use selfhost_core::preflight::{Check, Verdict, flags_and_gates};
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

/// The rendered manifests, and what the version ignores in them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RenderedManifests {
    /// The objects, encoded.
    pub text: String,
    /// One line per finding the version ignores (a feature gate at its locked value): the
    /// components still start.
    pub warnings: Vec<String>,
}

/// Manifests that cannot be rendered.
#[derive(Debug, thiserror::Error)]
pub enum ManifestsError {
    /// A component carries a flag or feature gate the version refuses: it would never start.
    #[error(
        "{version} would not start {}, so nothing is rendered:\n- {}",
        components.join(", "),
        refusals.join("\n- ")
    )]
    Refused {
        /// The version, as given.
        version: String,
        /// The components it would not start.
        components: Vec<String>,
        /// What it refuses in each, with the fix.
        refusals: Vec<String>,
    },
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

/// The manifests of `version` for `config` (kubeadm's defaults when `None`); `config_path`
/// names the file an operator edits, for the fix of a refusal.
///
/// # Errors
/// A component carries a flag or feature gate `version` refuses, or the objects cannot be
/// built or serialised.
pub fn render_manifests(
    config: Option<&ClusterConfig>,
    config_path: Option<&str>,
    version: &KubeVersion,
    form: ManifestForm,
    encoding: ManifestEncoding,
) -> Result<RenderedManifests, ManifestsError> {
    let defaults;
    let config = match config {
        Some(config) => config,
        None => {
            defaults = ClusterConfig::default_for(version);
            &defaults
        }
    };
    let pods = static_pods(config, &NodeContext::default(), version);
    let warnings = flags_findings(&pods, config_path, version)?;
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
    let text = match encoding {
        ManifestEncoding::Yaml => render::to_yaml_stream(&documents)?,
        ManifestEncoding::JsonList => {
            let mut text = serde_json::to_string_pretty(&render::to_json_list(&documents)?)?;
            text.push('\n');
            text
        }
    };
    Ok(RenderedManifests { text, warnings })
}

/// The flags-and-gates findings over `pods` at `version`: the warnings, or the refusal when
/// the version would not start a component.
fn flags_findings(
    pods: &[(Component, k8s_openapi::api::core::v1::Pod)],
    config_path: Option<&str>,
    version: &KubeVersion,
) -> Result<Vec<String>, ManifestsError> {
    let line = |c: Check| {
        let component = c.component.map(|c| c.to_string()).unwrap_or_default();
        match c.fix {
            Some(fix) => format!("{component}: {} (fix: {fix})", c.message),
            None => format!("{component}: {}", c.message),
        }
    };
    let mut refused = Vec::new();
    let mut warnings = Vec::new();
    for (component, pod) in pods {
        let template = PodTemplateSpec {
            metadata: None,
            spec: pod.spec.clone(),
        };
        let origin = match config_path {
            Some(path) => format!("{path}, {component}'s extraArgs"),
            None => "the kubeadm configuration's extraArgs".to_string(),
        };
        for check in flags_and_gates(*component, &template, version.minor_version(), &origin) {
            match check.verdict {
                Verdict::Fail => refused.push((*component, line(check))),
                _ => warnings.push(line(check)),
            }
        }
    }
    if refused.is_empty() {
        return Ok(warnings);
    }
    let mut components: Vec<String> = refused.iter().map(|(c, _)| c.to_string()).collect();
    components.dedup();
    Err(ManifestsError::Refused {
        version: version.to_string(),
        components,
        refusals: refused.into_iter().map(|(_, line)| line).collect(),
    })
}
