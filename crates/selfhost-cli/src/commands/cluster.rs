//! Connecting to the cluster for the commands that talk to one.

use std::time::Duration;

use anyhow::anyhow;
use k8s_openapi::api::apps::v1::DaemonSet;
use kube::Api;
use kube::api::ListParams;
use selfhost::access::{self, AccessCheck, Permission, PermissionsMissing};
use selfhost::observe::Observer;
use selfhost::{ClientArgs, Clients, FailureKind, RetryPolicy, health, with_retries};
use selfhost_core::component::NAMESPACE;

use crate::args::GlobalArgs;
use crate::exit::{CliError, Outcome};

/// How long the first list of the control-plane objects may take.
const FIRST_LIST: Duration = Duration::from_secs(30);
/// The pauses before the second and third reachability probe.
const REACH_RETRIES: [Duration; 2] = [Duration::from_millis(200), Duration::from_millis(600)];

/// The first API request is retried only briefly: a server that cannot answer one small list
/// within this is reported as it is, instead of after the engine's longer patience. Eight
/// attempts (about 9 s): each is a new connection, and on a resume the kernel may hand one to
/// a starting or never-Ready apiserver on the shared port that answers 500 "the server is still
/// starting" while the backup beside it serves; four (1.4 s) were lost to that in the campaign.
const FIRST_REQUEST: RetryPolicy = RetryPolicy {
    first_delay: Duration::from_millis(200),
    max_delay: Duration::from_secs(2),
    max_attempts: 8,
    attempt_timeout: Duration::from_secs(10),
    deadline: Duration::from_secs(20),
};

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

/// Asks whether the credentials have every permission `needs` lists (with those of observing
/// the control plane): the refusal names every missing one (exit 3, nothing changed). When
/// the server cannot be asked, says so and lets the command go on.
async fn check_access(clients: &Clients, needs: &Needs) -> Result<(), CliError> {
    let mut permissions = access::observe();
    permissions.extend(needs.permissions.iter().cloned());
    match access::check(&clients.api, &permissions, &RetryPolicy::default()).await {
        AccessCheck::Granted => Ok(()),
        AccessCheck::Missing(missing) => Err(refused(
            PermissionsMissing {
                command: needs.command.to_string(),
                role: needs.role.to_string(),
                missing,
            }
            .into(),
        )),
        AccessCheck::Unknown(why) => {
            tracing::warn!("cannot check the permissions up front ({why}); going on");
            Ok(())
        }
    }
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
    // A quick probe first: a dead or unreachable server is reported within a second, plainly,
    // instead of after the watches' retries. Tried three times: one connection reset (a load
    // balancer, an apiserver restarting) must not end the run.
    let mut ready = health::readyz(&clients.probe).await;
    for pause in REACH_RETRIES {
        let forbidden = ready
            .problem
            .as_deref()
            .is_some_and(|p| p.starts_with("forbidden"));
        if ready.healthy || !ready.checks.is_empty() || forbidden {
            break;
        }
        tokio::time::sleep(pause).await;
        ready = health::readyz(&clients.probe).await;
    }
    let problem = ready.problem.clone().unwrap_or_default();
    if !ready.healthy && problem.starts_with("forbidden") {
        return Err(refused(anyhow!("{problem}")));
    }
    if !ready.healthy && ready.checks.is_empty() {
        return Err(unreachable(&clients, &ready.problem.unwrap_or_default()));
    }
    // Then one small authenticated request, so that refused credentials, a missing
    // permission or a server that does not speak the Kubernetes API are named for what they
    // are (the health endpoints answer anonymous clients, and the watches would only retry).
    let daemonsets: Api<DaemonSet> = Api::namespaced(clients.api.clone(), NAMESPACE);
    let first = ListParams::default().limit(1);
    if let Err(error) = with_retries(
        &format!("list DaemonSets in {NAMESPACE}"),
        &FIRST_REQUEST,
        || daemonsets.list(&first),
    )
    .await
    {
        if error.kind == FailureKind::Forbidden {
            // Name every permission that is missing, not only this one.
            check_access(&clients, &needs).await?;
        }
        return Err(first_request_failed(&clients, error));
    }
    check_access(&clients, &needs).await?;
    let observer = Observer::start(&clients);
    observer.ready(FIRST_LIST).await.map_err(|e| CliError {
        outcome: Outcome::Refused,
        error: anyhow!(
            "{e}; the API server {} answers but too slowly to work with: check its health \
             (`kubectl get --raw '/readyz?verbose'`) and try again",
            clients.server
        ),
    })?;
    Ok((clients, observer))
}

