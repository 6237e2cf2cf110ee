//! `selfhost manifests <VERSION>`: the control-plane manifests for a version, as YAML.

use std::io::Write;

use anyhow::{Context, anyhow};
use selfhost::{KubeVersion, ManifestEncoding, ManifestForm, SUPPORTED_VERSIONS, manifests};

use crate::args::{GlobalArgs, ManifestForm as Form, ManifestsArgs, OutputFormat};
use crate::exit::{CliError, Outcome};

/// Renders the manifests and prints them.
pub fn run(global: &GlobalArgs, args: &ManifestsArgs) -> Result<Outcome, CliError> {
    let version = KubeVersion::parse(&args.target).map_err(CliError::bad_input)?;
    let form = match (args.form, args.certs_in_secrets) {
        (Form::StaticPods, true) => {
            return Err(CliError::bad_input(anyhow!(
                "--certs-in-secrets applies to DaemonSets only; drop it or use --as daemonsets"
            )));
        }
        (Form::StaticPods, false) => ManifestForm::StaticPods,
        (Form::Daemonsets, certs_in_secrets) => ManifestForm::DaemonSets { certs_in_secrets },
    };
    if !SUPPORTED_VERSIONS.contains(&version) {
        crate::ui::warn(format!(
            "{version} is outside the versions this release of selfhost supports ({SUPPORTED_VERSIONS}); \
             the manifests follow current kubeadm and may not suit it"
        ));
    }
    let config = match &args.config {
        Some(path) => Some(super::config_file::read_config(path, Some(&version))?),
        None => None,
    };
    let encoding = match global.output {
        OutputFormat::Text | OutputFormat::Yaml => ManifestEncoding::Yaml,
        OutputFormat::Json => ManifestEncoding::JsonList,
    };
    let rendered = manifests(
        config.as_ref(),
        args.config.as_deref(),
        &version,
        form,
        encoding,
    )?;
    for warning in rendered.warnings {
        crate::ui::warn(warning);
    }
    let mut stdout = std::io::stdout().lock();
    stdout
        .write_all(rendered.text.as_bytes())
        .context("writing to stdout")?;
    stdout.flush().context("writing to stdout")?;
    Ok(Outcome::Done)
}
