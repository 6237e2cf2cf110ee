//! `selfhost front install` and `selfhost front remove`: the API front's static pod on a node
//! of a self-hosted cluster, put there or taken away, with the result said as the
//! checkpointer's install says its own.

use selfhost::{FrontInstall, install_front, remove_front};

use super::checkpoint::on_host;
use crate::args::{FrontInstallArgs, FrontRemoveArgs, GlobalArgs};
use crate::exit::{CliError, Outcome};

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
    let fix = (!outcome.succeeded()).then_some("check the image with --front-image");
    super::conclude_on_node(global, &args.on.node, "front", &outcome, fix)
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
    super::conclude_on_node(global, &args.on.node, "front", &outcome, None)
}
