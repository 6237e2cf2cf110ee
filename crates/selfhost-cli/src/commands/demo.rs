//! `selfhost demo`: until the simulated cluster and the upgrade engine exist, say plainly what
//! the tool can do today.

use std::io::Write;

use anyhow::Context;

use crate::args::{DemoArgs, GlobalArgs};
use crate::exit::{CliError, Outcome};

/// Prints what selfhost can do in this build and how to try it.
pub fn run(_global: &GlobalArgs, _args: &DemoArgs) -> Result<Outcome, CliError> {
    let text = "\
selfhost demo: the built-in simulated cluster and the upgrade engine are not part of this build yet.

What this build can do today:
  selfhost manifests v1.33.1                      self-hosted control-plane DaemonSets, as YAML
  selfhost manifests v1.33.1 --as static-pods     kubeadm-style static pods
  selfhost manifests v1.33.1 --config kubeadm.yaml --certs-in-secrets

Try: cargo run --release -- manifests v1.33.1 | less
";
    std::io::stdout()
        .write_all(text.as_bytes())
        .context("writing to stdout")?;
    Ok(Outcome::Done)
}
