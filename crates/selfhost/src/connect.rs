//! Reaching the API server before a command does anything: a quick health probe (so that a
//! dead or unreachable server is named within a second), one small authenticated list (so
//! that refused credentials or a server that is not a kube-apiserver are named for what they
//! are), and the permission check of the command.

use std::time::Duration;

use k8s_openapi::api::apps::v1::DaemonSet;
use kube::Api;
use kube::api::ListParams;
use selfhost_core::component::NAMESPACE;

use crate::access::{self, AccessCheck, PermissionsMissing};
use crate::api_call::{ApiCallError, FailureKind};
use crate::client::Clients;
use crate::cluster_view::ViewTimeout;
use crate::health::{self, Health};
use crate::permission::Permission;
use crate::retry::{RetryPolicy, with_retries};

/// The first API request is retried only briefly: a server that cannot answer one small list
/// within this is reported as it is, instead of after the engine's longer patience. Eight
/// attempts (about 9 s): each is a new connection, and on a resume the kernel may hand one to
/// a starting or never-Ready apiserver on the shared port that answers 500 "the server is still
/// starting" while the backup beside it serves.
const FIRST_REQUEST: RetryPolicy = RetryPolicy {
    first_delay: Duration::from_millis(200),
    max_delay: Duration::from_secs(2),
    max_attempts: 8,
    attempt_timeout: Duration::from_secs(10),
    deadline: Duration::from_secs(20),
};

/// The pause between two reachability probes.
const PROBE_PAUSE: Duration = Duration::from_millis(400);

/// Why the API server cannot be worked with; nothing was changed.
#[derive(Debug, thiserror::Error)]
pub enum ConnectError {
    /// The server refused the credentials (401).
    #[error(
        "the API server {server} refused the credentials of context {context} (401 \
         Unauthorized): the token or client certificate in the kubeconfig is invalid or has \
         expired; get a fresh kubeconfig (kubeadm writes /etc/kubernetes/admin.conf) or log in \
         again"
    )]
    CredentialsRefused {
        /// The server address.
        server: String,
        /// The kubeconfig context.
        context: String,
    },
    /// The server's TLS certificate is not signed by the kubeconfig's CA.
    #[error(
        "cannot verify the API server {server} (context {context}): {problem}; its TLS \
         certificate is not signed by the certificate authority the kubeconfig names \
         (certificate-authority-data of the context's cluster): use the cluster's own CA, as \
         in /etc/kubernetes/admin.conf"
    )]
    Untrusted {
        /// The server address.
        server: String,
        /// The kubeconfig context.
        context: String,
        /// What the TLS layer said.
        problem: String,
    },
    /// No health answer worth the name.
    #[error("cannot reach the API server {server} (context {context}): {problem}; {hint}")]
    Unreachable {
        /// The server address.
        server: String,
        /// The kubeconfig context.
        context: String,
        /// What the probe met.
        problem: String,
        /// What to check, in the user's terms.
        hint: &'static str,
    },
    /// The health endpoint itself is forbidden to these credentials.
    #[error("{0}")]
    HealthForbidden(String),
    /// The credentials lack permissions the command needs.
    #[error(transparent)]
    Permissions(#[from] PermissionsMissing),
    /// The watches did not list the control plane in time.
    #[error(
        "{0}; the API server answers but too slowly to work with: check its health (`kubectl \
         get --raw '/readyz?verbose'`) and try again"
    )]
    TooSlow(ViewTimeout),
    /// The first list of the control-plane DaemonSets failed for good.
    #[error("{failure}: {why}")]
    FirstRequest {
        /// The failure.
        failure: ApiCallError,
        /// What it means and what to do.
        why: String,
    },
}

impl ConnectError {
    /// Whether the kubeconfig is what needs fixing.
    pub fn is_bad_input(&self) -> bool {
        match self {
            ConnectError::CredentialsRefused { .. } | ConnectError::Untrusted { .. } => true,
            ConnectError::FirstRequest { failure, .. } => failure.kind == FailureKind::Unauthorized,
            ConnectError::Unreachable { .. }
            | ConnectError::HealthForbidden(_)
            | ConnectError::Permissions(_)
            | ConnectError::TooSlow(_) => false,
        }
    }
}

