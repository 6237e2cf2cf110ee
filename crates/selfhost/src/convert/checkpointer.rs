//! The checkpointer of a node being converted: to self-hosted, installed before the first
//! component (each static manifest then moves aside only once it keeps the DaemonSet pod that
//! replaces it); to static pods, removed with its checkpoints once every component is back.
//! Its node's read access to the Leases of kube-system comes and goes with it.

use selfhost_core::conversion::decide::Direction;

use super::{ConvertError, ConvertRequest};
use crate::checkpoint::install::{self, CheckpointerOutcome};
use crate::client::Clients;

/// To self-hosted with a checkpointer asked for: installs it before anything is converted.
/// When the kubelet does not run it, a static pod this run wrote is taken away again, and the
/// outcome does not succeed: nothing is to be converted.
pub(super) async fn prepare(
    clients: &Clients,
    request: &ConvertRequest,
    dry_run: bool,
) -> Result<Option<CheckpointerOutcome>, ConvertError> {
    Ok(match (request.direction, &request.checkpointer) {
        (Direction::ToSelfHosted, Some(wanted)) => {
            Some(install::install_or_withdraw(&clients.api, wanted, dry_run).await?)
        }
        _ => None,
    })
}

/// To static pods, once every component is back: removes the checkpointer with its
/// checkpoints (an old checkpoint must never start beside kubeadm's static pods) and takes the
/// node's access to the Leases of kube-system away.
pub(super) async fn finish(
    clients: &Clients,
    request: &ConvertRequest,
    dry_run: bool,
) -> Result<Option<CheckpointerOutcome>, ConvertError> {
    Ok(match request.direction {
        Direction::ToStatic => Some(
            install::remove(
                &clients.api,
                &request.node,
                &request.manifests_dir,
                &request.host_root,
                dry_run,
            )
            .await?,
        ),
        Direction::ToSelfHosted => None,
    })
}
