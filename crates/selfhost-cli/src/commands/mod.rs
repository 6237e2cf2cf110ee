//! One module per command.

pub mod apply;
pub mod apply_summary;
pub mod checkpoint;
pub mod cluster;
pub mod config_file;
pub mod convert;
pub mod demo;
pub mod front;
mod front_placement;
pub mod manifests;
pub mod plan;
pub mod prepull;
pub mod recover;
pub mod running;
pub mod signals;
pub mod sim;
pub mod sim_checkpointer;
pub mod sim_front;
pub mod status;
pub mod trace;

use crate::exit::{CliError, Outcome};

/// How `apply` and `convert` end once the run has an outcome: done, the message is said on
/// stderr (unless `-o json`, whose result line carries it) and the command succeeds; any
/// other outcome ends the command with the message as its error.
/// `builder` with the checkpointer on every control-plane node, as `convert to-self-hosted`
/// installs it, its image running this binary; its clock `speed` times faster than real.
fn with_checkpointer(
    builder: selfhost_sim::cluster::SimClusterBuilder,
    speed: u32,
) -> Result<selfhost_sim::cluster::SimClusterBuilder, CliError> {
    use anyhow::Context;
    let program = std::env::current_exe()
        .context("finding this binary, which the simulated checkpointer runs")?;
    sim_checkpointer::with_checkpointer(
        builder,
        crate::args::DEFAULT_CHECKPOINTER_IMAGE,
        program,
        speed,
    )
    .map_err(|e| CliError::from(anyhow::anyhow!(e).context("rendering the checkpointer")))
}

/// `builder` with a node-local API front on every control-plane node, as `convert
/// to-self-hosted` installs it; its clock `speed` times faster than real.
fn with_front(
    builder: selfhost_sim::cluster::SimClusterBuilder,
    speed: u32,
) -> Result<selfhost_sim::cluster::SimClusterBuilder, CliError> {
    sim_front::with_front(builder, speed)
        .map_err(|e| CliError::from(anyhow::anyhow!(e).context("rendering the API front")))
}

fn conclude(outcome: Outcome, message: String, json: bool) -> Result<Outcome, CliError> {
    if outcome == Outcome::Done {
        if !json {
            crate::ui::say(message);
        }
        Ok(Outcome::Done)
    } else {
        Err(CliError {
            outcome,
            error: anyhow::anyhow!(message),
        })
    }
}
