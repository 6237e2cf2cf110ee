//! The front door for converting a node: connect for the request (waiting a while for an API
//! server that is coming back, checking every permission the conversion needs), plan, run.

use std::time::Duration;

use selfhost_core::conversion::decide::Direction;
use tokio_util::sync::CancellationToken;

use crate::access;
use crate::client::{ClientArgs, Clients, connect};
use crate::connect::{ConnectError, check_access, reach};
use crate::convert::conversion_view::ConversionView;
use crate::convert::{
    ConversionPlan, ConvertReport, ConvertRequest, convert, plan, secrets_to_read,
};
use crate::error::Error;
use crate::events::Events;
use crate::permission::UPGRADER;

/// How long the first list of the watched objects may take.
const FIRST_LIST: Duration = Duration::from_secs(30);

/// How long an unreachable API server is asked again before the run refuses: longer than one
/// kube-apiserver pod start at real timings. A run stopped right after restarting this node's
/// static kube-apiserver is re-run while that one pod starts, and the API comes back by itself.
const API_COMEBACK: Duration = Duration::from_secs(30);

/// The command, for messages.
const COMMAND: &str = "selfhost convert";

/// A node's conversion, connected to its cluster and watching what it acts on.
pub struct NodeConversion {
    clients: Clients,
    view: ConversionView,
    request: ConvertRequest,
}

impl std::fmt::Debug for NodeConversion {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NodeConversion")
            .field("server", &self.clients.server)
            .finish_non_exhaustive()
    }
}

impl NodeConversion {
    /// Connects as kubectl would, checks every permission the conversion needs (the Secrets
    /// `to-static` reads included, once the DaemonSets tell which), and starts watching.
    ///
    /// # Errors
    /// A kubeconfig that cannot be used, a server that cannot be reached, missing permissions
    /// (each named), or watches that do not list in time. Nothing was changed.
    pub async fn connect(
        args: &ClientArgs,
        request: ConvertRequest,
    ) -> Result<NodeConversion, Error> {
        let clients = connect(args).await?;
        reach(&clients, API_COMEBACK).await?;
        let mut permissions = access::observe();
        permissions.extend(access::convert(
            &request.node,
            request.certs_in_secrets,
            &[],
        ));
        if request.config_file.is_none() {
            permissions.extend(access::cluster_config());
        }
        // The checkpointer's node is granted read access to the Leases of kube-system where
        // the checkpointer is installed, and loses it where it is removed.
        let checkpointer = match request.direction {
            Direction::ToSelfHosted if request.checkpointer.is_some() => {
                access::checkpointer_grant()
            }
            Direction::ToSelfHosted => Vec::new(),
            Direction::ToStatic => access::checkpointer_revoke(),
        };
        let permissions = access::adding(permissions, checkpointer);
        check_access(&clients, COMMAND, UPGRADER, &permissions).await?;
        let view = ConversionView::start(&clients.api);
        view.ready(FIRST_LIST)
            .await
            .map_err(ConnectError::TooSlow)?;
        let reads = secrets_to_read(&view, &request);
        if !reads.is_empty() {
            check_access(&clients, COMMAND, UPGRADER, &access::read_secrets(&reads)).await?;
        }
        Ok(NodeConversion {
            clients,
            view,
            request,
        })
    }

    /// The request this conversion carries out.
    pub fn request(&self) -> &ConvertRequest {
        &self.request
    }

    /// What the conversion would do, with its preflight.
    ///
    /// # Errors
    /// The node's files or the cluster's objects cannot be used; nothing was changed.
    pub async fn plan(&mut self) -> Result<ConversionPlan, Error> {
        Ok(plan(&mut self.view, &self.clients.api, &self.request).await?)
    }

    /// Converts the node, one component after the other.
    ///
    /// # Errors
    /// The run stopped after it began, without an outcome of its own; running the same
    /// command again continues it.
    pub async fn run(
        &mut self,
        events: &Events,
        cancel: &CancellationToken,
    ) -> Result<ConvertReport, Error> {
        convert(&self.clients, &mut self.view, &self.request, events, cancel)
            .await
            .map_err(|e| Error::ConversionStopped(Box::new(e)))
    }
}
