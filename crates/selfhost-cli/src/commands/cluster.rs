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
/// The pauses before the second and third reachability probe.
const REACH_RETRIES: [Duration; 2] = [Duration::from_millis(200), Duration::from_millis(600)];

/// Connects as kubectl would, checks the API answers, and starts watching it.
pub async fn connect(global: &GlobalArgs) -> Result<(Clients, Observer), CliError> {
    let args = ClientArgs {
        kubeconfig: global.kubeconfig.clone(),
        context: global.context.clone(),
    };
    let clients = selfhost::connect(&args)
        .await
        .map_err(CliError::bad_input)?;
    // A quick probe first: a dead or unreachable server is reported within a second, plainly,
    // instead of after the watches' retries. Tried three times: one connection reset (a load
    // balancer, an apiserver restarting) must not end the run.
    let mut ready = health::readyz(&clients.probe).await;
    for pause in REACH_RETRIES {
        if ready.healthy || !ready.checks.is_empty() {
            break;
        }
        tokio::time::sleep(pause).await;
        ready = health::readyz(&clients.probe).await;
    }
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
