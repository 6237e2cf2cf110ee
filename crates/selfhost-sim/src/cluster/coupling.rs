//! The task that applies the self-hosting model: on every change of what the kubelets run it
//! asks the [`ServingPolicy`] and the [`LeaderPolicy`], holds the API server down or lets it
//! serve, sets the version `/version` reports, pauses or resumes the garbage collector, and
//! publishes who acts for the controller-manager and the scheduler.
//!
//! Uncoupled (the model switched off, or while the cluster bootstraps), the API serves and
//! every controller acts regardless of pods.

use std::sync::Arc;

use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use super::model::{LeaderPolicy, Leadership, ProcessBoard, Role, ServingPolicy};
use super::recorder::AvailabilityRecorder;
use crate::server::SimServer;

/// What controllers wait on (cheap to clone).
#[derive(Debug, Clone)]
pub(crate) struct Signals {
    /// Whether the model lets the API serve.
    pub api_up: watch::Receiver<bool>,
    /// Who acts for the controller-manager.
    pub controller_manager: watch::Receiver<Leadership>,
    /// Who acts for the scheduler.
    pub scheduler: watch::Receiver<Leadership>,
}

/// The senders behind [`Signals`].
#[derive(Debug)]
pub(crate) struct SignalSenders {
    api_up: watch::Sender<bool>,
    controller_manager: watch::Sender<Leadership>,
    scheduler: watch::Sender<Leadership>,
}

/// A fresh pair of signals: API up, nobody leading yet.
pub(crate) fn signals() -> (SignalSenders, Signals) {
    let (api_up, api_rx) = watch::channel(true);
    let (cm, cm_rx) = watch::channel(Leadership::Vacant);
    let (sched, sched_rx) = watch::channel(Leadership::Vacant);
    (
        SignalSenders {
            api_up,
            controller_manager: cm,
            scheduler: sched,
        },
        Signals {
            api_up: api_rx,
            controller_manager: cm_rx,
            scheduler: sched_rx,
        },
    )
}

/// The model's inputs and outputs.
pub(crate) struct Coupling {
    pub server: Arc<SimServer>,
    pub board: ProcessBoard,
    pub serving: Arc<dyn ServingPolicy>,
    pub leaders: Arc<dyn LeaderPolicy>,
    pub recorder: AvailabilityRecorder,
    /// Whether the model is on.
    pub coupled: watch::Receiver<bool>,
    /// Whether the garbage collector may run at all.
    pub garbage_collector: bool,
    /// `/version` when no serving apiserver names one.
    pub configured_version: String,
    pub senders: SignalSenders,
}

impl Coupling {
    /// Runs until shutdown.
    pub(crate) async fn run(mut self, shutdown: CancellationToken) {
        let mut board = self.board.subscribe();
        loop {
            board.borrow_and_update();
            let coupled = *self.coupled.borrow_and_update();
            self.apply(coupled).await;
            tokio::select! {
                _ = shutdown.cancelled() => return,
                r = board.changed() => if r.is_err() { return },
                r = self.coupled.changed() => if r.is_err() { return },
            }
        }
    }

    async fn apply(&mut self, coupled: bool) {
        let snapshot = self.board.snapshot();
        let serving = self.serving.serving(&snapshot);
        let leader = |role: Role, current: &watch::Sender<Leadership>| {
            if coupled {
                self.leaders.leader(role, &snapshot, &current.borrow())
            } else {
                Leadership::Ungated
            }
        };
        let cm = leader(Role::ControllerManager, &self.senders.controller_manager);
        let scheduler = leader(Role::Scheduler, &self.senders.scheduler);
        let up = !coupled || serving.is_up();
        let version = serving
            .version
            .clone()
            .unwrap_or_else(|| self.configured_version.clone());
        if self.server.version() != version {
            self.server.set_version(&version);
        }
        if self.server.is_held_down() == up
            && let Err(e) = self.server.hold_down(!up).await
        {
            tracing::error!(error = %e, "the simulated apiserver could not serve again");
        }
        self.server
            .garbage_collector()
            .set_enabled(self.garbage_collector && up && cm.is_active());
        let names = serving
            .backends
            .iter()
            .map(|b| format!("{}/{}", b.node, b.pod.name))
            .collect();
        self.recorder.record_api(up, names, Some(version));
        self.senders.api_up.send_if_modified(|u| {
            let changed = *u != up;
            *u = up;
            changed
        });
        for (sender, new) in [
            (&self.senders.controller_manager, cm),
            (&self.senders.scheduler, scheduler),
        ] {
            sender.send_if_modified(|l| {
                let changed = *l != new;
                *l = new;
                changed
            });
        }
    }
}
