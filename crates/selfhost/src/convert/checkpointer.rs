//! The checkpointer, once a node's components are converted: installed on a node that is now
//! self-hosted (when asked), removed with its checkpoints from one back on static pods.

use selfhost_core::conversion::decide::Direction;

use super::{ConvertError, ConvertRequest};
use crate::checkpoint::install::{self, CheckpointerOutcome};
use crate::client::Clients;

/// Once every component is converted: installs the checkpointer on a self-hosted node (when
/// asked), removes it with its checkpoints from a node back on static pods.
pub(super) async fn finish(
    clients: &Clients,
    request: &ConvertRequest,
    dry_run: bool,
) -> Result<Option<CheckpointerOutcome>, ConvertError> {
    Ok(match (request.direction, &request.checkpointer) {
        (Direction::ToSelfHosted, Some(install)) => {
            Some(install::install(&clients.api, install, dry_run).await?)
        }
        (Direction::ToSelfHosted, None) => None,
        (Direction::ToStatic, _) => Some(install::remove(
            &request.manifests_dir,
            &request.host_root,
            dry_run,
        )?),
    })
}
