//! Connecting to the cluster for the commands that talk to one.

use std::time::Duration;

use anyhow::anyhow;
use selfhost::health;
use selfhost::observe::Observer;
use selfhost::{ClientArgs, Clients};

use crate::args::GlobalArgs;
use crate::exit::{CliError, Outcome};

/// How long the first list of the control-plane objects may take.
const FIRST_LIST: Duration = Duration::from_secs(30);

/// Connects as kubectl would, checks the API answers, and starts watching it.
pub async fn connect(global: &GlobalArgs) -> Result<(Clients, Observer), CliError> {
    let args = ClientArgs {
        kubeconfig: global.kubeconfig.clone(),
        context: global.context.clone(),
    };
    let clients = selfhost::connect(&args)
        .await
        .map_err(CliError::bad_input)?;
    // One quick probe first: a dead or unreachable server is reported at once, plainly,
    // instead of after the watches' retries.
    let ready = health::readyz(&clients.probe).await;
    if !ready.healthy && ready.checks.is_empty() {
        return Err(CliError {
            outcome: Outcome::Refused,
            error: anyhow!(
                "cannot reach the API server {} (context {}): {}; check that the cluster is up and that \
                 the kubeconfig points at it",
                clients.server,
                clients.context,
                ready.problem.unwrap_or_default()
            ),
        });
    }
    let observer = Observer::start(&clients);
    observer.ready(FIRST_LIST).await.map_err(|e| CliError {
        outcome: Outcome::Refused,
        error: e.into(),
    })?;
    Ok((clients, observer))
}
