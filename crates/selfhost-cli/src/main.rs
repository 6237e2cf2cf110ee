//! `selfhost`: upgrade a self-hosted Kubernetes control plane with no API downtime.
//!
//! Results go to stdout, logs and progress to stderr (kubectl's convention), and the exit code
//! says how the command ended (see `exit.rs` and docs/design.md).

mod args;
mod commands;
mod exit;
mod progress;
mod ui;

use std::io::{self, IsTerminal, Write};
use std::process::ExitCode;

use clap::Parser;
use tracing_subscriber::EnvFilter;

use crate::args::{Cli, Command};
use crate::exit::{CliError, Outcome};

fn main() -> ExitCode {
    let cli = Cli::parse();
    init_logging(cli.global.verbose);
    match run(cli) {
        Ok(outcome) => outcome.into(),
        Err(err) if is_broken_pipe(&err.error) => Outcome::Done.into(),
        Err(err) => {
            let _ = writeln!(io::stderr(), "error: {err}");
            err.outcome.into()
        }
    }
}

fn run(cli: Cli) -> Result<Outcome, CliError> {
    match &cli.command {
        Command::Manifests(args) => commands::manifests::run(&cli.global, args),
        Command::Demo(args) => block_on(commands::demo::run(&cli.global, args)),
        Command::Status(args) => block_on(commands::status::run(&cli.global, args)),
        Command::Plan(args) => block_on(commands::plan::run(&cli.global, args)),
        Command::Apply(args) => block_on(commands::apply::run(&cli.global, args)),
        Command::Convert(args) => block_on(commands::convert::run(&cli.global, args)),
        Command::Sim(args) => block_on(commands::sim::run(&cli.global, args)),
        Command::Checkpoint(args) => block_on(commands::checkpoint::run(&cli.global, args)),
        Command::Recover(args) => block_on(commands::recover::run(&cli.global, args)),
        Command::Front(args) => block_on(commands::front::run(&cli.global, args)),
    }
}

/// Runs an async command on a multi-threaded runtime (watches and probes run beside the work).
fn block_on(
    command: impl std::future::Future<Output = Result<Outcome, CliError>>,
) -> Result<Outcome, CliError> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| {
            CliError::from(anyhow::Error::from(e).context("starting the async runtime"))
        })?;
    runtime.block_on(command)
}

fn init_logging(verbose: u8) {
    // kube-rs logs every dropped connection as an error; during an apiserver hand-over those
    // are expected and the engine rides them out, so they are shown only with -vv and more.
    let default = match verbose {
        0 => "warn,kube_client=off,kube_runtime=off",
        1 => "info,kube_client=off,kube_runtime=off",
        2 => "debug",
        _ => "trace",
    };
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(default));
    // Colours only for a person at a terminal who has not asked for none (no-color.org).
    let colour =
        io::stderr().is_terminal() && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty());
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(colour)
        .with_writer(io::stderr)
        .try_init();
}

/// `selfhost manifests | head` closes stdout early; that is the reader's choice, not a failure.
fn is_broken_pipe(err: &anyhow::Error) -> bool {
    err.chain().any(|cause| {
        cause
            .downcast_ref::<io::Error>()
            .is_some_and(|e| e.kind() == io::ErrorKind::BrokenPipe)
    })
}
