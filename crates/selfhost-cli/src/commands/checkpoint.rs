//! `selfhost checkpoint`: the node agent that keeps this node's control-plane pods on disk and
//! starts them without the API after a reboot or a power cut. It runs until SIGINT or
//! SIGTERM, and says on stderr what it does. `selfhost checkpoint install` installs it on a
//! node as the static pod the kubelet runs, with its node's read access to kube-system Leases;
//! `selfhost checkpoint remove` takes both away again.

use std::path::Path;

use selfhost::{
    CheckpointOptions, CheckpointPolicy, CheckpointRound, CheckpointerInstall, CheckpointerPod,
    checkpoint, install_checkpointer, remove_checkpointer,
};
use tokio_util::sync::CancellationToken;

use crate::args::{
    AgentArgs, CheckpointAction, CheckpointArgs, CheckpointInstallArgs, CheckpointRemoveArgs,
    CheckpointerArgs, GlobalArgs,
};
use crate::exit::{CliError, Outcome};
use crate::ui;

/// The checkpointer for `node`, its static pod written into `manifests_dir` (the path the node
/// sees) beneath the node's root `host_root`, started within the default patience.
pub fn install_request(
    node: &str,
    manifests_dir: &Path,
    host_root: &Path,
    args: &CheckpointerArgs,
) -> CheckpointerInstall {
    CheckpointerInstall {
        pod: CheckpointerPod {
            image: args.checkpointer_image.clone(),
            node: node.to_string(),
            manifests_dir: manifests_dir.display().to_string(),
            kubeconfig: args.checkpointer_kubeconfig.clone(),
            tuning: None,
        },
        manifests_dir: on_host(host_root, manifests_dir),
        patience: selfhost::DEFAULT_CHECKPOINTER_PATIENCE,
    }
}

/// `path`, as the node sees it, beneath the node's root `host_root`.
pub fn on_host(host_root: &Path, path: &Path) -> std::path::PathBuf {
    match path.strip_prefix("/") {
        Ok(relative) => host_root.join(relative),
        Err(_) => host_root.join(path),
    }
}

/// Runs `selfhost checkpoint`: the agent, or what its subcommand asks.
pub async fn run(global: &GlobalArgs, args: &CheckpointArgs) -> Result<Outcome, CliError> {
    match &args.action {
        Some(CheckpointAction::Install(install)) => run_install(global, install).await,
        Some(CheckpointAction::Remove(remove)) => run_remove(global, remove).await,
        None => run_agent(global, &args.agent).await,
    }
}

/// `selfhost checkpoint install`.
async fn run_install(
    global: &GlobalArgs,
    args: &CheckpointInstallArgs,
) -> Result<Outcome, CliError> {
    let mut request = install_request(
        &args.on.node,
        &args.on.manifests_dir,
        &args.on.host_root,
        &args.checkpointer,
    );
    request.patience = args.timeout;
    let outcome =
        install_checkpointer(&super::cluster::client_args(global), &request, args.dry_run).await?;
    let fix = (!outcome.succeeded()).then_some(
        "the manifest stays, and the kubelet starts it once it can (check the image with \
         --checkpointer-image, or remove the manifest)",
    );
    super::conclude_on_node(global, &args.on.node, "checkpointer", &outcome, fix)
}

/// `selfhost checkpoint remove`.
async fn run_remove(global: &GlobalArgs, args: &CheckpointRemoveArgs) -> Result<Outcome, CliError> {
    let outcome = remove_checkpointer(
        &super::cluster::client_args(global),
        &args.on.node,
        &on_host(&args.on.host_root, &args.on.manifests_dir),
        &args.on.host_root,
        args.dry_run,
    )
    .await?;
    super::conclude_on_node(global, &args.on.node, "checkpointer", &outcome, None)
}

/// Runs the agent until stopped.
async fn run_agent(global: &GlobalArgs, args: &AgentArgs) -> Result<Outcome, CliError> {
    let node = args.node.clone().ok_or_else(|| {
        CliError::bad_input(anyhow::anyhow!(
            "selfhost checkpoint needs --node NAME: the node this agent runs on"
        ))
    })?;
    let options = CheckpointOptions {
        node: node.clone(),
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
    let mut say = move |round: &CheckpointRound| {
        let line = match &round.failed {
            Some(why) => format!(
                "{node}: {}: {}: FAILED: {why}",
                round.component,
                round.step.name()
            ),
            None => format!("{node}: {}: {}", round.component, round.step),
        };
        ui::say(line);
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
