//! The task that applies the model's API decisions to the HTTP server: it holds the server
//! down while no kube-apiserver serves (connections are refused) and lets it listen again
//! when one does, sets the version `/version` reports, pauses or resumes the garbage
//! collector with the controller-manager.

use std::sync::Arc;

use tokio_util::sync::CancellationToken;

use super::process_table::ModelDecisions;
use crate::server::SimServer;

/// The coupling task's inputs.
pub(crate) struct Coupling {
    pub server: Arc<SimServer>,
    pub decisions: ModelDecisions,
    /// Whether the garbage collector may run at all.
    pub garbage_collector: bool,
    /// `/version` when no serving apiserver names one.
    pub configured_version: String,
    /// Whether the server stops listening while no apiserver serves (off when the hand-over
    /// model routes each connection: then it refuses or holds them itself).
    pub holds_server_down: bool,
}

impl Coupling {
    /// Runs until shutdown.
    pub(crate) async fn run(mut self, shutdown: CancellationToken) {
        loop {
            self.apply().await;
            tokio::select! {
                _ = shutdown.cancelled() => return,
                r = self.decisions.api.changed() => if r.is_err() { return },
                r = self.decisions.controller_manager.changed() => if r.is_err() { return },
            }
        }
    }

    async fn apply(&mut self) {
        let decision = self.decisions.api.borrow_and_update().clone();
        let cm_acts = self
            .decisions
            .controller_manager
            .borrow_and_update()
            .is_active();
        let up = decision.is_up();
        let version = decision
            .serving
            .version
            .clone()
            .unwrap_or_else(|| self.configured_version.clone());
        if self.server.version() != version {
            self.server.set_version(&version);
        }
        if self.holds_server_down
            && self.server.is_held_down() == up
            && let Err(e) = self.server.hold_down(!up).await
        {
            tracing::error!(error = %e, "the simulated apiserver could not serve again");
        }
        self.server
            .garbage_collector()
            .set_enabled(self.garbage_collector && up && cm_acts);
    }
}
