//! `selfhost demo`: until the one-command demo exists, say plainly how to see the tool work
//! today.

use std::io::Write;

use anyhow::Context;

use crate::args::{DemoArgs, GlobalArgs};
use crate::exit::{CliError, Outcome};

/// Prints what selfhost can do in this build and how to try it.
pub fn run(_global: &GlobalArgs, _args: &DemoArgs) -> Result<Outcome, CliError> {
    let text = "\
selfhost demo: the one-command demo (an upgrade with a live availability report) is not part of
this build yet. Everything it will show can be run by hand today, on the built-in simulator:

  selfhost sim --control-plane-nodes 3 --kubeconfig /tmp/sim.kubeconfig &
  export KUBECONFIG=/tmp/sim.kubeconfig
  selfhost status                    components, versions per node, upgrades in progress
  selfhost plan v1.34.0              preflight, diffs and the disruption to expect
  selfhost apply v1.34.0 --yes       the zero-downtime pivot, step by step

  selfhost manifests v1.33.1         the self-hosted DaemonSets selfhost runs, as YAML
";
    std::io::stdout()
        .write_all(text.as_bytes())
        .context("writing to stdout")?;
    Ok(Outcome::Done)
}
