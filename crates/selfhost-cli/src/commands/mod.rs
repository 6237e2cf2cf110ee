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

/// Ends a command that put a node agent's static pod on a node or took it away: says what
/// it did to `node` (in JSON under `agent`, the agent's name) and succeeds, or, when the
/// agent does not run (`fix` says what to check), exits as not restored.
fn conclude_on_node<T: serde::Serialize + std::fmt::Display>(
    global: &crate::args::GlobalArgs,
    node: &str,
    agent: &str,
    result: &T,
    fix: Option<&str>,
) -> Result<Outcome, CliError> {
    let message = format!("node {node}: {result}");
    let json = global.output == crate::args::OutputFormat::Json;
    if json {
        let mut line = serde_json::json!({
            "event": "result",
            "outcome": if fix.is_none() { "done" } else { "not-restored" },
            "message": message,
        });
        line[agent] = serde_json::to_value(result)
            .map_err(|e| CliError::from(anyhow::anyhow!(e).context("rendering the result")))?;
        crate::ui::json_line(&line)?;
    }
    match fix {
        None => conclude(Outcome::Done, message, json),
        Some(fix) => conclude(Outcome::NotRestored, format!("{message}; {fix}"), json),
    }
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
