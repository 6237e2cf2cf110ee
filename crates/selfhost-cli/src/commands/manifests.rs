//! `selfhost manifests <VERSION>`: the control-plane manifests for a version, as YAML.

use std::io::Write;

use anyhow::{Context, anyhow};
use selfhost_core::KubeVersion;
use selfhost_core::config::ClusterConfig;
use selfhost_core::control_plane::{NodeContext, static_pods};
use selfhost_core::daemonset::{DaemonSetOptions, build_daemonset};
use selfhost_core::render;
use selfhost_core::skew::SUPPORTED_VERSIONS;

use crate::args::{GlobalArgs, ManifestForm, ManifestsArgs, OutputFormat};
use crate::exit::{CliError, Outcome};

/// Renders the manifests and prints them.
pub fn run(global: &GlobalArgs, args: &ManifestsArgs) -> Result<Outcome, CliError> {
    let version = KubeVersion::parse(&args.target).map_err(CliError::bad_input)?;
    if args.certs_in_secrets && args.form == ManifestForm::StaticPods {
        return Err(CliError::bad_input(anyhow!(
            "--certs-in-secrets applies to DaemonSets only; drop it or use --as daemonsets"
        )));
    }
    if !SUPPORTED_VERSIONS.contains(&version) {
        crate::ui::warn(format!(
            "{version} is outside the versions this release of selfhost supports ({SUPPORTED_VERSIONS}); \
             the manifests follow current kubeadm and may not suit it"
        ));
    }
    let config = match &args.config {
        Some(path) => super::config_file::read_config(path, &version)?,
        None => ClusterConfig::default_for(&version),
    };

    let pods = static_pods(&config, &NodeContext::default(), &version);
    let documents: Vec<serde_json::Value> = match args.form {
        ManifestForm::StaticPods => pods
            .iter()
            .map(|(_, pod)| serde_json::to_value(pod))
            .collect::<Result<_, _>>()
            .context("rendering static pods")?,
        ManifestForm::Daemonsets => {
            let options = DaemonSetOptions {
                certs_in_secrets: args.certs_in_secrets,
            };
            let mut out = Vec::with_capacity(pods.len());
            for (component, pod) in &pods {
                let ds = build_daemonset(*component, pod, &options).map_err(CliError::bad_input)?;
                out.push(serde_json::to_value(ds).context("rendering DaemonSets")?);
            }
            out
        }
    };

    let text = match global.output {
        OutputFormat::Text | OutputFormat::Yaml => {
            render::to_yaml_stream(&documents).context("rendering YAML")?
        }
        OutputFormat::Json => {
            let list = render::to_json_list(&documents).context("rendering JSON")?;
            let mut text = serde_json::to_string_pretty(&list).context("rendering JSON")?;
            text.push('\n');
            text
        }
    };
    let mut stdout = std::io::stdout().lock();
    stdout
        .write_all(text.as_bytes())
        .context("writing to stdout")?;
    stdout.flush().context("writing to stdout")?;
    Ok(Outcome::Done)
}