/// Probes `/readyz` until the server answers at all or `patience` has passed, and names what
/// is wrong when it never does. A probe that gets health checks back (even failing ones), or a
/// 403, is an answer.
pub async fn reach(clients: &Clients, patience: Duration) -> Result<Health, ConnectError> {
    let until = tokio::time::Instant::now() + patience;
    let mut ready = health::readyz(&clients.probe).await;
    let mut warned = false;
    loop {
        let forbidden = ready
            .problem
            .as_deref()
            .is_some_and(|p| p.starts_with("forbidden"));
        if forbidden {
            return Err(ConnectError::HealthForbidden(
                ready.problem.unwrap_or_default(),
            ));
        }
        if ready.healthy || !ready.checks.is_empty() {
            return Ok(ready);
        }
        if tokio::time::Instant::now() >= until {
            return Err(unreachable(clients, ready.problem.unwrap_or_default()));
        }
        // Said once: a line at every probe would bury the rest of the output.
        if !warned && patience > Duration::from_secs(2) {
            tracing::warn!(
                "cannot reach the API server {} yet ({}); asking again for up to {}s",
                clients.server,
                ready.problem.as_deref().unwrap_or_default(),
                patience.as_secs()
            );
            warned = true;
        }
        tokio::time::sleep(PROBE_PAUSE).await;
        ready = health::readyz(&clients.probe).await;
    }
}

/// One small authenticated request: the health endpoints answer anonymous clients, and the
/// watches would only retry, so a refusal is named here for what it is.
pub async fn first_request(
    clients: &Clients,
    command: &str,
    role: &str,
    permissions: &[Permission],
) -> Result<(), ConnectError> {
    let daemonsets: Api<DaemonSet> = Api::namespaced(clients.api.clone(), NAMESPACE);
    let first = ListParams::default().limit(1);
    let listed = with_retries(
        &format!("list DaemonSets in {NAMESPACE}"),
        &FIRST_REQUEST,
        || daemonsets.list(&first),
    )
    .await;
    match listed {
        Ok(_) => check_access(clients, command, role, permissions).await,
        Err(error) => {
            if error.kind == FailureKind::Forbidden {
                // Name every permission that is missing, not only this one.
                check_access(clients, command, role, permissions).await?;
            }
            Err(first_request_failed(clients, error))
        }
    }
}

/// Refuses when the credentials lack any of `permissions`, naming each; goes on when the
/// server cannot be asked (a missing permission then shows when used).
pub async fn check_access(
    clients: &Clients,
    command: &str,
    role: &str,
    permissions: &[Permission],
) -> Result<(), ConnectError> {
    match access::check(&clients.api, permissions, &RetryPolicy::default()).await {
        AccessCheck::Granted => Ok(()),
        AccessCheck::Missing(missing) => Err(PermissionsMissing {
            command: command.to_string(),
            role: role.to_string(),
            missing,
        }
        .into()),
        AccessCheck::Unknown(why) => {
            tracing::warn!("cannot check the permissions up front ({why}); going on");
            Ok(())
        }
    }
}

/// The health probe got no answer worth the name: say why in the user's terms.
fn unreachable(clients: &Clients, problem: String) -> ConnectError {
    let (server, context) = (clients.server.clone(), clients.context.clone());
    if problem.starts_with("HTTP 401") {
        return ConnectError::CredentialsRefused { server, context };
    }
    let tls = [
        "certificate",
        "UnknownIssuer",
        "BadSignature",
        "NotValidForName",
    ];
    if tls.iter().any(|t| problem.contains(t)) {
        return ConnectError::Untrusted {
            server,
            context,
            problem,
        };
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
    ConnectError::Unreachable {
        server,
        context,
        problem,
        hint,
    }
}

/// The first API request failed for good.
fn first_request_failed(clients: &Clients, error: ApiCallError) -> ConnectError {
    let (server, context) = (clients.server.clone(), clients.context.clone());
    let why = match error.kind {
        FailureKind::Unauthorized => {
            return ConnectError::CredentialsRefused { server, context };
        }
        FailureKind::Forbidden => format!(
            "the credentials of context {context} may not list DaemonSets in {NAMESPACE}; \
             selfhost needs to read and update the control-plane DaemonSets there (bind the \
             user to a role that allows it)"
        ),
        FailureKind::Malformed | FailureKind::NotFound | FailureKind::Other => format!(
            "{server} does not answer as a Kubernetes API server; check that the kubeconfig's \
             server address is the kube-apiserver and not a proxy or web page"
        ),
        FailureKind::Timeout => format!(
            "the API server {server} accepts requests but does not answer them; check its \
             health (`kubectl get --raw '/readyz?verbose'`) and try again"
        ),
        _ => format!(
            "the API server {server} is not fit to work with: check its health (`kubectl get \
             --raw '/readyz?verbose'`) and try again"
        ),
    };
    ConnectError::FirstRequest {
        failure: error,
        why,
    }
}
