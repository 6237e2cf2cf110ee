//! `selfhost checkpoint`: the node agent that keeps this node's control-plane pods on disk and
//! starts them without the API after a reboot or a power cut. It runs until SIGINT or
//! SIGTERM, and says on stderr what it does.

use selfhost::{CheckpointOptions, CheckpointPolicy, CheckpointRound, checkpoint};
use tokio_util::sync::CancellationToken;

use crate::args::{CheckpointArgs, GlobalArgs};
use crate::exit::{CliError, Outcome};

/// Runs the agent until stopped.
pub async fn run(global: &GlobalArgs, args: &CheckpointArgs) -> Result<Outcome, CliError> {
    let options = CheckpointOptions {
        node: args.node.clone(),
        checkpoint_dir: args.checkpoint_dir.clone(),
        manifests_dir: args.manifests_dir.clone(),
        host_root: args.host_root.clone(),
        policy: CheckpointPolicy {
            soak: args.soak,
            api_grace: args.api_grace,
        },
        interval: args.interval,
    };
    let cancel = CancellationToken::new();
    let stop = cancel.clone();
    let mut stops = super::signals::StopSignals::listen();
    let signals = tokio::spawn(async move {
        stops.next().await;
        stop.cancel();
    });
    let node = args.node.clone();
    let mut say = move |round: &CheckpointRound| {
        let line = match &round.failed {
            Some(why) => format!(
                "{node}: {}: {}: FAILED: {why}",
                round.component,
                round.step.name()
            ),
            None => format!("{node}: {}: {}", round.component, round.step),
        };
        crate::ui::say(line);
    };
    let result = checkpoint(
        &super::cluster::client_args(global),
        &options,
        &cancel,
        &mut say,
    )
    .await;
    signals.abort();
    result?;
    Ok(Outcome::Done)
}
