//! Connecting to the cluster for the commands that talk to one.

use selfhost::{ClientArgs, Cluster, Command};

use crate::args::GlobalArgs;
use crate::exit::CliError;

/// The kubeconfig flags as the engine takes them.
pub fn client_args(global: &GlobalArgs) -> ClientArgs {
    ClientArgs {
        kubeconfig: global.kubeconfig.clone(),
        context: global.context.clone(),
    }
}

/// Connects for `command`: the engine checks the API answers and that the credentials have
/// every permission the command needs before anything is done.
pub async fn connect(global: &GlobalArgs, command: Command) -> Result<Cluster, CliError> {
    Ok(Cluster::connect(&client_args(global), command).await?)
}
