//! `selfhost front install` and `selfhost front remove`: the API front's static pod on a node
//! of a self-hosted cluster, put there or taken away, with the result said as the
//! checkpointer's install says its own.

use selfhost::{FrontInstall, install_front, remove_front};

use super::checkpoint::on_host;
use crate::args::{FrontInstallArgs, FrontRemoveArgs, GlobalArgs, OutputFormat};
use crate::exit::{CliError, Outcome};
use crate::ui;

/// `selfhost front install`.
pub async fn install(global: &GlobalArgs, args: &FrontInstallArgs) -> Result<Outcome, CliError> {
    let request = FrontInstall {
        node: args.on.node.clone(),
        manifests_dir: on_host(&args.on.host_root, &args.on.manifests_dir),
        image: args.front.front_image.clone(),
        layout: args.front.front_addresses,
        patience: args.timeout,
    };
    let outcome =
        install_front(&super::cluster::client_args(global), &request, args.dry_run).await?;
    let message = format!("node {}: {outcome}", args.on.node);
    let json = global.output == OutputFormat::Json;
    let succeeded = outcome.succeeded();
    if json {
        ui::json_line(&serde_json::json!({
            "event": "result",
            "outcome": if succeeded { "done" } else { "not-restored" },
            "message": message,
            "front": outcome,
        }))?;
    }
    if succeeded {
        super::conclude(Outcome::Done, message, json)
    } else {
        super::conclude(
            Outcome::NotRestored,
            format!("{message}; check the image with --front-image"),
            json,
        )
    }
}

/// `selfhost front remove`.
pub async fn remove(global: &GlobalArgs, args: &FrontRemoveArgs) -> Result<Outcome, CliError> {
    let outcome = remove_front(
        &super::cluster::client_args(global),
        &args.on.node,
        &on_host(&args.on.host_root, &args.on.manifests_dir),
        args.dry_run,
    )
    .await?;
    let message = format!("node {}: {outcome}", args.on.node);
    let json = global.output == OutputFormat::Json;
    if json {
        ui::json_line(&serde_json::json!({
            "event": "result",
            "outcome": "done",
            "message": message,
            "front": outcome,
        }))?;
    }
    super::conclude(Outcome::Done, message, json)
}
