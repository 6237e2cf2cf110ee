//! Connecting to the cluster for the commands that talk to one.

use std::time::Duration;

use anyhow::anyhow;
use selfhost::access::{self, AccessCheck, Permission, PermissionsMissing};
use selfhost::health;
use selfhost::observe::Observer;
use selfhost::retry::RetryPolicy;
use selfhost::{ClientArgs, Clients};

use crate::args::GlobalArgs;
use crate::exit::{CliError, Outcome};

/// How long the first list of the control-plane objects may take.
const FIRST_LIST: Duration = Duration::from_secs(30);

/// What a command needs of the API besides observing the control plane.
#[derive(Debug, Clone)]
pub struct Needs {
    /// The command, for messages: `selfhost apply`.
    pub command: &'static str,
    /// Its permissions beyond [`access::observe`].
    pub permissions: Vec<Permission>,
    /// The service account of deploy/rbac.yaml that has them all.
    pub role: &'static str,
}

/// Connects as kubectl would, checks the API answers and that the credentials have every
/// permission the command needs (refusing with exit 3 and the list of missing ones before
/// anything is done), and starts watching it.
pub async fn connect(global: &GlobalArgs, needs: Needs) -> Result<(Clients, Observer), CliError> {
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
    let problem = ready.problem.clone().unwrap_or_default();
    if !ready.healthy && problem.starts_with("forbidden") {
        return Err(CliError {
            outcome: Outcome::Refused,
            error: anyhow!("{problem}"),
        });
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
    let mut permissions = access::observe();
    permissions.extend(needs.permissions);
    match access::check(&clients.api, &permissions, &RetryPolicy::default()).await {
        AccessCheck::Granted => {}
        AccessCheck::Missing(missing) => {
            return Err(CliError {
                outcome: Outcome::Refused,
                error: PermissionsMissing {
                    command: needs.command.to_string(),
                    role: needs.role.to_string(),
                    missing,
                }
                .into(),
            });
        }
        AccessCheck::Unknown(why) => {
            tracing::warn!("cannot check the permissions up front ({why}); going on");
        }
    }
    let observer = Observer::start(&clients);
    observer.ready(FIRST_LIST).await.map_err(|e| CliError {
        outcome: Outcome::Refused,
        error: e.into(),
    })?;
    Ok((clients, observer))
}