/// Refused credentials are a kubeconfig to fix (exit 2); anything else is a cluster that is
/// not fit to work with (exit 3). Either way nothing was changed.
fn credentials_refused(clients: &Clients) -> CliError {
    CliError::bad_input(anyhow!(
        "the API server {} refused the credentials of context {} (401 Unauthorized): the token \
         or client certificate in the kubeconfig is invalid or has expired; get a fresh \
         kubeconfig (kubeadm writes /etc/kubernetes/admin.conf) or log in again",
        clients.server,
        clients.context
    ))
}

fn refused(error: anyhow::Error) -> CliError {
    CliError {
        outcome: Outcome::Refused,
        error,
    }
}

/// The health probe got no answer worth the name: say why in the user's terms.
fn unreachable(clients: &Clients, problem: &str) -> CliError {
    let (server, context) = (&clients.server, &clients.context);
    if problem.starts_with("HTTP 401") {
        return credentials_refused(clients);
    }
    let tls = [
        "certificate",
        "UnknownIssuer",
        "BadSignature",
        "NotValidForName",
    ];
    if tls.iter().any(|t| problem.contains(t)) {
        return CliError::bad_input(anyhow!(
            "cannot verify the API server {server} (context {context}): {problem}; its TLS \
             certificate is not signed by the certificate authority the kubeconfig names \
             (certificate-authority-data of the context's cluster): use the cluster's own CA, \
             as in /etc/kubernetes/admin.conf"
        ));
    }
    let hint = if problem.contains("invalid HTTP version") || problem.contains("HTTP/0.9") {
        "the server does not answer plain HTTP; if it serves HTTPS, write https:// in the \
         kubeconfig's server address"
    } else if problem.contains("timed out") || problem.contains("elapsed") {
        "it accepts connections but does not answer; check that it is a kube-apiserver and \
         that it is not overloaded"
    } else {
        "check that the cluster is up and that the kubeconfig points at it"
    };
    refused(anyhow!(
        "cannot reach the API server {server} (context {context}): {problem}; {hint}"
    ))
}

/// The first API request failed for good.
fn first_request_failed(clients: &Clients, error: selfhost::ApiCallError) -> CliError {
    let server = &clients.server;
    match error.kind {
        FailureKind::Unauthorized => credentials_refused(clients),
        FailureKind::Forbidden => refused(anyhow!(
            "{error}: the credentials of context {} may not list DaemonSets in {NAMESPACE}; \
             selfhost needs to read and update the control-plane DaemonSets there (bind the \
             user to a role that allows it)",
            clients.context
        )),
        FailureKind::Malformed | FailureKind::NotFound | FailureKind::Other => refused(anyhow!(
            "{error}: {server} does not answer as a Kubernetes API server; check that the \
             kubeconfig's server address is the kube-apiserver and not a proxy or web page"
        )),
        FailureKind::Timeout => refused(anyhow!(
            "{error}: the API server {server} accepts requests but does not answer them; check \
             its health (`kubectl get --raw '/readyz?verbose'`) and try again"
        )),
        _ => refused(anyhow!(
            "{error}; the API server {server} is not fit to work with: check its health \
             (`kubectl get --raw '/readyz?verbose'`) and try again"
        )),
    }
}
